"""GPU check: the vLLM backend against the HF backend on the same few-shot prompts.

Builds a shapes-world benchmark and (unless ``--model`` is given) a tiny checkpoint offline,
plans a few-shot setting exactly as a run does, and sends the same requests through
`HFBackend` and `VLLMBackend` on the GPU. Prints, per scored query, max |Δ log-likelihood|
over its options (and per token); whether token counts and prompt lengths agree; how many
generated texts match; the vLLM backend's prefix-cache usage.

Exit status: 0 when every option's |Δ| is within ``--tol`` per token and the token
bookkeeping agrees exactly; 1 otherwise; 2 when vllm or CUDA is missing.

    python benchmarks/vllm_check.py [--model PATH_OR_ID] [--family FAMILY (any tiny family)]
        [--setting 4-random] [--queries 4] [--dtype bfloat16] [--tol 0.05]

The tiny checkpoint's weights are random: greedy texts can differ on near-ties in bf16, so
text mismatches are reported, not failed. Its language model is built with head size 64
(``--hidden 256``), which vLLM's attention kernels take.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@dataclass
class Requests:
    score: list  # ScoreRequest
    generate: list  # GenerateRequest
    max_images: int


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="HF model id or folder (default: a tiny checkpoint built here)")
    from mmctx.models.tiny import FAMILIES

    parser.add_argument("--family", default="idefics3", choices=FAMILIES, help="tiny checkpoint family")
    parser.add_argument("--hidden", type=int, default=256, help="tiny checkpoint width (4 heads)")
    parser.add_argument("--layers", type=int, default=2, help="tiny checkpoint depth")
    parser.add_argument("--setting", default="4-random", help="few-shot setting to plan, e.g. 4-random, 8-similar")
    parser.add_argument("--queries", type=int, default=4, help="queries per task")
    parser.add_argument("--max-new-tokens", type=int, default=12)
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument(
        "--tol", type=float, default=None, help="max |Δ| per option token (default: 0.05 bf16/fp16, 2e-3 fp32)"
    )
    parser.add_argument("--max-model-len", type=int, default=4096)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.5)
    parser.add_argument(
        "--compile", action="store_true", help="let vLLM compile and capture CUDA graphs (slower start)"
    )
    parser.add_argument("--trust-remote-code", action="store_true")
    return parser.parse_args()


def environment_problem() -> str | None:
    """Why this machine cannot run the check, or None."""
    if importlib.util.find_spec("vllm") is None:
        return "vllm is not installed: pip install 'mmctx[vllm]' on a machine with a CUDA GPU"
    import torch

    if not torch.cuda.is_available():
        return "no CUDA device: the vLLM backend needs a GPU"
    return None


def build_inputs(args: argparse.Namespace, root: Path) -> tuple[str, Requests]:
    """The model folder (or id) and the planned requests, as a run would send them."""
    from mmctx.data.shapes import build_benchmark
    from mmctx.models.base import GenerateRequest, ScoreRequest
    from mmctx.models.tiny import build_tiny_vlm
    from mmctx.models.vllm import max_images_per_prompt
    from mmctx.prompts.presets import get_preset
    from mmctx.run.plan import GenerationLimits, plan_requests
    from mmctx.run.settings import Setting

    model = args.model or str(
        build_tiny_vlm(root / "model", family=args.family, hidden=args.hidden, layers=args.layers)
    )
    bench = build_benchmark(root / "bench", queries_per_task=args.queries, seed=0)
    limits = GenerationLimits(args.max_new_tokens, args.max_new_tokens)
    plan = plan_requests(bench, [Setting.parse(args.setting)], ["generate", "ppl"], get_preset("fewmmbench"), 0, limits)
    score = [ScoreRequest(r.prompt.messages, r.prompt.options.texts) for r in plan if r.scorer == "ppl"]
    generate = [
        GenerateRequest(r.prompt.messages, r.max_new_tokens or args.max_new_tokens)
        for r in plan
        if r.scorer == "generate"
    ]
    return model, Requests(score, generate, max_images_per_prompt(r.prompt.messages for r in plan))


def run_hf(model: str, args: argparse.Namespace, requests: Requests) -> tuple[list, list, float]:
    import torch

    from mmctx.models.hf import HFBackend

    backend = HFBackend(model, device="cuda", dtype=args.dtype, trust_remote_code=args.trust_remote_code)
    started = time.perf_counter()
    scores, texts = backend.score(requests.score), backend.generate(requests.generate)
    seconds = time.perf_counter() - started
    del backend
    gc.collect()
    torch.cuda.empty_cache()  # vLLM sizes its KV cache from the memory left free
    return scores, texts, seconds


def run_vllm(model: str, args: argparse.Namespace, requests: Requests):
    from mmctx.models.vllm import VLLMBackend

    backend = VLLMBackend(
        model,
        max_images=max(1, requests.max_images),
        dtype=args.dtype,
        max_model_len=args.max_model_len,
        trust_remote_code=args.trust_remote_code,
        engine_metrics=True,
        engine_kwargs={"gpu_memory_utilization": args.gpu_memory_utilization, "enforce_eager": not args.compile},
    )
    started = time.perf_counter()
    scores, texts = backend.score(requests.score), backend.generate(requests.generate)
    return scores, texts, time.perf_counter() - started, backend.usage()


def compare_scores(hf: list, vllm: list, tol: float) -> bool:
    """Prints one line per query; True when all agree."""
    ok, worst, worst_per_token = True, 0.0, 0.0
    for i, (a, b) in enumerate(zip(hf, vllm)):
        if a.error or b.error:
            same = bool(a.error) == bool(b.error)
            ok &= same
            print(f"  query {i:3d}: errors  hf={a.error!r}  vllm={b.error!r}{'' if same else '  MISMATCH'}")
            continue
        deltas = [abs(x - y) for x, y in zip(a.loglikelihoods, b.loglikelihoods)]
        per_token = [d / max(1, n) for d, n in zip(deltas, a.token_counts)]
        structure = a.token_counts == b.token_counts and a.prompt_tokens == b.prompt_tokens
        good = structure and max(per_token) <= tol
        ok &= good
        worst, worst_per_token = max(worst, max(deltas)), max(worst_per_token, max(per_token))
        note = (
            ""
            if structure
            else f"  TOKENS hf={a.token_counts}/{a.prompt_tokens} vllm={b.token_counts}/{b.prompt_tokens}"
        )
        print(
            f"  query {i:3d}: {len(deltas)} options, {a.prompt_tokens} prompt tokens, "
            f"max |Δ ll| {max(deltas):.4f} ({max(per_token):.4f}/token){note}{'' if good else '  FAIL'}"
        )
    print(f"scores: max |Δ log-likelihood| {worst:.4f}, {worst_per_token:.4f} per token (tolerance {tol}/token)")
    return ok


def compare_generations(hf: list, vllm: list) -> None:
    same = sum(a.text == b.text and a.error == b.error for a, b in zip(hf, vllm))
    counts = sum(a.prompt_tokens == b.prompt_tokens for a, b in zip(hf, vllm))
    print(f"generation: {same}/{len(hf)} texts match, {counts}/{len(hf)} prompt lengths match")
    for a, b in [(a, b) for a, b in zip(hf, vllm) if a.text != b.text][:3]:
        print(
            f"  hf   {a.text!r} ({a.output_tokens} tokens{', truncated' if a.truncated else ''}{', ' + a.error if a.error else ''})"
        )
        print(
            f"  vllm {b.text!r} ({b.output_tokens} tokens{', truncated' if b.truncated else ''}{', ' + b.error if b.error else ''})"
        )


def report_usage(usage: dict) -> None:
    print(
        f"prefix cache: {usage['prompt_tokens_cached']}/{usage['prompt_tokens']} prompt tokens read from cache "
        f"(hit rate {usage['prefix_cache_hit_rate']:.1%}), {usage['prompt_tokens_computed']} computed, "
        f"{usage['recomputed_requests']} scoring requests recomputed"
    )
    if "engine_prefix_cache_queries" in usage:
        print(
            f"vLLM counters: {usage['engine_prefix_cache_hits']}/{usage['engine_prefix_cache_queries']} "
            f"(hit rate {usage['engine_prefix_cache_hit_rate']:.1%})"
        )


def main() -> int:
    args = parse_args()
    problem = environment_problem()
    if problem:
        print(f"vllm_check: cannot run here: {problem}", file=sys.stderr)
        return 2
    tol = args.tol if args.tol is not None else (2e-3 if args.dtype == "float32" else 0.05)
    root = Path(tempfile.mkdtemp(prefix="mmctx-vllm-check-"))
    model, requests = build_inputs(args, root)
    print(
        f"model {args.model or f'tiny {args.family} (random weights)'}, {args.dtype}, setting {args.setting}: "
        f"{len(requests.score)} scored queries, {len(requests.generate)} generations, up to {requests.max_images} images"
    )
    hf_scores, hf_texts, hf_s = run_hf(model, args, requests)
    v_scores, v_texts, v_s, usage = run_vllm(model, args, requests)
    print(f"time: HF {hf_s:.1f}s, vLLM {v_s:.1f}s (after loading)")
    ok = compare_scores(hf_scores, v_scores, tol)
    compare_generations(hf_texts, v_texts)
    report_usage(usage)
    print("OK" if ok else "FAILED: vLLM scores differ from the HF backend's")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
