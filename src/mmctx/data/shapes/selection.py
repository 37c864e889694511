"""Choosing demonstrations for a query: a seeded uniform draw, and nearest neighbours by a cheap feature.

The feature is a bag of scene facts (shapes, colours, sizes, shape-colour pairs, frame count,
question kind) next to a bag of words of the text. Each half is L2-normalised, so the picture
and the wording weigh the same in the cosine, whatever the number of objects or words.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from collections.abc import Sequence

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


def similar_demos(query: Sample, candidates: Sequence[Sample], k: int) -> list[str]:
    """Ids of the ``k`` most similar candidates, most similar first, ties broken by id."""
    q = features(query)
    scored = sorted(candidates, key=lambda s: (-round(cosine(q, features(s)), 12), s.id))
    return [s.id for s in scored[:k]]


def random_demos(query: Sample, candidates: Sequence[Sample], k: int, seed: int) -> list[str]:
    ids = sorted(s.id for s in candidates)
    return random.Random(derive_seed(seed, "random-demos", query.id)).sample(ids, k)
