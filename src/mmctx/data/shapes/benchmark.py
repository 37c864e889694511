"""The shapes-world benchmark: a pool, split into queries and the demonstrations they draw on."""

from __future__ import annotations

from pathlib import Path

from mmctx.data.disk import load_benchmark, save_benchmark
from mmctx.data.shapes.pool import generate_pool
from mmctx.data.shapes.rationale import scene_rationale
from mmctx.data.shapes.selection import eligible, random_demos, similar_demos
from mmctx.schema import Benchmark, Sample

NAME = "shapes-world"
DESCRIPTION = (
    "Synthetic FewMMBench analogue: seeded shape scenes with exact ground truth for all nine task types, "
    "with random and similarity-selected demonstrations carrying programmatic rationales."
)


def build_benchmark(
    out: Path,
    queries_per_task: int = 10,
    demos_per_query: int = 8,
    seed: int = 0,
    pool_per_task: int | None = None,
) -> Benchmark:
    """Generate, split, select demos, save under ``out`` and return the benchmark as loaded from there.

    Per (task, format) generator, the first ``queries_per_task`` samples are the queries (samples are
    independent draws, so the first are as random as any) and the rest the demonstration pool.
    """
    out = Path(out)
    pool_size = pool_per_task if pool_per_task is not None else queries_per_task + 4 * demos_per_query
    if pool_size < queries_per_task + demos_per_query:
        raise ValueError(f"pool_per_task={pool_size} leaves fewer than {demos_per_query} demos per query")
    pool = generate_pool(out, pool_size, seed)

    query_ids = {s.id for s in pool if s.meta["index"] < queries_per_task}
    queries: list[Sample] = []
    for query in (s for s in pool if s.id in query_ids):
        candidates = eligible(query, pool, exclude=query_ids)
        keys = {
            "random": random_demos(query, candidates, demos_per_query, seed),
            "similar": similar_demos(query, candidates, demos_per_query),
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
