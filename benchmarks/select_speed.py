"""Graph Cut query selection: our closed form against submodlib's NaiveGreedy, plus demo retrieval.

Selects k = 250 of n random unit vectors (d = 1024, float32) with the paper's λ = 50 (submodlib λ = 51)
and prints, per n: wall time and peak extra memory of `mmctx.curate.select.select_graph_cut`
(tracemalloc, in this process; best of --repeats for time) and of submodlib's dense GraphCutFunction
with NaiveGreedy (peak RSS growth, measured in a subprocess capped at --mem-limit-gb with
RLIMIT_AS so it fails fast instead of swapping, and so a MemoryError cannot end this script), and
whether the ordered selections are identical. The blockwise kernel path (a linear kernel, which must
reproduce the closed form) is timed too. Last, it times demonstration retrieval (top 8 by cosine for
the 250 selected queries in the remaining pool) with `mmctx.curate.retrieve.similar_demos`.

    python benchmarks/select_speed.py [--sizes 2000 10000 30000] [--no-submodlib]

A script that prints, not a test. Other processes on the machine skew the times; the load average is
printed so a reader can tell.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

MB = 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 10000, 30000])
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--k", type=int, default=250)
    parser.add_argument("--lam", type=float, default=50.0, help="paper convention; submodlib gets lam + 1")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--mem-limit-gb", type=float, default=16.0)
    parser.add_argument("--no-submodlib", action="store_true")
    parser.add_argument("--no-blockwise", action="store_true")
    parser.add_argument("--child", choices=["submodlib"], help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _submodlib_child(Path(args.data), args.k, args.lam + 1.0)
        return

    from mmctx.curate.select import select_graph_cut

    has_submodlib = not args.no_submodlib and _importable("submodlib")
    print(
        f"k = {args.k}, λ = {args.lam:g} (paper; submodlib λ = {args.lam + 1:g}), d = {args.dim}, float32, "
        f"{os.cpu_count()} CPUs, numpy {np.__version__}, load average {os.getloadavg()[0]:.2f}"
    )
    if not has_submodlib:
        print("submodlib: not run (not importable or --no-submodlib)")
    at_10k: dict[str, float] = {}
    selections: dict[int, tuple[np.ndarray, tuple[int, ...]]] = {}
    with tempfile.TemporaryDirectory(prefix="mmctx-select-") as tmp:
        for n in args.sizes:
            pool = _unit_vectors(n, args.dim, seed=n)
            seconds, peak, ours = _time_ours(lambda p=pool: select_graph_cut(p, k=args.k, lam=args.lam), args.repeats)
            selections[n] = (pool, ours.indices)
            print(
                f"n = {n:>6,}  ours closed form     {seconds:8.3f} s   peak extra {peak / MB:9.2f} MB (tracemalloc)"
                f"   ρ = {ours.rho:.3f}"
            )
            if not args.no_blockwise:
                seconds_b, peak_b, blockwise = _time_ours(
                    lambda p=pool: select_graph_cut(p, k=args.k, lam=args.lam, kernel=_linear), 1
                )
                same = "identical" if blockwise.indices == ours.indices else "DIFFERENT"
                print(
                    f"           ours blockwise kernel {seconds_b:8.3f} s   peak extra {peak_b / MB:9.2f} MB (tracemalloc)"
                    f"   order {same} to closed form"
                )
            if has_submodlib:
                result = _run_submodlib(pool, Path(tmp), args)
                if "error" in result:
                    print(
                        f"           submodlib NaiveGreedy  failed after {result['seconds']:.1f} s: {result['error']}"
                    )
                else:
                    same = "identical" if tuple(result["indices"]) == ours.indices else "DIFFERENT"
                    print(
                        f"           submodlib NaiveGreedy {result['seconds']:8.3f} s   peak extra "
                        f"{result['rss_extra'] / MB:9.2f} MB (RSS)          order {same} to ours"
                        f"   [kernel {result['kernel_s']:.2f} s + construct {result['construct_s']:.2f} s"
                        f" + maximize {result['maximize_s']:.2f} s]"
                    )
                    if n == 10_000:
                        at_10k = {"speed": result["seconds"] / seconds, "memory": result["rss_extra"] / peak}
    if at_10k:
        print(
            f"at n = 10,000: ours is {at_10k['speed']:.0f}x faster than submodlib NaiveGreedy and needs "
            f"1/{at_10k['memory']:.0f} of its peak extra memory"
        )
    largest = max(selections)
    pool, queries = selections[largest]
    _print_retrieval(pool, np.asarray(queries), args.repeats)


# -- ours ------------------------------------------------------------------------------------------


def _unit_vectors(n: int, d: int, seed: int) -> np.ndarray:
    pool = np.random.default_rng(seed).standard_normal((n, d), dtype=np.float32)
    for start in range(0, n, 4096):  # in blocks: no n×d temporary in the measured process
        block = pool[start : start + 4096]
        block /= np.sqrt(np.einsum("ij,ij->i", block, block))[:, None]
    return pool


def _linear(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a @ b.T


def _time_ours(run, repeats: int):
    """Best wall time of `repeats` runs, then one more run under tracemalloc for the peak."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - start)
    tracemalloc.start()
    run()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return best, peak, result


# -- submodlib, in a memory-capped subprocess --------------------------------------------------------


def _importable(module: str) -> bool:
    return subprocess.run([sys.executable, "-c", f"import {module}"], check=False, capture_output=True).returncode == 0


def _run_submodlib(pool: np.ndarray, tmp: Path, args: argparse.Namespace) -> dict:
    path = tmp / f"pool-{len(pool)}.npy"
    np.save(path, pool)
    limit = int(args.mem_limit_gb * 2**30)

    def cap_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    command = [sys.executable, __file__, "--child", "submodlib", "--data", str(path), "--k", str(args.k)]
    command += ["--lam", str(args.lam)]
    start = time.perf_counter()
    proc = subprocess.run(command, check=False, capture_output=True, text=True, preexec_fn=cap_memory, timeout=1800)
    elapsed = time.perf_counter() - start
    path.unlink()
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        return {
            "error": f"{tail} (exit code {proc.returncode}, RLIMIT_AS {args.mem_limit_gb:g} GB)",
            "seconds": elapsed,
        }
    return json.loads(lines[-1])


def _submodlib_child(path: Path, k: int, lam_submodlib: float) -> None:
    from submodlib import GraphCutFunction

    pool = np.load(path)
    n = len(pool)
    baseline = _peak_rss()
    start = time.perf_counter()
    # Row blocks: E @ E.T on one buffer takes OpenBLAS's syrk path, which crashes near n = 26k.
    kernel = np.empty((n, n), dtype=np.float32)
    for row in range(0, n, 4096):
        kernel[row : row + 4096] = pool[row : row + 4096] @ pool.T
    built = time.perf_counter()
    objective = GraphCutFunction(n=n, mode="dense", lambdaVal=lam_submodlib, ggsijs=kernel)
    constructed = time.perf_counter()
    picks = objective.maximize(budget=k, optimizer="NaiveGreedy", show_progress=False)
    done = time.perf_counter()
    report = {
        "indices": [int(i) for i, _ in picks],
        "seconds": done - start,
        "kernel_s": built - start,
        "construct_s": constructed - built,
        "maximize_s": done - constructed,
        "rss_extra": _peak_rss() - baseline,
    }
    print(json.dumps(report))


def _peak_rss() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024.0  # Linux reports KiB


# -- demo retrieval: mmctx.curate.retrieve.similar_demos, checked against a full lexsort ----------


def _print_retrieval(pool: np.ndarray, queries: np.ndarray, repeats: int, m: int = 8) -> None:
    from mmctx.curate.retrieve import similar_demos

    rest = np.setdiff1d(np.arange(len(pool)), queries)  # every selected query leaves the demo pool
    query_rows, pool_rows = pool[queries], pool[rest]
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        neighbours = rest[similar_demos(query_rows, pool_rows, k=m).indices]
        best = min(best, time.perf_counter() - start)
    full = rest[
        np.lexsort(
            (np.broadcast_to(np.arange(len(rest)), (len(queries), len(rest))), -(query_rows @ pool_rows.T)), axis=1
        )[:, :m]
    ]
    agree = "matches" if np.array_equal(neighbours, full) else "DIFFERS FROM"
    print(
        f"demo retrieval (mmctx similar_demos): top {m} of {len(rest):,} pool rows for {len(queries)} "
        f"queries in {best:.3f} s; {agree} a full lexsort"
    )


if __name__ == "__main__":
    main()
