"""`mmctx demo`: the embedded default end to end."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import typer
from rich.markup import escape

from mmctx.cli.common import app, console
from mmctx.cli.evaluate import prompt_budget
from mmctx.models import DEFAULT_MODEL
from mmctx.run.plan import DEMO_LIMITS


@app.command()
def demo(
    out: Path = typer.Option(Path("runs/demo"), help="Folder for the benchmark, run and report."),
    model: str = typer.Option(DEFAULT_MODEL, help="Model to evaluate."),
    queries_per_task: int = typer.Option(4, help="shapes-world queries per task and format."),
    cot_max_new_tokens: int = typer.Option(DEMO_LIMITS.cot_max_new_tokens, help="Generation limit for CoT settings."),
    clbench: bool = typer.Option(True, help="Also run the CLBench-V toy suite (the model judges itself)."),
) -> None:
    """The embedded default: shapes-world benchmark → full settings grid, both scorers → report + viewer;
    then the CLBench-V toy suite → Tables 2–3."""
    from mmctx import api
    from mmctx.data import shapes as sw

    bench_dir, run_dir = out / "benchmark", out / "run"
    if not (bench_dir / "benchmark.json").exists():
        # The paper's grid shows at most 8 demos: 8 ranked keys per list, chosen among 32 candidates
        # per task and format. Many-shot, with 64 per list, is `mmctx study`'s.
        sw.build_benchmark(
            bench_dir, queries_per_task=queries_per_task, demos_per_query=8, pool_per_task=queries_per_task + 32, seed=0
        )
    limits = replace(DEMO_LIMITS, cot_max_new_tokens=cot_max_new_tokens)
    result = api.evaluate(bench_dir, model, run_dir, limits=limits, progress=True)
    print(api.report([run_dir], out / "report", csv=out / "report.csv"))
    index = api.view([run_dir], out / "viewer", figures=out / "report")
    s = result.stats
    console.print(
        f"{s.planned} requests ({s.cached} cached) in {s.seconds:.1f}s; report → {out}/report/report.md; "
        f"viewer → {index}"
    )
    if clbench:
        _demo_clbench(out / "clbench", model)


def _demo_clbench(out: Path, model: str) -> None:
    """Every CLBench-V subset once through the pipeline, offline: toy items, repair on, the model as judge."""
    from mmctx import api
    from mmctx.data.clbench.toy import write_toy_suite
    from mmctx.reporting.clbench_tables import table2_markdown

    write_toy_suite(out / "suite")
    context = api.ContextOptions(max_new_tokens=32, repair=True)
    result = api.evaluate(out / "suite", model, out / "run", context=context, judge=model, progress=True)
    api.report([out / "run"], out / "report")
    print(table2_markdown({result.model: result.scores}))  # Table 3 is in the report folder
    s = result.stats
    console.print(f"CLBench-V toy suite: {s.planned} items, outcomes {s.outcomes}; Tables 2–3 → {out}/report")


@app.command()
def study(
    out: Path = typer.Option(Path("runs/study"), help="Folder for the benchmark, run, annotation forms and report."),
    model: str = typer.Option(DEFAULT_MODEL, help="Model to study."),
    benchmark: Path | None = typer.Option(
        None, help="Benchmark folder (settings it cannot run are left out and listed); default: shapes-world in OUT."
    ),
    queries_per_task: int = typer.Option(10, help="shapes-world queries per task and format."),
    limit: int | None = typer.Option(None, help="Only the first N queries of each task (a quick look)."),
    blind_orders: int = typer.Option(3, help="Option orders each blind or blank setting is asked in."),
    annotators: int = typer.Option(3, help="Annotators a rating form is written for."),
    sample: int = typer.Option(5, help="CoT demos per task on each annotator's form."),
    scorers: str = typer.Option(
        "generate,ppl,ppl-calibrated", help="Comma list; generate alone for a model that cannot score options."
    ),
    max_prompt_tokens: str = typer.Option(
        "window",
        callback=prompt_budget,
        help="Prompt budget: window (the model's window less the generation limit), tokens, or none; "
        "a model that cannot count its prompts (an API model) runs without one.",
    ),
) -> None:
    """Beyond the papers, in one report: shortcut checks, CoT failure tags, demo strategies up to 64 shots,
    demo orders, calibrated ppl, and rating forms for human validation of the CoT demos."""
    from mmctx.cli.common import comma_list, fail
    from mmctx.study import run_study

    try:
        outcome = run_study(
            out, model, benchmark=benchmark, queries_per_task=queries_per_task, limit=limit, blind_orders=blind_orders,
            annotators=annotators, sample=sample, max_prompt_tokens=max_prompt_tokens, progress=True,
            scorers=tuple(comma_list(scorers) or ()),
        )  # fmt: skip
    except (ValueError, OSError, RuntimeError, LookupError) as exc:
        fail(str(exc))
    for name, why in outcome.skipped.items():
        console.print(f"[yellow]not run[/yellow] {name}: {escape(why)}", soft_wrap=True)
    s = outcome.result.stats
    console.print(
        f"{s.planned} requests ({s.cached} already stored, {s.shared} sharing another's call, {s.done} new, "
        f"{s.errors} errors) in {s.seconds:.1f}s; report → {outcome.report}"
    )
    console.print(
        f"rating forms → {outcome.annotation}; once filled: mmctx annotate import {outcome.annotation}, "
        f"then run this command again"
    )
