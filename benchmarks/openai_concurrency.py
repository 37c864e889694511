"""Throughput of the OpenAI-compatible backend against a local server with fixed latency, by
concurrency: through the real `mmctx run` command (the default), or the backend alone.

The test chat server (`tests/fixtures/chat_server.py`) runs in a process of its own and holds
every reply ``--latency`` seconds, a stand-in for a model's time to answer; with the server's
time dominating, throughput should grow with concurrency — at 32, at least 20x sequential.

- ``--mode run``: each measurement is ``python -m mmctx run`` on a shapes-world benchmark
  (0-shot, generate scorer: one request per query) into a fresh run folder, timed from process
  start to exit: imports, planning, the requests, the commits, scoring and the tables.
- ``--mode backend``: `OpenAIBackend` built afresh and one `generate` call over the requests.

How the numbers are made, so that a difference is the executor's and not noise or startup:

- a warm-up at each level first (imports, disk cache, first connections), not counted;
- ``--rounds`` rounds, the levels alternating, in reverse order every other round (drift
  in the machine's load falls on both sides);
- two plan sizes per level (the large one about ``--seconds`` at the ideal rate, the small about
  a quarter; both whole waves of requests, `plan_items`), so that fixed costs and the per-item
  rate are separated: rate = (items_large - items_small) / (t_large - t_small), startup =
  t_small - items_small / rate;
- medians with (min–max) over rounds; the ratio is taken per round, top level over first;
- every run must store each request once without error, and the levels must have stored
  identical outputs for the requests both asked (smaller plans are prefixes of larger ones).

    python benchmarks/openai_concurrency.py [--mode run|backend] [--latency 0.2] [--levels 1,32]
                                            [--rounds 3] [--seconds 6] [--batch-size N]
"""

from __future__ import annotations

import argparse
import math
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "tests" / "fixtures" / "chat_server.py"
MODEL = "mock-vlm"
# The sources of this checkout, not whichever mmctx the interpreter has installed.
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
sys.path.insert(0, str(ROOT / "src"))

Outputs = dict[str, tuple]  # what one measurement stored or returned, by request


@dataclass(frozen=True)
class Measured:
    seconds: float
    outputs: Outputs

    @property
    def items(self) -> int:
        return len(self.outputs)


def start_server(latency: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, str(SERVER), "--latency", str(latency)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    base_url = proc.stdout.readline().strip()
    if not base_url.startswith("http://127.0.0.1:"):
        proc.kill()
        raise RuntimeError(f"chat server did not start (said {base_url!r})")
    return proc, base_url


# ---- the two ways to measure -----------------------------------------------------------------


class ThroughRun:
    """``python -m mmctx run`` over the first ``size`` queries of each task of a shapes benchmark."""

    def __init__(self, base_url: str, work: Path, most_per_task: int, batch_size: int | None):
        from mmctx.data.shapes import build_benchmark

        self.base_url, self.work, self.batch_size = base_url, work, batch_size
        self.bench = work / "bench"
        # Every task then holds at least this many queries (some have several formats).
        build_benchmark(self.bench, queries_per_task=most_per_task, seed=0)
        self.runs = 0

    @staticmethod
    def unit() -> int:
        """Requests one step of ``size`` (``--limit``, queries per task) adds: one per task."""
        from mmctx.data.shapes import GENERATORS

        return len({task for task, _ in GENERATORS})

    def __call__(self, concurrency: int, size: int) -> Measured:
        self.runs += 1
        out = self.work / f"run{self.runs}"  # fresh: nothing stored to resume from
        command = [
            sys.executable, "-m", "mmctx", "run", str(self.bench), "--model", f"openai:{MODEL}@{self.base_url}",
            "--out", str(out), "--settings", "0-shot", "--scorers", "generate", "--limit", str(size),
            "--max-concurrency", str(concurrency), "--no-progress",
            *(["--batch-size", str(self.batch_size)] if self.batch_size else []),
        ]  # fmt: skip
        started = time.perf_counter()
        done = subprocess.run(command, env=ENV, capture_output=True, text=True)
        seconds = time.perf_counter() - started
        if done.returncode:
            raise RuntimeError(f"mmctx run failed ({done.returncode}):\n{done.stderr[-2000:]}")
        with sqlite3.connect(out / "responses.sqlite") as db:
            rows = db.execute("SELECT key, payload, error FROM responses").fetchall()
        planned = len((out / "requests.jsonl").read_text().splitlines())
        errors = [e for _, _, e in rows if e]
        if len(rows) != planned or planned != size * self.unit() or errors:
            raise RuntimeError(
                f"{out}: {len(rows)} of {planned} planned requests stored ({size * self.unit()} wanted), "
                f"{len(errors)} errors {errors[:3]}"
            )
        return Measured(seconds, {key: (payload, error) for key, payload, error in rows})


class BackendAlone:
    """`OpenAIBackend` built afresh, then one `generate` call over ``size`` requests."""

    def __init__(self, base_url: str):
        self.base_url = base_url

    @staticmethod
    def unit() -> int:
        return 1

    def __call__(self, concurrency: int, size: int) -> Measured:
        from mmctx.models.base import GenerateRequest
        from mmctx.models.openai import OpenAIBackend
        from mmctx.prompts.messages import Message, TextPart

        requests = [GenerateRequest((Message("user", (TextPart(f"question {i}"),)),), 8) for i in range(size)]
        started = time.perf_counter()
        with OpenAIBackend(MODEL, base_url=self.base_url, max_concurrency=concurrency) as backend:
            results = backend.generate(requests)
        seconds = time.perf_counter() - started
        errors = [g.error for g in results if g.error]
        if errors:
            raise RuntimeError(f"{len(errors)} of {size} requests failed: {errors[:3]}")
        return Measured(seconds, {f"question {i}": (g.text,) for i, g in enumerate(results)})


def plan_items(concurrency: int, target: float, unit: int) -> tuple[int, int]:
    """Items of the small and the large plan at one level: the large about ``target``, the small
    about a quarter of it; both whole multiples of ``concurrency`` (whole waves of requests, so a
    part-filled last wave does not bend the straight-line fit) and of ``unit`` (what one step of
    plan size adds)."""
    step = math.lcm(concurrency, unit)
    steps = max(2, round(target / step))
    return step * max(1, round(steps / 4)), step * steps


# ---- rounds and statistics -------------------------------------------------------------------


@dataclass(frozen=True)
class Fit:
    rate: float  # items per second, from the difference of the two plan sizes
    startup: float  # seconds the small plan took beyond its items at that rate


def fit(small: Measured, large: Measured) -> Fit:
    rate = (large.items - small.items) / (large.seconds - small.seconds)
    return Fit(rate, small.seconds - small.items / rate)


def spread(values: list[float], unit: str = "") -> str:
    return f"{statistics.median(values):.2f}{unit} ({min(values):.2f}–{max(values):.2f})"


def check_identical(a: Outputs, b: Outputs) -> int:
    """The number of requests both asked; raises if any of them got a different stored output."""
    common = a.keys() & b.keys()
    if common != min(a.keys(), b.keys(), key=len):
        raise RuntimeError("the smaller plan is not part of the larger: the outputs cannot be compared")
    differing = [k for k in common if a[k] != b[k]]
    if differing:
        raise RuntimeError(f"{len(differing)} of {len(common)} requests stored different outputs, e.g. {differing[0]}")
    return len(common)


def measure_rounds(
    measure: Callable[[int, int], Measured], sizes: dict[int, tuple[int, int]], rounds: int
) -> tuple[dict[int, list[Fit]], dict[int, list[Measured]], dict[int, tuple[int, int]], int]:
    """Per level, one `Fit` and the large plan's measurement per round, and the items of its two
    plans; and how many requests the levels' outputs were compared on."""
    levels = list(sizes)
    for level in levels:  # warm-up, not counted
        measure(level, sizes[level][0])
    fits: dict[int, list[Fit]] = {level: [] for level in levels}
    counts: dict[int, tuple[int, int]] = {}
    larges: dict[int, list[Measured]] = {level: [] for level in levels}
    compared = 0
    for r in range(rounds):
        for level in levels if r % 2 == 0 else reversed(levels):
            small, large = (measure(level, size) for size in sizes[level])
            fits[level].append(fit(small, large))
            counts[level] = (small.items, large.items)
            larges[level].append(large)
            print(
                f"  round {r + 1} concurrency {level:>3}: {small.items:>4} items {small.seconds:6.2f}s, "
                f"{large.items:>4} items {large.seconds:6.2f}s",
                flush=True,
            )
        compared = min(
            check_identical(larges[levels[0]][-1].outputs, larges[level][-1].outputs) for level in levels[1:]
        )
    return fits, larges, counts, compared


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["run", "backend"], default="run", help="through mmctx run, or the backend")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds the server holds every reply")
    parser.add_argument(
        "--levels", default="1,32", help="comma list of --max-concurrency values; the first is the base"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=6.0, help="about how long each large plan's requests take")
    parser.add_argument("--batch-size", type=int, default=None, help="run mode: mmctx run --batch-size (its default)")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    if len(levels) < 2 or args.rounds < 3:
        parser.error("give at least two levels and three rounds")
    target = {c: c * args.seconds / args.latency for c in levels}  # items in --seconds at the ideal rate

    kind = ThroughRun if args.mode == "run" else BackendAlone
    unit = kind.unit()
    sizes = {c: tuple(items // unit for items in plan_items(c, target[c], unit)) for c in levels}
    proc, base_url = start_server(args.latency)
    try:
        with tempfile.TemporaryDirectory(prefix="mmctx-concurrency-") as tmp:
            if args.mode == "run":
                most = max(large for _, large in sizes.values())
                measure: ThroughRun | BackendAlone = ThroughRun(base_url, Path(tmp), most, args.batch_size)
                how = f"python -m mmctx run, 0-shot generate, --batch-size {args.batch_size or 'default'}"
            else:
                measure = BackendAlone(base_url)
                how = "OpenAIBackend.generate, one call"
            print(f"server latency {args.latency * 1000:.0f} ms; {how}; warm-up, then {args.rounds} rounds", flush=True)
            fits, larges, counts, compared = measure_rounds(measure, sizes, args.rounds)
    finally:
        proc.terminate()
        proc.wait(timeout=10)

    base = levels[0]
    print(f"\n{'concurrency':>11} {'items':>10} {'startup':>20} {'per-item rate /s':>22} {'ideal /s':>9}")
    for c in levels:
        print(
            f"{c:>11} {'/'.join(str(n) for n in counts[c]):>10} {spread([f.startup for f in fits[c]], 's'):>20} "
            f"{spread([f.rate for f in fits[c]]):>22} {c / args.latency:>9.1f}"
        )
    print(f"outputs identical across levels: yes ({compared} requests compared each round)")
    for c in levels[1:]:
        whole = [lg.items / lg.seconds / (lb.items / lb.seconds) for lg, lb in zip(larges[c], larges[base])]
        print(f"end to end (large plans, startup included), concurrency {c} vs {base}: {spread(whole, 'x')}")
    top = levels[-1]
    ratios = [t.rate / b.rate for t, b in zip(fits[top], fits[base])]
    verdict = ""
    if (base, top) == (1, 32):
        verdict = " — meets the >= 20x goal" if statistics.median(ratios) >= 20 else " — MISSES the >= 20x goal"
    print(f"ratio of per-item rates, concurrency {top} vs {base}: {spread(ratios, 'x')}{verdict}")


if __name__ == "__main__":
    main()
