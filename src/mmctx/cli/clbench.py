"""`mmctx clbench …`: the context-learning (CLBench-V) commands, argument parsing over the packages."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from mmctx.cli.common import (
    Adapter,
    BaseUrl,
    BatchSize,
    Device,
    Dtype,
    ModelSpec,
    Progress,
    RetryErrors,
    Revision,
    TrustRemoteCode,
    backend_options,
    console,
    fail,
)
from mmctx.models import DEFAULT_MODEL

app = typer.Typer(add_completion=False, no_args_is_help=True, help="CLBench-V: multimodal context learning.")
_ERRORS: tuple[type[Exception], ...] = (ValueError, OSError, RuntimeError, LookupError)


def _role_backend(spec: str | None):
    from mmctx.api import role_backend

    return role_backend(spec)


@app.command()
def suite() -> None:
    """List the 14 subsets: level, instances in the paper, template, answer format, evaluator."""
    from mmctx.data.clbench.suite import SUBSETS

    table = Table("subset", "level", "counts as", "paper N", "template", "suffix", "evaluator", "answer type")
    for s in SUBSETS:
        table.add_row(
            s.name, s.level, s.table_level, str(s.paper_n), s.template, s.suffix or "-", s.evaluator, s.answer_type
        )
    Console().print(table)


@app.command()
def toy(out: Path = typer.Option(..., help="Folder to write the toy suite to.")) -> None:
    """Write the toy suite: two hand-made items for each of the 14 subsets (a fixture, not data)."""
    from mmctx.data.clbench.toy import write_toy_suite

    bench = write_toy_suite(out)
    console.print(f"toy suite: {len(bench.queries)} items → {out}")


@app.command()
def validate(path: Path = typer.Argument(..., help="Suite folder or .jsonl file.")) -> None:
    """Check a suite and print every problem (exit 1 if any); a run scores such items invalid_sample."""
    from mmctx.data.clbench.loader import load_clbench
    from mmctx.scoring.context import evaluator_problems as _evaluator_problems

    try:
        bench = load_clbench(path)
    except (OSError, ValueError) as exc:
        fail(str(exc))
    problems = [str(p) for p in bench.validate()] + [p for q in bench.queries for p in _evaluator_problems(q)]
    for p in problems:
        print(p)
    if problems:
        console.print(f"[red]{len(problems)} problem(s)[/red] in {len(bench.queries)} items")
        raise typer.Exit(1)
    console.print(f"[green]ok[/green]: {len(bench.queries)} items, subsets: {', '.join(bench.tasks)}")


@app.command()
def run(
    suite_path: Path = typer.Argument(..., metavar="SUITE", help="Suite folder or .jsonl file."),
    model: ModelSpec = DEFAULT_MODEL,
    out: Path = typer.Option(..., help="Run folder (created, or resumed if it holds the same run)."),
    judge: str | None = typer.Option(None, help="Judge model spec (pinned; temperature 0); needed by judged subsets."),
    extractor: str | None = typer.Option(None, help="Extractor model spec for free-form answers the rules miss."),
    repair: bool = typer.Option(False, "--repair", help="Ask once more, with the repair prompt, when unparsed."),
    max_new_tokens: int = typer.Option(1024, help="Generation limit."),
    system_prompt: str | None = typer.Option(None, help="System prompt (default: the paper's); '' for none."),
    truncation: str = typer.Option("none", help="none (report context_overflow) | head | middle."),
    budget: int | None = typer.Option(None, help="With --truncation: context text budget in tokens."),
    tokenizer: str | None = typer.Option(None, help="With --truncation: tokenizer (path or id, or 'whitespace')."),
    subset: list[str] | None = typer.Option(None, help="Only these subsets (repeatable)."),
    limit: int | None = typer.Option(None, help="Only the first N items."),
    batch_size: BatchSize = None,
    device: Device = None,
    dtype: Dtype = None,
    revision: Revision = None,
    trust_remote_code: TrustRemoteCode = False,
    adapter: Adapter = None,
    base_url: BaseUrl = None,
    retry_errors: RetryErrors = False,
    progress: Progress = True,
) -> None:
    """Run a model on a suite (resumable), score it, and print Tables 2 and 3 for it (`mmctx eval SUITE`)."""
    from mmctx import api
    from mmctx.cli.evaluate import _print_outcome

    context = api.ContextOptions(
        system_prompt=system_prompt, max_new_tokens=max_new_tokens, repair=repair, truncation=truncation,
        truncation_budget=budget, tokenizer=tokenizer,
    )  # fmt: skip
    options = backend_options(
        device=device, dtype=dtype, batch_size=batch_size, revision=revision, trust_remote_code=trust_remote_code,
        adapter=adapter, base_url=base_url,
    )  # fmt: skip
    try:
        result = api.evaluate(
            api.resolve_task("clbench-v", path=suite_path), model, out, tasks=subset or None, limit=limit,
            context=context, options=options, judge=judge, extractor=extractor, retry_errors=retry_errors,
            progress=progress,
        )  # fmt: skip
    except _ERRORS as exc:
        fail(str(exc))
    _print_outcome(result, retry_errors)


def _suite_of(run_dir: Path, suite_path: Path | None):
    from mmctx.data.clbench.loader import load_clbench
    from mmctx.run.manifest import read_manifest

    path = suite_path or read_manifest(run_dir).source
    return load_clbench(path)


@app.command()
def score(
    run_dir: Path = typer.Argument(..., help="Run folder."),
    suite_path: Path | None = typer.Option(None, "--suite", help="Suite it ran on (default: the manifest's)."),
    judge: str | None = typer.Option(None, help="Judge model spec."),
    extractor: str | None = typer.Option(None, help="Extractor model spec."),
) -> None:
    """Re-score a run from its stored responses (no model needed; judge calls are cached)."""
    from mmctx import api

    try:
        result = api.score(run_dir, judge=judge, extractor=extractor, suite=suite_path)
    except _ERRORS as exc:
        fail(str(exc))
    console.print(f"{run_dir}: {len(result.results)} items scored")


@app.command()
def report(
    run_dirs: list[Path] = typer.Argument(..., help="Scored run folders, one per model."),
    out: Path | None = typer.Option(None, help="Write Tables 2–3 (md, csv, tex) and the heatmap here."),
) -> None:
    """Print CLBench-V's Table 2 (levels) and Table 3 (datasets) for one or more runs."""
    from mmctx import api
    from mmctx.run.manifest import read_manifest

    try:
        few_shot = [str(r) for r in run_dirs if read_manifest(r).kind != "context"]
    except _ERRORS as exc:
        fail(str(exc))
    if few_shot:
        fail(f"not context-learning runs: {', '.join(few_shot)} (report few-shot runs with mmctx report)")
    try:
        print(api.report(run_dirs, out))
    except _ERRORS as exc:
        fail(str(exc))
    if out:
        console.print(f"report → {out}")


@app.command()
def judges(
    run_dir: Path = typer.Argument(..., help="Run folder whose predictions are re-judged."),
    judge: list[str] = typer.Option(..., help="Judge model spec (repeat for several)."),
    out: Path = typer.Option(..., help="Folder for per-judge results and the comparison."),
    suite_path: Path | None = typer.Option(None, "--suite", help="Suite it ran on (default: the manifest's)."),
    extractor: str | None = typer.Option(
        None, help="The extractor the run used (free-form items are extracted as in the run)."
    ),
) -> None:
    """Re-judge stored predictions with several judges: per-judge macro scores (Table 4) and agreement."""
    from mmctx.analysis.clbench import judge_comparison

    try:
        bench = _suite_of(run_dir, suite_path)
        backends = [_role_backend(spec) for spec in judge]
        text = judge_comparison(run_dir, bench, backends, out, extractor=_role_backend(extractor))
    except _ERRORS as exc:
        fail(str(exc))
    print(text)


@app.command()
def complexity(
    run_dirs: list[Path] = typer.Argument(..., help="Scored run folders."),
    tokenizer: str = typer.Option(
        "whitespace", help="Tokenizer for token length (path or id; the paper: Qwen3-VL-4B)."
    ),
    exclude: list[str] | None = typer.Option(None, help="Subsets left out (e.g. 'Financial Report ROE')."),
    out: Path | None = typer.Option(None, help="Write correlations JSON and scatter plots here."),
) -> None:
    """Token length and image count vs score: Pearson and Spearman, per run."""
    from mmctx.reporting.complexity import complexity_report

    try:
        print(complexity_report(run_dirs, tokenizer, exclude or [], out))
    except (ValueError, OSError) as exc:
        fail(str(exc))


@app.command()
def failures(
    run_dir: Path = typer.Argument(..., help="Scored run folder."),
    tags: Path | None = typer.Option(None, help="CSV of id,tag[,note] labelled by hand."),
    template: Path | None = typer.Option(None, help="Write a CSV of the failed items to label by hand."),
    judge: str | None = typer.Option(None, help="Let this model propose a tag for each failed item."),
) -> None:
    """Failure taxonomy (six types): counts per level from hand tags or judge proposals."""
    from mmctx.analysis.clbench import failure_report

    try:
        print(failure_report(run_dir, tags, template, _role_backend(judge)))
    except (ValueError, OSError, RuntimeError) as exc:
        fail(str(exc))


@app.command()
def paper(
    pdf: Path = typer.Argument(..., help="Paper PDF."),
    out: Path = typer.Option(..., help="Suite folder to add the item to."),
    findings: Path | None = typer.Option(None, help="Text file of reference findings, one per line."),
    generator: str | None = typer.Option(None, help="Model spec that writes reference findings from the Results."),
    sample_id: str | None = typer.Option(None, help="Item id (default: from the file name)."),
) -> None:
    """Build a Paper Conclusion item from a PDF (evaluation version cut before Results)."""
    from mmctx.data.clbench.construct import build_paper_sample
    from mmctx.jsonl import split_records

    if not findings and not generator:
        fail("give --findings FILE or --generator MODEL")
    try:
        given = [line.strip() for _, line in split_records(findings.read_text(encoding="utf-8"))] if findings else None
        sample = build_paper_sample(pdf, out, backend=_role_backend(generator), findings=given, sample_id=sample_id)
    except (ValueError, OSError, RuntimeError) as exc:
        fail(str(exc))
    _append(out, sample)


@app.command()
def roe(
    pdf: Path = typer.Argument(..., help="Financial report PDF."),
    out: Path = typer.Option(..., help="Suite folder to add the item to."),
    net_profit: float = typer.Option(..., help="Net profit, as extracted by you."),
    revenue: float = typer.Option(...),
    total_assets: float = typer.Option(...),
    equity: float = typer.Option(..., help="Shareholders' equity."),
    sample_id: str | None = typer.Option(None, help="Item id (default: from the file name)."),
) -> None:
    """Build a Financial Report ROE item (DuPont) from a PDF and the gold figures you supply."""
    from mmctx.data.clbench.construct import RoeGold, build_roe_sample

    try:
        gold = RoeGold(net_profit=net_profit, revenue=revenue, total_assets=total_assets, equity=equity)
        sample = build_roe_sample(pdf, out, gold, sample_id=sample_id)
    except (ValueError, OSError) as exc:
        fail(str(exc))
    _append(out, sample)


def _append(out: Path, sample) -> None:
    """Add ``sample`` to the suite at ``out``, replacing an item of the same id."""
    from mmctx.data.clbench.loader import SAMPLES_FILE, load_clbench, write_clbench

    existing = load_clbench(out).queries if (Path(out) / SAMPLES_FILE).exists() else []
    kept = [s for s in existing if s.id != sample.id]
    write_clbench([*kept, sample], out)
    console.print(f"{sample.task} item {sample.id!r} → {out} ({len(kept) + 1} items)")
