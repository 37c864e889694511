"""CLBench-V aggregation: per-dataset, per-level and overall scores of one run (Tables 2 and 3).

Input is the run's ``results.jsonl`` rows, one per sample, as the pipeline writes them. Rules,
following the paper (§4.2, Tables 2 and 3):

  - every sample counts, whatever its outcome: a ``context_overflow``, ``unparsed``,
    ``judge_error``, ``invalid_sample`` or ``error`` row enters the denominator with score 0
    (the paper prints InternVL's context overflow on Financial Report ROE as 0.0000);
  - the per-dataset score is the mean over all of the dataset's samples;
  - the level score is the *micro*-average: "Dataset scores are weighted by their corresponding
    numbers of instances", i.e. the mean over every sample whose ``table_level`` is that level
    (MIRBench counts in L0, PRISMM-Bench in L1, see `mmctx.data.clbench.suite`);
  - overall is the mean over all samples of the run.

Outcome counts are kept per dataset and per level so that a low score can be read next to
why it is low. For the ROE evaluator the mean absolute error (percentage points) over the
*scored* samples is kept as well, since the paper discusses ROE both as a score and as an error.
Pure functions: no files are read here except by `load_run` (through `mmctx.jsonl`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmctx.data.clbench.suite import LEVEL_ORDER, SUBSETS, subset_or_none
from mmctx.data.clbench.suite import table_level as suite_table_level
from mmctx.jsonl import read_jsonl  # still importable from here; the reader is mmctx.jsonl's
from mmctx.scoring.evaluators.base import OUTCOMES, evaluator_metrics

__all__ = ["LevelScores", "aggregate", "dataset_order", "load_run"]

ROE_EVALUATOR = "roe"


@dataclass(frozen=True)
class LevelScores:
    """One run's CLBench-V scores. Dicts keyed by dataset follow the suite's order (Table 1).

    ``outcomes`` dicts always hold every name in `OUTCOMES` (zeros included), so a table can
    print any count without guarding. ``roe_mae`` holds, per dataset scored by the ROE
    evaluator, the mean ``detail.abs_error`` over its scored samples (``roe_mae_n`` of them).
    """

    model: str
    dataset_scores: dict[str, float]
    dataset_n: dict[str, int]
    dataset_level: dict[str, str]  # the Table 1 level, boundary cases included ("L0–L1")
    dataset_table_level: dict[str, str]  # the level it counts towards: L0, L1 or L2
    dataset_outcomes: dict[str, dict[str, int]]
    level_scores: dict[str, float]
    level_n: dict[str, int]
    level_outcomes: dict[str, dict[str, int]]
    overall: float
    n: int
    outcomes: dict[str, int]
    roe_mae: dict[str, float] = field(default_factory=dict)
    roe_mae_n: dict[str, int] = field(default_factory=dict)
    # Per dataset, the metrics its evaluator declares, as (mean, n): ReasonMap's map score beside
    # its binary topology score, CourtSI's MA / MRA / LocA split (non-scored samples count 0 in each).
    sub_scores: dict[str, dict[str, tuple[float, int]]] = field(default_factory=dict)

    def non_scored(self) -> dict[str, dict[str, int]]:
        """``{outcome: {dataset: count}}`` for every outcome other than ``scored`` that occurred."""
        out: dict[str, dict[str, int]] = {}
        for outcome in OUTCOMES[1:]:
            hits = {d: c[outcome] for d, c in self.dataset_outcomes.items() if c[outcome]}
            if hits:
                out[outcome] = hits
        return out


def load_run(run_dir: str | Path, model: str | None = None) -> LevelScores:
    """`aggregate` over ``RUN/results.jsonl``."""
    return aggregate(read_jsonl(Path(run_dir) / "results.jsonl"), model=model)


def dataset_order(names: Iterable[str]) -> list[str]:
    """Suite order (Table 1) first, then any unknown dataset names sorted, so tables are stable."""
    names = set(names)
    known = [s.name for s in SUBSETS if s.name in names]
    return known + sorted(names - set(known))


def _zeros() -> dict[str, int]:
    return {o: 0 for o in OUTCOMES}


def _row_score(row: Mapping[str, Any], where: str) -> float:
    """The score a row contributes: its score if scored (checked to lie in [0, 1]), else 0."""
    outcome = row.get("outcome")
    if outcome not in OUTCOMES:
        raise ValueError(f"{where}: unknown outcome {outcome!r}; one of {OUTCOMES}")
    if outcome != "scored":
        return 0.0
    score = float(row.get("score", 0.0))
    if not 0.0 <= score <= 1.0:
        raise ValueError(f"{where}: score {score} outside [0, 1]")
    return score


def _levels_of(row: Mapping[str, Any]) -> tuple[str, str]:
    """(Table 1 level, table level) of a row; the suite fills in what the row leaves out."""
    subset = str(row["subset"])
    known = subset_or_none(subset)
    level = row.get("level") or (known.level if known else "")
    table = row.get("table_level") or suite_table_level(level, subset)
    if not table:
        raise ValueError(f"sample {row.get('id')!r} of {subset!r}: no level to count it towards")
    return level, table


def aggregate(rows: Iterable[Mapping[str, Any]], model: str | None = None) -> LevelScores:
    """Scores of one run from its results rows (see the module docstring for the rules).

    Level scores are micro-averages (sample-weighted over datasets), as the paper's Table 2.
    Raises ValueError on no rows, an unknown outcome, a score outside [0, 1], a sample id seen
    twice in one dataset (a resumed run written twice would silently double-weight it), or a
    dataset whose rows disagree on the level they count towards.
    """
    sums: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    outcomes: dict[str, dict[str, int]] = defaultdict(_zeros)
    levels: dict[str, tuple[str, str]] = {}
    abs_errors: dict[str, list[float]] = defaultdict(list)
    subs: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    seen: set[tuple[str, str]] = set()
    models: Counter[str] = Counter()
    for index, row in enumerate(rows):
        subset = str(row["subset"])
        key = (subset, str(row["id"]))
        where = f"row {index} (sample {key[1]!r} of {subset!r})"
        if key in seen:
            raise ValueError(f"{where}: sample appears twice")
        seen.add(key)
        level = _levels_of(row)
        if levels.setdefault(subset, level)[1] != level[1]:
            raise ValueError(f"{where}: counts towards {level[1]}, other samples of {subset!r} towards "
                             f"{levels[subset][1]}")  # fmt: skip
        sums[subset] += _row_score(row, where)
        counts[subset] += 1
        outcomes[subset][row["outcome"]] += 1
        if row.get("model"):
            models[str(row["model"])] += 1
        detail = row.get("detail") or {}
        if row.get("evaluator") == ROE_EVALUATOR and row["outcome"] == "scored" and "abs_error" in detail:
            abs_errors[subset].append(float(detail["abs_error"]))
        for name, value in _sub_scores(row):
            subs[subset][name].append(value)
    if not counts:
        raise ValueError("no results rows to aggregate")
    return _collect(
        model or (models.most_common(1)[0][0] if models else ""), sums, counts, outcomes, levels, abs_errors, subs
    )


def _sub_scores(row: Mapping[str, Any]) -> list[tuple[str, float]]:
    """The metrics a row contributes to: those its evaluator declares (`Evaluator.metrics`:
    ReasonMap's map score, CourtSI's MA / MRA / LocA split, …), each where it counts the row."""
    found = []
    for metric in evaluator_metrics(str(row.get("evaluator") or "")):
        value = metric.value(row)
        if value is not None:
            found.append((metric.name, float(value)))
    return found


def _collect(model, sums, counts, outcomes, levels, abs_errors, subs) -> LevelScores:
    datasets = dataset_order(counts)
    level_sum: dict[str, float] = defaultdict(float)
    level_n: dict[str, int] = defaultdict(int)
    level_out: dict[str, dict[str, int]] = defaultdict(_zeros)
    for d in datasets:
        table = levels[d][1]
        level_sum[table] += sums[d]
        level_n[table] += counts[d]
        for o, c in outcomes[d].items():
            level_out[table][o] += c
    order = [lv for lv in LEVEL_ORDER if lv in level_n] + sorted(set(level_n) - set(LEVEL_ORDER))
    total = sum(counts.values())
    return LevelScores(
        model=model,
        dataset_scores={d: sums[d] / counts[d] for d in datasets},
        dataset_n={d: counts[d] for d in datasets},
        dataset_level={d: levels[d][0] for d in datasets},
        dataset_table_level={d: levels[d][1] for d in datasets},
        dataset_outcomes={d: dict(outcomes[d]) for d in datasets},
        level_scores={lv: level_sum[lv] / level_n[lv] for lv in order},
        level_n={lv: level_n[lv] for lv in order},
        level_outcomes={lv: dict(level_out[lv]) for lv in order},
        overall=sum(sums.values()) / total,
        n=total,
        outcomes={o: sum(outcomes[d][o] for d in datasets) for o in OUTCOMES},
        roe_mae={d: sum(e) / len(e) for d in datasets if (e := abs_errors.get(d))},
        roe_mae_n={d: len(e) for d in datasets if (e := abs_errors.get(d))},
        sub_scores={d: {k: (sum(v) / len(v), len(v)) for k, v in subs[d].items()} for d in datasets if d in subs},
    )
