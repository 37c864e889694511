"""The shapes-world benchmark: a pool, split into queries and the demonstrations they draw on."""

from __future__ import annotations

from pathlib import Path

from mmctx.data.disk import load_benchmark, save_benchmark
from mmctx.data.shapes.pool import generate_pool
from mmctx.data.shapes.rationale import scene_rationale
from mmctx.data.shapes.selection import (
    eligible,
    image_features,
    mmr_demos,
    random_demos,
    similar_demos,
    text_features,
)
from mmctx.schema import Benchmark, Sample

NAME = "shapes-world"
# Ranked demo keys stored per query and list: enough for the many-shot settings (16, 32, 64).
DEMOS_PER_QUERY = 64
# The λ of the stored ``mmr`` list (`mmctx.run.strategies.DEFAULT_MMR_LAMBDA`; data sits below run).
MMR_LAMBDA = 0.5
DESCRIPTION = (
    "Synthetic FewMMBench analogue: seeded shape scenes with exact ground truth for all nine task types, "
    "with random and similarity-selected demonstrations carrying programmatic rationales."
)


def build_benchmark(
    out: Path,
    queries_per_task: int = 10,
    demos_per_query: int = DEMOS_PER_QUERY,
    seed: int = 0,
    pool_per_task: int | None = None,
) -> Benchmark:
    """Generate, split, select demos, save under ``out`` and return the benchmark as loaded from there.

    Per (task, format) generator, the first ``queries_per_task`` samples are the queries (samples are
    independent draws, so the first are as random as any) and the rest the demonstration pool (by
    default twice ``demos_per_query``, so similar demos are a choice, not the whole pool). Each
    query stores ``demos_per_query`` ranked keys (fewer where ``pool_per_task`` holds fewer) under
    ``random``, ``similar``, ``image-similar``, ``text-similar`` and ``mmr``
    (see `mmctx.data.shapes.selection`).
    """
    out = Path(out)
    if demos_per_query < 1:
        raise ValueError(f"demos_per_query={demos_per_query}: needs at least 1")
    pool_size = pool_per_task if pool_per_task is not None else queries_per_task + 2 * demos_per_query
    if pool_size <= queries_per_task:
        raise ValueError(
            f"pool_per_task={pool_size} leaves no candidate demo beside {queries_per_task} queries per task"
        )
    pool = generate_pool(out, pool_size, seed)

    query_ids = {s.id for s in pool if s.meta["index"] < queries_per_task}
    queries: list[Sample] = []
    for query in (s for s in pool if s.id in query_ids):
        candidates = eligible(query, pool, exclude=query_ids)
        # A pool smaller than asked stores what it holds; a setting asking more is refused at planning,
        # naming the query. Every list is a prefix of a longer one, so a larger pool changes no demo shown.
        n = min(demos_per_query, len(candidates))
        keys = {
            "random": random_demos(query, candidates, n, seed),
            "similar": similar_demos(query, candidates, n),
            "image-similar": similar_demos(query, candidates, n, image_features),
            "text-similar": similar_demos(query, candidates, n, text_features),
            "mmr": mmr_demos(query, candidates, n, MMR_LAMBDA),
        }
        queries.append(query.model_copy(update={"demo_keys": keys}))

    used = {key for q in queries for keys in q.demo_keys.values() for key in keys}
    demos = [s.model_copy(update={"rationale": scene_rationale(s)}) for s in pool if s.id in used]
    _remove_unused_images(out, pool, kept=query_ids | used)

    save_benchmark(Benchmark(NAME, queries, demos, root=out, description=DESCRIPTION), out)
    return load_benchmark(out)


def _remove_unused_images(out: Path, pool: list[Sample], kept: set[str]) -> None:
    """Pool samples neither asked nor shown leave no file behind, so the folder is the benchmark."""
    for s in pool:
        if s.id not in kept:
            for rel in s.images:
                (out / rel).unlink(missing_ok=True)
