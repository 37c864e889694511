"""A few-shot (FewMMBench-style) run in one call: from a benchmark folder to a scored run folder.

Order matters: the benchmark is validated and every prompt planned *before* the model is
loaded, so a bad record costs seconds, not a model load; the run folder is held (`run_lock`)
before the model loads, so a second process on it refuses at once; capabilities are checked
before the first request; each response is committed as it arrives; scoring reads only the run folder.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mmctx.data.disk import load_benchmark
from mmctx.models import load_backend, options_for, sized_by_plan
from mmctx.models.base import Backend
from mmctx.models.registry import backend_entry, changed_values
from mmctx.prompts.build import preset_problems
from mmctx.prompts.presets import Preset, get_preset
from mmctx.run.budget import (
    WINDOW,
    check_max_prompt_tokens,
    counts_before_loading,
    fit_plan,
    refuse_uncounted,
    window_budget,
)
from mmctx.run.distributed import RayOptions
from mmctx.run.plan import BLANK_IMAGES, GenerationLimits, PlannedRequest, Shard, plan_requests, take_shard
from mmctx.run.runner import (
    RunConfig,
    RunStats,
    check_capabilities,
    execute,
    manifest_for,
    open_run,
    open_run_manifest,
    run_lock,
)
from mmctx.run.settings import parse_scorers, parse_settings, with_demo_orders, with_option_orders
from mmctx.schema import BenchmarkError
from mmctx.scoring.results import CellMetrics, SampleResult, rescore


@dataclass
class RunOutcome:
    run_dir: Path
    stats: RunStats
    results: list[SampleResult]
    cells: list[CellMetrics]


def evaluate(
    benchmark: Path,
    model: str,
    run_dir: Path,
    *,
    settings: str | None = None,
    scorers: str | None = None,
    preset: str | Preset = "fewmmbench",
    seed: int = 0,
    limits: GenerationLimits = GenerationLimits(),
    limit: int | None = None,
    tasks: list[str] | None = None,
    batch_size: int = 8,
    device: str = "auto",
    dtype: str = "auto",
    revision: str | None = None,
    trust_remote_code: bool = False,
    adapter: str | None = None,
    quantization: str | None = None,
    backend_options: dict | None = None,
    retry_errors: bool = False,
    demo_orders: int = 1,
    blind_orders: int = 3,
    shard: str | None = None,
    show_progress: bool = True,
    backend_factory: Callable[..., Backend] = load_backend,
    ray: RayOptions | None = None,
    max_prompt_tokens: int | str | None = None,
) -> RunOutcome:
    """``max_prompt_tokens``: the prompt budget (`mmctx.run.budget`), counted by the loaded model:
    a number of tokens or ``"window"`` (the model's window less the longest generation limit)."""
    max_prompt_tokens = check_max_prompt_tokens(max_prompt_tokens)
    if max_prompt_tokens is not None:
        if ray is not None:
            raise ValueError("max_prompt_tokens counts prompts with the model loaded here; it does not run on Ray")
        if backend_factory is load_backend and not counts_before_loading(model):
            refuse_uncounted(backend_entry(model).target, model)  # said before the model loads
    bench = load_benchmark(benchmark)
    bench.check()
    chosen = preset if isinstance(preset, Preset) else get_preset(preset)  # a task may bring its own
    problems = preset_problems(bench, chosen)  # every item the preset cannot show, not just the first
    if problems:
        raise BenchmarkError(problems)
    grid = with_option_orders(with_demo_orders(parse_settings(settings), demo_orders), blind_orders)
    config = RunConfig(
        benchmark=str(Path(benchmark).resolve()),
        benchmark_name=bench.name,
        benchmark_sha256=bench.fingerprint(),
        settings=[s.name for s in grid],  # recorded: changes scores
        scorers=parse_scorers(scorers),
        preset=chosen.name,
        preset_sha256=chosen.fingerprint(),
        seed=seed,
        limits=limits,
        limit=limit,
        tasks=tasks,
        batch_size=batch_size,
        shard=shard,
        max_prompt_tokens=max_prompt_tokens,
    )
    unknown = [t for t in tasks or [] if t not in bench.tasks]
    if unknown:  # a misspelt task would otherwise be an empty run that reports nothing
        raise ValueError(f"unknown task(s) {unknown}; the benchmark has {bench.tasks}")
    run_dir = Path(run_dir)
    plan = plan_requests(bench, grid, config.scorers, chosen, seed, limits, limit=limit, tasks=tasks,
                         blank_dir=run_dir / BLANK_IMAGES)  # fmt: skip
    plan = take_shard(plan, Shard.parse(shard) if shard else None)
    # evaluate's model arguments and `backend_options` are flat values: the backend takes its own,
    # and one it does not take is refused if the caller set it (`options_for`: None, False and
    # "auto" — these arguments' defaults — count as not set; batch_size and device steer the run too).
    values = dict(
        device=device, dtype=dtype, batch_size=batch_size, revision=revision, trust_remote_code=trust_remote_code,
        adapter=adapter, quantization=quantization, **(backend_options or {}),
    )  # fmt: skip
    if sized_by_plan(model):  # the engine is sized up front for the most images one prompt holds
        values.setdefault("max_images", max((sum(len(m.images) for m in r.prompt.messages) for r in plan), default=1))
    options = options_for(model, values)
    run_dir = Path(run_dir)
    fit = None
    if max_prompt_tokens is not None:  # the planned requests are fitted once the model can count them

        def fit(plan: list[PlannedRequest], backend: Backend) -> list[PlannedRequest]:
            name = backend.info.name
            count = refuse_uncounted(backend, name)
            tokens = max_prompt_tokens
            if tokens == WINDOW:
                tokens = window_budget(backend, name, max(limits.max_new_tokens, limits.cot_max_new_tokens))
            return fit_plan(
                plan, count, tokens, bench=bench, preset=chosen, seed=seed, blank_dir=run_dir / BLANK_IMAGES
            )

    # Held from before the model loads: a second process on the folder refuses at once.
    with run_lock(run_dir):
        stats = _execute(plan, model, options, run_dir, config, batch_size, show_progress, retry_errors,
                         backend_factory, ray, fit)  # fmt: skip
        results, cells = rescore(run_dir)
    return RunOutcome(run_dir, stats, results, cells)


def _execute(
    plan: list[PlannedRequest],
    model: str,
    options: Any,
    run_dir: Path,
    config: RunConfig,
    batch_size: int,
    show_progress: bool,
    retry_errors: bool,
    backend_factory: Callable[..., Backend],
    ray: RayOptions | None,
    fit: Callable[[list[PlannedRequest], Backend], list[PlannedRequest]] | None = None,
) -> RunStats:
    """Load the backend (or the Ray replicas), open the run folder and send what is not stored.

    ``options`` is the backend's options record (`mmctx.models.options_for`); ``backend_factory``
    is called as ``factory(model, **fields)`` with the fields set to other than their defaults.
    ``fit``: fits the plan to a prompt budget with the backend's counter (`mmctx.run.budget.fit_plan`).
    """
    if ray is not None:  # one replica per Ray actor, each loading the backend itself; rows come back here
        from mmctx.run.distributed import execute_distributed

        stats = execute_distributed(
            plan, model, options, run_dir, config=config, workers=ray.workers, address=ray.address,
            batch_size=batch_size, show_progress=show_progress, retry_errors=retry_errors,
        )  # fmt: skip
    else:
        backend = backend_factory(model, **changed_values(options))
        if fit is not None:
            plan = fit(plan, backend)
        check_capabilities(plan, backend)
        manifest = manifest_for(config, backend)
        open_run(run_dir, manifest, plan, backend.info)
        stats = execute(
            plan, backend, run_dir, batch_size=batch_size, show_progress=show_progress, retry_errors=retry_errors
        )
        usage = getattr(backend, "usage", None)
        stats.usage = usage() if callable(usage) else {}
        # e.g. the option-scoring path the HF backend chose: recorded with the run, by a session
        # that asked the model something (a resumed run with nothing left keeps what was recorded)
        if stats.usage and stats.done:
            open_run_manifest(run_dir, {**manifest, "backend_usage": stats.usage}, refresh=("backend_usage",))
    return stats
