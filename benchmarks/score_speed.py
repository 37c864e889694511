"""Option scoring: one prefill per query (the fast path) vs one full forward per option.

Builds a shapes-world benchmark and a tiny checkpoint offline, renders 8-shot caption/foil
(2 options) and 8-shot MCQA (4 options) prompts exactly as a run does, and times
`HFBackend.score` against `HFBackend.score_naive` on the same requests. The floor of the fast
path is one prefill per query, so the expected speed-up is about the number of options.

    python benchmarks/score_speed.py [--family idefics3|llava] [--queries 6] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--family", default="idefics3", choices=["idefics3", "llava"])
    parser.add_argument("--queries", type=int, default=6, help="queries per format")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--hidden", type=int, default=256, help="language model width of the tiny checkpoint")
    parser.add_argument("--layers", type=int, default=4, help="language model depth of the tiny checkpoint")
    args = parser.parse_args()

    import torch

    from mmctx.data.shapes import build_benchmark
    from mmctx.models.base import ScoreRequest
    from mmctx.models.hf import HFBackend
    from mmctx.models.tiny import build_tiny_vlm
    from mmctx.prompts.presets import get_preset
    from mmctx.run.plan import GenerationLimits, plan_requests
    from mmctx.run.settings import Setting

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    tmp = Path(tempfile.mkdtemp(prefix="mmctx-bench-"))
    bench = build_benchmark(tmp / "bench", queries_per_task=args.queries, seed=0)
    backend = HFBackend(
        str(build_tiny_vlm(tmp / "model", family=args.family, hidden=args.hidden, layers=args.layers)),
        device="cpu",
        dtype="float32",
        batch_size=8,
    )
    plan = plan_requests(bench, [Setting.parse("8-similar")], ["ppl"], get_preset("fewmmbench"), 0, GenerationLimits())

    print(f"model: tiny {args.family}, {sum(p.numel() for p in backend.model.parameters()):,} parameters, CPU fp32")
    for fmt, n_options in (("caption_foil", 2), ("mcqa", 4)):
        reqs = [
            ScoreRequest(r.prompt.messages, r.prompt.options.texts)
            for r in plan
            if r.format == fmt and len(r.prompt.options.texts) == n_options
        ][: args.queries]
        backend.score(reqs[:1])  # warm-up
        fast = min(_timed(lambda reqs=reqs: backend.score(reqs)) for _ in range(args.repeats))
        naive = min(_timed(lambda reqs=reqs: [backend.score_naive(r) for r in reqs]) for _ in range(args.repeats))
        tokens = sum(backend.score([r])[0].prompt_tokens for r in reqs) / len(reqs)
        print(
            f"8-shot {fmt:12s} {n_options} options, {len(reqs)} queries, ~{tokens:.0f} prompt tokens: "
            f"fast {fast / len(reqs) * 1000:.1f} ms/query, naive {naive / len(reqs) * 1000:.1f} ms/query, "
            f"speed-up {naive / fast:.2f}x (floor ≈ {0.8 * n_options:.1f}x)"
        )


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
