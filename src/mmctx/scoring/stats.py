"""Statistics over scored runs: paired setting comparisons, uncertainty and difficulty.

Everything here works on `SampleResult` lists (from `score_run`) and reuses `metrics` for
accuracy, bootstrap intervals, ECE and Brier; nothing is re-derived.

- **Paired comparisons** (`compare`): two settings of one model on the SAME items, joined on
  ``(task, query_id)``. Only items answered in both settings count; an item with an error or a
  missing response in either setting is dropped and counted (``dropped``). The accuracy
  difference (treatment − baseline) is the papers' ``Avg.``: the mean over tasks of the
  per-task paired differences, with a paired bootstrap CI that resamples items within each
  task (one task: the plain paired bootstrap). The p-value is McNemar's test on the pooled
  discordant pairs — exact binomial below `EXACT_BELOW` discordant pairs, chi-square with
  continuity correction otherwise. With tasks of equal size the macro difference and the
  pooled test describe the same quantity; use ``average="micro"`` to make them identical.
- **Uncertainty** (paper C.2, Figures 6 and 9): for ppl results, the probability of the chosen
  option split by correct / incorrect, and reliability-diagram bins with ECE and Brier.
- **Difficulty** (paper C.1, Figure 10): how many models answered each item correctly, bucketed.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from mmctx.run.settings import Setting
from mmctx.scoring import metrics
from mmctx.scoring.results import AVERAGE, SampleResult, macro_bootstrap_ci

__all__ = [
    "COMPARISONS",
    "EXACT_BELOW",
    "Comparison",
    "ComparisonRow",
    "ConfidenceSplit",
    "DifficultyCounts",
    "PairedComparison",
    "ReliabilityDiagram",
    "bucket_label",
    "compare",
    "compare_settings",
    "confidence_split",
    "correct_counts",
    "difficulty",
    "difficulty_buckets",
    "mcnemar",
    "reliability_diagram",
    "significance_mark",
]

ItemKey = tuple[str, str]  # (task, query_id)

# McNemar: exact binomial below this many discordant pairs, chi-square (continuity-corrected) from it.
EXACT_BELOW = 25


# --- paired comparisons --------------------------------------------------------------------------


@dataclass(frozen=True)
class PairedComparison:
    """Treatment vs baseline on the items both answered. Accuracies and difference are fractions."""

    baseline: str
    treatment: str
    n: int  # paired items: answered in both settings
    dropped: int  # items planned in either setting but not answered in both (error, missing, absent)
    baseline_accuracy: float
    treatment_accuracy: float
    difference: float  # treatment - baseline
    ci_low: float
    ci_high: float
    only_treatment: int  # discordant: treatment right, baseline wrong
    only_baseline: int  # discordant: baseline right, treatment wrong
    p_value: float
    test: str  # "exact" | "chi2" | "none" (no discordant pairs)

    @property
    def mark(self) -> str:
        return significance_mark(self.p_value)


def significance_mark(p_value: float) -> str:
    """``**`` for p < 0.01, ``*`` for p < 0.05, else empty (also for nan)."""
    if math.isnan(p_value):
        return ""
    return "**" if p_value < 0.01 else "*" if p_value < 0.05 else ""


def mcnemar(only_a: int, only_b: int, exact_below: int = EXACT_BELOW) -> tuple[float, str]:
    """Two-sided McNemar p-value from the two discordant counts, and the test used.

    - no discordant pairs: ``(1.0, "none")`` — nothing distinguishes the settings;
    - ``only_a + only_b < exact_below``: exact binomial test of ``only_a`` out of
      ``only_a + only_b`` at p = 1/2 (``scipy.stats.binomtest``);
    - otherwise: ``(|a - b| - 1)^2 / (a + b)`` against chi-square with 1 d.f. (Edwards'
      continuity correction, clipped at 0 so equal counts give p = 1).
    """
    from scipy import stats as sps

    if only_a < 0 or only_b < 0:
        raise ValueError("discordant counts must be non-negative")
    total = only_a + only_b
    if total == 0:
        return 1.0, "none"
    if total < exact_below:
        return float(sps.binomtest(only_a, total, 0.5).pvalue), "exact"
    statistic = max(abs(only_a - only_b) - 1, 0) ** 2 / total
    return float(sps.chi2.sf(statistic, df=1)), "chi2"


def _answered_by_item(results: Iterable[SampleResult]) -> tuple[dict[ItemKey, bool], set[ItemKey]]:
    answered: dict[ItemKey, bool] = {}
    planned: set[ItemKey] = set()
    for r in results:
        key = (r.task, r.query_id)
        planned.add(key)
        if r.answered:
            answered[key] = r.correct
    return answered, planned


def _one_setting(results: Sequence[SampleResult]) -> str:
    settings = {(r.setting, r.scorer) for r in results}
    if len(settings) > 1:
        raise ValueError(f"expected results of one setting and scorer, got {sorted(settings)}")
    return next(iter(settings))[0] if settings else ""


def compare(
    baseline: Sequence[SampleResult],
    treatment: Sequence[SampleResult],
    *,
    average: Literal["macro", "micro"] = "macro",
    n_resamples: int = 1000,
    seed: int = 0,
) -> PairedComparison:
    """Paired comparison of two settings' results (each list: one setting, one scorer, one model).

    ``average="macro"``: accuracies and difference are means over tasks of the per-task values
    on the paired items (the papers' ``Avg.``), CI from `macro_bootstrap_ci` over per-item
    differences grouped by task. ``"micro"``: pooled over items, CI from `metrics.bootstrap_ci`.
    Seeded: the same inputs and seed give the same interval.
    """
    base, base_planned = _answered_by_item(baseline)
    treat, treat_planned = _answered_by_item(treatment)
    paired = sorted(base.keys() & treat.keys())
    by_task: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    for key in paired:
        by_task[key[0]].append((base[key], treat[key]))
    only_treatment = sum(t and not b for b, t in (pair for pairs in by_task.values() for pair in pairs))
    only_baseline = sum(b and not t for b, t in (pair for pairs in by_task.values() for pair in pairs))
    p_value, test = mcnemar(only_treatment, only_baseline)

    if average == "macro":
        groups = [[float(t) - float(b) for b, t in pairs] for pairs in by_task.values()]
        base_acc = _mean([metrics.accuracy([b for b, _ in pairs]) for pairs in by_task.values()])
        treat_acc = _mean([metrics.accuracy([t for _, t in pairs]) for pairs in by_task.values()])
        difference = _mean([float(np.mean(g)) for g in groups])
        ci = macro_bootstrap_ci(groups, n_resamples=n_resamples, seed=seed)
    elif average == "micro":
        pairs = [pair for pairs in by_task.values() for pair in pairs]
        diffs = [float(t) - float(b) for b, t in pairs]
        base_acc = metrics.accuracy([b for b, _ in pairs])
        treat_acc = metrics.accuracy([t for _, t in pairs])
        difference = _mean(diffs)
        ci = metrics.bootstrap_ci(diffs, n_resamples=n_resamples, seed=seed)
    else:
        raise ValueError(f"average must be 'macro' or 'micro', not {average!r}")

    return PairedComparison(
        baseline=_one_setting(baseline),
        treatment=_one_setting(treatment),
        n=len(paired),
        dropped=len(base_planned | treat_planned) - len(paired),
        baseline_accuracy=base_acc,
        treatment_accuracy=treat_acc,
        difference=difference,
        ci_low=ci[0],
        ci_high=ci[1],
        only_treatment=only_treatment,
        only_baseline=only_baseline,
        p_value=p_value,
        test=test,
    )


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else math.nan


@dataclass(frozen=True)
class Comparison:
    """A question the comparison table answers: does ``treatment`` beat ``baseline``?"""

    question: str
    baseline: str
    treatment: str


# Strategies compared with ``similar`` at the same k (`mmctx.run.strategies`).
STRATEGY_QUESTIONS: tuple[str, ...] = ("mmr", "balanced", "different-answer", "image-similar", "text-similar")


def _comparisons(shots: Sequence[int] = (4, 8, 16, 32, 64)) -> tuple[Comparison, ...]:
    out: list[Comparison] = []
    for k in shots:
        out += [
            Comparison(f"{k}-shot random vs 0-shot", "0-shot", f"{k}-random"),
            Comparison(f"{k}-shot similar vs 0-shot", "0-shot", f"{k}-similar"),
            Comparison(f"{k}-shot similar vs random", f"{k}-random", f"{k}-similar"),
            Comparison(f"{k}-shot CoT vs no CoT (similar)", f"{k}-similar", f"{k}-similar-cot"),
        ]
        out += [Comparison(f"{k}-shot {s} vs similar", f"{k}-similar", f"{k}-{s}") for s in STRATEGY_QUESTIONS]
        out.append(Comparison(f"{k}-shot similar: nearest last vs first", f"{k}-similar", f"{k}-similar-last"))
    return tuple(out)


# The default questions, for k from 4 to 64. Each is asked per scorer wherever a run has both
# settings (CoT settings exist for generation only, so the CoT question has no ppl row); a run
# without a strategy's settings has none of its rows.
COMPARISONS: tuple[Comparison, ...] = _comparisons()


@dataclass(frozen=True)
class ComparisonRow:
    """One line of the comparison table: a model's answer to one question under one scorer."""

    model: str
    scorer: str
    question: str
    task: str  # a task, or "Avg." for the comparison over all tasks
    result: PairedComparison


def compare_settings(
    model: str,
    results: Sequence[SampleResult],
    comparisons: Sequence[Comparison] = COMPARISONS,
    *,
    per_task: bool = False,
    seed: int = 0,
) -> list[ComparisonRow]:
    """Every comparison whose two settings the run has, per scorer (``generate`` first).

    One ``Avg.`` row per (scorer, comparison); with ``per_task`` also one row per task.
    """
    groups: dict[tuple[str, str], list[SampleResult]] = defaultdict(list)
    for r in results:
        groups[(r.setting, r.scorer)].append(r)
    scorers = sorted({scorer for _, scorer in groups}, key=lambda s: (s != "generate", s))
    rows: list[ComparisonRow] = []
    for scorer in scorers:
        for c in comparisons:
            base, treat = groups.get((c.baseline, scorer)), groups.get((c.treatment, scorer))
            if not base or not treat:
                continue
            rows += _rows(model, scorer, c.question, base, treat, per_task, seed)
    # Contextual calibration is a scorer, not a setting: asked per setting that has both ppl forms.
    calibrated = {s for s, scorer in groups if scorer == "ppl-calibrated"}
    for setting in sorted(calibrated, key=lambda name: Setting.parse(name).sort_key):
        raw, calibrated = groups.get((setting, "ppl")), groups[(setting, "ppl-calibrated")]
        if raw:
            question = f"{setting}: calibrated vs raw ppl"
            rows += _rows(model, "ppl-calibrated", question, raw, calibrated, per_task, seed)
    return rows


def _rows(
    model: str,
    scorer: str,
    question: str,
    base: list[SampleResult],
    treat: list[SampleResult],
    per_task: bool,
    seed: int,
) -> list[ComparisonRow]:
    rows = [ComparisonRow(model, scorer, question, AVERAGE, compare(base, treat, seed=seed))]
    if per_task:
        for task in sorted({r.task for r in base} | {r.task for r in treat}):
            pair = [r for r in base if r.task == task], [r for r in treat if r.task == task]
            rows.append(ComparisonRow(model, scorer, question, task, compare(*pair, seed=seed)))
    return rows


# --- uncertainty (paper C.2) --------------------------------------------------------------------


@dataclass(frozen=True)
class ConfidenceSplit:
    """Probability of the chosen option, for the correct and the incorrect answers of one setting."""

    setting: str
    correct: tuple[float, ...]
    incorrect: tuple[float, ...]


def _chosen(r: SampleResult) -> float:
    """The probability of the chosen option (only called on `_ranked` results)."""
    if r.pred is None:
        raise ValueError(f"{r.request_id}: no chosen option")
    return r.probs[r.pred]


def _ranked(results: Iterable[SampleResult]) -> list[SampleResult]:
    """Answered results that carry option probabilities (ppl), with a usable chosen option."""
    return [r for r in results if r.answered and r.probs and r.pred is not None and not math.isnan(_chosen(r))]


def confidence_split(setting: str, results: Iterable[SampleResult]) -> ConfidenceSplit:
    ranked = _ranked(results)
    return ConfidenceSplit(
        setting=setting,
        correct=tuple(_chosen(r) for r in ranked if r.correct),
        incorrect=tuple(_chosen(r) for r in ranked if not r.correct),
    )


# metrics.expected_calibration_error's default, so a diagram's ECE equals summary.json's.
N_BINS = 15


@dataclass(frozen=True)
class ReliabilityDiagram:
    """Equal-width confidence bins of one setting (``nan`` accuracy/confidence for empty bins).

    Bins follow `metrics.expected_calibration_error`: the first is ``[0, 1/n]``, every other
    ``(k/n, (k+1)/n]``; ``ece`` and ``brier`` come from `metrics` on the same samples.
    """

    setting: str
    edges: tuple[float, ...]  # n_bins + 1
    counts: tuple[int, ...]
    accuracy: tuple[float, ...]
    confidence: tuple[float, ...]
    ece: float
    brier: float

    @property
    def n(self) -> int:
        return sum(self.counts)


def _bin_index(confidences: np.ndarray, n_bins: int) -> np.ndarray:
    # The same edges and side as metrics.expected_calibration_error (checked by a test).
    return np.searchsorted(np.arange(1, n_bins) / n_bins, confidences, side="left")


def reliability_diagram(setting: str, results: Iterable[SampleResult], n_bins: int = N_BINS) -> ReliabilityDiagram:
    ranked = _ranked(results)
    confidences, correct = [_chosen(r) for r in ranked], [r.correct for r in ranked]
    conf, hit = np.array(confidences, dtype=np.float64), np.array(correct, dtype=np.float64)
    bins = _bin_index(conf, n_bins)
    counts = np.bincount(bins, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = np.bincount(bins, weights=hit, minlength=n_bins) / counts
        confidence = np.bincount(bins, weights=conf, minlength=n_bins) / counts
    return ReliabilityDiagram(
        setting=setting,
        edges=tuple(float(e) for e in np.arange(n_bins + 1) / n_bins),
        counts=tuple(int(c) for c in counts),
        accuracy=tuple(float(a) for a in accuracy),
        confidence=tuple(float(c) for c in confidence),
        ece=metrics.expected_calibration_error(confidences, correct, n_bins=n_bins),
        brier=metrics.brier_score([np.array(r.probs) for r in ranked], [r.gold for r in ranked]),
    )


# --- difficulty (paper C.1, Figure 10) ----------------------------------------------------------


def difficulty_buckets(n_models: int, n_buckets: int = 4) -> list[tuple[int, int]]:
    """Inclusive ranges of "models correct" counts, ``0..n_models`` split as evenly as possible.

    The ``n_models + 1`` possible counts are cut into ``n_buckets`` consecutive ranges whose
    sizes differ by at most one, the larger ones first (``numpy.array_split``); empty ranges
    are dropped, so fewer models than buckets give one bucket per count. For the paper's 26
    models this is exactly Figure 10's [0–6], [7–13], [14–20], [21–26] (shown as "21+").
    """
    if n_models < 0 or n_buckets < 1:
        raise ValueError("need n_models >= 0 and n_buckets >= 1")
    parts = np.array_split(np.arange(n_models + 1), n_buckets)
    return [(int(p[0]), int(p[-1])) for p in parts if p.size]


def bucket_label(bucket: tuple[int, int], n_models: int) -> str:
    low, high = bucket
    if low == high:
        return f"[{low}]"
    return f"[{low}+]" if high == n_models else f"[{low}–{high}]"


def correct_counts(runs: Sequence[Sequence[SampleResult]], setting: str, scorer: str) -> tuple[dict[ItemKey, int], int]:
    """For each item planned (in this setting and scorer) in every run: how many runs got it right.

    Returns the counts and the number of (item, run) pairs without an answer (error or
    missing): those count as not correct — an item a model failed on was not answered
    correctly — and are reported so that a broken run is visible.
    """
    per_run = [_answered_by_item(r for r in run if r.setting == setting and r.scorer == scorer) for run in runs]
    if not per_run:
        return {}, 0
    common = set.intersection(*(planned for _, planned in per_run))
    counts = {key: sum(answered.get(key, False) for answered, _ in per_run) for key in sorted(common)}
    unscored = sum(key not in answered for answered, _ in per_run for key in common)
    return counts, unscored


@dataclass(frozen=True)
class DifficultyCounts:
    """Figure 10 for one (setting, scorer): items per bucket of "how many models got it right"."""

    setting: str
    scorer: str
    n_models: int
    buckets: tuple[tuple[int, int], ...]
    counts: tuple[int, ...]  # items per bucket
    unscored: int  # (item, model) pairs with an error or missing response, counted as not correct

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(bucket_label(b, self.n_models) for b in self.buckets)

    @property
    def n_items(self) -> int:
        return sum(self.counts)


def difficulty(
    runs: Sequence[Sequence[SampleResult]],
    setting: str,
    scorer: str,
    buckets: Sequence[tuple[int, int]] | None = None,
) -> DifficultyCounts:
    """Bucket the items of one setting by how many of ``runs`` (one per model) answered correctly.

    ``buckets`` default to `difficulty_buckets(len(runs))`; they must cover ``0..len(runs)``.
    """
    n_models = len(runs)
    buckets = list(buckets) if buckets is not None else difficulty_buckets(n_models)
    covered = sorted(v for low, high in buckets for v in range(low, high + 1))
    if covered != list(range(n_models + 1)):
        raise ValueError(f"buckets {buckets} must cover 0..{n_models} exactly once")
    counts, unscored = correct_counts(runs, setting, scorer)
    per_bucket = [sum(low <= c <= high for c in counts.values()) for low, high in buckets]
    return DifficultyCounts(setting, scorer, n_models, tuple(buckets), tuple(per_bucket), unscored)


# --- demo-order sensitivity -------------------------------------------------------------------


@dataclass(frozen=True)
class OrderSensitivity:
    """One few-shot setting evaluated in several demo orders (``mmctx run --demo-orders N``)."""

    setting: str  # the setting with demos in stored order
    scorer: str
    accuracies: tuple[float, ...]  # per order, stored order first, over items answered in every order
    agreement: float  # share of those items whose prediction is the same in every order
    n: int
    orders: tuple[str, ...] = ()  # each accuracy's order: "stored", "last", "#o1", …

    @property
    def spread(self) -> float:
        return max(self.accuracies) - min(self.accuracies)

    @property
    def std(self) -> float:
        return float(np.std(self.accuracies))


def order_sensitivity(results: Iterable[SampleResult]) -> list[OrderSensitivity]:
    """Per (setting, scorer) run in more than one demo order: accuracy per order and agreement.

    Orders are the stored one (most similar first), ``-last`` (most similar nearest the query)
    and the seeded permutations ``#o<n>``, in that order.
    """
    from mmctx.run.settings import Setting

    groups: dict[tuple[str, str], dict[tuple[int, int], dict[ItemKey, SampleResult]]] = {}
    for r in results:
        setting = Setting.parse(r.setting)
        if r.answered:
            rank = (0, 0) if not (setting.last or setting.order) else (1, 0) if setting.last else (2, setting.order)
            groups.setdefault((setting.base.name, r.scorer), {}).setdefault(rank, {})[(r.task, r.query_id)] = r
    out = []
    for (setting, scorer), by_order in sorted(groups.items()):
        if len(by_order) < 2:
            continue
        ranks = sorted(by_order)
        labels = tuple("stored" if k == 0 else "last" if k == 1 else f"#o{n}" for k, n in ranks)
        orders = [by_order[o] for o in ranks]
        items = sorted(set.intersection(*(set(o) for o in orders)))
        if not items:
            continue
        accuracies = tuple(float(np.mean([o[i].correct for i in items])) for o in orders)
        agreement = float(np.mean([len({o[i].pred for o in orders}) == 1 for i in items]))
        out.append(OrderSensitivity(setting, scorer, accuracies, agreement, len(items), labels))
    return out
