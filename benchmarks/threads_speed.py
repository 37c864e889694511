"""torch CPU threads for a small model: wall time and CPU time per item at 1 thread vs every core.

Loads ``builtin:shapes-vlm`` (or ``--model``) once, plans 8-shot shapes-world requests as a run
does, and alternates the thread counts over ``--rounds`` rounds after a warm-up, timing
generation and option scoring of the same requests each round. Outputs must agree at
every thread count (generated text identical; log-likelihoods equal up to summation order,
whose largest difference is printed); printed per count: median (min–max) seconds per item, wall and CPU;
then the ratios, last. `mmctx.models.hf.default_threads` picks one thread below
`SMALL_MODEL_PARAMETERS` parameters on CPU on the strength of this measurement.

    python benchmarks/threads_speed.py [--queries 4] [--rounds 3] [--model builtin:shapes-vlm]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="builtin:shapes-vlm")
    parser.add_argument("--queries", type=int, default=4, help="queries per task and format")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    import torch

    from mmctx.data.shapes import build_benchmark
    from mmctx.models.base import GenerateRequest, ScoreRequest
    from mmctx.models.hf import HFBackend, usable_cores
    from mmctx.prompts.presets import get_preset
    from mmctx.run.plan import GenerationLimits, plan_requests
    from mmctx.run.settings import Setting

    bench = build_benchmark(Path(tempfile.mkdtemp(prefix="mmctx-threads-")) / "bench", queries_per_task=args.queries)
    backend = HFBackend.from_spec(args.model, device="cpu", dtype="float32")
    plan = plan_requests(
        bench, [Setting.parse("8-similar")], ["generate", "ppl"], get_preset("fewmmbench"), 0, GenerationLimits()
    )
    generate = [GenerateRequest(r.prompt.messages, 8) for r in plan if r.scorer == "generate"]
    score = [ScoreRequest(r.prompt.messages, r.prompt.options.texts) for r in plan if r.scorer == "ppl"]
    items = len(generate) + len(score)
    counts = sorted({1, usable_cores()})

    def work() -> tuple:
        return tuple(backend.generate(generate)), tuple(backend.score(score))

    outputs = {}
    for n in counts:  # warm-up, and each count's outputs
        torch.set_num_threads(n)
        outputs[n] = work()
    # Summation order follows the thread count: generations must match, log-likelihoods to rounding.
    texts = {n: [g.text for g in outputs[n][0]] for n in counts}
    same_text = all(texts[n] == texts[counts[0]] for n in counts)
    drift = max(
        abs(a - b)
        for n in counts
        for s, t in zip(outputs[n][1], outputs[counts[0]][1])
        for a, b in zip(s.loglikelihoods, t.loglikelihoods)
    )
    wall: dict[int, list[float]] = {n: [] for n in counts}
    cpu: dict[int, list[float]] = {n: [] for n in counts}
    for _ in range(args.rounds):
        for n in counts:
            torch.set_num_threads(n)
            w, c = time.perf_counter(), time.process_time()
            work()
            wall[n].append((time.perf_counter() - w) / items)
            cpu[n].append((time.process_time() - c) / items)

    params = sum(p.numel() for p in backend.model.parameters())
    print(f"model {args.model} ({params:,} parameters), CPU fp32, {usable_cores()} usable cores, {items} items")
    print(f"generations identical at every thread count: {same_text}; largest |Δ log-likelihood| {drift:.2g}")
    for n in counts:
        print(f"{n} thread(s): wall {_spread(wall[n])} ms/item, cpu {_spread(cpu[n])} ms/item")
    if len(counts) > 1:
        one, many = counts[0], counts[-1]
        print(
            f"{many} threads vs 1: wall speed-up {statistics.median(wall[one]) / statistics.median(wall[many]):.2f}x, "
            f"CPU cost {statistics.median(cpu[many]) / statistics.median(cpu[one]):.2f}x"
        )


def _spread(values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return f"{statistics.median(ms):.1f} ({min(ms):.1f}–{max(ms):.1f})"


if __name__ == "__main__":
    main()
