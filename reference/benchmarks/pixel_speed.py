"""Stage 1's pixel values: `_pixels` (a thread a core) against one image at a time.

Builds a shapes-world benchmark, then computes every image's pixel values with the shipped
VLM's processor both ways, checks the tensors are identical, and prints the ratio. PIL's
resizes release the GIL, so on 2 cores the threaded way should take about half the time.

    python reference/benchmarks/pixel_speed.py [--queries-per-task 20]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import torch
from mmctx_reference.vlm import Renderer, _pixels, load_for_training

from mmctx.data.shapes import build_benchmark
from mmctx.models.shipped import VLM_NAME, shipped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries-per-task", type=int, default=20)
    args = parser.parse_args()
    _, processor, adapter = load_for_training(shipped(VLM_NAME))
    with tempfile.TemporaryDirectory() as tmp:
        bench = build_benchmark(Path(tmp), queries_per_task=args.queries_per_task, seed=0)
        samples = [*bench.queries, *bench.demos]
        renderer = Renderer(processor, adapter, bench.root)
        _pixels(renderer, samples)  # warm-up: files read once, imports done, for both timings alike
        started = time.perf_counter()
        paths, threaded = _pixels(renderer, samples)
        threaded_s = time.perf_counter() - started
        started = time.perf_counter()
        serial = torch.stack([renderer.pixel_values(p) for p in paths])
        serial_s = time.perf_counter() - started
    if not torch.equal(threaded, serial):
        raise SystemExit("the threaded pixel values differ from the serial ones")
    print(f"{len(paths)} images, {os.cpu_count()} cores: one at a time {serial_s:.2f} s, threaded {threaded_s:.2f} s")
    print(f"ratio {serial_s / threaded_s:.2f}x (identical tensors)")


if __name__ == "__main__":
    main()
