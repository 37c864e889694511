"""Per-sample metrics: accuracy, option probabilities, calibration, bootstrap CIs.

Pure numpy functions over per-sample arrays. Empty input is handled explicitly:
scalar metrics return ``nan`` rather than raising or returning a misleading 0.
Invalid input (mismatched lengths, confidences outside [0, 1], non-positive
token counts) raises ``ValueError``: that is a caller bug, not an empty result.

Log-likelihood conventions (defined once, here): a model adapter reports, per
option, the SUM of the continuation's token log-probabilities and the number of
continuation tokens. Everything else (perplexity, the ranked choice, option
probabilities) is derived from those two numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = [
    "accuracy",
    "bootstrap_ci",
    "brier_score",
    "expected_calibration_error",
    "option_probabilities",
    "perplexity",
    "ppl_choice",
    "rate",
]

# Cap on resamples x n held in memory at once by bootstrap_ci (int64 indices: ~32 MB).
_BOOTSTRAP_CHUNK_CELLS = 4_000_000


def _mean_of_flags(flags: Sequence[bool]) -> float:
    arr = np.asarray(flags, dtype=bool).ravel()
    return float(arr.mean()) if arr.size else math.nan


def accuracy(correct: Sequence[bool]) -> float:
    """Fraction correct; ``nan`` for no samples (an empty cell is not 0% accurate)."""
    return _mean_of_flags(correct)


def rate(flags: Sequence[bool]) -> float:
    """Fraction of flagged samples, e.g. unparsed or truncated responses; ``nan`` when empty."""
    return _mean_of_flags(flags)


def _mean_loglikelihoods(loglikelihoods: Sequence[float], token_counts: Sequence[int]) -> np.ndarray:
    ll = np.asarray(loglikelihoods, dtype=np.float64).ravel()
    n = np.asarray(token_counts, dtype=np.float64).ravel()
    if ll.shape != n.shape:
        raise ValueError(f"{ll.size} log-likelihoods for {n.size} token counts")
    if np.any(n <= 0):
        # A zero-token continuation has no perplexity; silently dividing would rank it first or last.
        raise ValueError("token counts must be positive")
    return ll / n


def perplexity(loglikelihood: float, token_count: int) -> float:
    """Per-token perplexity ``exp(-loglikelihood / token_count)``.

    ``loglikelihood`` is the summed log-probability of the continuation (natural log).
    Returns ``nan`` for ``token_count <= 0``: an empty continuation has no perplexity.
    """
    if token_count <= 0:
        return math.nan
    return float(np.exp(-float(loglikelihood) / token_count))


def ppl_choice(loglikelihoods: Sequence[float], token_counts: Sequence[int]) -> int:
    """Index of the option with the lowest per-token perplexity (ties -> lowest index).

    Equivalent to the highest mean token log-likelihood; compared in log space
    so that ties are exact rather than an artefact of ``exp`` rounding.

    Raises:
        ValueError: for zero options. A choice among nothing has no index, and a
            sentinel such as -1 would silently index the last option.
    """
    mean = _mean_loglikelihoods(loglikelihoods, token_counts)
    if mean.size == 0:
        raise ValueError("ppl_choice needs at least one option")
    # np.argmax returns the first maximum, which gives the lowest-index tie-break.
    return int(np.argmax(mean))


def option_probabilities(loglikelihoods: Sequence[float], token_counts: Sequence[int]) -> np.ndarray:
    """Probabilities over options: softmax of per-token MEAN log-likelihoods.

    Why the mean and not the sum: a softmax over summed log-likelihoods favours
    short options (every extra token costs probability), while scoring picks the
    lowest-perplexity option. Using ``sum / count`` makes the most probable
    option exactly the ``ppl_choice`` option, so confidence-based metrics (ECE,
    Brier) describe the same decision that accuracy scores. Note these are
    length-normalised scores turned into a distribution, not the model's joint
    probability of each option string.

    Computed with log-sum-exp (shift by the max) so very negative
    log-likelihoods do not underflow. Options with ``-inf`` get probability 0;
    if every option is ``-inf`` the distribution is undefined and all entries
    are ``nan``. Empty input gives an empty array.
    """
    mean = _mean_loglikelihoods(loglikelihoods, token_counts)
    if mean.size == 0:
        return np.empty(0, dtype=np.float64)
    top = np.max(mean)
    if not np.isfinite(top):
        # all -inf (or +inf/nan from a broken adapter): no meaningful distribution
        return np.full(mean.shape, math.nan)
    weights = np.exp(mean - top)
    return weights / weights.sum()


def calibrated_probabilities(probs: Sequence[float], prior: Sequence[float]) -> np.ndarray:
    """Contextual calibration ("Calibrate Before Use", Zhao et al. 2021): ``probs`` divided by the
    option ``prior`` a content-free prompt gives, renormalised — the diagonal W = diag(prior)⁻¹, b = 0.

    An option the prior gives probability 0 would divide by zero: the prior is floored at the
    smallest positive double, so such an option wins only where it is also the only one left.
    A ``nan`` in either (an undefined distribution) gives all ``nan``.
    """
    p, q = np.asarray(probs, dtype=np.float64), np.asarray(prior, dtype=np.float64)
    if p.shape != q.shape:
        raise ValueError(f"{p.size} option probabilities against a prior over {q.size} options")
    if p.size == 0 or np.isnan(p).any() or np.isnan(q).any():
        return np.full(p.shape, math.nan)
    # In log space: a prior of 1e-300 times a probability of 1e-300 must not underflow to a tie.
    logits = np.log(np.maximum(p, np.finfo(float).tiny)) - np.log(np.maximum(q, np.finfo(float).tiny))
    weights = np.exp(logits - logits.max())
    return weights / weights.sum()


def expected_calibration_error(confidences: Sequence[float], correct: Sequence[bool], n_bins: int = 15) -> float:
    """Expected calibration error with ``n_bins`` equal-width bins over [0, 1].

    Bins: the first is ``[0, 1/n_bins]`` (it includes 0); every other bin ``k``
    is ``(k/n_bins, (k+1)/n_bins]`` (left-open, right-closed), so a confidence of
    exactly 1.0 lands in the last bin. Edges are computed as ``k / n_bins``, so
    a confidence of 0.7 with 10 bins lands in ``(0.6, 0.7]``.

    ECE = sum over non-empty bins of ``(n_bin / N) * |accuracy_bin - mean_confidence_bin|``.
    Returns ``nan`` for no samples or if any confidence is ``nan``.
    """
    conf = np.asarray(confidences, dtype=np.float64).ravel()
    hit = np.asarray(correct, dtype=np.float64).ravel()
    if conf.shape != hit.shape:
        raise ValueError(f"{conf.size} confidences for {hit.size} correctness flags")
    if n_bins < 1:
        raise ValueError("n_bins must be >= 1")
    if conf.size == 0 or np.isnan(conf).any():
        return math.nan
    if np.any((conf < 0) | (conf > 1)):
        raise ValueError("confidences must lie in [0, 1]")
    inner_edges = np.arange(1, n_bins) / n_bins
    # side="left": a confidence equal to an edge belongs to the bin that edge closes.
    bins = np.searchsorted(inner_edges, conf, side="left")
    counts = np.bincount(bins, minlength=n_bins)
    conf_sum = np.bincount(bins, weights=conf, minlength=n_bins)
    hit_sum = np.bincount(bins, weights=hit, minlength=n_bins)
    filled = counts > 0
    gaps = np.abs(hit_sum[filled] - conf_sum[filled])  # = n_bin * |acc_bin - conf_bin|
    return float(gaps.sum() / conf.size)


def brier_score(probs: Sequence[np.ndarray], gold: Sequence[int]) -> float:
    """Multi-class Brier score: mean over samples of ``sum_k (p_k - 1[k == gold])^2``.

    Samples may have different numbers of options. Ranges from 0 (perfect) to 2
    (all mass on one wrong option). ``nan`` for no samples.
    """
    if len(probs) != len(gold):
        raise ValueError(f"{len(probs)} probability vectors for {len(gold)} gold labels")
    if len(probs) == 0:
        return math.nan
    total = 0.0
    for p, g in zip(probs, gold):
        p = np.asarray(p, dtype=np.float64).ravel()
        if not 0 <= int(g) < p.size:
            raise ValueError(f"gold index {g} out of range for {p.size} options")
        target = np.zeros_like(p)
        target[int(g)] = 1.0
        total += float(np.sum((p - target) ** 2))
    return total / len(probs)


def bootstrap_ci(
    values: Sequence[float], n_resamples: int = 1000, confidence: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval for the mean of ``values``.

    Resamples ``values`` with replacement ``n_resamples`` times (vectorised,
    from ``numpy.random.default_rng(seed)``, so the same inputs and seed give
    the same interval) and returns the ``(1 - confidence) / 2`` and
    ``(1 + confidence) / 2`` quantiles of the resampled means.
    Returns ``(nan, nan)`` for empty input and ``(v, v)`` when every value is ``v``.
    """
    x = np.asarray(values, dtype=np.float64).ravel()
    if not 0 < confidence < 1:
        raise ValueError("confidence must be in (0, 1)")
    if n_resamples < 1:
        raise ValueError("n_resamples must be >= 1")
    if x.size == 0:
        return (math.nan, math.nan)
    if np.all(x == x[0]):
        # Exact, rather than a mean that picked up rounding error.
        return (float(x[0]), float(x[0]))
    rng = np.random.default_rng(seed)
    # Chunk the (resamples x n) index matrix so large n does not blow up memory;
    # drawing chunk by chunk from one generator keeps the result seed-determined.
    rows = max(1, _BOOTSTRAP_CHUNK_CELLS // x.size)
    means = np.concatenate(
        [
            x[rng.integers(0, x.size, size=(min(rows, n_resamples - start), x.size))].mean(axis=1)
            for start in range(0, n_resamples, rows)
        ]
    )
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return (float(low), float(high))
