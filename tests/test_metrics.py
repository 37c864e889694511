"""Metrics: values worked out by hand, edge cases, and determinism."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mmctx.scoring.metrics import (
    accuracy,
    bootstrap_ci,
    brier_score,
    expected_calibration_error,
    option_probabilities,
    perplexity,
    ppl_choice,
    rate,
)

# --- accuracy / rate ----------------------------------------------------------------------------


def test_accuracy_and_rate() -> None:
    assert accuracy([True, False, True, True]) == 0.75
    assert rate([False, False, True]) == pytest.approx(1 / 3)
    assert accuracy(np.array([1, 0], dtype=bool)) == 0.5


@pytest.mark.parametrize("fn", [accuracy, rate])
def test_flag_metrics_are_nan_on_empty(fn) -> None:  # type: ignore[no-untyped-def]
    assert math.isnan(fn([]))


# --- perplexity, ppl_choice, option probabilities -----------------------------------------------


def test_perplexity_by_hand() -> None:
    # three tokens, each with probability 1/4 -> perplexity 4
    assert perplexity(3 * math.log(0.25), 3) == pytest.approx(4.0)
    assert perplexity(0.0, 5) == 1.0
    assert math.isnan(perplexity(-1.0, 0))


def test_ppl_choice_uses_per_token_not_summed_loglikelihood() -> None:
    lls, counts = [-2.0, -3.0], [1, 2]
    # summed log-likelihood prefers option 0 (-2 > -3) ...
    assert int(np.argmax(lls)) == 0
    # ... but per-token perplexity is e^2 ~ 7.39 versus e^1.5 ~ 4.48, so option 1 wins.
    assert perplexity(-3.0, 2) < perplexity(-2.0, 1)
    assert ppl_choice(lls, counts) == 1


def test_ppl_choice_ties_go_to_lowest_index() -> None:
    assert ppl_choice([-4.0, -2.0, -6.0], [2, 1, 3]) == 0  # all mean -2
    assert ppl_choice([-5.0, -2.0, -2.0], [1, 1, 1]) == 1


def test_option_probabilities_by_hand() -> None:
    p = option_probabilities([-2.0, -3.0], [1, 2])  # means -2.0 and -1.5
    expected_1 = 1.0 / (1.0 + math.exp(-0.5))  # e^-1.5 / (e^-2 + e^-1.5)
    assert p == pytest.approx([1 - expected_1, expected_1])
    assert p.sum() == pytest.approx(1.0)
    assert int(np.argmax(p)) == ppl_choice([-2.0, -3.0], [1, 2])


def test_option_probabilities_sum_to_one_and_agree_with_ppl_choice() -> None:
    rng = np.random.default_rng(7)
    for _ in range(200):
        k = int(rng.integers(2, 8))
        counts = rng.integers(1, 30, size=k)
        lls = -rng.uniform(0, 5, size=k) * counts
        p = option_probabilities(lls, counts)
        assert p.sum() == pytest.approx(1.0)
        assert np.all(p >= 0)
        assert int(np.argmax(p)) == ppl_choice(lls, counts)


def test_option_probabilities_are_numerically_stable() -> None:
    p = option_probabilities([-10_000.0, -10_001.0], [1, 1])
    assert np.all(np.isfinite(p))
    assert p[0] == pytest.approx(1 / (1 + math.exp(-1)))
    assert option_probabilities([-math.inf, -1.0], [1, 1]) == pytest.approx([0.0, 1.0])
    assert np.all(np.isnan(option_probabilities([-math.inf, -math.inf], [1, 1])))


def test_ranking_input_validation_and_empty() -> None:
    assert option_probabilities([], []).shape == (0,)
    with pytest.raises(ValueError):
        ppl_choice([], [])
    with pytest.raises(ValueError):
        option_probabilities([-1.0, -2.0], [1])
    with pytest.raises(ValueError):
        ppl_choice([-1.0, -2.0], [1, 0])


# --- expected calibration error -----------------------------------------------------------------


def test_ece_worked_by_hand() -> None:
    # 5 bins: [0, .2], (.2, .4], (.4, .6], (.6, .8], (.8, 1]
    conf = [0.1, 0.2, 0.3, 0.9, 0.95, 1.0]
    hit = [False, True, True, True, False, True]
    # bin 0: {0.1 F, 0.2 T}   mean conf 0.15, acc 0.5  -> 2 * 0.35  = 0.70
    # bin 1: {0.3 T}          mean conf 0.30, acc 1.0  -> 1 * 0.70  = 0.70
    # bin 4: {.9 T,.95 F,1 T} mean conf 0.95, acc 2/3  -> 3 * 0.283 = 0.85
    # ECE = (0.70 + 0.70 + 0.85) / 6 = 0.375
    assert expected_calibration_error(conf, hit, n_bins=5) == pytest.approx(0.375)


def test_ece_bin_edges_are_right_closed_and_first_bin_holds_zero() -> None:
    # 0.2 sits on an edge: it belongs to [0, .2] with 0.1, not to (.2, .4] with 0.3.
    # Were it binned with 0.3 the answer would be (0.1 + 1.5) / 3 ~ 0.533.
    assert expected_calibration_error([0.1, 0.2, 0.3], [True, True, True], n_bins=5) == pytest.approx(
        (2 * (1 - 0.15) + 1 * (1 - 0.3)) / 3
    )
    assert expected_calibration_error([0.0], [False]) == 0.0
    assert expected_calibration_error([0.0], [True]) == 1.0
    assert expected_calibration_error([1.0], [True]) == 0.0
    # 0.7 with 10 bins is in (0.6, 0.7], sharing a bin with 0.65 and not with 0.75
    assert expected_calibration_error([0.65, 0.7, 0.75], [True, False, True], n_bins=10) == pytest.approx(
        (abs(0.5 - 0.675) * 2 + abs(1 - 0.75)) / 3
    )


def test_ece_perfect_calibration_is_zero() -> None:
    assert expected_calibration_error([0.75] * 4, [True, True, True, False]) == pytest.approx(0.0)


def test_ece_edge_cases() -> None:
    assert math.isnan(expected_calibration_error([], []))
    assert math.isnan(expected_calibration_error([0.5, math.nan], [True, False]))
    with pytest.raises(ValueError):
        expected_calibration_error([1.2], [True])
    with pytest.raises(ValueError):
        expected_calibration_error([0.5, 0.6], [True])


# --- Brier --------------------------------------------------------------------------------------


def test_brier_by_hand_with_ragged_option_counts() -> None:
    probs = [np.array([0.7, 0.2, 0.1]), np.array([0.5, 0.5])]
    # sample 1: 0.3^2 + 0.2^2 + 0.1^2 = 0.14; sample 2: 0.5^2 + 0.5^2 = 0.5
    assert brier_score(probs, [0, 1]) == pytest.approx((0.14 + 0.5) / 2)


def test_brier_extremes_and_edges() -> None:
    assert brier_score([np.array([1.0, 0.0])], [0]) == 0.0
    assert brier_score([np.array([0.0, 1.0, 0.0])], [0]) == pytest.approx(2.0)
    assert math.isnan(brier_score([], []))
    with pytest.raises(ValueError):
        brier_score([np.array([0.5, 0.5])], [2])
    with pytest.raises(ValueError):
        brier_score([np.array([0.5, 0.5])], [0, 1])


# --- bootstrap ----------------------------------------------------------------------------------


def test_bootstrap_ci_contains_mean_and_matches_normal_approximation() -> None:
    rng = np.random.default_rng(3)
    values = (rng.random(400) < 0.5).astype(float)
    low, high = bootstrap_ci(values)
    assert low < values.mean() < high
    # normal approximation: 2 * 1.96 * sqrt(p(1-p)/n) ~ 0.098 for p ~ 0.5, n = 400
    assert 0.08 < high - low < 0.115


def test_bootstrap_ci_shrinks_as_n_grows() -> None:
    rng = np.random.default_rng(11)
    widths = []
    for n in (25, 400, 6400):
        low, high = bootstrap_ci((rng.random(n) < 0.7).astype(float), seed=0)
        widths.append(high - low)
    assert widths[0] > widths[1] > widths[2]
    assert widths[0] / widths[2] > 8  # ~ sqrt(6400 / 25) = 16


def test_bootstrap_ci_is_seeded() -> None:
    values = [0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.5]
    assert bootstrap_ci(values, seed=5) == bootstrap_ci(values, seed=5)
    draws = {bootstrap_ci(values, n_resamples=200, seed=s) for s in range(10)}
    assert len(draws) > 1  # the seed is actually used


def test_bootstrap_ci_edge_cases() -> None:
    low, high = bootstrap_ci([])
    assert math.isnan(low) and math.isnan(high)
    assert bootstrap_ci([0.1] * 7) == (0.1, 0.1)
    assert bootstrap_ci([3.0]) == (3.0, 3.0)
    low, high = bootstrap_ci([0.0, 1.0], confidence=0.5)
    assert 0.0 <= low <= high <= 1.0
    with pytest.raises(ValueError):
        bootstrap_ci([0.0, 1.0], confidence=1.0)


def test_bootstrap_ci_large_input_is_chunked_but_same_size_of_interval() -> None:
    values = np.tile([0.0, 1.0], 150_000)  # 300k values: the index matrix must be chunked
    low, high = bootstrap_ci(values, n_resamples=200)
    assert low < 0.5 < high
    assert high - low < 0.01


def test_non_finite_loglikelihoods_are_errors_and_an_incomplete_average_is_empty():
    import math

    from mmctx.scoring.results import score_request, summarize

    request = {"id": "s/ppl/q", "query_id": "q", "task": "counting", "setting": "0-shot", "scorer": "ppl", "gold": 0,
               "options": ["a", "b"], "labels": ["A", "B"]}  # fmt: skip
    bad = score_request(request, {"loglikelihoods": [float("nan"), -1.0], "token_counts": [1, 1], "error": None})
    assert bad.outcome == "error" and bad.pred is None
    good = score_request(
        {**request, "task": "plurality"}, {"loglikelihoods": [-1.0, -3.0], "token_counts": [1, 1], "error": None}
    )
    assert good.outcome == "correct"
    cells = {c.task: c for c in summarize([bad, good])}
    assert cells["counting"].errors == 1 and cells["counting"].n == 0 and math.isnan(cells["counting"].accuracy)
    assert cells["plurality"].accuracy == 1.0
    assert math.isnan(cells["Avg."].accuracy)  # not 1.0: one task has no answered sample
