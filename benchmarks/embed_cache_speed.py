"""Reading the embedding cache: time and peak memory against the number of cached samples.

`mmctx.curate.embed.EmbeddingCache` keeps one ``.npz`` per encoder (ids, content digests, an
image block and a text block). This script writes caches of --sizes rows (default up to 30,000,
about the size of the FewMMBench source pool) with CLIP ViT-L/14 widths (768 + 768, float32),
then reads each back and prints, per size: the file size, wall time of the read (best of
--repeats) and peak extra memory during it (tracemalloc, which numpy reports its buffers to),
next to the bytes of the stored rows. A linear reader's peak is a small multiple of those bytes.

For contrast it also times, at --legacy-sizes (small: its cost is quadratic), a reader that
indexes the archive once per entry (``data["text"][i]``), which decompresses the whole member
on every access and keeps one full copy alive per entry.

    python benchmarks/embed_cache_speed.py [--sizes 1000 10000 30000] [--legacy-sizes 100 200]

A script that prints, not a test. Other processes on the machine skew the times; the load
average is printed so a reader can tell.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np

from mmctx.curate.embed import EmbeddingCache, _Entry, l2_normalise

MB = 1e6
ENCODER = "clip:benchmark@fixed"


def write_cache(folder: Path, n: int, width: int) -> Path:
    """A cache of ``n`` entries, written the way `embed_samples` writes one."""
    rng = np.random.default_rng(n)
    image = l2_normalise(rng.normal(size=(n, width)))
    text = l2_normalise(rng.normal(size=(n, width)))
    cache = EmbeddingCache(folder, ENCODER)
    for i in range(n):
        cache.put(f"source/subset/{i}", _Entry(f"{i:064x}", image[i], text[i]))
    cache.flush()
    return cache.path


def read_linear(folder: Path) -> int:
    return len(EmbeddingCache(folder, ENCODER).entries)


def read_per_entry(folder: Path) -> int:
    """The per-entry indexing reader, kept here only as the quadratic baseline."""
    entries = {}
    with np.load(_path(folder), allow_pickle=False) as data:
        for i, (sid, digest) in enumerate(zip(data["ids"], data["digests"])):
            entries[str(sid)] = (str(digest), data["image"][i], data["text"][i])
    return len(entries)


def _path(folder: Path) -> Path:
    (path,) = Path(folder).glob("*.npz")
    return path


def measure(read: Callable[[Path], int], folder: Path, repeats: int) -> tuple[float, float, int]:
    """(best seconds, peak extra MB on the first read, entries read)."""
    tracemalloc.start()
    count = read(folder)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        read(folder)
        best = min(best, time.perf_counter() - start)
    return best, peak / MB, count


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 30000])
    parser.add_argument("--legacy-sizes", type=int, nargs="*", default=[100, 200])
    parser.add_argument("--width", type=int, default=768, help="width of each block (ViT-L/14: 768)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    print(f"load average {os.getloadavg()[0]:.2f}, blocks {args.width} + {args.width} float32")
    print(f"{'reader':<10} {'rows':>7} {'file MB':>8} {'rows MB':>8} {'read s':>8} {'peak MB':>9} {'peak/rows':>9}")
    runs = [("linear", read_linear, n) for n in args.sizes]
    runs += [("per-entry", read_per_entry, n) for n in args.legacy_sizes]
    for label, read, n in runs:
        with tempfile.TemporaryDirectory() as tmp:
            path = write_cache(Path(tmp), n, args.width)
            rows_mb = 2 * n * args.width * 4 / MB
            seconds, peak, count = measure(read, Path(tmp), args.repeats if label == "linear" else 1)
            assert count == n, f"read {count} of {n} entries"
            print(
                f"{label:<10} {n:>7} {path.stat().st_size / MB:>8.1f} {rows_mb:>8.1f} {seconds:>8.3f} "
                f"{peak:>9.1f} {peak / rows_mb:>9.2f}"
            )


if __name__ == "__main__":
    main()
