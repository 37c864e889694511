"""GPU check: the HF backend on CUDA in fp32 and bf16 against the same model on the CPU in fp32.

Models: the shipped reference model (``builtin:shapes-vlm``) and three tiny families
(``--families``, default idefics3, qwen2_vl, gemma3: a tiled-image Llama, multimodal RoPE, and
sliding-window layers), each built offline at its test size. Requests: 4-shot shapes-world
prompts (generate and ppl), planned exactly as ``mmctx run`` plans them.

Per model, the CPU in fp32 is the reference; then per dtype on the device:

* **fp32**: greedy generations equal the CPU's text for text; option log-likelihoods equal the
  CPU's within ``EXACT_TOLERANCE[float32]`` (TF32 is switched off, so that fp32 means fp32);
* **bf16**: the answer each query's log-likelihoods pick equals the CPU fp32 one's ("same
  answer k/n"), and the largest |Δ| from the CPU's fp32 log-likelihoods is reported, not
  checked: bf16 keeps 8 bits of mantissa, so a confident model's unlikely options move by about
  |log-likelihood| × 2^-8 per token (0.3-0.4 nats on the shipped model's -5 to -25 nats options,
  measured with CPU bf16), and no fixed tolerance separates that from a defect. Generations are
  counted, not checked (bf16 rounding flips near-ties of greedy decoding);
* both: the option-scoring path the backend chose (packed, copied or per_option) equals one full
  forward per option (`HFBackend.score_naive`) in that dtype within ``EXACT_TOLERANCE[dtype]``
  (the bf16 tolerance of the issue): the check the backend itself runs on its first query,
  repeated on other queries;
* samples/s: generation at each of ``--batch-sizes`` (default 1, 8, 32) over ``--samples``
  requests (default: the largest batch size), and ppl queries/s (the backend scores one query at
  a time, its options together), after a warm-up.

Exit status: 0 when every check passes, and also when no CUDA device is present (nothing to
check; the message says so); 1 when a check fails. With ``$OUT`` set (or ``--out``), a JSON
summary is written there (``gpu_check.json``). ``--device cpu`` runs every step with the CPU as
the "device" (a dry run of the script itself; its timings mean nothing).

Needs only torch, transformers and Pillow besides mmctx's model layer: planning prompts needs
the rest of mmctx (pydantic), so on a machine without it, plan here and carry the folder:

    python benchmarks/gpu_check.py --prepare .gpu-requests            # where mmctx is installed
    PYTHONPATH=src python benchmarks/gpu_check.py --requests .gpu-requests  # on the GPU machine

or, where all of mmctx's dependencies are installed, just ``python benchmarks/gpu_check.py``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

SHIPPED = "builtin:shapes-vlm"
DEFAULT_FAMILIES = "idefics3,qwen2_vl,gemma3"
SETTING = "4-random"
REQUESTS_FILE = "requests.json"


@dataclass
class DtypeResult:
    dtype: str
    path: str = ""
    generation_equal: str = ""  # "k/n" texts equal to the CPU fp32 reference
    ppl_max_diff: float | None = None  # vs CPU fp32, nats per option
    ppl_max_diff_per_token: float | None = None
    ppl_same_answer: str = ""  # "k/n" queries whose highest-scored option is the CPU fp32 one's
    path_vs_naive: float | None = None  # the chosen path vs one full forward per option, same dtype
    tolerance: float = 0.0
    generate_samples_per_s: dict[str, float] = field(default_factory=dict)  # batch size -> samples/s
    ppl_queries_per_s: float | None = None
    failures: list[str] = field(default_factory=list)


@dataclass
class ModelResult:
    model: str
    folder: str = ""
    seconds: float = 0.0
    dtypes: list[DtypeResult] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures and all(not d.failures for d in self.dtypes)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cpu: a dry run of every step")
    parser.add_argument("--families", default=DEFAULT_FAMILIES, help="tiny families checked besides " + SHIPPED)
    parser.add_argument("--no-shipped", action="store_true", help=f"leave out {SHIPPED}")
    parser.add_argument("--batch-sizes", default="1,8,32", help="generation batch sizes timed")
    parser.add_argument("--samples", type=int, default=0, help="requests timed per batch size (default: the largest)")
    parser.add_argument("--check-queries", type=int, default=4, help="requests per scorer compared with the CPU")
    parser.add_argument("--max-new-tokens", type=int, default=8)
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--prepare", metavar="DIR", help="only plan the requests into DIR (with their images)")
    parser.add_argument("--requests", metavar="DIR", help="read requests planned with --prepare from DIR")
    parser.add_argument("--out", help="JSON summary path (default: $OUT/gpu_check.json when OUT is set)")
    return parser.parse_args(argv)


# ---- requests: planned where mmctx is whole, read back with the model layer alone ----------------


def prepare(folder: Path, n_generate: int, n_score: int, max_new_tokens: int) -> Path:
    """Plan ``SETTING`` shapes-world requests as a run does; write them and their images under ``folder``.

    Image paths are stored relative to ``folder`` so that it can be carried to another machine.
    """
    from mmctx.data.shapes import build_benchmark
    from mmctx.prompts.presets import get_preset
    from mmctx.run.plan import GenerationLimits, plan_requests
    from mmctx.run.settings import Setting

    folder = Path(folder).resolve()
    per_task = 1
    while True:  # enough queries for the largest batch: shapes-world has about 13 (task, format) pairs
        bench = build_benchmark(folder / "bench", queries_per_task=per_task, seed=0)
        plan = plan_requests(
            bench, [Setting.parse(SETTING)], ["generate", "ppl"], get_preset("fewmmbench"), 0,
            GenerationLimits(max_new_tokens, max_new_tokens),
        )  # fmt: skip
        generate = [r for r in plan if r.scorer == "generate"]
        score = [r for r in plan if r.scorer == "ppl"]
        if len(generate) >= n_generate and len(score) >= n_score:
            break
        per_task += 1

    def messages(prompt) -> list[dict]:
        return [
            {"role": m.role, "content": [
                {"image": str(Path(p.path).resolve().relative_to(folder))} if hasattr(p, "path") else {"text": p.text}
                for p in m.content
            ]}
            for m in prompt
        ]  # fmt: skip

    data = {
        "setting": SETTING,
        "generate": [
            {"id": r.id, "messages": messages(r.prompt.messages), "max_new_tokens": max_new_tokens}
            for r in spread(generate, n_generate)
        ],
        "score": [
            {"id": r.id, "messages": messages(r.prompt.messages), "options": list(r.prompt.options.texts)}
            for r in spread(score, n_score)
        ],
    }
    (folder / REQUESTS_FILE).write_text(json.dumps(data, indent=1), encoding="utf-8")
    return folder


def spread(items: list, n: int) -> list:
    """``n`` items taken evenly across ``items`` (every task and format, not the first task's alone)."""
    if n >= len(items):
        return list(items)
    return [items[i * len(items) // n] for i in range(n)]


@dataclass
class Requests:
    generate: list  # GenerateRequest
    score: list  # ScoreRequest


def load_requests(folder: Path) -> Requests:
    """The requests written by `prepare`; a missing image or field is named before any model loads."""
    from mmctx.models.base import GenerateRequest, ScoreRequest
    from mmctx.prompts.messages import ImagePart, Message, TextPart

    folder = Path(folder).resolve()
    path = folder / REQUESTS_FILE
    if not path.exists():
        raise SystemExit(f"{path} not found: write it with `python benchmarks/gpu_check.py --prepare {folder}`")
    data = json.loads(path.read_text(encoding="utf-8"))

    def prompt(record: dict) -> tuple:
        out = []
        for m in record["messages"]:
            parts = []
            for part in m["content"]:
                if "image" in part:
                    image = folder / part["image"]
                    if not image.is_file():
                        raise SystemExit(f"{path}: request {record['id']}: image {image} is missing")
                    parts.append(ImagePart.from_path(image))
                else:
                    parts.append(TextPart(part["text"]))
            out.append(Message(m["role"], tuple(parts)))
        return tuple(out)

    try:
        return Requests(
            generate=[GenerateRequest(prompt(r), int(r["max_new_tokens"])) for r in data["generate"]],
            score=[ScoreRequest(prompt(r), tuple(r["options"])) for r in data["score"]],
        )
    except KeyError as exc:
        raise SystemExit(f"{path}: a request lacks the field {exc}") from None


# ---- models ----------------------------------------------------------------------------------


def model_folders(args: argparse.Namespace, workdir: Path) -> list[tuple[str, Callable[[], Path]]]:
    """(name, a call that returns its checkpoint folder) of every model checked; a tiny family is
    built when its turn comes, so one that cannot be built here is a failed row, not a stopped check."""
    import mmctx
    from mmctx.models.tiny import build_tiny_vlm, tiny_families

    models: list[tuple[str, Callable[[], Path]]] = []
    if not args.no_shipped:
        # The shipped checkpoint's folder, read straight from the package data (the device machine has no pydantic).
        folder = Path(mmctx.__file__).resolve().parent / "reference_models" / SHIPPED.removeprefix("builtin:")
        if not (folder / "config.json").exists():
            raise SystemExit(f"{SHIPPED}: {folder} holds no checkpoint (a checkout without the shipped models?)")
        models.append((SHIPPED, lambda: folder))
    known = tiny_families()
    for name in [n.strip() for n in args.families.split(",") if n.strip()]:
        if name not in known:
            raise SystemExit(f"unknown tiny family {name!r}; registered: {', '.join(known)}")
        models.append((f"tiny-{name}", lambda name=name: build_tiny_vlm(workdir / name, family=name)))
    return models


def check_model(name: str, checkpoint: Callable[[], Path], requests: Requests, args: argparse.Namespace) -> ModelResult:
    """One model through the CPU reference and each dtype on the device; a failure is recorded, never raised."""
    from mmctx.models.hf import HFBackend

    result = ModelResult(name)
    started = time.perf_counter()
    gen_check, score_check = requests.generate[: args.check_queries], requests.score[: args.check_queries]
    try:
        folder = checkpoint()
        result.folder = str(folder)
        cpu = HFBackend(str(folder), device="cpu", dtype="float32", batch_size=8)
        reference_texts = [g.text for g in cpu.generate(gen_check)]
        reference_scores = cpu.score(score_check)
        del cpu
        gc.collect()
    except Exception as exc:  # noqa: BLE001 - the summary says which model failed and why
        result.failures.append(f"build or CPU reference: {type(exc).__name__}: {exc}")
        result.seconds = time.perf_counter() - started
        return result
    for dtype in [d.strip() for d in args.dtypes.split(",") if d.strip()]:
        row = DtypeResult(dtype)
        result.dtypes.append(row)
        try:
            check_dtype(row, folder, requests, reference_texts, reference_scores, args)
        except Exception as exc:  # noqa: BLE001
            row.failures.append(f"{type(exc).__name__}: {exc}")
        release_device_memory(args.device)
    result.seconds = time.perf_counter() - started
    return result


def check_dtype(
    row: DtypeResult, folder: Path, requests: Requests, reference_texts: list[str], reference_scores: list,
    args: argparse.Namespace,
) -> None:  # fmt: skip
    import torch

    from mmctx.models.hf import EXACT_TOLERANCE, HFBackend

    backend = HFBackend(str(folder), device=args.device, dtype=row.dtype, batch_size=8)
    row.tolerance = EXACT_TOLERANCE[backend.dtype]
    gen_check, score_check = requests.generate[: args.check_queries], requests.score[: args.check_queries]

    texts = [g.text for g in backend.generate(gen_check)]
    equal = sum(a == b for a, b in zip(texts, reference_texts))
    row.generation_equal = f"{equal}/{len(texts)}"
    if backend.dtype == torch.float32 and equal != len(texts):
        first = next(i for i, (a, b) in enumerate(zip(texts, reference_texts)) if a != b)
        row.failures.append(f"fp32 generation differs from the CPU's: {texts[first]!r} vs {reference_texts[first]!r}")

    scores = backend.score(score_check)
    errors = [s.error for s in scores if s.error]
    if errors:
        row.failures.append(f"ppl error: {errors[0]}")
        return
    row.path = backend.option_path or ""
    diffs = [
        (abs(a - b), abs(a - b) / max(1, n))
        for s, ref in zip(scores, reference_scores)
        for a, b, n in zip(s.loglikelihoods, ref.loglikelihoods, ref.token_counts)
    ]
    row.ppl_max_diff = max(d for d, _ in diffs)
    row.ppl_max_diff_per_token = max(d for _, d in diffs)
    if backend.dtype == torch.float32 and row.ppl_max_diff > row.tolerance:
        row.failures.append(f"fp32 ppl differs from the CPU's by {row.ppl_max_diff:.2e} > {row.tolerance:g}")
    same = sum(argmax(s.loglikelihoods) == argmax(ref.loglikelihoods) for s, ref in zip(scores, reference_scores))
    row.ppl_same_answer = f"{same}/{len(scores)}"
    naive = [backend.score_naive(r) for r in score_check]
    row.path_vs_naive = max(
        abs(a - b) for s, n in zip(scores, naive) for a, b in zip(s.loglikelihoods, n.loglikelihoods)
    )  # fmt: skip
    if row.path_vs_naive > row.tolerance:
        row.failures.append(f"{row.path} path differs from one forward per option by {row.path_vs_naive:.2e}")

    sizes = [int(b) for b in args.batch_sizes.split(",") if b.strip()]
    n = args.samples or max(sizes)
    timed = (requests.generate * (1 + n // max(1, len(requests.generate))))[:n]
    for size in sizes:
        backend.batch_size = size
        backend.generate(timed[:size])  # warm-up: kernels and allocations for this batch shape
        seconds = timed_call(lambda: backend.generate(timed), args.device)
        row.generate_samples_per_s[str(size)] = round(len(timed) / seconds, 2)
    backend.batch_size = 8
    seconds = timed_call(lambda: backend.score(requests.score), args.device)
    row.ppl_queries_per_s = round(len(requests.score) / seconds, 2)


def argmax(values) -> int:
    return max(range(len(values)), key=values.__getitem__)


def timed_call(fn, device: str) -> float:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def release_device_memory(device: str) -> None:
    import torch

    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


# ---- report ----------------------------------------------------------------------------------


def print_table(results: list[ModelResult], sizes: str) -> None:
    print(
        "\n| model | dtype | path | generation = CPU | ppl max Δ vs CPU fp32 (per token) | same answer | path vs naive "
        f"| gen samples/s at batch {sizes} | ppl queries/s | ok |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for m in results:
        if not m.dtypes:
            print(f"| {m.model} | — | | | | | | | | **no**: {'; '.join(m.failures)} |")
        for d in m.dtypes:
            rates = " / ".join(f"{v:g}" for v in d.generate_samples_per_s.values()) or "—"
            diff = f"{d.ppl_max_diff:.1e} ({d.ppl_max_diff_per_token:.1e})" if d.ppl_max_diff is not None else "—"
            naive = f"{d.path_vs_naive:.1e}" if d.path_vs_naive is not None else "—"
            ok = "yes" if not d.failures else "**no**: " + "; ".join(d.failures)
            cells = [
                m.model, d.dtype, d.path or "—", d.generation_equal or "—", diff, d.ppl_same_answer or "—", naive,
                rates, d.ppl_queries_per_s if d.ppl_queries_per_s is not None else "—", ok,
            ]  # fmt: skip
            print("| " + " | ".join(map(str, cells)) + " |")


def write_summary(path: Path | None, summary: dict) -> None:
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=1), encoding="utf-8")
    print(f"summary written to {path}")


def summary_path(args: argparse.Namespace) -> Path | None:
    if args.out:
        return Path(args.out)
    return Path(os.environ["OUT"]) / "gpu_check.json" if os.environ.get("OUT") else None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = [int(b) for b in args.batch_sizes.split(",") if b.strip()]
    n_generate = max(args.samples or max(sizes), args.check_queries)
    if args.prepare:
        folder = prepare(Path(args.prepare), n_generate, max(args.check_queries, 8), args.max_new_tokens)
        print(f"requests written to {folder / REQUESTS_FILE}")
        return 0

    import torch
    import transformers

    environment = {
        "torch": torch.__version__, "transformers": transformers.__version__, "device": args.device,
        "cuda": torch.cuda.is_available(), "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }  # fmt: skip
    if args.device == "cuda" and not torch.cuda.is_available():
        message = "no CUDA device on this machine: nothing to check (--device cpu runs the same steps on the CPU)"
        print(message)
        write_summary(summary_path(args), {"status": "skipped", "reason": message, "environment": environment})
        return 0
    if args.device == "cuda":
        # fp32 must mean fp32 for the comparison with the CPU: no TF32 in matmuls or convolutions.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False

    started = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="mmctx-gpu-check-"))
    folder = Path(args.requests) if args.requests else prepare(
        workdir / "requests", n_generate, max(args.check_queries, 8), args.max_new_tokens
    )  # fmt: skip
    requests = load_requests(folder)
    print(f"{environment}; {len(requests.generate)} generate and {len(requests.score)} ppl requests ({SETTING})")
    results = []
    for name, checkpoint in model_folders(args, workdir):
        results.append(check_model(name, checkpoint, requests, args))
        print(f"  {name}: {'ok' if results[-1].passed else 'FAILED'} in {results[-1].seconds:.0f} s", flush=True)
    print_table(results, "/".join(map(str, sizes)))
    passed = all(m.passed for m in results)
    seconds = time.perf_counter() - started
    print(f"\n{'all checks passed' if passed else 'SOME CHECKS FAILED'} in {seconds:.0f} s")
    write_summary(summary_path(args), {
        "status": "passed" if passed else "failed", "seconds": round(seconds, 1), "environment": environment,
        "setting": SETTING, "models": [{**asdict(m), "passed": m.passed} for m in results],
    })  # fmt: skip
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
