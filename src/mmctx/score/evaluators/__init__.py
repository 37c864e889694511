"""Open-answer evaluators (CLBench-V): each a small module that registers itself by name.

Rule evaluators: ``choice`` (option extraction + exact match), ``numeric`` and ``roe`` (normalised
numbers, tolerance, MAE), ``zerobench`` and ``reasonmap_plus`` (source conventions), ``route``
(ReasonMap topology judge + map score), ``courtsi`` (MA / MRA / LocA). Judged evaluators:
``semantic`` and ``mmlongbench`` (strict semantic equivalence; without a judge, normalised exact match and
MMLongBench-Doc's per-format rules respectively),
``rubric`` (CL-bench all-or-nothing), ``conclusions`` (list-count judge). See `base` for outcomes.
"""

from mmctx.score.evaluators.base import (
    OUTCOMES,
    Evaluator,
    Extraction,
    Judge,
    JudgeReplyError,
    Verdict,
    evaluator_names,
    get_evaluator,
    register,
)

__all__ = [
    "OUTCOMES",
    "Evaluator",
    "Extraction",
    "Judge",
    "JudgeReplyError",
    "Verdict",
    "evaluator_names",
    "get_evaluator",
    "register",
]
