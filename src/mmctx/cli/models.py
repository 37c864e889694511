"""`mmctx models`, `tiny-model`, `train-reference`: the model families, tiny checkpoints, the reference models."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from mmctx.cli.common import app, console, fail


@app.command("models")
def models_cmd(
    check: bool = typer.Option(False, "--check", help="Build every tiny family and run the conformance checks."),
    family: list[str] | None = typer.Option(None, help="With --check: only these families."),
    out: Path | None = typer.Option(None, help="With --check: also write the Markdown table here."),
) -> None:
    """The model family adapters of the HF backend, the ids they match and what they support."""
    from rich.table import Table

    from mmctx.models.adapters import all_adapters

    if check:
        _check_families(family, out)
        return

    table = Table("adapter", "matches", "loads with", "remote code", "max images", "dtypes", "quantization", "notes")
    for a in all_adapters():
        matches = "\n".join(list(a.aliases) + [f"model_type={t}" for t in a.model_types]) or "anything else"
        table.add_row(
            a.family, matches, a.auto_class, "yes" if a.needs_remote_code else "no", str(a.max_images or "—"),
            ", ".join(a.dtypes), ", ".join(a.quantization) or "—", a.notes,
        )  # fmt: skip
    table.add_row("builtin", "builtin:shapes-vlm", "(shipped)", "no", "—", "auto", "—",
                  "reference Idefics3 trained on shapes-world (the default); rebuild with mmctx train-reference")  # fmt: skip
    table.add_row("builtin", "builtin:tiny-idefics3, builtin:tiny-llava", "(built offline)", "no", "—", "auto", "—",
                  "untrained, chance level")  # fmt: skip
    Console(width=max(200, console.width)).print(table)


def _check_families(families: list[str] | None, out: Path | None) -> None:
    """Print (and write) the conformance table of the tiny families; exit 1 if any fails."""
    from mmctx.tasks.conformance import UnknownFamily, check_families, conformance_markdown, with_table

    try:
        rows, remote = check_families(families, on_start=lambda name: console.print(f"checking {name} …"))
    except UnknownFamily as exc:
        fail(str(exc))
    table = conformance_markdown(rows, remote)
    print(table)
    for r in rows:
        for problem in r.problems:
            console.print(f"[red]{r.family}[/red]: {escape(problem)}", soft_wrap=True)
    if out:
        out.write_text(with_table(out, table))
        console.print(f"table → {out}")
    if not all(r.passed for r in rows):
        raise typer.Exit(1)


@app.command("tiny-model")
def tiny_model(
    out: Path | None = typer.Option(None, help="Folder for the checkpoint (required unless --list)."),
    family: str = typer.Option("idefics3", help="Model family (`mmctx tiny-model --list` names them)."),
    list_families: bool = typer.Option(False, "--list", help="List the families and the releases they mirror."),
    seed: int = typer.Option(0),
) -> None:
    """Build a tiny random-weight checkpoint offline (chance-level; for pipelines and tests)."""
    from mmctx.models.tiny import build_tiny_vlm, tiny_families

    if list_families:
        for name, fam in tiny_families().items():
            console.print(f"{name}: mirrors {escape(fam.mirrors)}", soft_wrap=True)
        return
    if out is None:
        fail("--out is required")
    try:
        build_tiny_vlm(out, family=family, seed=seed)  # type: ignore[arg-type]
    except ValueError as exc:
        fail(str(exc))
    console.print(f"tiny {family} checkpoint → {out}")


@app.command("train-reference")
def train_reference(
    out: Path = typer.Option(..., help="Folder for shapes-clip/ and shapes-vlm/ (each a checkpoint + model card)."),
    seed: int = typer.Option(0, min=0, help="One seed for data, initialisation and batch draws."),
    only: str | None = typer.Option(None, help="clip or vlm: train just one of the two."),
    grid: bool = typer.Option(True, help="Also measure the full settings grid on the demo benchmark for the card."),
    quick: bool = typer.Option(
        False, help="Check the pipeline in about two minutes (a few steps; meaningless scores)."
    ),
) -> None:
    """Train the reference models (shapes-clip, shapes-vlm) from a seed on the CPU, score them, write cards.

    Needs the mmctx-reference package (`pip install -e ./reference` in mmctx's repository).
    """
    try:
        from mmctx_reference.train import train_reference as run_training
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "mmctx_reference":
            raise  # a dependency of an installed mmctx_reference: its own error says which
        fail("training needs the mmctx-reference package: run `pip install -e ./reference` in mmctx's repository")

    try:
        result = run_training(out, seed=seed, grid=grid, quick=quick, only=only)
    except ValueError as exc:
        fail(str(exc))
    sizes = ", ".join(f"{name} {mb:.1f} MB" for name, mb in result["megabytes"].items())
    cards = ", ".join(f"{out}/{name}/README.md" for name in result["megabytes"])
    console.print(
        f"trained in {result['training_seconds']:.0f} s, all in {result['seconds']:.0f} s ({sizes}); model cards → {cards}"
    )
