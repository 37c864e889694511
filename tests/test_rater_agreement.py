"""Fleiss' κ, Krippendorff's α and their bootstrap intervals against values worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("krippendorff")

from mmctx.analysis.rater_agreement import category_counts, fleiss_kappa, scale_agreement

CORRECTNESS = ("true", "false", "other")
LIKERT = ("1", "2", "3", "4", "5")

# Four items, three raters. Answer correctness (codes into CORRECTNESS):
#   all True, all True, True True False, all False.
CORRECTNESS_CODES = np.array([[0, 0, 0], [0, 0, 0], [0, 0, 1], [1, 1, 1]])
# Reasoning quality (codes = rating − 1): 5 5 4, 3 3 3, 1 2 1, 4 4 4.
LIKERT_CODES = np.array([[4, 4, 3], [2, 2, 2], [0, 1, 0], [3, 3, 3]])


def test_fleiss_kappa_by_hand():
    # P_i = (Σ n_ij² − n) / n(n−1): 1, 1, (4 + 1 − 3)/6 = 1/3, 1, so P̄ = 5/6. Shares: True 8/12, False 4/12,
    # P̄e = 4/9 + 1/9 = 5/9. κ = (5/6 − 5/9) / (1 − 5/9) = 5/8.
    assert fleiss_kappa(category_counts(CORRECTNESS_CODES, 3)) == pytest.approx(5 / 8)
    # Likert as categories: P_i = 1/3, 1, 1/3, 1, P̄ = 2/3; shares 2, 1, 3, 4, 2 of 12, P̄e = 34/144.
    # κ = (2/3 − 17/72) / (1 − 17/72) = 31/55.
    assert fleiss_kappa(category_counts(LIKERT_CODES, 5)) == pytest.approx(31 / 55)


def test_fleiss_kappa_on_fleiss_worked_example():
    # The 10 subjects × 14 raters × 5 categories example of Fleiss (1971) as Wikipedia gives it: κ = 0.210.
    table = np.array(
        [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
         [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]
    )  # fmt: skip
    assert fleiss_kappa(table) == pytest.approx(0.20993, abs=1e-5)


def test_fleiss_kappa_matches_statsmodels():
    inter_rater = pytest.importorskip("statsmodels.stats.inter_rater")
    rng = np.random.default_rng(0)
    for _ in range(10):
        table = category_counts(rng.integers(0, 5, size=(40, 3)), 5)
        assert fleiss_kappa(table) == pytest.approx(inter_rater.fleiss_kappa(table))


def test_fleiss_kappa_is_undefined_when_every_rating_is_one_value_and_refuses_uneven_raters():
    assert math.isnan(fleiss_kappa(np.array([[3, 0], [3, 0]])))
    with pytest.raises(ValueError, match="same number"):
        fleiss_kappa(np.array([[3, 0], [1, 1]]))


def test_krippendorff_alpha_by_hand():
    # Nominal, correctness: coincidences o_TT = 3 + 3 + 1 = 7, o_FF = 3, o_TF = o_FT = 1; n_T = 8, n_F = 4, n = 12.
    # α = 1 − (n − 1) Σ_{c≠k} o_ck / Σ_{c≠k} n_c n_k = 1 − 11 · 2 / (2 · 8 · 4) = 21/32.
    nominal = scale_agreement(CORRECTNESS_CODES, CORRECTNESS, (1, 0, 0), "nominal", resamples=10)
    assert nominal.alpha.value == pytest.approx(21 / 32)
    # Ordinal, reasoning: n_v = 2, 1, 3, 4, 2 (n = 12); the disagreeing coincidences are 1–2 and 4–5, once each
    # way, with δ²(1,2) = ((2+1)/2)² = 2.25 and δ²(4,5) = ((4+2)/2)² = 9, so D_o = 2 (2.25 + 9) / 12 = 1.875.
    # Σ_{c<k} n_c n_k δ²_ck = 1620, so D_e = 2 · 1620 / (12 · 11); α = 1 − D_o / D_e = 133/144.
    ordinal = scale_agreement(LIKERT_CODES, LIKERT, (1, 2, 3, 4, 5), "ordinal", resamples=10)
    assert ordinal.alpha.value == pytest.approx(133 / 144)
    # Item means 14/3, 3, 4/3, 4: mean 13/4.
    assert ordinal.mean.value == pytest.approx(13 / 4)
    assert ordinal.item_means == pytest.approx((14 / 3, 3, 4 / 3, 4))


def test_alpha_matches_the_krippendorff_package_on_random_ratings():
    import krippendorff

    codes = np.random.default_rng(1).integers(0, 5, size=(60, 3))
    got = scale_agreement(codes, LIKERT, (1, 2, 3, 4, 5), "ordinal", resamples=10).alpha.value
    want = krippendorff.alpha(reliability_data=codes.T.astype(float), level_of_measurement="ordinal")
    assert got == pytest.approx(want)


def test_summary_counts_and_majorities():
    a = scale_agreement(CORRECTNESS_CODES, CORRECTNESS, (1, 0, 0), "nominal", resamples=10)
    assert a.counts == {"true": 8, "false": 4, "other": 0}
    assert a.majority == {"true": 3, "false": 1, "other": 0, "tie": 0}
    assert (a.items, a.raters, a.mean.value) == (4, 3, pytest.approx(8 / 12))
    tied = scale_agreement(np.array([[0, 1], [0, 0]]), CORRECTNESS, (1, 0, 0), "nominal", resamples=10)
    assert tied.majority["tie"] == 1


def test_bootstrap_is_seeded_resamples_items_and_counts_undefined_resamples():
    codes = np.random.default_rng(2).integers(0, 5, size=(30, 3))
    first = scale_agreement(codes, LIKERT, (1, 2, 3, 4, 5), "ordinal", resamples=200, seed=7)
    again = scale_agreement(codes, LIKERT, (1, 2, 3, 4, 5), "ordinal", resamples=200, seed=7)
    other = scale_agreement(codes, LIKERT, (1, 2, 3, 4, 5), "ordinal", resamples=200, seed=8)
    assert first == again and first.kappa != other.kappa
    for estimate in (first.mean, first.kappa, first.alpha):
        assert estimate.low <= estimate.value <= estimate.high
    # One item disagrees, three agree on True: a resample without the disagreeing item has no κ or α.
    lopsided = np.array([[0, 0, 0], [0, 0, 0], [0, 0, 0], [0, 1, 0]])
    a = scale_agreement(lopsided, CORRECTNESS, (1, 0, 0), "nominal", resamples=400, seed=0)
    # P(no copy of item 4 among 4 draws) = (3/4)⁴ ≈ 0.32.
    assert 0.2 * 400 < a.undefined_resamples["kappa"] < 0.45 * 400
    assert a.undefined_resamples["kappa"] == a.undefined_resamples["alpha"] and a.undefined_resamples["mean"] == 0
