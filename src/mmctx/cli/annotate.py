"""`mmctx annotate export|import`: human validation of CoT demonstrations (FewMMBench appendix B.3)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from mmctx.cli.common import console, fail

if TYPE_CHECKING:
    from mmctx.curate.annotation.drop import DropRule

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Human validation of CoT demonstrations (FewMMBench appendix B.3): rating forms out, agreement back.",
)


@app.command("export")
def export_cmd(
    benchmark: Path = typer.Argument(..., help="Benchmark folder whose demos with a rationale are sampled."),
    sample: int = typer.Option(50, "--sample", help="Demos sampled per task (the paper: 50 per task)."),
    annotators: int = typer.Option(3, "--annotators", help="Annotators; each rates every sampled demo."),
    seed: int = typer.Option(0, help="Seed of the sample and of each annotator's item order."),
    out: Path = typer.Option(..., help="Folder for the forms and export.json (must not hold an export)."),
) -> None:
    """Write one HTML form and one CSV form per annotator, and export.json recording the sample."""
    from mmctx.curate.annotation.export import ExportError
    from mmctx.data.disk import load_benchmark
    from mmctx.reporting.annotation_forms import export_forms

    try:
        outcome = export_forms(load_benchmark(benchmark), out, sample, annotators, seed)
    except (ExportError, ValueError, FileNotFoundError) as exc:
        fail(str(exc))
    export = outcome.export
    for task, n in export.short_tasks.items():
        console.print(f"{task}: only {n} demo(s) with a rationale; all are in the sample")
    console.print(f"export {export.export_id}: {len(export.demos)} demos, {len(export.annotators)} annotators → {out}")
    for form in export.annotators:
        console.print(f"  annotator {form.annotator}: {out / form.html} (or {out / form.csv})", soft_wrap=True)


@app.command("import")
def import_cmd(
    paths: list[Path] = typer.Argument(..., help="The export folder and/or filled forms (.ratings.json, .csv)."),
    bench: Path | None = typer.Option(None, help="Benchmark to drop from (default: the one the export was made from)."),
    drop_below: list[str] | None = typer.Option(
        None,
        "--drop-below",
        help="[CRITERION=]T: drop the rationale of demos whose mean rating is below T "
        "(default criterion reasoning_quality; answer_correctness means the share rated True). Repeatable.",
    ),
    bootstrap: int = typer.Option(1000, help="Bootstrap resamples (of demos) for the intervals."),
    seed: int = typer.Option(0, help="Seed of the bootstrap."),
) -> None:
    """Check the filled forms, report mean rating, Fleiss' κ and Krippendorff's α per criterion; optionally drop."""
    from mmctx.curate.annotation.drop import DropError
    from mmctx.curate.annotation.export import ExportError
    from mmctx.curate.annotation.forms import FormError
    from mmctx.reporting.annotation_report import import_ratings, validation_markdown

    rules = _drop_rules(drop_below or [])
    try:
        result = import_ratings(paths, bench, rules, resamples=bootstrap, seed=seed)
    except (FormError, ExportError, DropError, ValueError, FileNotFoundError) as exc:
        fail(str(exc))
    table = result.ratings
    for path in table.blank:
        console.print(f"passed over the blank form {path}")
    if table.missing_annotators:
        console.print(f"no form back from annotator(s) {', '.join(table.missing_annotators)}")
    print(validation_markdown(result), end="")
    console.print(f"statistics → {result.written}")
    drop = result.drop
    if drop is None:
        return
    if drop.already:
        console.print(f"{len(drop.already)} demo(s) were dropped by an earlier import of this export")
    if drop.log_entry is None:
        console.print("nothing to drop: the benchmark is unchanged")
        return
    for item in drop.dropped:
        console.print(
            f"dropped {item.demo_id}: mean {item.criterion} {item.mean:.2f} < {item.threshold:g}", soft_wrap=True
        )
    left = drop.left_with_rationale
    fewest = min((n for by_key in left.values() for n in by_key.values()), default=0)
    console.print(
        f"{len(drop.dropped)} rationale(s) dropped; {len(left)} queries lost a demo with a rationale (the fewest "
        f"left in one of their demo lists: {fewest}; a CoT setting asking for more shots refuses such a query); "
        f"benchmark {drop.benchmark_sha256_before[:12]} → {drop.benchmark_sha256_after[:12]}, "
        "logged in curation/log.jsonl",
        soft_wrap=True,
    )


def _drop_rules(specs: list[str]) -> list[DropRule]:
    from mmctx.curate.annotation.criteria import DEFAULT_DROP_CRITERION
    from mmctx.curate.annotation.drop import DropRule

    rules = []
    for spec in specs:
        name, sep, value = spec.rpartition("=")
        name = name.strip() if sep else DEFAULT_DROP_CRITERION
        try:
            rules.append(DropRule(name, float(value)))
        except ValueError as exc:
            fail(f"--drop-below {spec!r}: {exc}")
    return rules
