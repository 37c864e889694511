"""The `mmctx` command line: thin commands over the packages."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Multimodal in-context benchmarks.")
console = Console(stderr=True)


def _fail(message: str) -> None:
    # Messages quote records like queries[id].field: escape them, or rich reads them as markup.
    console.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)
    raise typer.Exit(2)


@app.command()
def validate(path: Path = typer.Argument(..., help="Benchmark folder.")) -> None:
    """Check a benchmark and print every problem found (exit 1 if any)."""
    from mmctx.data.disk import load_benchmark

    try:
        bench = load_benchmark(path)
    except (OSError, ValueError) as exc:
        _fail(str(exc))
    problems = bench.validate()
    for p in problems:
        print(p)
    n_demo = len(bench.demos)
    if problems:
        console.print(f"[red]{len(problems)} problem(s)[/red] in {len(bench.queries)} queries, {n_demo} demos")
        raise typer.Exit(1)
    console.print(f"[green]ok[/green]: {len(bench.queries)} queries, {n_demo} demos, tasks: {', '.join(bench.tasks)}")


@app.command()
def shapes(
    out: Path = typer.Option(..., help="Output folder."),
    per_task: int = typer.Option(40, help="Pool samples per task and format."),
    seed: int = typer.Option(0),
    benchmark: bool = typer.Option(False, "--benchmark", help="Write a ready benchmark (queries + demos + keys)."),
    queries_per_task: int = typer.Option(10, help="With --benchmark: queries per task and format."),
) -> None:
    """Write a shapes-world pool, or a ready benchmark with --benchmark."""
    from mmctx.data import shapes as sw

    if benchmark:
        bench = sw.build_benchmark(out, queries_per_task=queries_per_task, seed=seed, pool_per_task=per_task)
        console.print(f"benchmark: {len(bench.queries)} queries, {len(bench.demos)} demos → {out}")
    else:
        from mmctx.data.disk import write_samples

        pool = sw.generate_pool(out, per_task=per_task, seed=seed)
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


@app.command()
def run(
    benchmark: Path = typer.Argument(..., help="Benchmark folder."),
    model: str = typer.Option("builtin:tiny-idefics3", help="HF model id, local folder, or builtin:tiny-idefics3|tiny-llava."),
    out: Path = typer.Option(..., help="Run folder (created, or resumed if it holds the same run)."),
    settings: str = typer.Option("all", help="Comma list: 0-shot,4-random,4-similar,4-similar-cot,8-random,8-similar,8-similar-cot."),
    scorers: str = typer.Option("all", help="Comma list: generate,ppl."),
    preset: str = typer.Option("fewmmbench", help="Prompt preset: fewmmbench | fewmmbench-single-turn."),
    seed: int = typer.Option(0, help="Seeds option shuffling."),
    max_new_tokens: int = typer.Option(16, help="Generation limit for settings without CoT."),
    cot_max_new_tokens: int = typer.Option(512, help="Generation limit for CoT settings."),
    limit: Optional[int] = typer.Option(None, help="Only the first N queries of each task."),
    tasks: Optional[str] = typer.Option(None, help="Comma list of tasks to run."),
    batch_size: int = typer.Option(8, help="Prompts per generate call; options per scoring forward."),
    device: str = typer.Option("auto", help="auto, cpu, cuda, cuda:1, …"),
    dtype: str = typer.Option("auto", help="auto (bf16/fp16 on GPU, fp32 on CPU), float32, bfloat16, float16."),
    revision: Optional[str] = typer.Option(None, help="Model revision (branch, tag or commit) to pin."),
    trust_remote_code: bool = typer.Option(False, help="Allow the model repository's own code to run."),
    retry_errors: bool = typer.Option(False, help="Ask again for requests stored as errors."),
    progress: bool = typer.Option(True, help="Show a progress bar."),
) -> None:
    """Evaluate a model on a benchmark over a settings grid; resumable; scores and prints the tables."""
    from mmctx.report.tables import markdown_tables
    from mmctx.run.evaluate import evaluate
    from mmctx.run.plan import GenerationLimits
    from mmctx.run.runner import RunError
    from mmctx.models.hf import ModelError
    from mmctx.schema import BenchmarkError

    try:
        outcome = evaluate(
            benchmark,
            model,
            out,
            settings=settings,
            scorers=scorers,
            preset=preset,
            seed=seed,
            limits=GenerationLimits(max_new_tokens, cot_max_new_tokens),
            limit=limit,
            tasks=tasks.split(",") if tasks else None,
            batch_size=batch_size,
            device=device,
            dtype=dtype,
            revision=revision,
            trust_remote_code=trust_remote_code,
            retry_errors=retry_errors,
            show_progress=progress,
        )
    except (BenchmarkError, RunError, ModelError, ValueError, FileNotFoundError) as exc:
        _fail(str(exc))
    s = outcome.stats
    console.print(
        f"{s.planned} requests: {s.cached} already stored, {s.done} new ({s.errors} errors) "
        f"in {s.seconds:.1f}s → {out}"
    )
    print(markdown_tables([(_model_name(out), outcome.cells)]))


def _model_name(run_dir: Path) -> str:
    return json.loads((Path(run_dir) / "manifest.json").read_text())["model"]["name"]


@app.command()
def score(run_dirs: list[Path] = typer.Argument(..., help="Run folder(s).")) -> None:
    """Re-score runs from their stored responses (no model needed)."""
    from mmctx.report.tables import markdown_tables
    from mmctx.run.evaluate import rescore

    for run_dir in run_dirs:
        results, cells = rescore(run_dir)
        console.print(f"{run_dir}: {len(results)} results scored")
        print(markdown_tables([(_model_name(run_dir), cells)]))


@app.command()
def report(
    run_dirs: list[Path] = typer.Argument(..., help="Scored run folder(s), one per model."),
    csv: Optional[Path] = typer.Option(None, help="Also write every metric as CSV here."),
    markdown: Optional[Path] = typer.Option(None, help="Also write the Markdown tables here."),
) -> None:
    """Print the papers' Table 4/5 layout for one or more runs."""
    from mmctx.report.tables import markdown_tables, write_csv
    from mmctx.run.evaluate import rescore
    from mmctx.score.results import SUMMARY, load_summary

    runs = []
    names: dict[str, int] = {}
    for run_dir in run_dirs:
        if not (run_dir / SUMMARY).exists():
            rescore(run_dir)
        name = _model_name(run_dir)
        names[name] = names.get(name, 0) + 1
        runs.append((name if names[name] == 1 else f"{name} ({run_dir.name})", load_summary(run_dir)))
    text = markdown_tables(runs)
    print(text)
    if markdown:
        markdown.write_text(text)
    if csv:
        write_csv(runs, csv)
        console.print(f"CSV → {csv}")


@app.command("tiny-model")
def tiny_model(
    out: Path = typer.Option(..., help="Folder for the checkpoint."),
    family: str = typer.Option("idefics3", help="idefics3 or llava."),
    seed: int = typer.Option(0),
) -> None:
    """Build a tiny random-weight checkpoint offline (chance-level; for pipelines and tests)."""
    from mmctx.models.tiny import build_tiny_vlm

    build_tiny_vlm(out, family=family, seed=seed)  # type: ignore[arg-type]
    console.print(f"tiny {family} checkpoint → {out}")


@app.command()
def demo(
    out: Path = typer.Option(Path("runs/demo"), help="Folder for the benchmark, run and report."),
    model: str = typer.Option("builtin:tiny-idefics3", help="Model to evaluate."),
    queries_per_task: int = typer.Option(4, help="shapes-world queries per task and format."),
    cot_max_new_tokens: int = typer.Option(64, help="Generation limit for CoT settings."),
) -> None:
    """The embedded default: shapes-world benchmark → full settings grid, both scorers → report."""
    from mmctx.data import shapes as sw
    from mmctx.report.tables import markdown_tables, write_csv
    from mmctx.run.evaluate import evaluate
    from mmctx.run.plan import GenerationLimits

    bench_dir, run_dir = out / "benchmark", out / "run"
    if not (bench_dir / "benchmark.json").exists():
        sw.build_benchmark(bench_dir, queries_per_task=queries_per_task, seed=0)
    outcome = evaluate(bench_dir, model, run_dir, limits=GenerationLimits(16, cot_max_new_tokens))
    runs = [(_model_name(run_dir), outcome.cells)]
    text = markdown_tables(runs)
    (out / "report.md").write_text(text)
    write_csv(runs, out / "report.csv")
    print(text)
    s = outcome.stats
    console.print(f"{s.planned} requests ({s.cached} cached) in {s.seconds:.1f}s; report → {out}/report.md")


def main() -> None:  # pragma: no cover
    sys.exit(app())
