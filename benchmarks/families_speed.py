"""Option scoring per family: the path the backend chose vs one full forward per option.

For every registered tiny family (`mmctx.models.tiny.tiny_families`), builds the family's tiny
checkpoint offline at a larger size than the tests use (``--hidden 256 --layers 4``: model
compute, not Python overhead, dominates what is timed), plans 8-shot shapes-world ``ppl``
requests exactly as a run does (caption/foil with 2 options and MCQA with 4), and times
`HFBackend.score` (the fast path, after the first query has chosen it: packed, copied or
per_option) against `HFBackend.score_naive` (the unshared reference: one full forward per option
through the processor) on the same requests.

Printed per family: the path chosen, seconds for all queries each way (the two alternate query
by query, each query's best of ``--repeats``), their ratio, and the largest |Δ log-likelihood|
between the two, which must be within `mmctx.models.hf.EXACT_TOLERANCE` (1e-4 in fp32) for the
ratio to mean anything. On a machine busy with other work, ``--threads 1`` steadies the ratio.
The ratio is what carries over to real checkpoints; the seconds depend on the machine and the
tiny size.
A family whose path is ``per_option`` runs the same forwards as the reference: its ratio is
about 1 by construction. The expected ratio of a shared-prefix path is about the number of
options (one prefill per query instead of one per option).

    python benchmarks/families_speed.py [--families gemma3,qwen2_vl] [--queries 2] [--repeats 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

FORMATS = (("caption_foil", 2), ("mcqa", 4))  # (format, options): the two ways a query is asked


@dataclass
class SpeedRow:
    family: str
    path: str = ""
    queries: int = 0
    prompt_tokens: float = 0.0
    images: float = 0.0
    fast_s: float = 0.0
    naive_s: float = 0.0
    max_diff: float | None = None
    error: str = ""

    @property
    def ratio(self) -> float:
        return self.naive_s / self.fast_s if self.fast_s else float("nan")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", default="", help="comma-separated tiny families (default: every registered one)")
    parser.add_argument("--queries", type=int, default=2, help="8-shot queries per format (caption/foil, MCQA)")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats; each query's best is kept")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (default: every core)")
    parser.add_argument("--hidden", type=int, default=256, help="language model width of the tiny checkpoints")
    parser.add_argument("--layers", type=int, default=4, help="language model depth of the tiny checkpoints")
    parser.add_argument("--setting", default="8-similar", help="few-shot setting the prompts are planned with")
    return parser.parse_args()


def planned_requests(bench, setting: str, per_format: int) -> list:
    """``per_format`` ppl requests of each format in `FORMATS`, as a run plans them."""
    from mmctx.models.base import ScoreRequest
    from mmctx.prompts.presets import get_preset
    from mmctx.run.plan import GenerationLimits, plan_requests
    from mmctx.run.settings import Setting

    plan = plan_requests(bench, [Setting.parse(setting)], ["ppl"], get_preset("fewmmbench"), 0, GenerationLimits())
    chosen = []
    for fmt, n_options in FORMATS:
        matching = [r for r in plan if r.format == fmt and len(r.prompt.options.texts) == n_options]
        chosen += [ScoreRequest(r.prompt.messages, r.prompt.options.texts) for r in matching[:per_format]]
    return chosen


def measure(family: str, bench, args: argparse.Namespace, workdir: Path) -> SpeedRow:
    """One family's row; a family that cannot be built, loaded or scored is a row that says why."""
    from mmctx.models.hf import HFBackend
    from mmctx.models.tiny import build_tiny_vlm

    row = SpeedRow(family)
    try:
        checkpoint = build_tiny_vlm(workdir / family, family=family, hidden=args.hidden, layers=args.layers)
        backend = HFBackend(str(checkpoint), device="cpu", dtype="float32", batch_size=8)
        requests = planned_requests(bench, args.setting, args.queries)
        backend.score(requests[:1])  # the first scored query chooses the path (and warms up)
        row.path = backend.option_path or "undecided"
        fast, naive, row.fast_s, row.naive_s = interleaved_times(backend, requests, args.repeats)
        errors = [s.error for s in [*fast, *naive] if s.error]
        if errors:
            raise RuntimeError(errors[0])
        row.max_diff = max(
            abs(a - b) for f, n in zip(fast, naive) for a, b in zip(f.loglikelihoods, n.loglikelihoods)
        )  # fmt: skip
        row.queries = len(requests)
        row.prompt_tokens = sum(s.prompt_tokens for s in fast) / len(fast)
        row.images = sum(len(m.images) for r in requests for m in r.messages) / len(requests)
    except Exception as exc:  # noqa: BLE001 - the table goes on; the row names the failure
        row.error = f"{type(exc).__name__}: {exc}"
    return row


def interleaved_times(backend, requests: list, repeats: int) -> tuple[list, list, float, float]:
    """Both ways' scores, and their seconds summed over queries, each query's best of ``repeats``.

    The two ways alternate query by query, so a machine busy with other work slows both alike,
    and each query keeps its fastest time: the ratio of the sums is what is compared.
    """
    fast_s, naive_s = [float("inf")] * len(requests), [float("inf")] * len(requests)
    fast, naive = [], []
    for _ in range(max(1, repeats)):
        fast, naive = [], []
        for i, request in enumerate(requests):
            start = time.perf_counter()
            fast.append(backend.score([request])[0])
            middle = time.perf_counter()
            naive.append(backend.score_naive(request))
            fast_s[i] = min(fast_s[i], middle - start)
            naive_s[i] = min(naive_s[i], time.perf_counter() - middle)
    return fast, naive, sum(fast_s), sum(naive_s)


def markdown(rows: list[SpeedRow]) -> str:
    lines = [
        (
            "| family | scoring path | queries | prompt tokens (mean) | images (mean) | path s | reference s "
            "| ratio | max \\|Δ\\| |"
        ),
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r.error:
            lines.append(f"| {r.family} | **failed**: {r.error} | | | | | | | |")
            continue
        lines.append(
            f"| {r.family} | {r.path} | {r.queries} | {r.prompt_tokens:.0f} | {r.images:.1f} | {r.fast_s:.2f} "
            f"| {r.naive_s:.2f} | {r.ratio:.2f}x | {r.max_diff:.1e} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    args = parse_args()
    import torch

    from mmctx.data.shapes import build_benchmark
    from mmctx.models.tiny import tiny_families

    known = tiny_families()
    names = [n.strip() for n in args.families.split(",") if n.strip()] or list(known)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown tiny families {unknown}; registered: {', '.join(known)}")
    torch.set_num_threads(args.threads or max(1, os.cpu_count() or 1))
    workdir = Path(tempfile.mkdtemp(prefix="mmctx-families-speed-"))
    bench = build_benchmark(workdir / "bench", queries_per_task=args.queries, seed=0)
    print(
        f"CPU fp32, {torch.get_num_threads()} threads; tiny checkpoints hidden={args.hidden} layers={args.layers}; "
        f"{args.setting} ppl, {args.queries} caption/foil (2 options) + {args.queries} MCQA (4 options) queries; "
        f"best of {args.repeats}",
        flush=True,
    )
    rows = []
    for name in names:
        rows.append(measure(name, bench, args, workdir))
        r = rows[-1]
        print(f"  {name}: {r.error or f'{r.path}, ratio {r.ratio:.2f}x'}", flush=True)
    print()
    print(markdown(rows), end="")
    return 1 if any(r.error for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
