"""Graph Cut query selection: pick k representative queries from a pool of embeddings.

FewMMBench (section 3.2) selects 250 queries per task by greedily maximising

    f(X) = Σ_{i∈V\\X, j∈X} s_ij − λ Σ_{i,j∈X} s_ij                      ("paper" convention)

over cosine similarities s_ij of joint CLIP embeddings. Because Σ_{i∈V\\X, j∈X} = Σ_{i∈V, j∈X} − Σ_{i,j∈X},
this is submodlib's `GraphCutFunction`, f(X) = Σ_{i∈V, j∈X} s_ij − λ' Σ_{i,j∈X} s_ij, with λ' = λ + 1
("submodlib" convention). Both are written below as one objective with a redundancy weight

    w = λ + 1 (paper)  or  w = λ (submodlib),    gain(j | X) = c_j − 2w·S_j(X) − w·s_jj,

where c_j = Σ_{i∈V} s_ij (column sums) and S_j(X) = Σ_{i∈X} s_ij.

With the cosine kernel s_ij = ⟨ê_i, ê_j⟩ (ê: L2-normalised rows), c_j = ⟨ê_j, m⟩ with m = Σ_i ê_i and
S_j(X) = ⟨ê_j, σ_X⟩ with σ_X = Σ_{i∈X} ê_i, so exact naive greedy costs one matrix-vector product per
pick: O(n·k·d) time and O(n + d) extra memory, and the n×n matrix is never built (building it also
crashes numpy's bundled OpenBLAS near n ≈ 26,000 × 1024 on our machines, numpy/numpy#19685).

What λ means depends on the pool size. For unit rows f(X) = ⟨σ_X, m⟩ − w‖σ_X‖², maximised at
σ_X = m/(2w), i.e. mean(X) ≈ ρ·mean(V) with ρ = n / (2wk). ρ = 1 is mean matching (the most
representative set); ρ ≪ 1 (the paper's λ = 50 on pools below ~25k) favours outlying, mutually
dissimilar items; ρ > 1 favours central, redundant ones. We keep the paper's λ as the default, report ρ
on every `Selection`, and offer ``lam="auto"`` for mean matching (see /work/shared/notes/selection.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = [
    "DEFAULT_LAMBDA",
    "LARGE_POOL_LAMBDA",
    "PAPER_LAMBDA",
    "Kernel",
    "Selection",
    "graph_cut_value",
    "paper_lambda",
    "select_graph_cut",
]

Convention = Literal["paper", "submodlib"]
CONVENTIONS: tuple[str, ...] = ("paper", "submodlib")

# kernel(A, B) -> (len(A), len(B)) similarity block. Must be symmetric, kernel(A, B) == kernel(B, A).T,
# because the gain formula counts s_ij and s_ji as the same edge (as submodlib does).
Kernel = Callable[[np.ndarray, np.ndarray], np.ndarray]

DEFAULT_LAMBDA = 50.0
LARGE_POOL_LAMBDA = 200.0

# λ (paper convention) per (task, format), keyed by the task names of `mmctx.schema.TASKS`. The paper
# sets λ per format, not per task: the same task gets 50 for one format and 200 for the other.
# Source: /work/shared/seeds/fewmmbench-paper.txt, section 3.2 line 85 ("λ=50 for most tasks, and λ=200
# for larger task pools") and appendix C.x.1 "Example Selection" (line numbers below); pool sizes from
# section 3.1 (lines 57-73), so the ρ they imply can be checked.
PAPER_LAMBDA: dict[tuple[str, str], float] = {
    ("attribute_recognition", "mcqa"): DEFAULT_LAMBDA,  # C.3.1, l.426; pool ~5K
    ("attribute_recognition", "caption_foil"): LARGE_POOL_LAMBDA,  # C.3.1, l.426; pool ~30K
    ("object_recognition", "mcqa"): LARGE_POOL_LAMBDA,  # C.4.1, l.456; pool 20K
    ("object_recognition", "caption_foil"): DEFAULT_LAMBDA,  # C.4.1, l.456; pool 505
    ("plurality", "caption_foil"): DEFAULT_LAMBDA,  # C.5.1, l.486; pool 851
    ("counting", "mcqa"): DEFAULT_LAMBDA,  # C.6.1, l.510; pool ~2,500
    ("counting", "caption_foil"): DEFAULT_LAMBDA,  # C.6.1, l.510; pool ~2,500
    ("spatial_relations", "mcqa"): DEFAULT_LAMBDA,  # C.7.1, l.540; pool 1K
    ("spatial_relations", "caption_foil"): LARGE_POOL_LAMBDA,  # C.7.1, l.540; pool 29K
    ("action_recognition", "caption_foil"): DEFAULT_LAMBDA,  # C.8.1, l.570; pool ~1,600
    ("commonsense", "mcqa"): DEFAULT_LAMBDA,  # C.9.1, l.596; pool >1,500
    ("temporal", "mcqa"): DEFAULT_LAMBDA,  # C.10.1, l.620; pool ~2,500
    ("coreference", "caption_foil"): DEFAULT_LAMBDA,  # C.11.1, l.644; pool >800
}


def paper_lambda(task: str, format: str) -> float:
    """The paper's λ (paper convention) for one of its 13 (task, format) selections.

    Raises KeyError for any other pair rather than falling back to 50: a misspelt task would otherwise
    silently get λ = 50 instead of 200. Pools outside the paper should pass `DEFAULT_LAMBDA` or "auto".
    """
    try:
        return PAPER_LAMBDA[(task, format)]
    except KeyError:
        known = ", ".join(f"{t}/{f}" for t, f in PAPER_LAMBDA)
        raise KeyError(f"the paper sets no λ for {task}/{format}; it covers: {known}") from None


@dataclass(frozen=True)
class Selection:
    """The outcome of one greedy Graph Cut selection.

    Attributes:
        indices: Picked rows, in pick order.
        gains: Marginal gain f(X ∪ {j}) − f(X) of each pick, in `convention` with λ = `lam`
            (the two conventions describe the same function, so the gains agree for equivalent λ).
        lam: The λ actually used, in `convention` (after resolving "auto").
        convention: "paper" (f as printed in the paper) or "submodlib" (GraphCutFunction's λ = paper λ + 1).
        rho: n / (2wk) = n / (2(λ_paper + 1)k) = n / (2 λ_submodlib k), with w the redundancy weight:
            the factor in the target mean(X) ≈ ρ·mean(V), which is f's exact stationary point for the
            cosine kernel (other kernels: the same statement in their feature space). The simpler
            n / (2 λ_paper k) overstates it by (λ + 1)/λ: 2% at λ = 50, unbounded at λ = 0.
            `inf` when w = 0 (submodlib λ = 0: top-k by centrality).
        kernel: "cosine", or the kernel callable's `__name__`.
    """

    indices: tuple[int, ...]
    gains: tuple[float, ...]
    lam: float
    convention: str
    rho: float
    kernel: str


def select_graph_cut(
    embeddings: np.ndarray,
    k: int = 250,
    lam: float | str = DEFAULT_LAMBDA,
    convention: str = "paper",
    kernel: Kernel | None = None,
    block_size: int = 4096,
) -> Selection:
    """Greedily pick `k` rows of `embeddings` maximising the Graph Cut objective (module docstring).

    Exact naive greedy: every step takes the remaining row with the largest marginal gain, lowest index
    on ties. Rows are L2-normalised inside (zero rows are an error), so only directions matter.

    Args:
        embeddings: (n, d) pool, e.g. concatenated CLIP image+text embeddings. float32 and float64 are
            used as they are, without any copy on the cosine path; other dtypes are converted once.
        k: Number of queries to pick, 1 <= k <= n.
        lam: λ >= 0 in `convention`, e.g. `paper_lambda(task, format)`. "auto" picks the
            mean-matching λ, i.e. w = n/(2k) so ρ = 1: λ = n/(2k) in the submodlib convention and
            n/(2k) − 1 in the paper one (negative, but still a positive weight w, when n < 2k).
        convention: "paper" or "submodlib", the λ convention (see `Selection.lam`).
        kernel: None for cosine (closed form, O(n·k·d)). Otherwise a symmetric callable
            kernel(A, B) -> (len(A), len(B)) similarities, called on L2-normalised row blocks; it runs
            blockwise in O(n²·d) time and O(block_size² + n) memory, plus one normalised copy of the
            embeddings in their float dtype.
        block_size: Rows per kernel block (bounds the kernel path's memory; unused for cosine).

    Raises:
        TypeError: k is not an integer.
        ValueError: bad k, λ, convention, block_size or shape; a row with NaN/inf or zero norm (named by
            index), all before the selection starts; a kernel returning a wrong shape, non-finite or
            asymmetric values.
    """
    matrix = _as_float_matrix(embeddings)
    n = matrix.shape[0]
    _check_k(k, n)
    _check_convention(convention)
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    lam_used = _resolve_lambda(lam, n, k, convention)
    weight = _redundancy_weight(lam_used, convention)
    inv_norms = _inverse_row_norms(matrix)

    if kernel is None:
        initial, column = _cosine_terms(matrix, inv_norms, weight)
        kernel_name = "cosine"
    else:
        unit = matrix * inv_norms[:, None].astype(matrix.dtype)
        initial, column = _kernel_terms(unit, kernel, weight, block_size)
        kernel_name = getattr(kernel, "__name__", type(kernel).__name__)

    indices, gains = _naive_greedy(initial, column, k, weight)
    rho = math.inf if weight == 0 else n / (2.0 * weight * k)
    return Selection(indices, gains, lam_used, convention, rho, kernel_name)


def graph_cut_value(
    embeddings: np.ndarray,
    indices: tuple[int, ...] | list[int] | np.ndarray,
    lam: float,
    convention: str = "paper",
) -> float:
    """f(X) for the cosine kernel on L2-normalised rows, in `convention`: ⟨σ_X, m⟩ − w‖σ_X‖².

    O(n·d) time and O(n + d) memory (the identity in the module docstring), never the n×n matrix.
    `lam` may be any finite number here, so a `Selection.lam` from "auto" can be passed back.
    """
    matrix = _as_float_matrix(embeddings)
    _check_convention(convention)
    if not math.isfinite(lam):
        raise ValueError(f"lam must be finite, got {lam}")
    picked = _check_indices(indices, matrix.shape[0])
    inv_norms = _inverse_row_norms(matrix)
    total = _weighted_row_sum(matrix, inv_norms)
    subset = _weighted_row_sum(matrix[picked], inv_norms[picked])
    weight = _redundancy_weight(float(lam), convention)
    return float(subset @ total - weight * (subset @ subset))


# -- validation ------------------------------------------------------------------------------------


def _as_float_matrix(embeddings: np.ndarray) -> np.ndarray:
    matrix = np.asarray(embeddings)
    if matrix.ndim != 2 or matrix.shape[0] < 1 or matrix.shape[1] < 1:
        raise ValueError(f"embeddings must be a non-empty (n, d) matrix, got shape {matrix.shape}")
    if matrix.dtype in (np.float32, np.float64):
        return matrix
    # float16 matrix-vector products are slow and lossy; integers must not wrap in the dot products.
    return matrix.astype(np.float32 if matrix.dtype == np.float16 else np.float64)


def _check_k(k: int, n: int) -> None:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"k must be an integer, got {k!r}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if k > n:
        raise ValueError(f"k = {k} exceeds the pool size n = {n}")


def _check_convention(convention: str) -> None:
    if convention not in CONVENTIONS:
        raise ValueError(f"unknown convention {convention!r}; expected one of {CONVENTIONS}")


def _resolve_lambda(lam: float | str, n: int, k: int, convention: str) -> float:
    if isinstance(lam, str):
        if lam != "auto":
            raise ValueError(f"lam must be a number >= 0 or 'auto', got {lam!r}")
        mean_matching_weight = n / (2.0 * k)
        return mean_matching_weight - 1.0 if convention == "paper" else mean_matching_weight
    value = float(lam)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"lam must be a finite number >= 0, got {lam}")
    return value


def _redundancy_weight(lam: float, convention: str) -> float:
    """w in f(X) = Σ_{i∈V, j∈X} s_ij − w Σ_{i,j∈X} s_ij: the paper's cut term hides one extra Σ_{X,X}."""
    return lam + 1.0 if convention == "paper" else lam


def _inverse_row_norms(matrix: np.ndarray) -> np.ndarray:
    """1/‖row‖ as float64, naming the first NaN/inf or zero row; O(n) memory (einsum buffers its cast)."""
    squared = np.einsum("ij,ij->i", matrix, matrix, dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(squared))
    if bad.size:
        row = int(bad[0])
        if not np.isfinite(matrix[row]).all():
            raise ValueError(f"embeddings row {row} contains NaN or inf")
        raise ValueError(f"embeddings row {row} has a norm too large for float64")
    zero = np.flatnonzero(squared == 0)
    if zero.size:
        raise ValueError(f"embeddings row {int(zero[0])} has zero norm, so its cosine similarity is undefined")
    return 1.0 / np.sqrt(squared)


def _check_indices(indices: tuple[int, ...] | list[int] | np.ndarray, n: int) -> np.ndarray:
    picked = np.asarray(indices, dtype=np.int64).reshape(-1)
    if picked.size and (picked.min() < 0 or picked.max() >= n):
        raise ValueError(f"indices must lie in [0, {n}), got min {picked.min()} and max {picked.max()}")
    if np.unique(picked).size != picked.size:
        raise ValueError("indices contain duplicates; X is a set")
    return picked


# -- the two ways to get c_j − w·s_jj and one kernel row per pick ----------------------------------


# Returns s_{j,·} for all n rows as float64.
Column = Callable[[int], np.ndarray]


def _weighted_row_sum(matrix: np.ndarray, weights: np.ndarray, rows_per_chunk: int = 8192) -> np.ndarray:
    """Σ_i weights_i · matrix_i in float64, chunked so a float32 matrix is never upcast whole."""
    total = np.zeros(matrix.shape[1], dtype=np.float64)
    for start in range(0, matrix.shape[0], rows_per_chunk):
        chunk = slice(start, start + rows_per_chunk)
        total += matrix[chunk].T @ weights[chunk].astype(matrix.dtype)
    return total


def _cosine_terms(matrix: np.ndarray, inv_norms: np.ndarray, weight: float) -> tuple[np.ndarray, Column]:
    """Closed form: ê_i = matrix_i · inv_norms_i is never materialised; each product is rescaled instead.

    Memory is O(n + d): the products below are matrix-vector products whose float32/float64 results
    are n-vectors, and the scaling happens on those, in float64.
    """
    pool_sum = _weighted_row_sum(matrix, inv_norms)  # m = Σ ê_i
    column_sums = inv_norms * (matrix @ pool_sum.astype(matrix.dtype))  # c_j = ⟨ê_j, m⟩
    initial = column_sums - weight  # s_jj = 1 exactly for unit rows

    def column(j: int) -> np.ndarray:
        unit_j = (matrix[j] * inv_norms[j]).astype(matrix.dtype)
        return inv_norms * (matrix @ unit_j)

    return initial, column


def _kernel_terms(unit: np.ndarray, kernel: Kernel, weight: float, block_size: int) -> tuple[np.ndarray, Column]:
    """Blockwise path for any symmetric kernel: column sums over B×B tiles, then one kernel row per pick.

    Only tiles on or above the diagonal are evaluated; by symmetry each off-diagonal tile also gives
    the column sums of its mirror image. Peak memory: one tile plus O(n).
    """
    n = unit.shape[0]
    blocks = [slice(start, min(start + block_size, n)) for start in range(0, n, block_size)]
    column_sums = np.zeros(n, dtype=np.float64)
    diagonal = np.empty(n, dtype=np.float64)
    for a, rows in enumerate(blocks):
        for cols in blocks[a:]:
            tile = _kernel_block(kernel, unit[rows], unit[cols])
            column_sums[cols] += tile.sum(axis=0, dtype=np.float64)
            if cols == rows:
                _check_symmetric(tile, rows.start)
                diagonal[rows] = np.diagonal(tile)
            else:
                column_sums[rows] += tile.sum(axis=1, dtype=np.float64)
            del tile  # or the next call's tile would coexist with this one
    initial = _finite(column_sums - weight * diagonal)

    def column(j: int) -> np.ndarray:
        row = unit[j : j + 1]
        return _finite(
            np.concatenate([_kernel_block(kernel, row, unit[cols])[0] for cols in blocks]).astype(np.float64)
        )

    return initial, column


def _kernel_block(kernel: Kernel, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    tile = np.asarray(kernel(rows, cols))
    if tile.shape != (len(rows), len(cols)):
        raise ValueError(f"kernel returned shape {tile.shape} for blocks of {len(rows)} and {len(cols)} rows")
    return tile


def _finite(values: np.ndarray) -> np.ndarray:
    """NaN/inf in any kernel entry reaches these sums and rows, so checking them (O(n)) replaces a
    tile-sized isfinite temporary."""
    if not np.isfinite(values).all():
        raise ValueError("kernel returned NaN or inf")
    return values


def _check_symmetric(tile: np.ndarray, offset: int, corner: int = 256) -> None:
    """Compare the tile's top-left corner with its transpose: asymmetric kernels are rarely symmetric
    there, and the whole tile would cost several tile-sized temporaries."""
    head = tile[:corner, :corner]
    if not np.allclose(head, head.T, rtol=1e-5, atol=1e-6, equal_nan=True):
        i, j = np.unravel_index(np.argmax(np.abs(head - head.T)), head.shape)
        raise ValueError(
            f"kernel is not symmetric: s[{offset + i}, {offset + j}] = {head[i, j]} but "
            f"s[{offset + j}, {offset + i}] = {head[j, i]}"
        )


# -- the greedy --------------------------------------------------------------------------------------


def _naive_greedy(
    initial: np.ndarray, column: Column, k: int, weight: float
) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """Exact naive greedy on gain_j = initial_j − 2w·Σ_{i∈X} s_ij, lowest index on ties.

    No lazy greedy, on purpose: lazy greedy assumes gains only ever fall (submodularity), but here
    gain_j(X ∪ {i}) − gain_j(X) = −2w·s_ij, which is positive whenever a cosine is negative. With
    mixed-sign similarities lazy greedy then silently returns a different and worse set (22 of 250 items
    in common on random data, per the notes), and it saves nothing anyway: every pick changes every gain.
    """
    gains = initial.astype(np.float64, copy=True)  # float64: gains are differences of large sums
    picked: list[int] = []
    picked_gains: list[float] = []
    for _ in range(k):
        j = int(np.argmax(gains))  # first maximum = lowest index
        picked.append(j)
        picked_gains.append(float(gains[j]))
        gains -= (2.0 * weight) * column(j)
        gains[j] = -np.inf  # stays -inf (minus finite values), so j is never picked again
    return tuple(picked), tuple(picked_gains)
