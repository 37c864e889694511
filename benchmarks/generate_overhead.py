"""How much of `transformers.generate()` at batch size 1 is decoding overhead rather than the model.

The lmms-eval comparison (`vs_lmms_eval.py`) finds both tools spending about 88% of each item in
the same `generate()` call. This bounds what any faster decoder could win there: the same model
and inputs (prompts planned and processed as an mmctx run does), greedy, ``--tokens`` new tokens,
through `generate()` and through a bare loop of forward passes over a `DynamicCache` that does
nothing else (no stopping criteria, no logits processors, no end-of-sequence check, so it never
does less work than `generate()`). The two alternate over ``--rounds`` rounds after a warm-up, one
torch thread; printed: median (min–max) ms per item each, then generate / bare loop, last.

    python benchmarks/generate_overhead.py [--model builtin:tiny-llava] [--items 20] [--rounds 3]
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
    parser.add_argument("--model", default="builtin:tiny-llava")
    parser.add_argument("--items", type=int, default=20)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    import torch
    from transformers import DynamicCache

    from mmctx.data.disk import load_benchmark
    from mmctx.data.shapes import build_benchmark
    from mmctx.models import load_backend
    from mmctx.prompts.presets import get_preset
    from mmctx.run.plan import GenerationLimits, plan_requests
    from mmctx.run.settings import parse_settings

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        build_benchmark(Path(tmp), queries_per_task=2, seed=0)
        bench = load_benchmark(Path(tmp))
        plan = plan_requests(bench, parse_settings("0-shot"), ["generate"], get_preset("fewmmbench"), 0,
                             GenerationLimits(max_new_tokens=args.tokens))[: args.items]  # fmt: skip
        backend = load_backend(args.model)
        model = backend.model
        inputs = []  # exactly as the backend builds them for generation
        for r in plan:
            text, images = backend._rendered(r.prompt.messages)
            inputs.append(backend._process([text], [images]))

    def with_generate(batch: dict) -> None:
        model.generate(**batch, max_new_tokens=args.tokens, do_sample=False)

    def bare_loop(batch: dict) -> None:
        out = model(**batch, past_key_values=DynamicCache(config=model.config), use_cache=True)
        for _ in range(args.tokens - 1):
            token = out.logits[:, -1].argmax(-1, keepdim=True)
            out = model(input_ids=token, past_key_values=out.past_key_values, use_cache=True)

    sides = {"generate()": with_generate, "bare loop": bare_loop}
    times: dict[str, list[float]] = {name: [] for name in sides}
    with torch.inference_mode():
        for run in sides.values():  # warm-up
            run(inputs[0])
        for _ in range(args.rounds):
            for name, run in sides.items():
                start = time.perf_counter()
                for batch in inputs:
                    run(batch)
                times[name].append(1000 * (time.perf_counter() - start) / len(inputs))
    for name, values in times.items():
        print(f"{name:>10}: {statistics.median(values):.2f} ms per item ({min(values):.2f}–{max(values):.2f})")
    ratio = statistics.median(times["generate()"]) / statistics.median(times["bare loop"])
    print(f"generate() / bare loop: {ratio:.2f}x")


if __name__ == "__main__":
    main()
