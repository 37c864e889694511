"""`mmctx study`: what the papers could not measure, on one benchmark and model, in one report.

One command runs, on shapes-world with the built-in model unless told otherwise:

- **shortcut checks**: ``0-shot-blind`` and ``0-shot-blank`` in ``blind_orders`` option orders,
  so the report gives the share of each task answerable without vision and accuracy without it;
- **CoT failure analysis**: ``4-similar-cot`` and ``8-similar-cot``, every response tagged;
- **demonstration strategies**: random, similar, image-similar, text-similar, MMR, balanced and
  same-task-different-answer at 4 shots, similar from 8 to 64 shots, most-similar-last and two
  seeded orders (the order-sensitivity table), each compared with ``similar`` in the
  paired-comparison table; ``ppl-calibrated`` beside ``ppl``;
- **human validation**: rating forms for ``annotators`` people on a sample of the CoT demos
  (`mmctx annotate export`); once filled and imported (`mmctx annotate import OUT/annotation`),
  running the study again puts their agreement in the report.

Many-shot prompts are fitted to the model's window: ``max_prompt_tokens="window"``, the default,
is the window less the longest generation limit, and the demos a prompt drops are recorded per
request (`mmctx.run.budget`). A backend that cannot count prompts (an API model) runs without one:
its server answers an overflow with an error, which the report counts as one.

Everything lands in ``OUT``: ``benchmark/``, ``run/`` (resumable: a second call asks nothing
already stored), ``annotation/`` and ``report/report.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mmctx import api
from mmctx.models import DEFAULT_MODEL
from mmctx.reporting.escaping import markdown_text as md
from mmctx.run.budget import counts_before_loading
from mmctx.run.plan import DEMO_LIMITS, GenerationLimits
from mmctx.run.settings import Setting
from mmctx.schema import Benchmark, BenchmarkError

SHORTCUT_SETTINGS = ("0-shot-blind", "0-shot-blank")
COT_SETTINGS = ("4-similar-cot", "8-similar-cot")
STRATEGY_SETTINGS = (
    "0-shot",
    "4-random",
    "4-similar",
    "4-image-similar",
    "4-text-similar",
    "4-mmr",
    "4-balanced",
    "4-different-answer",
    "4-similar-last",
    "4-similar#o1",
    "4-similar#o2",
    "8-random",
    "8-similar",
    "16-similar",
    "32-similar",
    "64-similar",
)
STUDY_GRID: tuple[str, ...] = STRATEGY_SETTINGS + SHORTCUT_SETTINGS + COT_SETTINGS
STUDY_SCORERS: tuple[str, ...] = ("generate", "ppl", "ppl-calibrated")


@dataclass(frozen=True)
class StudyOutcome:
    benchmark: Path
    run: Path
    annotation: Path
    report: Path  # report.md
    result: api.EvalResult
    skipped: dict[str, str]  # study setting -> why this benchmark cannot run it


def run_study(
    out: str | Path,
    model: str = DEFAULT_MODEL,
    *,
    benchmark: str | Path | None = None,
    queries_per_task: int = 10,
    limit: int | None = None,
    blind_orders: int = 3,
    annotators: int = 3,
    sample: int = 5,
    limits: GenerationLimits = DEMO_LIMITS,
    max_prompt_tokens: int | str | None = "window",
    scorers: tuple[str, ...] = STUDY_SCORERS,
    progress: bool = False,
) -> StudyOutcome:
    """Run the study into ``out`` and write its report; see the module docstring.

    ``benchmark``: a benchmark folder; the settings it cannot run are left out and named in
    ``skipped`` and the report (default: shapes-world with ``queries_per_task`` queries per task
    and format, built into ``OUT/benchmark``); ``limit``: only the first N queries of each task.
    ``sample`` demos per task go to each of the ``annotators``' forms. ``max_prompt_tokens``: a
    prompt budget (`mmctx.run.budget`): ``"window"`` (see above), a number of tokens, or None.
    ``scorers``: fewer than the three for a model that cannot score options (``generate`` alone).
    """
    from mmctx.curate.annotation.export import EXPORT_FILE
    from mmctx.data.disk import load_benchmark
    from mmctx.reporting.annotation_forms import export_forms

    out = Path(out)
    if benchmark is None:
        from mmctx.data import shapes

        bench_dir = out / "benchmark"
        if not (bench_dir / "benchmark.json").exists():
            shapes.build_benchmark(bench_dir, queries_per_task=queries_per_task, seed=0)
    else:
        bench_dir = Path(benchmark)
    run_dir, annotation = out / "run", out / "annotation"
    if max_prompt_tokens == "window" and not counts_before_loading(model):
        max_prompt_tokens = None
    grid, skipped = study_grid(load_benchmark(bench_dir))
    result = api.evaluate(
        bench_dir, model, run_dir, grid=grid, scorers=list(scorers), limits=limits,
        blind_orders=blind_orders, limit=limit, max_prompt_tokens=max_prompt_tokens, progress=progress,
    )  # fmt: skip
    if not (annotation / EXPORT_FILE).exists():  # the forms people may be filling in are kept
        export_forms(load_benchmark(bench_dir), annotation, sample, annotators, seed=0)
    api.report([run_dir], out / "report", annotation=annotation)
    report = out / "report" / "report.md"
    if skipped:
        rows = "\n".join(f"| {md(name)} | {md(why)} |" for name, why in skipped.items())
        with open(report, "a", encoding="utf-8") as f:
            f.write(
                f"\n## Study settings not run\n\nThis benchmark cannot run them:\n\n| setting | why |\n|---|---|\n{rows}\n"
            )
    return StudyOutcome(bench_dir, run_dir, annotation, report, result, skipped)


def study_grid(bench: Benchmark) -> tuple[list[str], dict[str, str]]:
    """The `STUDY_GRID` settings ``bench`` can run, and for each other one its first problem (a
    list the benchmark does not store, fewer demos or rationales than the setting shows): the
    study runs on a benchmark built for 8 shots, or without image-similar lists, minus those."""
    from mmctx.prompts.presets import get_preset
    from mmctx.run.plan import choose_demos

    preset, grid, skipped = get_preset("fewmmbench"), [], {}
    for name in STUDY_GRID:
        setting = Setting.parse(name)
        try:
            for query in bench.queries:
                choose_demos(bench, query, setting, preset, seed=0)
        except BenchmarkError as exc:
            skipped[name] = str(exc.problems[0])
            continue
        grid.append(name)
    return grid, skipped
