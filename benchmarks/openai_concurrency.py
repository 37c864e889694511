"""Throughput of the OpenAI-compatible backend against a local server with fixed latency, by concurrency.

Starts the test chat server (`tests/fixtures/chat_server.py`) in a process of its own, so its
threads do not compete with the client for one interpreter, holds every reply ``--latency``
seconds (a stand-in for a model's time to answer), and times `OpenAIBackend.generate` over
batches sized to take about ``--seconds`` at each concurrency level. With the server's time
dominating, throughput should grow with concurrency: at 32, at least 20x sequential.

    python benchmarks/openai_concurrency.py [--latency 0.2] [--levels 1,4,16,32] [--seconds 2]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "tests" / "fixtures" / "chat_server.py"


def start_server(latency: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, str(SERVER), "--latency", str(latency)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    base_url = proc.stdout.readline().strip()
    if not base_url.startswith("http://127.0.0.1:"):
        proc.kill()
        raise RuntimeError(f"chat server did not start (said {base_url!r})")
    return proc, base_url


def throughput(base_url: str, concurrency: int, n_requests: int) -> tuple[float, int]:
    """Requests per second over one `generate` call, and how many came back as errors."""
    from mmctx.models.base import GenerateRequest
    from mmctx.models.openai import OpenAIBackend
    from mmctx.prompts.messages import Message, TextPart

    backend = OpenAIBackend("mock-vlm", base_url=base_url, max_concurrency=concurrency)
    requests = [GenerateRequest((Message("user", (TextPart(f"question {i}"),)),), 8) for i in range(n_requests)]
    started = time.perf_counter()
    results = backend.generate(requests)
    elapsed = time.perf_counter() - started
    return n_requests / elapsed, sum(1 for g in results if g.error)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.2, help="seconds the server holds every reply")
    parser.add_argument("--levels", default="1,4,16,32", help="comma list of max_concurrency values")
    parser.add_argument("--seconds", type=float, default=2.0, help="about how long each level runs")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]

    proc, base_url = start_server(args.latency)
    try:
        throughput(base_url, 4, 8)  # warm-up: imports, first connections
        print(f"server latency {args.latency * 1000:.0f} ms; ideal throughput = concurrency / latency")
        print(f"{'concurrency':>11} {'requests':>8} {'req/s':>8} {'ideal':>7} {'x sequential':>12} {'errors':>6}")
        baseline = None
        for c in levels:
            n = max(8, round(c * args.seconds / args.latency))
            rate, errors = throughput(base_url, c, n)
            baseline = baseline or rate
            print(f"{c:>11} {n:>8} {rate:>8.1f} {c / args.latency:>7.1f} {rate / baseline:>12.1f} {errors:>6}")
        top = levels[-1]
        ratio = rate / baseline
        verdict = "meets" if top < 32 or ratio >= 20 else "MISSES"
        print(f"ratio at concurrency {top} vs {levels[0]}: {ratio:.1f}x ({verdict} the >= 20x expectation at 32)")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()
