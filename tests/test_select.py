"""Graph Cut query selection: parity with a brute-force greedy over the explicit objective."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mmctx.curate.select import (
    PAPER_LAMBDA,
    Selection,
    graph_cut_value,
    paper_lambda,
    select_graph_cut,
)
from mmctx.schema import FORMATS, TASKS


def unit_rows(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def mixed_sign_pool(n: int, d: int = 5, seed: int = 0) -> np.ndarray:
    """Random Gaussian rows: in low d about half of all cosines are negative."""
    return np.random.default_rng(seed).standard_normal((n, d)) * np.random.default_rng(seed + 1).uniform(
        0.5, 3.0, (n, 1)
    )


def clip_like_pool(n: int, d: int = 16, seed: int = 0) -> np.ndarray:
    """A shared direction plus noise: all cosines positive, like CLIP embeddings."""
    rng = np.random.default_rng(seed)
    return 2.0 * np.ones(d) + rng.standard_normal((n, d))


def objective(sim: np.ndarray, chosen: list[int], lam: float) -> float:
    """The paper's f(X) = Σ_{i∈V\\X, j∈X} s_ij − λ Σ_{i,j∈X} s_ij, summed straight from the matrix."""
    inside = np.zeros(len(sim), dtype=bool)
    inside[chosen] = True
    cut = sim[np.ix_(~inside, inside)].sum()
    internal = sim[np.ix_(inside, inside)].sum()
    return float(cut - lam * internal)


def brute_force_greedy(sim: np.ndarray, k: int, lam: float) -> tuple[list[int], list[float]]:
    """Naive greedy that re-evaluates f(X ∪ {j}) − f(X) for every candidate; lowest index wins ties."""
    chosen: list[int] = []
    gains: list[float] = []
    for _ in range(k):
        base = objective(sim, chosen, lam)
        candidates = [j for j in range(len(sim)) if j not in chosen]
        deltas = [objective(sim, chosen + [j], lam) - base for j in candidates]
        best = int(np.argmax(deltas))
        chosen.append(candidates[best])
        gains.append(deltas[best])
    return chosen, gains


def cosine_matrix(x: np.ndarray) -> np.ndarray:
    u = unit_rows(x)
    return u @ u.T


def linear(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a @ b.T


def rbf(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    sq = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T
    return np.exp(-np.maximum(sq, 0.0))


# -- parity with the explicit objective ----------------------------------------------------------


@pytest.mark.parametrize(
    ("pool", "lam"),
    [
        (mixed_sign_pool(40), 50.0),
        (mixed_sign_pool(60, seed=3), 0.0),
        (mixed_sign_pool(60, seed=4), 2.0),
        (clip_like_pool(50), 50.0),
        (clip_like_pool(60, seed=5), 0.3),
    ],
)
def test_matches_brute_force_greedy_on_explicit_objective(pool: np.ndarray, lam: float) -> None:
    k = 15
    expected, expected_gains = brute_force_greedy(cosine_matrix(pool), k, lam)
    sel = select_graph_cut(pool, k=k, lam=lam)
    assert list(sel.indices) == expected
    np.testing.assert_allclose(sel.gains, expected_gains, rtol=1e-9, atol=1e-9)
    assert graph_cut_value(pool, sel.indices, lam) == pytest.approx(objective(cosine_matrix(pool), expected, lam))


def test_pool_has_mixed_sign_cosines() -> None:
    sim = cosine_matrix(mixed_sign_pool(40))
    assert (sim < -0.5).any() and (sim > 0.5).any()


def test_rbf_kernel_matches_brute_force_greedy() -> None:
    pool = mixed_sign_pool(45, seed=7)
    u = unit_rows(pool)
    expected, expected_gains = brute_force_greedy(rbf(u, u), 12, 3.0)
    sel = select_graph_cut(pool, k=12, lam=3.0, kernel=rbf, block_size=7)  # ragged 7-row tiles
    assert list(sel.indices) == expected
    np.testing.assert_allclose(sel.gains, expected_gains, rtol=1e-9, atol=1e-9)
    assert sel.kernel == "rbf"


def test_conventions_differ_by_one_in_lambda() -> None:
    pool = mixed_sign_pool(60, seed=11)
    paper = select_graph_cut(pool, k=20, lam=4.0, convention="paper")
    submodlib = select_graph_cut(pool, k=20, lam=5.0, convention="submodlib")
    assert paper.indices == submodlib.indices
    np.testing.assert_allclose(paper.gains, submodlib.gains, rtol=1e-12)
    assert (paper.convention, submodlib.convention) == ("paper", "submodlib")
    assert paper.rho == submodlib.rho == pytest.approx(60 / (2 * 5.0 * 20))
    assert graph_cut_value(pool, paper.indices, 4.0) == pytest.approx(
        graph_cut_value(pool, paper.indices, 5.0, convention="submodlib")
    )


def test_same_lambda_in_both_conventions_is_a_different_objective() -> None:
    pool = mixed_sign_pool(60, seed=12)
    sim = cosine_matrix(pool)
    sel = select_graph_cut(pool, k=15, lam=0.0, convention="submodlib")
    # submodlib λ = 0 is the paper's λ = −1: top-k by column sum.
    assert list(sel.indices) == list(np.argsort(-sim.sum(0), kind="stable")[:15])
    assert sel.rho == math.inf


# -- the blockwise path ---------------------------------------------------------------------------


@pytest.mark.parametrize("block_size", [1, 8, 4096])
def test_blockwise_cosine_equals_closed_form(block_size: int) -> None:
    pool = mixed_sign_pool(50, d=8, seed=21)
    closed = select_graph_cut(pool, k=20, lam=1.5)
    blockwise = select_graph_cut(pool, k=20, lam=1.5, kernel=linear, block_size=block_size)
    assert blockwise.indices == closed.indices
    np.testing.assert_allclose(blockwise.gains, closed.gains, rtol=1e-9, atol=1e-9)
    assert (closed.kernel, blockwise.kernel) == ("cosine", "linear")


@pytest.mark.parametrize(("scale", "shift"), [(3.0, 2.0), (0.5, -0.7), (1.0, 1.0)])
def test_selection_invariant_to_affine_rescaling(scale: float, shift: float) -> None:
    pool = mixed_sign_pool(55, d=6, seed=31)
    n, k, lam = 55, 18, 2.0
    base = select_graph_cut(pool, k=k, lam=lam)

    def affine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return scale * (a @ b.T) + shift

    moved = select_graph_cut(pool, k=k, lam=lam, kernel=affine, block_size=10)
    assert moved.indices == base.indices
    # Every gain at step t moves by the same amount: a·g + b(n − 2wt − w), w = λ + 1 (paper).
    w = lam + 1.0
    expected = [scale * g + shift * (n - 2 * w * t - w) for t, g in enumerate(base.gains)]
    np.testing.assert_allclose(moved.gains, expected, rtol=1e-9, atol=1e-8)


def test_selection_invariant_to_row_scaling() -> None:
    pool = mixed_sign_pool(50, seed=41)
    scaled = pool * np.random.default_rng(0).uniform(0.01, 100.0, (50, 1))
    assert select_graph_cut(scaled, k=20, lam=3.0).indices == select_graph_cut(pool, k=20, lam=3.0).indices


# -- properties -----------------------------------------------------------------------------------


@pytest.mark.parametrize("convention", ["paper", "submodlib"])
def test_first_pick_is_argmax_of_column_sums(convention: str) -> None:
    pool = clip_like_pool(60, seed=51)
    sim = cosine_matrix(pool)
    sel = select_graph_cut(pool, k=5, lam=50.0, convention=convention)
    w = 51.0 if convention == "paper" else 50.0
    assert sel.indices[0] == int(np.argmax(sim.sum(0)))
    assert sel.gains[0] == pytest.approx(sim.sum(0).max() - w)


@pytest.mark.parametrize("convention", ["paper", "submodlib"])
def test_first_pick_with_varying_diagonal_uses_the_convention_weight(convention: str) -> None:
    def weighted(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return (1.0 + a[:, :1] ** 2) * (a @ b.T) * (1.0 + b[:, :1] ** 2).T

    pool = mixed_sign_pool(40, seed=52)
    u = unit_rows(pool)
    sim = weighted(u, u)
    lam = 0.7
    w = lam + 1.0 if convention == "paper" else lam
    first = sim.sum(0) - w * np.diagonal(sim)
    sel = select_graph_cut(pool, k=3, lam=lam, convention=convention, kernel=weighted, block_size=9)
    assert sel.indices[0] == int(np.argmax(first))
    assert sel.gains[0] == pytest.approx(first.max())


def test_deterministic_across_runs() -> None:
    pool = np.random.default_rng(61).standard_normal((400, 32)).astype(np.float32)
    assert select_graph_cut(pool, k=100) == select_graph_cut(pool, k=100)
    assert select_graph_cut(pool, k=50, kernel=linear, block_size=64) == select_graph_cut(
        pool, k=50, kernel=linear, block_size=64
    )


@pytest.mark.parametrize("k", [1, 37, 60])
def test_returns_k_distinct_indices(k: int) -> None:
    sel = select_graph_cut(mixed_sign_pool(60, seed=71), k=k, lam=50.0)
    assert len(sel.indices) == len(sel.gains) == k
    assert len(set(sel.indices)) == k
    assert all(isinstance(i, int) for i in sel.indices)


def test_ties_go_to_the_lowest_index() -> None:
    # One-hot rows with repeats: every cosine is exactly 0 or 1, so gains tie exactly and often.
    pool = np.eye(4)[np.random.default_rng(81).integers(0, 4, 30)]
    expected, _ = brute_force_greedy(pool @ pool.T, 12, 0.2)
    sel = select_graph_cut(pool, k=12, lam=0.2)
    assert list(sel.indices) == expected
    biggest = np.argmax(pool.sum(0))
    assert sel.indices[0] == int(np.flatnonzero(pool[:, biggest])[0])


def test_lambda_auto_matches_means() -> None:
    n, k = 60, 10
    pool = clip_like_pool(n, seed=91)
    paper = select_graph_cut(pool, k=k, lam="auto")
    submodlib = select_graph_cut(pool, k=k, lam="auto", convention="submodlib")
    assert submodlib.lam == n / (2 * k)
    assert paper.lam == n / (2 * k) - 1
    assert paper.rho == submodlib.rho == 1.0
    assert paper.indices == submodlib.indices == select_graph_cut(pool, k=k, lam=n / (2 * k) - 1).indices


def test_rho_reported_for_paper_lambda() -> None:
    sel = select_graph_cut(mixed_sign_pool(60), k=10, lam=50.0)
    assert sel.lam == 50.0
    assert sel.rho == pytest.approx(60 / (2 * 51.0 * 10))


def test_float32_and_float64_agree() -> None:
    pool = np.random.default_rng(95).standard_normal((500, 24))
    assert select_graph_cut(pool.astype(np.float32), k=60).indices == select_graph_cut(pool, k=60).indices


def test_selection_is_frozen() -> None:
    sel = select_graph_cut(mixed_sign_pool(20), k=3)
    assert isinstance(sel, Selection)
    with pytest.raises(AttributeError):
        sel.lam = 1.0  # type: ignore[misc]


# -- errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_row_is_named(bad: float) -> None:
    pool = mixed_sign_pool(20)
    pool[13, 2] = bad
    with pytest.raises(ValueError, match=r"row 13 contains NaN or inf"):
        select_graph_cut(pool, k=5)


def test_zero_row_is_named() -> None:
    pool = mixed_sign_pool(20).astype(np.float32)
    pool[7] = 0.0
    with pytest.raises(ValueError, match=r"row 7 has zero norm"):
        select_graph_cut(pool, k=5)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"k": 21}, r"k = 21 exceeds the pool size n = 20"),
        ({"k": 0}, r"k must be >= 1"),
        ({"lam": -0.1}, r"lam must be a finite number >= 0"),
        ({"lam": float("nan")}, r"lam must be a finite number >= 0"),
        ({"lam": "big"}, r"lam must be a number >= 0 or 'auto'"),
        ({"convention": "apricot"}, r"unknown convention 'apricot'"),
        ({"block_size": 0}, r"block_size must be >= 1"),
    ],
)
def test_bad_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        select_graph_cut(mixed_sign_pool(20), **{"k": 5, **kwargs})


def test_non_integer_k() -> None:
    with pytest.raises(TypeError, match="k must be an integer"):
        select_graph_cut(mixed_sign_pool(20), k=2.5)  # type: ignore[arg-type]


def test_arguments_are_checked_before_rows() -> None:
    pool = mixed_sign_pool(20)
    pool[3] = np.nan
    with pytest.raises(ValueError, match="unknown convention"):
        select_graph_cut(pool, k=5, convention="nope")


def test_bad_shape() -> None:
    with pytest.raises(ValueError, match=r"\(n, d\) matrix"):
        select_graph_cut(np.ones(10), k=2)


def test_bad_kernels() -> None:
    pool = mixed_sign_pool(20)
    with pytest.raises(ValueError, match="kernel returned shape"):
        select_graph_cut(pool, k=5, kernel=lambda a, b: a @ a.T, block_size=8)
    with pytest.raises(ValueError, match="kernel is not symmetric"):
        select_graph_cut(pool, k=5, kernel=lambda a, b: a @ b.T + a[:, :1])
    with pytest.raises(ValueError, match="kernel returned NaN or inf"):
        select_graph_cut(pool, k=5, kernel=lambda a, b: np.full((len(a), len(b)), np.nan))

    def inf_far_off(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.where(a @ b.T < -0.2, np.inf, a @ b.T)

    with pytest.raises(ValueError, match="kernel returned NaN or inf"):
        select_graph_cut(pool, k=5, kernel=inf_far_off, block_size=6)


def test_graph_cut_value_checks_indices() -> None:
    pool = mixed_sign_pool(20)
    with pytest.raises(ValueError, match="duplicates"):
        graph_cut_value(pool, [1, 1], 50.0)
    with pytest.raises(ValueError, match=r"\[0, 20\)"):
        graph_cut_value(pool, [20], 50.0)
    assert graph_cut_value(pool, [], 50.0) == 0.0


# -- the paper's λ table --------------------------------------------------------------------------


def test_paper_lambda_table() -> None:
    assert len(PAPER_LAMBDA) == 13  # 13 × 250 = the paper's 3,250 queries
    assert {task for task, _ in PAPER_LAMBDA} == set(TASKS)
    assert {fmt for _, fmt in PAPER_LAMBDA} <= set(FORMATS)
    large = {key for key, lam in PAPER_LAMBDA.items() if lam == 200.0}
    assert large == {
        ("attribute_recognition", "caption_foil"),
        ("object_recognition", "mcqa"),
        ("spatial_relations", "caption_foil"),
    }
    assert set(PAPER_LAMBDA.values()) == {50.0, 200.0}
    assert paper_lambda("object_recognition", "caption_foil") == 50.0
    with pytest.raises(KeyError, match="spatial_relation/mcqa"):
        paper_lambda("spatial_relation", "mcqa")


# -- parity with submodlib ------------------------------------------------------------------------


def test_matches_submodlib_naive_greedy() -> None:
    submodlib = pytest.importorskip("submodlib")
    n, d, k, lam = 2000, 64, 250, 50.0
    pool = np.random.default_rng(2024).standard_normal((n, d)).astype(np.float32)  # continuous: no ties
    u = unit_rows(pool)
    kernel = u @ u.T
    objective_fn = submodlib.GraphCutFunction(n=n, mode="dense", lambdaVal=lam + 1.0, ggsijs=kernel)
    theirs = objective_fn.maximize(budget=k, optimizer="NaiveGreedy", show_progress=False)

    ours = select_graph_cut(pool, k=k, lam=lam)  # paper λ = submodlib λ − 1
    assert list(ours.indices) == [int(i) for i, _ in theirs]
    np.testing.assert_allclose(ours.gains, [g for _, g in theirs], rtol=1e-4, atol=1e-2)
