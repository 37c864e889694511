"""Demonstrations for selected queries: similar (nearest by cosine) and random, per query.

Both draw from the same candidates: the pool minus every selected query, so a query never
sees itself or another query as a demonstration. Similar demos are ordered most similar
first (ties: lowest pool index). Near-duplicates of a query — the same image content, or a
cosine above a threshold — are excluded, because such a demo would show the query's answer.
Random demos are a seeded permutation of the candidates (seed derived from (seed, task, query
id), so a query's draw does not depend on which other queries exist), cut to k: a draw of fewer
is a prefix of it. MMR demos (maximal marginal relevance) are picked greedily, so they too are
stored once for the largest k and any shorter prefix is what MMR picks for fewer.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from mmctx.prompts.build import derived_seed

DUPLICATE_COSINE = 0.98


class TooFewCandidates(ValueError):
    """Some queries have fewer than k candidates left once near-duplicates are excluded."""

    def __init__(self, rows: list[int], k: int):
        self.rows, self.k = rows, k
        super().__init__(f"query rows {rows[:10]} have fewer than {k} candidates after near-duplicate exclusion")


@dataclass(frozen=True)
class Neighbours:
    """For each query row: candidate indices (most similar first), their cosines, and exclusions."""

    indices: np.ndarray  # (q, k) int
    scores: np.ndarray  # (q, k) float
    excluded: np.ndarray  # (q,) int: near-duplicates skipped per query


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def top_k(scores: np.ndarray, k: int, banned: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the ``k`` highest scores, descending, ties to the lowest column; banned cells never win."""
    scores = np.asarray(scores, dtype=np.float64).copy()
    if banned is not None:
        scores[banned] = -np.inf
    k = min(k, scores.shape[1])
    part = (
        np.argpartition(-scores, k - 1, axis=1)[:, :k]
        if k < scores.shape[1]
        else np.tile(np.arange(k), (len(scores), 1))
    )
    # argpartition may cut inside a run of ties; widen to every column tied with the k-th score.
    kth = np.take_along_axis(scores, part, axis=1).min(axis=1, keepdims=True)
    order_rows, order_scores = [], []
    for row, threshold in zip(scores, kth[:, 0]):
        cand = np.flatnonzero(row >= threshold)
        cand = cand[np.lexsort((cand, -row[cand]))][:k]
        order_rows.append(cand)
        order_scores.append(row[cand])
    return np.array(order_rows), np.array(order_scores)


def near_duplicates(
    queries: np.ndarray, candidates: np.ndarray, duplicate_cosine: float, same_content: np.ndarray | None = None
) -> np.ndarray:
    """``[i, j]``: candidate j would leak query i's answer (cosine above the threshold, or the same image)."""
    banned = (_unit(queries) @ _unit(candidates).T) > duplicate_cosine
    return banned | same_content if same_content is not None else banned


def similar_demos(
    queries: np.ndarray,
    candidates: np.ndarray,
    k: int = 8,
    duplicate_cosine: float = DUPLICATE_COSINE,
    same_content: np.ndarray | None = None,
) -> Neighbours:
    """The ``k`` nearest candidates of each query by cosine, near-duplicates excluded.

    ``same_content[i, j]`` marks candidate j as holding the same image as query i.
    """
    sims = _unit(queries) @ _unit(candidates).T  # once: the near-duplicate test reads the same cosines
    banned = sims > duplicate_cosine
    if same_content is not None:
        banned |= same_content
    short = np.flatnonzero((~banned).sum(axis=1) < k)
    if len(short):
        raise TooFewCandidates(short.tolist(), k)
    idx, scores = top_k(sims, k, banned)
    return Neighbours(indices=idx, scores=scores, excluded=banned.sum(axis=1))


def rerank_demos(
    query_image: np.ndarray,
    cand_image: np.ndarray,
    query_text: np.ndarray,
    cand_text: np.ndarray,
    k: int = 8,
    shortlist: int = 32,
    duplicate_cosine: float = DUPLICATE_COSINE,
    same_content: np.ndarray | None = None,
) -> Neighbours:
    """The FewMMBench predecessor's variant: top ``shortlist`` by image similarity, re-ranked by text."""
    img = _unit(query_image) @ _unit(cand_image).T
    txt = _unit(query_text) @ _unit(cand_text).T
    joint = (img + txt) / 2  # the near-duplicate test uses the joint cosine, as `similar_demos` does
    banned = joint > duplicate_cosine
    if same_content is not None:
        banned |= same_content
    short = np.flatnonzero((~banned).sum(axis=1) < k)
    if len(short):
        raise TooFewCandidates(short.tolist(), k)
    short_idx, _ = top_k(img, max(k, shortlist), banned)
    rows, scores = [], []
    for q, cand in enumerate(short_idx):
        cand = cand[~banned[q, cand]]  # the shortlist may hold banned cells when few are allowed
        order = cand[np.lexsort((cand, -txt[q, cand]))][:k]
        rows.append(order)
        scores.append(txt[q, order])
    return Neighbours(indices=np.array(rows), scores=np.array(scores), excluded=banned.sum(axis=1))


def mmr_demos(
    queries: np.ndarray,
    candidates: np.ndarray,
    k: int,
    lam: float,
    duplicate_cosine: float = DUPLICATE_COSINE,
    same_content: np.ndarray | None = None,
) -> Neighbours:
    """Per query, ``k`` candidates by maximal marginal relevance, in the order greedy MMR picks them.

    Each step takes the candidate maximising ``λ·cos(query, c) − (1 − λ)·max cos(c, picked)``
    (ties: lowest index); λ = 1 is `similar_demos`. Near-duplicates are excluded as there.
    ``scores`` are the picked candidates' cosines to the query.
    """
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"MMR λ must lie in [0, 1], got {lam:g}")
    q, c = _unit(queries), _unit(candidates)
    sims = q @ c.T
    banned = sims > duplicate_cosine
    if same_content is not None:
        banned |= same_content
    short = np.flatnonzero((~banned).sum(axis=1) < k)
    if len(short):
        raise TooFewCandidates(short.tolist(), k)
    pair = c @ c.T
    rows, scores = [], []
    for qi in range(len(q)):
        left = ~banned[qi]
        redundancy = np.zeros(len(c))
        picked = []
        for _ in range(k):
            score = np.where(left, lam * sims[qi] - (1 - lam) * redundancy, -np.inf)
            best = int(np.argmax(score))  # the first of equal maxima: the lowest index
            picked.append(best)
            left[best] = False
            redundancy = np.maximum(redundancy, pair[best])
        rows.append(picked)
        scores.append(sims[qi, picked])
    return Neighbours(indices=np.array(rows), scores=np.array(scores), excluded=banned.sum(axis=1))


def random_demos(query_id: str, task: str, candidates: list[str], k: int, seed: int) -> list[str]:
    """The first ``k`` of a permutation of the candidates seeded by (seed, task, query id)."""
    if len(candidates) < k:
        raise ValueError(f"query {query_id!r}: {len(candidates)} candidates for {k} random demos")
    ids = sorted(candidates)
    random.Random(derived_seed(seed, "random-demos", task, query_id)).shuffle(ids)
    return ids[:k]
