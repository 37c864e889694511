"""Judge agreement against values worked out by hand."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("krippendorff")
pytest.importorskip("sklearn")

from mmctx.analysis.agreement import cohen_kappa, judge_agreement, macro_by_dataset

IDS = ["s1", "s2", "s3", "s4", "s5", "s6"]


def scores(values) -> dict[str, float]:
    return dict(zip(IDS, values))


def test_kappa_by_hand_on_binarised_scores():
    # Labels a = 1 1 0 0 1 0, b = 1 0 0 0 1 1 (after >= 0.5): p_o = 4/6, p_e = 0.5·0.5 + 0.5·0.5 = 1/2,
    # κ = (2/3 - 1/2) / (1 - 1/2) = 1/3.
    a, b = [1.0, 0.7, 0.0, 0.2, 0.5, 0.0], [1.0, 0.4, 0.0, 0.0, 0.9, 0.6]
    assert cohen_kappa(a, b) == pytest.approx(1 / 3)
    report = judge_agreement({"A": scores(a), "B": scores(b)})
    pair = report.pairs[("A", "B")]
    assert (pair.n, pair.kappa, pair.agreement) == (6, pytest.approx(1 / 3), pytest.approx(4 / 6))


def test_identical_judges_agree_perfectly():
    same = scores([1, 0, 1, 1, 0, 0])
    report = judge_agreement({"A": same, "B": dict(same), "C": dict(same)})
    assert all(p.kappa == pytest.approx(1.0) and p.agreement == 1.0 for p in report.pairs.values())
    assert len(report.pairs) == 3 and report.alpha == pytest.approx(1.0)
    assert report.scores == {"A": 0.5, "B": 0.5, "C": 0.5}


def test_alpha_nominal_by_hand():
    # Two judges, binary: coincidences o00 = 4, o11 = 4, o01 = o10 = 2; n0 = n1 = 6, n = 12.
    # α = 1 - (n - 1)(o01 + o10) / (2 n0 n1) = 1 - 11·4 / 72 = 7/18.
    report = judge_agreement({"A": scores([1, 1, 0, 0, 1, 0]), "B": scores([1, 0, 0, 0, 1, 1])})
    assert report.alpha_level == "nominal" and report.alpha == pytest.approx(7 / 18)


def test_alpha_interval_by_hand():
    # Pooled values .1 .1 .2 .2 .3 .4 (n = 6). D_o = 2·0.1² / 6; D_e = Σ_{i≠j} (v_i - v_j)² / (n(n-1))
    # = 2n·Σ(v - mean)² / 30 = 0.82 / 30. α = 1 - D_o / D_e = 1 - 5/41 = 36/41.
    ids = ["x", "y", "z"]
    report = judge_agreement({"A": dict(zip(ids, [0.1, 0.2, 0.3])), "B": dict(zip(ids, [0.1, 0.2, 0.4]))})
    assert report.alpha_level == "interval" and report.alpha == pytest.approx(36 / 41)


def test_alpha_with_missing_ratings_by_hand():
    # Units: u1 (1, 1), u2 (0, 0, 0), u3 (1, 0). o11 = 2, o00 = 3 (6 ordered pairs at weight 1/2),
    # o01 = o10 = 1; n0 = 4, n1 = 3, n = 7. α = 1 - 6·2 / (2·4·3) = 1/2. u4 is rated once: left out.
    report = judge_agreement(
        {"A": {"u1": 1, "u2": 0, "u3": 1, "u4": 1}, "B": {"u1": 1, "u2": 0}, "C": {"u2": 0, "u3": 0}}
    )
    assert report.alpha == pytest.approx(0.5) and report.alpha_units == 3
    assert report.shared == 1 and report.n_scored == {"A": 4, "B": 2, "C": 2}
    assert report.pairs[("A", "C")].n == 2 and report.pairs[("B", "C")].n == 1


def test_degenerate_agreement_is_nan_not_a_number_made_up():
    report = judge_agreement({"A": scores([0] * 6), "B": scores([0] * 6)})
    pair = report.pairs[("A", "B")]
    assert math.isnan(pair.kappa) and pair.agreement == 1.0 and math.isnan(report.alpha)
    assert math.isnan(judge_agreement({"A": scores([1, 0] * 3)}).alpha)


def test_scores_are_macro_over_datasets_on_shared_samples():
    datasets = {"s1": "pix", "s2": "pix", "s3": "pix", "s4": "mlb"}
    a = {"s1": 1.0, "s2": 1.0, "s3": 0.0, "s4": 0.0, "extra": 1.0}
    b = {"s1": 1.0, "s2": 0.0, "s3": 0.0, "s4": 1.0}
    report = judge_agreement({"A": a, "B": b}, datasets=datasets)
    assert report.scores == {"A": pytest.approx((2 / 3 + 0) / 2), "B": pytest.approx((1 / 3 + 1) / 2)}
    assert judge_agreement({"A": a, "B": b}).scores == {"A": 0.5, "B": 0.5}


def test_macro_by_dataset_table_layout():
    rows = [
        ("qwen-4b", "pix", 1.0),
        ("qwen-4b", "pix", 0.0),
        ("qwen-4b", "mlb", 1.0),
        ("qwen-32b", "pix", 0.0),
        ("qwen-32b", "pix", 0.0),
        ("qwen-32b", "mlb", 0.5),
        ("qwen-32b", "cl", 1.0),
    ]
    table = macro_by_dataset(rows)
    assert table.judges == ("qwen-4b", "qwen-32b") and table.datasets == ("pix", "mlb", "cl")
    assert table.per_dataset["qwen-4b"] == {"pix": 0.5, "mlb": 1.0}
    assert table.counts["qwen-32b"] == {"pix": 2, "mlb": 1, "cl": 1}
    assert table.macro == {"qwen-4b": pytest.approx(0.75), "qwen-32b": pytest.approx(0.5)}
