"""Choosing demonstrations for a query: a seeded uniform draw, and nearest neighbours by a cheap feature.

The feature is a bag of scene facts (shapes, colours, sizes, shape-colour pairs, frame count,
question kind) next to a bag of words of the text. Each half is L2-normalised, so the picture
and the wording weigh the same in the cosine, whatever the number of objects or words. The
scene half alone is the image-only similarity, the words alone the text-only one; MMR trades
the joint similarity to the query against the similarity to demos already picked.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from mmctx.data.shapes.draws import derive_seed
from mmctx.schema import Sample

Features = dict[str, float]


def _normalised(counts: Counter[str]) -> Features:
    norm = math.sqrt(sum(v * v for v in counts.values())) or 1.0
    return {k: v / norm for k, v in counts.items()}


def scene_counts(sample: Sample) -> Counter[str]:
    counts: Counter[str] = Counter()
    for frame in sample.meta.get("frames", []):
        for o in frame["objects"]:
            counts.update(
                [
                    f"shape:{o['shape']}",
                    f"colour:{o['colour']}",
                    f"size:{o['size']}",
                    f"pair:{o['colour']}-{o['shape']}",
                ]
            )
    counts[f"frames:{len(sample.meta.get('frames', []))}"] += 1
    counts[f"kind:{sample.meta.get('query', {}).get('kind', '')}"] += 1
    return counts


def text_counts(sample: Sample) -> Counter[str]:
    text = " ".join([sample.question, sample.statement, *sample.choices]).lower()
    return Counter(f"word:{w}" for w in re.findall(r"[a-z0-9]+", text))


def features(sample: Sample) -> Features:
    return {**_normalised(scene_counts(sample)), **_normalised(text_counts(sample))}


def cosine(a: Features, b: Features) -> float:
    dot = sum(v * b.get(k, 0.0) for k, v in a.items())
    na, nb = math.sqrt(sum(v * v for v in a.values())), math.sqrt(sum(v * v for v in b.values()))
    return dot / (na * nb) if na and nb else 0.0


def scene_similarity(a: Sample, b: Sample) -> float:
    """Cosine of two samples' scene facts alone (no wording): how alike their pictures are, by construction."""
    return cosine(scene_counts(a), scene_counts(b))


def eligible(query: Sample, pool: Sequence[Sample], exclude: set[str]) -> list[Sample]:
    """Same task and format as ``query``, never the query itself nor anything in ``exclude``."""
    return [
        s
        for s in pool
        if s.task == query.task and s.format == query.format and s.id != query.id and s.id not in exclude
    ]


def text_features(sample: Sample) -> Features:
    return _normalised(text_counts(sample))


def image_features(sample: Sample) -> Features:
    return _normalised(scene_counts(sample))


def similar_demos(
    query: Sample, candidates: Sequence[Sample], k: int, feature: Callable[[Sample], Features] = features
) -> list[str]:
    """Ids of the ``k`` most similar candidates by ``feature``, most similar first, ties broken by id."""
    _check_enough(query, candidates, k)
    q = feature(query)
    scored = sorted(candidates, key=lambda s: (-round(cosine(q, feature(s)), 12), s.id))
    return [s.id for s in scored[:k]]


def mmr_demos(query: Sample, candidates: Sequence[Sample], k: int, lam: float) -> list[str]:
    """``k`` candidates by maximal marginal relevance, in the order greedy MMR picks them.

    Each step takes the candidate maximising ``λ·sim(query, c) − (1 − λ)·max sim(c, picked)``
    (ties by id); greedy, so the first ``j`` of the list are what MMR would pick for ``j``.
    """
    _check_enough(query, candidates, k)
    ordered = sorted(candidates, key=lambda s: s.id)  # ties go to the lowest id: argmax keeps the first
    vectors = _unit_rows([features(query)] + [features(s) for s in ordered])
    sims = vectors[1:] @ vectors[1:].T
    relevance = vectors[1:] @ vectors[0]
    redundancy = np.zeros(len(ordered))  # max similarity to a picked demo so far (none: 0)
    left = np.ones(len(ordered), dtype=bool)
    picked: list[str] = []
    for _ in range(k):
        score = np.round(lam * relevance - (1 - lam) * redundancy, 12)
        best = int(np.argmax(np.where(left, score, -np.inf)))
        picked.append(ordered[best].id)
        left[best] = False
        redundancy = np.maximum(redundancy, sims[best])
    return picked


def _unit_rows(feats: list[Features]) -> np.ndarray:
    vocab = {key: i for i, key in enumerate(sorted({key for f in feats for key in f}))}
    m = np.zeros((len(feats), len(vocab)))
    for row, f in enumerate(feats):
        for key, value in f.items():
            m[row, vocab[key]] = value
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return m / np.where(norms == 0, 1.0, norms)


def random_demos(query: Sample, candidates: Sequence[Sample], k: int, seed: int) -> list[str]:
    """The first ``k`` of a seeded permutation of the candidates: any shorter draw is a prefix of it."""
    _check_enough(query, candidates, k)
    ids = sorted(s.id for s in candidates)
    random.Random(derive_seed(seed, "random-demos", query.id)).shuffle(ids)
    return ids[:k]


def _check_enough(query: Sample, candidates: Sequence[Sample], k: int) -> None:
    if len(candidates) < k:
        raise ValueError(f"query {query.id!r}: the pool holds {len(candidates)} candidate demos, {k} asked")
