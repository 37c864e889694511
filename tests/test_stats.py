"""score.stats on hand-made results: McNemar, paired bootstrap, reliability bins, difficulty buckets."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mmctx.scoring import metrics
from mmctx.scoring.results import SampleResult, cell_metrics
from mmctx.scoring.stats import (
    COMPARISONS,
    compare,
    compare_settings,
    confidence_split,
    correct_counts,
    difficulty,
    difficulty_buckets,
    mcnemar,
    reliability_diagram,
    significance_mark,
)


def result(
    qid: str,
    outcome: str,
    *,
    task: str = "counting",
    setting: str = "0-shot",
    scorer: str = "generate",
    confidence: float | None = None,
) -> SampleResult:
    """One result; with ``confidence``, a two-option ppl result whose chosen option has that probability."""
    gold = 0
    pred = None if outcome in ("unparsed", "error", "missing") else (0 if outcome == "correct" else 1)
    probs: tuple[float, ...] = ()
    if confidence is not None:
        probs = (confidence, 1 - confidence) if pred == 0 else (1 - confidence, confidence)
    return SampleResult(
        request_id=f"{setting}/{scorer}/{qid}",
        query_id=qid,
        task=task,
        source="hand",
        setting=setting,
        scorer=scorer,
        gold=gold,
        pred=pred,
        outcome=outcome,
        probs=probs,
    )


def results(flags: str, setting: str, task: str = "counting", prefix: str = "q") -> list[SampleResult]:
    """``flags``: one letter per item: c(orrect) w(rong) u(nparsed) e(rror) m(issing)."""
    names = {"c": "correct", "w": "wrong", "u": "unparsed", "e": "error", "m": "missing"}
    return [result(f"{task}/{prefix}{i}", names[f], task=task, setting=setting) for i, f in enumerate(flags)]


# --- McNemar ------------------------------------------------------------------------------------


def test_mcnemar_exact_by_hand() -> None:
    # 1 vs 6 discordant: two-sided binomial p = 2 * P(X <= 1 | n=7, 1/2) = 2 * (1 + 7) / 2^7
    p, test = mcnemar(1, 6)
    assert test == "exact"
    assert p == pytest.approx(16 / 128)
    assert mcnemar(6, 1)[0] == pytest.approx(16 / 128)


def test_mcnemar_chi_square_with_continuity_by_hand() -> None:
    # (|30 - 10| - 1)^2 / 40 = 9.025; chi-square(1) survival = erfc(sqrt(x / 2))
    p, test = mcnemar(30, 10)
    assert test == "chi2"
    assert p == pytest.approx(math.erfc(math.sqrt(9.025 / 2)))
    assert mcnemar(20, 20) == (1.0, "chi2")  # equal counts: the correction is clipped at 0


def test_mcnemar_without_discordant_pairs_and_bad_input() -> None:
    assert mcnemar(0, 0) == (1.0, "none")
    with pytest.raises(ValueError):
        mcnemar(-1, 2)


def test_significance_marks() -> None:
    assert [significance_mark(p) for p in (0.001, 0.0099, 0.01, 0.049, 0.05, 0.5, math.nan)] == [
        "**",
        "**",
        "*",
        "*",
        "",
        "",
        "",
    ]


# --- paired comparisons -------------------------------------------------------------------------


def test_compare_pairs_items_and_counts_by_hand() -> None:
    # items:            0  1  2  3  4  5  6  7  8  9
    base = results("cwwwwcwuem", "0-shot")
    treat = results("ccccwwcwwc", "4-random")
    r = compare(base, treat, seed=0)
    # item 8 errors in the baseline, item 9 is missing there: both dropped; item 7 unparsed = answered
    assert (r.n, r.dropped) == (8, 2)
    assert (r.baseline, r.treatment) == ("0-shot", "4-random")
    # treatment-only right: items 1, 2, 3, 6; baseline-only right: item 5
    assert (r.only_treatment, r.only_baseline) == (4, 1)
    assert r.baseline_accuracy == pytest.approx(2 / 8)
    assert r.treatment_accuracy == pytest.approx(5 / 8)
    assert r.difference == pytest.approx(3 / 8)
    assert r.test == "exact"
    assert r.p_value == pytest.approx(2 * (1 + 5) / 2**5)  # binomial(5, 1/2): P(X <= 1) twice
    assert r.ci_low <= r.difference <= r.ci_high


def test_compare_drops_errors_on_either_side() -> None:
    base = results("cce", "0-shot")
    treat = results("ecc", "4-random")
    r = compare(base, treat)
    assert (r.n, r.dropped) == (1, 2)  # only item 1 is answered in both


def test_compare_items_absent_from_one_setting_are_dropped() -> None:
    base = results("cc", "0-shot")
    treat = results("ccw", "4-random")
    assert (compare(base, treat).n, compare(base, treat).dropped) == (2, 1)


def test_paired_bootstrap_is_seeded_and_covers_the_true_difference() -> None:
    rng = np.random.default_rng(123)
    n = 600
    base_hit = rng.random(n) < 0.5
    # treatment fixes 20% of baseline errors and breaks none: true difference 0.5 * 0.2 = 0.10
    treat_hit = base_hit | (rng.random(n) < 0.2)
    flags = lambda hits: "".join("c" if h else "w" for h in hits)
    base, treat = results(flags(base_hit), "0-shot"), results(flags(treat_hit), "4-random")
    a, b = compare(base, treat, seed=7), compare(base, treat, seed=7)
    assert (a.ci_low, a.ci_high) == (b.ci_low, b.ci_high)
    assert a.ci_low < 0.10 < a.ci_high
    assert a.ci_low > 0  # a real improvement is detected ...
    assert a.p_value < 0.01 and a.test == "chi2" and a.only_baseline == 0  # ... and is significant
    c = compare(base, treat, seed=8)
    assert (c.ci_low, c.ci_high) != (a.ci_low, a.ci_high)


def test_macro_difference_is_the_mean_of_task_differences() -> None:
    base = results("wwww", "0-shot", task="counting") + results("cw", "0-shot", task="plurality")
    treat = results("cccc", "4-random", task="counting") + results("cw", "4-random", task="plurality")
    macro = compare(base, treat, average="macro")
    micro = compare(base, treat, average="micro")
    assert macro.difference == pytest.approx((1.0 + 0.0) / 2)
    assert micro.difference == pytest.approx(4 / 6)
    assert macro.baseline_accuracy == pytest.approx((0 + 0.5) / 2)
    assert (macro.only_treatment, macro.p_value) == (micro.only_treatment, micro.p_value)
    # the plurality task never changes, so every resample's difference is exactly 0.5
    assert (macro.ci_low, macro.ci_high) == (0.5, 0.5)
    with pytest.raises(ValueError):
        compare(base, treat, average="median")  # type: ignore[arg-type]


def test_compare_rejects_mixed_settings() -> None:
    with pytest.raises(ValueError):
        compare(results("c", "0-shot") + results("c", "4-random", prefix="x"), results("c", "4-random"))


def test_compare_settings_asks_only_questions_the_run_can_answer() -> None:
    run = []
    for setting in ("0-shot", "4-random", "4-similar", "4-similar-cot"):
        run += results("cwcw", setting)
        if not setting.endswith("cot"):
            run += [
                result(r.query_id, r.outcome, setting=setting, scorer="ppl", confidence=0.6)
                for r in results("ccww", setting)
            ]
    rows = compare_settings("m", run)
    generate = [r.question for r in rows if r.scorer == "generate"]
    ppl = [r.question for r in rows if r.scorer == "ppl"]
    ran = {"0-shot", "4-random", "4-similar", "4-similar-cot"}
    assert generate == [c.question for c in COMPARISONS if {c.baseline, c.treatment} <= ran]
    assert ppl == [q for q in generate if "CoT" not in q]  # no CoT setting for ppl
    assert [r.scorer for r in rows] == ["generate"] * 4 + ["ppl"] * 3  # generation first
    per_task = compare_settings("m", run, per_task=True)
    assert len(per_task) == 2 * len(rows)  # one task: its row next to each Avg. row


# --- uncertainty --------------------------------------------------------------------------------


def test_confidence_split_and_reliability_bins_by_hand() -> None:
    rs = [
        result("a", "correct", setting="0-shot", scorer="ppl", confidence=0.55),
        result("b", "wrong", setting="0-shot", scorer="ppl", confidence=0.6),
        result("c", "correct", setting="0-shot", scorer="ppl", confidence=0.9),
        result("d", "correct", setting="0-shot", scorer="ppl", confidence=1.0),
        result("e", "wrong", setting="0-shot", scorer="ppl", confidence=0.75),  # on an edge: closes (0.5, 0.75]
        result("f", "error", setting="0-shot", scorer="ppl"),  # no probabilities: ignored
        result("g", "unparsed", setting="0-shot"),  # generation: ignored
    ]
    split = confidence_split("0-shot", rs)
    assert split.correct == pytest.approx((0.55, 0.9, 1.0))
    assert split.incorrect == pytest.approx((0.6, 0.75))

    d = reliability_diagram("0-shot", rs, n_bins=4)  # edges 0, .25, .5, .75, 1
    assert d.edges == (0.0, 0.25, 0.5, 0.75, 1.0)
    assert d.counts == (0, 0, 3, 2)
    assert d.n == 5
    assert math.isnan(d.accuracy[0]) and math.isnan(d.confidence[1])
    assert d.accuracy[2:] == pytest.approx((1 / 3, 1.0))
    assert d.confidence[2:] == pytest.approx(((0.55 + 0.6 + 0.75) / 3, 0.95))
    ece = (3 * abs(1 / 3 - 1.9 / 3) + 2 * abs(1.0 - 0.95)) / 5
    assert d.ece == pytest.approx(ece)
    # two options: Brier = 2 * (1 - p_gold)^2 per item
    p_gold = [0.55, 0.4, 0.9, 1.0, 0.25]
    assert d.brier == pytest.approx(np.mean([2 * (1 - p) ** 2 for p in p_gold]))


def test_reliability_diagram_agrees_with_metrics_and_summary() -> None:
    rng = np.random.default_rng(0)
    conf = np.round(rng.uniform(0.5, 1.0, 300), 2)  # many values exactly on bin edges
    hits = rng.random(300) < conf
    rs = [
        result(f"q{i}", "correct" if h else "wrong", setting="4-random", scorer="ppl", confidence=float(c))
        for i, (c, h) in enumerate(zip(conf, hits))
    ]
    for n_bins in (4, 10, 15):
        d = reliability_diagram("4-random", rs, n_bins=n_bins)
        assert d.ece == pytest.approx(metrics.expected_calibration_error(conf, hits, n_bins=n_bins))
        # the bins re-add to the same ECE: the binning is metrics' binning
        filled = np.array(d.counts) > 0
        gaps = np.array(d.counts)[filled] * np.abs(np.array(d.accuracy)[filled] - np.array(d.confidence)[filled])
        assert gaps.sum() / len(rs) == pytest.approx(d.ece)
    default = reliability_diagram("4-random", rs)
    cell = cell_metrics("counting", "4-random", "ppl", rs)
    assert default.ece == pytest.approx(cell.ece) and default.brier == pytest.approx(cell.brier)


# --- difficulty ---------------------------------------------------------------------------------


def test_difficulty_buckets_match_the_paper_and_scale() -> None:
    assert difficulty_buckets(26) == [(0, 6), (7, 13), (14, 20), (21, 26)]  # Figure 10
    assert difficulty_buckets(10) == [(0, 2), (3, 5), (6, 8), (9, 10)]
    assert difficulty_buckets(2) == [(0, 0), (1, 1), (2, 2)]  # fewer counts than buckets
    assert difficulty_buckets(0) == [(0, 0)]
    with pytest.raises(ValueError):
        difficulty_buckets(-1)


def test_difficulty_counts_by_hand() -> None:
    # 3 models x items q0..q3 (+ q4 only planned for model 0): how many got each item right?
    runs = [
        results("cccwc", "0-shot"),  # q4 is not planned for the others: left out
        results("ccwe", "0-shot"),  # error on q3: counted as not correct, and as unscored
        results("cwwm", "0-shot") + results("cccc", "4-random"),  # other settings do not leak in
    ]
    counts, unscored = correct_counts(runs, "0-shot", "generate")
    assert counts == {("counting", "counting/q0"): 3, ("counting", "counting/q1"): 2,
                      ("counting", "counting/q2"): 1, ("counting", "counting/q3"): 0}  # fmt: skip
    assert unscored == 2

    d = difficulty(runs, "0-shot", "generate")  # default buckets for 3 models: one per count
    assert d.buckets == ((0, 0), (1, 1), (2, 2), (3, 3))
    assert d.counts == (1, 1, 1, 1)
    assert (d.n_items, d.unscored, d.n_models) == (4, 2, 3)

    coarse = difficulty(runs, "0-shot", "generate", buckets=[(0, 1), (2, 3)])
    assert coarse.counts == (2, 2)
    assert coarse.labels == ("[0–1]", "[2+]")
    with pytest.raises(ValueError):
        difficulty(runs, "0-shot", "generate", buckets=[(0, 1), (3, 3)])  # 2 is not covered


def test_difficulty_labels_follow_the_paper() -> None:
    runs = [results("c", "0-shot")] * 26
    assert difficulty(runs, "0-shot", "generate").labels == ("[0–6]", "[7–13]", "[14–20]", "[21+]")


def test_demo_orders_permute_the_same_demos_and_report_sensitivity(tmp_path):
    """`--demo-orders 3`: each few-shot setting in stored order plus two seeded permutations."""
    from mmctx.data.shapes import build_benchmark
    from mmctx.run.plan import GenerationLimits
    from mmctx.scoring.stats import order_sensitivity
    from mmctx.tasks.fewshot import evaluate

    bench = build_benchmark(tmp_path / "bench", queries_per_task=1)
    out = evaluate(tmp_path / "bench", "builtin:tiny-llava", tmp_path / "run", settings="0-shot,4-similar",
                   scorers="ppl", limit=1, demo_orders=3, limits=GenerationLimits(4, 4),
                   tasks=["counting", "plurality"], show_progress=False)  # fmt: skip
    assert {r.setting for r in out.results} == {"0-shot", "4-similar", "4-similar#o1", "4-similar#o2"}
    import json

    requests = [json.loads(line) for line in open(tmp_path / "run" / "requests.jsonl")]
    for q in {r["query_id"] for r in requests}:
        demos = {r["setting"]: r["demo_ids"] for r in requests if r["query_id"] == q}
        stored = bench.queries[[x.id for x in bench.queries].index(q)].demo_keys["similar"][:4]
        assert demos["4-similar"] == stored
        assert sorted(demos["4-similar#o1"]) == sorted(stored) and sorted(demos["4-similar#o2"]) == sorted(stored)
        assert len({tuple(demos[s]) for s in ("4-similar", "4-similar#o1", "4-similar#o2")}) > 1
    (sens,) = order_sensitivity(out.results)
    assert (
        sens.setting == "4-similar" and len(sens.accuracies) == 3 and sens.n == len({r.query_id for r in out.results})
    )
    assert 0.0 <= sens.agreement <= 1.0 and sens.spread >= 0.0


def test_order_sensitivity_by_hand():
    from mmctx.scoring.results import SampleResult
    from mmctx.scoring.stats import order_sensitivity

    def r(q, setting, pred, gold=0):
        return SampleResult(f"{setting}/ppl/{q}", q, "counting", "s", setting, "ppl", gold, pred,
                            "correct" if pred == gold else "wrong")  # fmt: skip

    results = [r("a", "4-random", 0), r("b", "4-random", 1), r("c", "4-random", 0),
               r("a", "4-random#o1", 0), r("b", "4-random#o1", 0), r("c", "4-random#o1", 1),
               r("a", "0-shot", 0)]  # fmt: skip
    (s,) = order_sensitivity(results)
    assert s.accuracies == (2 / 3, 2 / 3) and s.spread == 0.0
    assert s.agreement == 1 / 3  # only item a has the same prediction in both orders
    assert s.n == 3
