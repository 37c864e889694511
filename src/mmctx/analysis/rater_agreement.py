"""How much annotators agree who each rated every item on one scale (FewMMBench appendix B.3).

The paper reports Fleiss' κ for answer correctness and Krippendorff's α for reasoning quality;
here both are computed for every criterion, with percentile bootstrap intervals that resample
items (the demos), so the three estimates of one resample come from the same demos.

  - Fleiss' κ treats the scale's values as unordered categories: κ = (P̄ − P̄ₑ) / (1 − P̄ₑ), with
    P̄ the mean over items of the share of agreeing rater pairs and P̄ₑ = Σⱼ pⱼ² from the
    categories' overall shares (Fleiss 1971). Undefined (NaN) when every rating is one value.
  - Krippendorff's α at the scale's level of measurement (nominal or ordinal) over the scale's
    values in order, by the ``krippendorff`` package (`mmctx.analysis.agreement.krippendorff_alpha`).
  - The mean is the mean over items of each item's mean score.

A resample on which a statistic is undefined (all its ratings one value) is left out of that
statistic's interval and counted. Every rater must have rated every item: the caller checks that.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mmctx.analysis.agreement import krippendorff_alpha

__all__ = ["Estimate", "ScaleAgreement", "bootstrap_interval", "category_counts", "fleiss_kappa", "scale_agreement"]

TIE = "tie"  # an item's majority when two or more values share the most votes


@dataclass(frozen=True)
class Estimate:
    value: float
    low: float  # bootstrap percentile interval; NaN when no resample defined it
    high: float


@dataclass(frozen=True)
class ScaleAgreement:
    """Agreement and level of one criterion over items × raters."""

    items: int
    raters: int
    level: str
    mean: Estimate  # mean over items of an item's mean score
    sd: float  # standard deviation over items of an item's mean score
    kappa: Estimate  # Fleiss' κ
    alpha: Estimate  # Krippendorff's α at ``level``
    counts: dict[str, int]  # ratings given per scale value
    majority: dict[str, int]  # items per majority value (``tie`` when no single value has the most)
    item_means: tuple[float, ...]  # per item, in input order
    undefined_resamples: dict[str, int]  # statistic -> resamples on which it was undefined
    resamples: int
    confidence: float


def category_counts(codes: np.ndarray, n_categories: int) -> np.ndarray:
    """items × categories: how many raters gave each item each value (``codes``: items × raters indices)."""
    codes = np.asarray(codes, dtype=np.int64)
    out = np.zeros((codes.shape[0], n_categories), dtype=np.int64)
    for column in codes.T:
        out[np.arange(codes.shape[0]), column] += 1
    return out


def fleiss_kappa(counts: np.ndarray) -> float:
    """Fleiss' κ of an items × categories count table with the same number of raters per item."""
    counts = np.asarray(counts, dtype=np.float64)
    raters = counts.sum(axis=1)
    if counts.shape[0] == 0 or raters[0] < 2 or np.any(raters != raters[0]):
        raise ValueError("Fleiss' κ needs at least two raters per item and the same number for every item")
    n = raters[0]
    agreement = ((counts * (counts - 1)).sum(axis=1) / (n * (n - 1))).mean()
    shares = counts.sum(axis=0) / counts.sum()
    chance = float((shares**2).sum())
    if chance >= 1.0:
        return math.nan  # one value throughout: agreement beyond chance is 0/0
    return float((agreement - chance) / (1.0 - chance))


def bootstrap_interval(
    statistic: Callable[[np.ndarray], float], samples: np.ndarray, confidence: float
) -> tuple[float, float, int]:
    """``(low, high, undefined)``: the percentile interval of ``statistic`` over resampled item
    indices (``samples``: resamples × items), leaving out the resamples where it is NaN."""
    values = np.array([statistic(idx) for idx in samples], dtype=np.float64)
    finite = values[np.isfinite(values)]
    undefined = int(values.size - finite.size)
    if finite.size == 0:
        return math.nan, math.nan, undefined
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(finite, [tail, 1.0 - tail])
    return float(low), float(high), undefined


def scale_agreement(
    codes: np.ndarray,
    values: Sequence[str],
    scores: Sequence[float],
    level: str,
    resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> ScaleAgreement:
    """κ, α and the mean of items × raters ``codes`` (indices into ``values``), with intervals.

    ``scores`` is each value's number in an item's mean. Resampling is seeded: the same input
    and seed give the same intervals.
    """
    codes = np.asarray(codes, dtype=np.int64)
    if codes.ndim != 2 or codes.shape[0] == 0 or codes.shape[1] < 2:
        raise ValueError(f"need items × raters codes with at least one item and two raters, got shape {codes.shape}")
    if not 0 < confidence < 1:
        raise ValueError("confidence must be in (0, 1)")
    n_items, n_raters = codes.shape
    table = category_counts(codes, len(values))
    means = np.asarray(scores, dtype=np.float64)[codes].mean(axis=1)
    domain = list(range(len(values)))

    def kappa(idx: np.ndarray) -> float:
        return fleiss_kappa(table[idx])

    def alpha(idx: np.ndarray) -> float:
        return krippendorff_alpha(codes[idx].T.astype(np.float64), level, domain)

    def mean(idx: np.ndarray) -> float:
        return float(means[idx].mean())

    rng = np.random.default_rng(seed)
    samples = rng.integers(0, n_items, size=(resamples, n_items))
    estimates, undefined = {}, {}
    for name, statistic in (("mean", mean), ("kappa", kappa), ("alpha", alpha)):
        low, high, undefined[name] = bootstrap_interval(statistic, samples, confidence)
        estimates[name] = Estimate(statistic(np.arange(n_items)), low, high)
    return ScaleAgreement(
        items=n_items,
        raters=n_raters,
        level=level,
        mean=estimates["mean"],
        sd=float(means.std(ddof=1)) if n_items > 1 else math.nan,
        kappa=estimates["kappa"],
        alpha=estimates["alpha"],
        counts={v: int(table[:, i].sum()) for i, v in enumerate(values)},
        majority=_majorities(table, values),
        item_means=tuple(float(m) for m in means),
        undefined_resamples=undefined,
        resamples=resamples,
        confidence=confidence,
    )


def _majorities(table: np.ndarray, values: Sequence[str]) -> dict[str, int]:
    out = dict.fromkeys([*values, TIE], 0)
    for row in table:
        top = np.flatnonzero(row == row.max())
        out[values[top[0]] if top.size == 1 else TIE] += 1
    return out
