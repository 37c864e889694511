"""`mmctx validate`, `shapes`, `import-fewmmbench`, `sources`, `build fewmmbench`: making and checking benchmarks."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from mmctx.cli.common import app, console, fail
from mmctx.cli.curation import ENCODER_HELP

build_app = typer.Typer(no_args_is_help=True, help="Build benchmarks from downloaded source datasets.")
app.add_typer(build_app, name="build")


@app.command()
def validate(
    path: Path = typer.Argument(..., help="Benchmark folder."),
    preset: str = typer.Option(
        "fewmmbench", help="Prompt preset the run will use (its option labels): a built-in name or a preset .yaml file."
    ),
) -> None:
    """Check a benchmark and print every problem found (exit 1 if any): what a run refuses, this refuses.

    Surface cues (the correct option told apart by its text alone: case, final punctuation, length)
    are printed as warnings and do not change the exit code.
    """
    from mmctx.curate.cues import find_surface_cues
    from mmctx.data.disk import load_benchmark
    from mmctx.prompts.build import preset_problems
    from mmctx.prompts.presets import get_preset

    try:
        bench = load_benchmark(path)
        chosen = get_preset(preset)
    except (OSError, ValueError, KeyError) as exc:
        fail(str(exc))
    problems = bench.validate() + preset_problems(bench, chosen)
    for p in problems:
        print(p)
    # A cue is a warning, not a problem: the benchmark runs, but its scores may not need the image.
    cues = find_surface_cues(bench.queries) + find_surface_cues(bench.demos, key=lambda s: f"{s.task} (demos)")
    for cue in cues:
        console.print(f"[yellow]surface cue[/yellow] {escape(cue.describe())}", soft_wrap=True)
    n_demo = len(bench.demos)
    if problems:
        console.print(f"[red]{len(problems)} problem(s)[/red] in {len(bench.queries)} queries, {n_demo} demos")
        raise typer.Exit(1)
    console.print(f"[green]ok[/green]: {len(bench.queries)} queries, {n_demo} demos, tasks: {', '.join(bench.tasks)}")


@app.command()
def shapes(
    out: Path = typer.Option(..., help="Output folder."),
    per_task: int | None = typer.Option(
        None, help="Pool samples per task and format (40; with --benchmark, queries per task + 2 × demos)."
    ),
    seed: int = typer.Option(0),
    benchmark: bool = typer.Option(False, "--benchmark", help="Write a ready benchmark (queries + demos + keys)."),
    queries_per_task: int = typer.Option(10, help="With --benchmark: queries per task and format."),
    demos: int = typer.Option(
        64,
        min=1,
        help="With --benchmark: ranked demo keys stored per query and strategy (the largest k a setting may ask).",
    ),
) -> None:
    """Write a shapes-world pool, or a ready benchmark with --benchmark."""
    from mmctx.data import shapes as sw

    if benchmark:
        bench = sw.build_benchmark(
            out, queries_per_task=queries_per_task, demos_per_query=demos, seed=seed, pool_per_task=per_task
        )
        console.print(f"benchmark: {len(bench.queries)} queries, {len(bench.demos)} demos → {out}")
    else:
        from mmctx.data.disk import write_samples

        pool = sw.generate_pool(out, per_task=40 if per_task is None else per_task, seed=seed)
        write_samples(pool, Path(out) / "pool.jsonl")
        console.print(f"pool: {len(pool)} samples → {out}/pool.jsonl")


@app.command("import-fewmmbench")
def import_fewmmbench(
    source: str = typer.Argument(..., help="HF dataset id (e.g. mustafaa/FewMMBench) or local folder in that layout."),
    out: Path = typer.Option(..., help="Benchmark folder to write."),
) -> None:
    """Convert the released FewMMBench data into an mmctx benchmark folder."""
    from mmctx.data.disk import save_benchmark
    from mmctx.data.fewmmbench import load_fewmmbench

    bench = load_fewmmbench(source, cache_dir=out)
    save_benchmark(bench, out)
    console.print(f"FewMMBench: {len(bench.queries)} queries, {len(bench.demos)} demos → {out}")


@app.command("sources")
def sources_cmd() -> None:
    """The source datasets mmctx converts: license, where to get them, the folder layout it expects."""
    from rich.table import Table

    from mmctx.data.sources import sources

    table = Table(
        "name", "dataset", "license", "published at", "expected layout under SOURCES/<name>/", "subsets → task/format"
    )
    for name, (info, _) in sources().items():
        subsets = "\n".join(f"{s} → {t}/{f}" for s, (t, f) in info.subsets.items())
        table.add_row(name, info.title, info.license, info.published, info.layout, subsets)
    Console(width=max(200, console.width)).print(table)


@build_app.command("fewmmbench")
def build_fewmmbench(
    sources_dir: Path = typer.Option(..., "--sources", help="Folder with one sub-folder per downloaded dataset."),
    out: Path = typer.Option(..., help="Benchmark folder to write."),
    encoder: str = typer.Option(..., help=ENCODER_HELP),
    recipe: Path | None = typer.Option(None, help="Recipe YAML (default: the shipped FewMMBench one)."),
    k: int = typer.Option(250, help="Queries per task and kind."),
    demos: int = typer.Option(
        64, min=1, help="Ranked demo keys per query and strategy: the largest k a setting may ask."
    ),
    seed: int = typer.Option(0),
    rationales: str | None = typer.Option(None, help="Model spec for CoT rationales (none without it)."),
    duplicate_cosine: float = typer.Option(0.98, help="Candidates closer than this to a query are not its demos."),
    figures: bool = typer.Option(True),
) -> None:
    """Convert the sources, pool them by the recipe (the paper's Table 2) and curate each task."""
    from collections import Counter

    from rich.table import Table

    from mmctx.curate.build import curate_pool, gather_pool
    from mmctx.curate.embed import EncoderError
    from mmctx.curate.pipeline import LAYOUT_DIR, CurateOptions, CurationError
    from mmctx.data.sources.build import COMPOSITION_COUNTS
    from mmctx.reporting.curation import figures_step

    try:
        gathered = gather_pool(sources_dir, k, demos, recipe)
    except (ValueError, OSError) as exc:
        fail(str(exc))
    report_path = out / "curation" / "build.json"
    for r in gathered.reports:
        if not r.present:
            console.print(f"[yellow]missing[/yellow] {r.name}: no folder {sources_dir / r.name}; skipped")
        else:
            console.print(f"{r.name}: {r.samples} samples, skipped by rule {r.skipped or '{}'}, {len(r.errors)} errors")
            for e in r.errors[:5]:
                console.print(f"  [red]error[/red] {escape(e)}", soft_wrap=True)
            if len(r.errors) > 5:
                console.print(f"  ... and {len(r.errors) - 5} more error(s), all in {escape(str(report_path))}")
    counts = gathered.duplicates_by_source()
    if counts:
        by_source = escape(", ".join(f"{name} {n}" for name, n in sorted(counts.items())))
        console.print(
            f"[yellow]dropped {sum(counts.values())} content duplicate(s)[/yellow] ({by_source}), keeping the first "
            "of each; listed in curation/build.json"
        )
    for name, size in gathered.small_groups.items():
        console.print(
            f"[yellow]skipped group[/yellow] {name}: {size} samples, fewer than k + {gathered.needed - k} demos "
            f"= {gathered.needed}"
        )
    for cue in gathered.cues:
        console.print(f"[yellow]surface cue[/yellow] {escape(cue.describe())}", soft_wrap=True)
    opts = CurateOptions(
        encoder=encoder, k=k, demos=demos, seed=seed, rationales=rationales, figures=figures,
        duplicate_cosine=duplicate_cosine,
    )  # fmt: skip
    try:
        built = curate_pool(gathered, out, opts, figures=figures_step)
    except (CurationError, EncoderError, ValueError) as exc:
        fail(str(exc))
    if built.left_out:
        reasons = Counter(built.left_out.values())
        console.print(
            f"[yellow]left out of {escape(str(out / LAYOUT_DIR))}[/yellow]: {len(built.left_out)} sample(s) the "
            "FewMMBench layout cannot hold (demo keys to them removed there; listed in curation/build.json)"
        )
        for reason, n in reasons.most_common(5):
            console.print(f"  {n} × {escape(reason)}", soft_wrap=True)
    columns = ("task", "kind", "source", *COMPOSITION_COUNTS)
    table = Table(*columns, caption="similar_demos: as in the paper's Table 2; random_only_demos: drawn only at random")
    for row in built.rows:
        table.add_row(*(str(row[c]) for c in columns))
    Console(width=max(120, console.width)).print(table)
    console.print(f"benchmark → {out}")
