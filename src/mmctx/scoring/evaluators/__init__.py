"""Open-answer evaluators (CLBench-V): each a small module that registers itself by name.

Rule evaluators: ``choice`` (option extraction + exact match), ``numeric`` and ``roe`` (normalised
numbers, tolerance, MAE), ``zerobench`` and ``reasonmap_plus`` (source conventions), ``route``
(ReasonMap topology judge + map score), ``courtsi`` (MA / MRA / LocA). Judged evaluators:
``semantic`` and ``mmlongbench`` (strict semantic equivalence; without a judge, normalised exact match and
MMLongBench-Doc's per-format rules respectively),
``rubric`` (CL-bench all-or-nothing), ``conclusions`` (list-count judge). See `base` for outcomes,
and for what a module declares: its answer types (a new one registered with it) and its metrics.
"""

from mmctx.scoring.evaluators.base import (
    ACCURACY,
    OUTCOMES,
    Evaluator,
    Extraction,
    Judge,
    JudgeReplyError,
    Metric,
    Verdict,
    evaluator_metrics,
    evaluator_names,
    get_evaluator,
    register,
    scored_or_zero,
)

__all__ = [
    "ACCURACY",
    "OUTCOMES",
    "Evaluator",
    "Extraction",
    "Judge",
    "JudgeReplyError",
    "Metric",
    "Verdict",
    "evaluator_metrics",
    "evaluator_names",
    "get_evaluator",
    "register",
    "scored_or_zero",
]
