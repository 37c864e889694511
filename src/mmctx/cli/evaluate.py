"""`mmctx eval`, `run`, `merge`, `score`, `report`, `view`: argument parsing over `mmctx.api`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from mmctx.cli.common import (
    Adapter,
    BaseUrl,
    BatchSize,
    Compile,
    Device,
    Dtype,
    ImageSettings,
    MaxConcurrency,
    ModelSpec,
    Progress,
    Quantization,
    RetryErrors,
    Revision,
    ScoreMode,
    Threads,
    TrustRemoteCode,
    app,
    backend_options,
    comma_list,
    console,
    fail,
    key_values,
)
from mmctx.models import DEFAULT_MODEL

# What a failed run raises: bad input, a run folder that refuses, a model that cannot load, an API
# server refusing the key (RuntimeError). Each is one line on stderr and exit 2, never a traceback.
_RUN_ERRORS: tuple[type[Exception], ...] = (ValueError, OSError, RuntimeError, LookupError)

Shard = Annotated[str | None, typer.Option(help="i/n: run only shard i of n (queries split by a hash of their id).")]
Ray = Annotated[bool, typer.Option("--ray", help="Run on Ray: one model replica per GPU, one run folder (mmctx[ray]).")]
RayAddress = Annotated[
    str | None, typer.Option(help="--ray: cluster to join (default: RAY_ADDRESS, else a local one).")
]


def prompt_budget(value: str | None) -> int | str | None:
    """``--max-prompt-tokens``: a whole number of tokens, at least 1, ``window``, or ``none`` (no budget)."""
    if value is None or value == "none":
        return None
    if value == "window":
        return value
    if not value.isdigit() or int(value) < 1:
        raise typer.BadParameter(f"a whole number of tokens, at least 1, window or none; not {value!r}")
    return int(value)


MaxPromptTokens = Annotated[
    str | None,
    typer.Option(
        callback=prompt_budget,
        help="Few-shot: a prompt budget counted by the model (images included; HF backend), in tokens or 'window' "
        "(its context window less the generation limit): a longer prompt drops demos from the least similar end "
        "until it fits; recorded per request in requests.jsonl.",
    ),
]
RayWorkers = Annotated[int | None, typer.Option(help="--ray: model replicas (default: one per GPU, 2 without GPUs).")]


def _ray(ray: bool, address: str | None, workers: int | None):
    if not ray:
        return None
    from mmctx.run.distributed import RayOptions

    return RayOptions(address=address, workers=workers)


def _print_outcome(result, retried: bool) -> None:
    s = result.stats
    if result.kind == "context":
        console.print(
            f"{s.planned} items ({s.invalid} invalid): {s.cached} already stored, {s.done} new "
            f"({s.errors} errors), repairs asked {s.repairs_asked} in {s.seconds:.1f}s → {result.run_dir}\n"
            f"outcomes: {json.dumps(s.outcomes, sort_keys=True)}"
        )
    else:
        again = f", {s.errors_retried} earlier errors asked again" if retried else ""
        console.print(
            f"{s.planned} requests: {s.cached} already stored, "
            + (f"{s.shared} sharing another's call, " if s.shared else "")
            + f"{s.done} new ({s.errors} errors{again}) "
            f"in {s.seconds:.1f}s → {result.run_dir}"
        )
        if s.usage:
            console.print(f"backend usage: {s.usage}")
    print(result.table())
    if result.kind != "context" and result.results and all(r.outcome == "error" for r in result.results):
        # Nothing was answered: a script must not read this as a run that worked. All is stored.
        first = result.results[0].error
        console.print(f"[red]every request failed[/red] (the first: {escape(str(first))}); --retry-errors asks again")
        raise typer.Exit(1)


@app.command("eval")
def eval_cmd(
    task: str = typer.Argument(
        ...,
        help="A task name (shapes-world, clbench-v-toy, …), a task file FILE.py[@NAME], a benchmark folder, "
        "a CLBench-V suite (.jsonl or folder) or a .jsonl of multiple-choice items.",
    ),
    model: ModelSpec = DEFAULT_MODEL,
    out: Path | None = typer.Option(None, help="Run folder (default runs/TASK/MODEL); resumed if it holds this run."),
    grid: str | None = typer.Option(None, help="Few-shot settings, comma-separated (default: the task's grid)."),
    scorers: str | None = typer.Option(
        None, help="Few-shot scorers: generate, ppl, ppl-calibrated (default: generate,ppl)."
    ),
    tasks: str | None = typer.Option(None, help="Only these sub-tasks or CLBench-V subsets, comma-separated."),
    limit: int | None = typer.Option(
        None, min=1, help="Only the first N queries of each sub-task (context tasks: the first N items)."
    ),
    seed: int = typer.Option(0, help="Seeds option shuffling and random demos."),
    preset: str | None = typer.Option(None, help="Prompt preset (a built-in name or PATH.yaml) instead of the task's."),
    max_new_tokens: int | None = typer.Option(None, help="Generation limit (few-shot: without CoT; context runs)."),
    cot_max_new_tokens: int | None = typer.Option(None, help="Few-shot: generation limit of CoT settings."),
    demo_orders: int = typer.Option(1, help="Few-shot: each setting in N demo orders (order sensitivity)."),
    blind_orders: int = typer.Option(3, help="Few-shot: each -blind/-blind-all/-blank setting in N option orders."),
    task_option: list[str] | None = typer.Option(None, help="KEY=VALUE passed to the task (repeatable)."),
    judge: str | None = typer.Option(None, help="Context runs: judge model spec (temperature 0)."),
    extractor: str | None = typer.Option(None, help="Context runs: extractor model spec for free-form answers."),
    repair: bool = typer.Option(False, "--repair", help="Context runs: ask once more, in format, when unparsed."),
    system_prompt: str | None = typer.Option(None, help="Context runs: system prompt (default: the paper's)."),
    truncation: str = typer.Option("none", help="Context runs: none (report context_overflow) | head | middle."),
    budget: int | None = typer.Option(None, help="With --truncation: context text budget in tokens."),
    tokenizer: str | None = typer.Option(None, help="With --truncation: tokenizer path or id, or 'whitespace'."),
    max_prompt_tokens: MaxPromptTokens = None,
    device: Device = None,
    dtype: Dtype = None,
    batch_size: BatchSize = None,
    revision: Revision = None,
    trust_remote_code: TrustRemoteCode = False,
    adapter: Adapter = None,
    quantization: Quantization = None,
    image_settings: ImageSettings = None,
    threads: Threads = None,
    compile: Compile = False,
    base_url: BaseUrl = None,
    max_concurrency: MaxConcurrency = None,
    score_mode: ScoreMode = None,
    retry_errors: RetryErrors = False,
    shard: Shard = None,
    ray: Ray = False,
    ray_address: RayAddress = None,
    ray_workers: RayWorkers = None,
    progress: Progress = True,
) -> None:
    """Evaluate a model on a task, score it and print the tables; resumable."""
    from dataclasses import replace

    from mmctx import api
    from mmctx.run.plan import GenerationLimits

    try:
        chosen = api.resolve_task(task, **key_values(task_option, "--task-option"))
    except (TypeError, ValueError, OSError, LookupError) as exc:
        fail(str(exc))
    few_shot = chosen.kind == "fewshot"
    # Each flag reaches the API only for the kind of task it belongs to, or when set: the API
    # refuses a set flag of the other kind by name rather than ignoring it.
    if not few_shot and cot_max_new_tokens is not None:
        fail(f"{chosen.name} is a context-learning task: --cot-max-new-tokens is for few-shot tasks (--max-new-tokens)")
    limits = None
    if few_shot:
        given = {"max_new_tokens": max_new_tokens, "cot_max_new_tokens": cot_max_new_tokens}
        limits = replace(chosen.limits or GenerationLimits(), **{k: v for k, v in given.items() if v is not None})
    context = api.ContextOptions(
        system_prompt=system_prompt, max_new_tokens=(max_new_tokens if not few_shot else None) or 1024,
        repair=repair, truncation=truncation, truncation_budget=budget, tokenizer=tokenizer,
    )  # fmt: skip
    options = backend_options(
        device=device, dtype=dtype, batch_size=batch_size, revision=revision, trust_remote_code=trust_remote_code,
        adapter=adapter, quantization=quantization, image_settings=image_settings, threads=threads, compile=compile, base_url=base_url, max_concurrency=max_concurrency,
        score_mode=score_mode,
    )  # fmt: skip
    try:
        result = api.evaluate(
            chosen, model, out, grid=comma_list(grid), scorers=comma_list(scorers), tasks=comma_list(tasks),
            limit=limit, seed=seed, preset=preset, limits=limits, demo_orders=demo_orders, blind_orders=blind_orders,
            context=context, options=options, judge=judge, extractor=extractor, retry_errors=retry_errors,
            shard=shard, ray=_ray(ray, ray_address, ray_workers), progress=progress,
            max_prompt_tokens=max_prompt_tokens,
        )  # fmt: skip
    except _RUN_ERRORS as exc:
        fail(str(exc))
    _print_outcome(result, retry_errors)


@app.command()
def run(
    benchmark: Path = typer.Argument(..., help="Benchmark folder."),
    model: ModelSpec = DEFAULT_MODEL,
    out: Path = typer.Option(..., help="Run folder (created, or resumed if it holds the same run)."),
    settings: str = typer.Option(
        "all", help="Comma list: 0-shot,4-random,4-similar,4-similar-cot,8-random,8-similar,8-similar-cot."
    ),
    scorers: str = typer.Option("all", help="Comma list of generate, ppl, ppl-calibrated (all: generate,ppl)."),
    preset: str = typer.Option(
        "fewmmbench", help="Prompt preset: fewmmbench | fewmmbench-single-turn | PATH.yaml (docs/extending.md)."
    ),
    seed: int = typer.Option(0, help="Seeds option shuffling."),
    max_new_tokens: int = typer.Option(16, help="Generation limit for settings without CoT."),
    cot_max_new_tokens: int = typer.Option(512, help="Generation limit for CoT settings."),
    limit: int | None = typer.Option(None, help="Only the first N queries of each task."),
    tasks: str | None = typer.Option(None, help="Comma list of tasks to run."),
    batch_size: BatchSize = None,
    device: Device = None,
    dtype: Dtype = None,
    revision: Revision = None,
    trust_remote_code: TrustRemoteCode = False,
    adapter: Adapter = None,
    quantization: Quantization = None,
    image_settings: ImageSettings = None,
    threads: Threads = None,
    compile: Compile = False,
    base_url: BaseUrl = None,
    max_concurrency: MaxConcurrency = None,
    score_mode: ScoreMode = None,
    retry_errors: RetryErrors = False,
    shard: Shard = None,
    demo_orders: int = typer.Option(1, help="Evaluate each few-shot setting in N demo orders (order sensitivity)."),
    blind_orders: int = typer.Option(3, help="Each -blind/-blind-all/-blank setting in N option orders."),
    max_prompt_tokens: MaxPromptTokens = None,
    ray: Ray = False,
    ray_address: RayAddress = None,
    ray_workers: RayWorkers = None,
    progress: Progress = True,
) -> None:
    """Evaluate a model on a benchmark folder over a settings grid (`mmctx eval` with the run's flags)."""
    from mmctx import api
    from mmctx.run.plan import GenerationLimits

    options = backend_options(
        device=device, dtype=dtype, batch_size=batch_size, revision=revision, trust_remote_code=trust_remote_code,
        adapter=adapter, quantization=quantization, image_settings=image_settings, threads=threads, compile=compile, base_url=base_url, max_concurrency=max_concurrency,
        score_mode=score_mode,
    )  # fmt: skip
    try:
        result = api.evaluate(
            api.resolve_task("fewmmbench", path=benchmark), model, out, grid=comma_list(settings),
            scorers=comma_list(scorers), tasks=comma_list(tasks), limit=limit, seed=seed, preset=preset,
            limits=GenerationLimits(max_new_tokens, cot_max_new_tokens), demo_orders=demo_orders, blind_orders=blind_orders, options=options,
            retry_errors=retry_errors, shard=shard, ray=_ray(ray, ray_address, ray_workers), progress=progress,
            max_prompt_tokens=max_prompt_tokens,
        )  # fmt: skip
    except _RUN_ERRORS as exc:
        fail(str(exc))
    _print_outcome(result, retry_errors)


@app.command()
def merge(
    shards: list[Path] = typer.Argument(..., help="Run folders of the shards (mmctx run --shard i/n)."),
    out: Path = typer.Option(..., help="Run folder for the merged run."),
) -> None:
    """Combine shard runs into one run (refuses shards of different runs) and score it."""
    from mmctx import api

    try:
        n = api.merge(shards, out)
        result = api.score(out)
    except _RUN_ERRORS as exc:
        fail(str(exc))
    console.print(f"merged {len(shards)} shards: {n} responses → {out}")
    print(result.table())


@app.command()
def score(
    run_dirs: list[Path] = typer.Argument(..., help="Run folder(s)."),
    judge: str | None = typer.Option(None, help="Context runs: judge model spec (judge calls are cached)."),
    extractor: str | None = typer.Option(None, help="Context runs: extractor model spec."),
) -> None:
    """Score runs afresh from their stored responses and write their results (no model needed)."""
    from mmctx import api

    for run_dir in run_dirs:
        try:
            result = api.score(run_dir, judge=judge, extractor=extractor)
        except _RUN_ERRORS as exc:
            fail(str(exc))
        console.print(f"{run_dir}: {len(result.results)} results scored")
        print(result.table())


@app.command("judge-cot")
def judge_cot(
    run_dir: Path = typer.Argument(..., help="A few-shot run folder with CoT settings."),
    judge: str = typer.Option(..., help="Judge model spec (openai:NAME@URL, an HF id, …); its calls are cached."),
    sample: int = typer.Option(50, min=1, help="CoT responses to judge, drawn with --seed."),
    seed: int = typer.Option(0, help="Seed of the sample."),
) -> None:
    """Have a judge read the reasoning of a sample of a run's CoT responses; `report --out` shows the counts."""
    from mmctx import api
    from mmctx.analysis.cot_failures import cot_judgement_counts
    from mmctx.reporting.cot_tables import cot_judgements_markdown

    try:
        judged = api.judge_cot(run_dir, judge, sample=sample, seed=seed)
    except _RUN_ERRORS as exc:
        fail(str(exc))
    console.print(f"{run_dir}: {len(judged)} CoT responses judged → {run_dir / 'cot_judgements.jsonl'}")
    print(cot_judgements_markdown([(run_dir.name, cot_judgement_counts(judged))]) or "No CoT response to judge.")


@app.command()
def report(
    run_dirs: list[Path] = typer.Argument(..., help="Run folder(s), one per model."),
    csv: Path | None = typer.Option(None, help="Also write every metric as CSV here."),
    markdown: Path | None = typer.Option(None, help="Also write the Markdown tables here."),
    out: Path | None = typer.Option(
        None, help="Write the full report into this folder: report.md, CSVs, paired comparisons, LaTeX, figures."
    ),
    latex: bool = typer.Option(True, help="With --out: also write table1/table4/table5.tex."),
    figures: bool = typer.Option(True, help="With --out: also write the figures (PNG + PDF)."),
    seed: int = typer.Option(0, help="With --out: seed of the paired bootstrap."),
    annotation: Path | None = typer.Option(
        None, help="An `mmctx annotate export` folder: its sample and, once imported, rater agreement."
    ),
) -> None:
    """Print the papers' tables for one or more runs; with --out, write the full report.

    Run folders are only read: few-shot results are scored afresh in memory from the stored
    responses. Context-learning runs get CLBench-V's Tables 2 and 3.
    """
    from mmctx import api

    try:
        text = api.report(run_dirs, out, latex=latex, figures=figures, seed=seed, csv=csv, annotation=annotation)
    except _RUN_ERRORS as exc:
        fail(str(exc))
    print(text)
    if markdown:
        markdown.write_text(text)
    if csv:
        console.print(f"CSV → {csv}")
    if out:
        start = out / "report.md"
        console.print(f"report → {out}" + (f" (start with {start})" if start.exists() else ""))


@app.command()
def view(
    run_dirs: list[Path] = typer.Argument(..., help="Run folder(s), one per model."),
    out: Path = typer.Option(..., help="Folder to write the site into (index.html, samples.html, …)."),
    figures: Path | None = typer.Option(None, help="Folder of figures (PNG/SVG) to show on the summary page."),
) -> None:
    """Write a static HTML viewer of the runs' per-sample results; open OUT/index.html from disk."""
    from mmctx import api

    try:
        index = api.view(run_dirs, out, figures=figures)
    except _RUN_ERRORS as exc:
        fail(str(exc))
    console.print(f"viewer → {index}")
