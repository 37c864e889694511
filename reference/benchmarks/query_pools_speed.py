"""Drawing stage-2 batches with one `QueryPools` kept for the run against lists filtered afresh
for every batch (as `draw_batch` did before).

Builds a small shapes-world benchmark and pads its zero-shot pool with copies of its demos up to
``--pool`` samples (stage 2's pool is about 22,000: the benchmark and the extra scenes), draws
``--batches`` batches of stage 2's last phase each way from the same seed, checks they are the
same batches, and prints the time per batch and the ratio.

    python reference/benchmarks/query_pools_speed.py [--pool 22000] [--batches 200]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from mmctx_reference.vlm import CURRICULUM, Mixture, QueryPools, Renderer, draw_batch, load_for_training, mixture_at

from mmctx.data.shapes import build_benchmark
from mmctx.models.shipped import VLM_NAME, shipped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool", type=int, default=22_000)
    parser.add_argument("--batches", type=int, default=200)
    args = parser.parse_args()
    _, processor, adapter = load_for_training(shipped(VLM_NAME))
    with tempfile.TemporaryDirectory() as tmp:
        bench = build_benchmark(Path(tmp), queries_per_task=20, seed=0)
        renderer = Renderer(processor, adapter, bench.root)
        copies = max(0, args.pool - len(bench.queries) - len(bench.demos)) // len(bench.demos) + 1
        extra = [d.model_copy(update={"id": f"{d.id}-copy{i}"}) for i in range(copies) for d in bench.demos]
        mixture = mixture_at(99, 100, Mixture(), CURRICULUM)  # the last phase: focus and drilled lists
        kept = QueryPools(bench, extra)
        seconds, drawn = {}, {}
        for name, pools in (("fresh", lambda: QueryPools(bench, extra)), ("kept", lambda: kept)) * 2:
            rng = random.Random(0)
            started = time.perf_counter()
            batches = [draw_batch(rng, pools(), renderer, mixture) for _ in range(args.batches)]
            seconds[name] = time.perf_counter() - started  # the second round's, once warm
            drawn[name] = [[c.ids for c in batch] for batch in batches]
    if drawn["fresh"] != drawn["kept"]:
        raise SystemExit("the two ways drew different batches")
    pool = len(kept.pool(True))
    per = {name: 1000 * s / args.batches for name, s in seconds.items()}
    print(
        f"{args.batches} batches from a zero-shot pool of {pool} samples: fresh lists {per['fresh']:.1f} ms/batch, "
        f"kept lists {per['kept']:.1f} ms/batch (the same batches)"
    )
    print(f"ratio {per['fresh'] / per['kept']:.2f}x")


if __name__ == "__main__":
    main()
