"""How much LLM judges agree (CLBench-V §5, Table 4): macro scores, Cohen's κ, Krippendorff's α.

Pure functions over scores already computed — no I/O, no models. Scores are per-sample verdict
scores in [0, 1] keyed by judge name, then sample id.

  - Cohen's κ is pairwise, over the samples both judges scored, on verdicts binarised at
    ``score >= 0.5`` (`THRESHOLD`): κ is a statistic of categorical labels, and a continuous
    list-count score is "mostly right" or not at that cut. When both judges give one and the
    same label throughout, κ is 0/0; it is reported as NaN (``agreement`` then shows 1.0).
  - Krippendorff's α is computed once across all judges over every sample at least two judges
    scored (missing ratings allowed), at the nominal level when every score is 0 or 1 and at
    the interval level otherwise, on the raw scores. NaN when it is undefined (fewer than two
    judges, or a single value throughout). Uses the ``krippendorff`` package.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

THRESHOLD = 0.5


@dataclass(frozen=True)
class PairAgreement:
    """Two judges over the samples both scored."""

    judges: tuple[str, str]
    n: int
    kappa: float  # Cohen's κ on binarised verdicts; NaN when undefined
    agreement: float  # fraction of samples with the same binarised verdict


@dataclass(frozen=True)
class AgreementReport:
    judges: tuple[str, ...]
    scores: dict[str, float]  # per judge: macro score over the samples every judge scored
    n_scored: dict[str, int]  # per judge: samples it scored
    shared: int  # samples every judge scored
    pairs: dict[tuple[str, str], PairAgreement]
    alpha: float  # Krippendorff's α across all judges; NaN when undefined
    alpha_level: str  # "nominal" (all scores 0/1) or "interval"
    alpha_units: int  # samples at least two judges scored


@dataclass(frozen=True)
class MacroTable:
    """Table 4's input for one prediction set: per judge, the mean per dataset and their macro average."""

    judges: tuple[str, ...]
    datasets: tuple[str, ...]
    per_dataset: dict[str, dict[str, float]]
    counts: dict[str, dict[str, int]]
    macro: dict[str, float]  # the mean of the judge's dataset means (datasets it has rows for)


def binarise(score: float) -> int:
    """A verdict as a label: 1 when ``score >= THRESHOLD``."""
    return int(score >= THRESHOLD)


def cohen_kappa(a: list[float], b: list[float]) -> float:
    """Cohen's κ of two judges' binarised verdicts on the same samples; NaN if undefined or empty."""
    if len(a) != len(b):
        raise ValueError(f"κ needs paired verdicts, got {len(a)} and {len(b)}")
    la, lb = [binarise(x) for x in a], [binarise(x) for x in b]
    if not la or (len(set(la)) == 1 and la == lb):
        return math.nan
    from sklearn.metrics import cohen_kappa_score

    return float(cohen_kappa_score(la, lb, labels=[0, 1]))


def alpha_level(values: Iterable[float]) -> str:
    """Nominal when every score is 0 or 1 (binary verdicts), interval otherwise."""
    return "nominal" if all(v in (0.0, 1.0) for v in values) else "interval"


def krippendorff_alpha(matrix: np.ndarray, level: str, value_domain: Sequence[float] | None = None) -> float:
    """α of a judges × samples matrix with NaN for missing ratings; NaN when undefined.

    ``value_domain`` lists the scale's values in order (the package otherwise takes those present).
    """
    try:
        import krippendorff
    except ImportError:
        raise ImportError("Krippendorff's α needs the krippendorff package: pip install krippendorff") from None
    if matrix.shape[0] < 2 or matrix.shape[1] == 0:
        return math.nan
    values = matrix[~np.isnan(matrix)]
    if len(np.unique(values)) < 2:
        return math.nan
    domain = None if value_domain is None else list(value_domain)
    return float(krippendorff.alpha(reliability_data=matrix, level_of_measurement=level, value_domain=domain))


def judge_agreement(
    scores: Mapping[str, Mapping[str, float]], datasets: Mapping[str, str] | None = None
) -> AgreementReport:
    """Macro scores, pairwise κ and overall α of several judges' scores of the same predictions.

    Per-judge scores are taken over the samples every judge scored, so they compare like with
    like; with ``datasets`` (sample id → dataset) they are macro averages over datasets, as in
    Table 4, else plain means.
    """
    judges = tuple(scores)
    shared = sorted(set.intersection(*(set(s) for s in scores.values()))) if judges else []
    macro = {j: _macro(scores[j], shared, datasets) for j in judges}
    pairs = {}
    for a, b in combinations(judges, 2):
        both = sorted(set(scores[a]) & set(scores[b]))
        va, vb = [scores[a][s] for s in both], [scores[b][s] for s in both]
        same = sum(binarise(x) == binarise(y) for x, y in zip(va, vb))
        pairs[(a, b)] = PairAgreement((a, b), len(both), cohen_kappa(va, vb), same / len(both) if both else math.nan)
    units = sorted({s for j in judges for s in scores[j]})
    units = [u for u in units if sum(u in scores[j] for j in judges) >= 2]
    matrix = np.full((len(judges), len(units)), np.nan)
    for row, j in enumerate(judges):
        for col, u in enumerate(units):
            matrix[row, col] = scores[j].get(u, np.nan)
    level = alpha_level(v for v in matrix.ravel() if not math.isnan(v))
    return AgreementReport(
        judges=judges,
        scores=macro,
        n_scored={j: len(scores[j]) for j in judges},
        shared=len(shared),
        pairs=pairs,
        alpha=krippendorff_alpha(matrix, level),
        alpha_level=level,
        alpha_units=len(units),
    )


def _macro(scores: Mapping[str, float], ids: list[str], datasets: Mapping[str, str] | None) -> float:
    if not ids:
        return math.nan
    if datasets is None:
        return float(np.mean([scores[s] for s in ids]))
    by_set: dict[str, list[float]] = {}
    for s in ids:
        by_set.setdefault(datasets[s], []).append(scores[s])
    return float(np.mean([np.mean(v) for v in by_set.values()]))


def macro_by_dataset(rows: Iterable[tuple[str, str, float]]) -> MacroTable:
    """``(judge, dataset, score)`` rows → per judge, per dataset mean and the macro average over datasets.

    One call per prediction set (Table 4 has one column per set). Every verdict counts,
    failures included with their 0 score, so the rows should be all of a dataset's samples.
    """
    sums: dict[str, dict[str, list[float]]] = {}
    for judge, dataset, score in rows:
        sums.setdefault(judge, {}).setdefault(dataset, []).append(float(score))
    judges = tuple(sums)
    datasets = tuple(dict.fromkeys(d for j in judges for d in sums[j]))
    per_dataset = {j: {d: float(np.mean(v)) for d, v in sums[j].items()} for j in judges}
    return MacroTable(
        judges=judges,
        datasets=datasets,
        per_dataset=per_dataset,
        counts={j: {d: len(v) for d, v in sums[j].items()} for j in judges},
        macro={j: float(np.mean(list(per_dataset[j].values()))) for j in judges},
    )
