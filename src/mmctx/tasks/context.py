"""A context-learning (CLBench-V) run from start to scores: plan, check, ask, then score.

    RUN/
      manifest.json      model, suite, system prompt, limits, repair, truncation, judge, extractor
      requests.jsonl     one line per item: subset, level, evaluator, store key, rendered prompt text
      responses.sqlite   model responses: first attempts and repair attempts (both kept)
      judges.sqlite      extractor and judge calls, keyed by their own model (their own cache)
      results.jsonl      one verdict per item (see `mmctx.scoring.levels` for what reads it)

Asking is `mmctx.run.context` (it stores and resumes, and asks for a repair where the scoring
layer says an answer cannot be read); scoring is `mmctx.scoring.context`. Everything that can
refuse the run (an invalid plan, a judge missing or unreachable) is checked before the first
request.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from mmctx.models.base import Backend
from mmctx.run.context import ContextConfig, ContextStats, ask_context, plan_context
from mmctx.run.runner import run_lock
from mmctx.schema import Benchmark
from mmctx.scoring.context import check_judges, evaluator_problems, probe_all, repair_issue, score_context_run

__all__ = ["ContextConfig", "ContextStats", "run_context"]


def run_context(
    bench: Benchmark,
    backend: Backend,
    run_dir: Path,
    config: ContextConfig,
    judge: Backend | None = None,
    extractor: Backend | None = None,
    count_tokens: Callable[[str], int] | None = None,
    show_progress: bool = True,
    retry_errors: bool = False,
) -> ContextStats:
    """Plan, check, generate (and repair), then score into ``results.jsonl``.

    The run folder is held throughout (`run_lock`): a second process on it is refused at once.
    """
    run_dir = Path(run_dir)
    with run_lock(run_dir):
        started = time.perf_counter()
        plan = plan_context(bench, config, count_tokens, item_problems=evaluator_problems)
        check_judges(plan, judge)
        probe_all(judge, extractor)
        stats = ask_context(
            plan, backend, run_dir, config, format_issue=repair_issue, judge=judge, extractor=extractor,
            show_progress=show_progress, retry_errors=retry_errors,
        )  # fmt: skip
        rows = score_context_run(run_dir, bench, judge=judge, extractor=extractor)
        for row in rows:
            stats.outcomes[row["outcome"]] = stats.outcomes.get(row["outcome"], 0) + 1
        stats.seconds = time.perf_counter() - started
        return stats
