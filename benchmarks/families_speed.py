"""Option scoring per family: the path the backend chose vs one full forward per option.

For every registered tiny family (`mmctx.models.tiny.tiny_families`), built offline at a larger
size than the tests use (``--hidden 256 --layers 4``: model compute, not Python overhead,
dominates), and for the shipped ``builtin:shapes-vlm`` as it ships, plans 8-shot shapes-world
``ppl`` requests exactly as a run does (caption/foil with 2 options, MCQA with 4) and times
`HFBackend.score` (the fast path: packed, copied or per_option, as the model's first query chose)
against `HFBackend.score_naive` (the unshared reference: one full forward per option through the
processor) on the same requests.

How it is timed, so that a machine busy with other work slows both sides alike: one warm-up
query each way (which also chooses the path), then ``--rounds`` rounds, each scoring every one
of a format's queries both ways back to back, which way first alternating from query to query
and from round to round. Each round gives one ratio (reference seconds / path seconds, summed
over its queries); printed is their median (min–max).
Every round's scores are compared: token counts and prompt tokens must be identical and the
largest |Δ log-likelihood| within `mmctx.models.hf.EXACT_TOLERANCE` (1e-4 in fp32), or the row
fails. The expected ratio of a shared-prefix path is about the number of options (one prefill
per query instead of one per option); the goal printed is 0.8 × options. A ``per_option`` model
runs the reference's own forwards: its ratio is about 1 by construction.

    python benchmarks/families_speed.py [--models llava,builtin:shapes-vlm] [--queries 3] [--rounds 5] [--threads 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

FORMATS = (("caption_foil", 2), ("mcqa", 4))  # (format, options): the two ways a query is asked
SHIPPED = "builtin:shapes-vlm"
GOAL = 0.8  # the fast path must be at least this many times the number of options faster


@dataclass
class SpeedRow:
    """One model on one format: per-round ratios and how far the two sides' scores differ."""

    model: str
    options: int
    path: str = ""
    queries: int = 0
    prompt_tokens: float = 0.0
    fast_s: list[float] = field(default_factory=list)
    naive_s: list[float] = field(default_factory=list)
    max_diff: float = 0.0
    error: str = ""

    @property
    def ratios(self) -> list[float]:
        return [n / f for f, n in zip(self.fast_s, self.naive_s)]

    @property
    def ratio(self) -> float:
        return statistics.median(self.ratios) if self.ratios else float("nan")

    @property
    def goal_met(self) -> bool:
        return self.ratio >= GOAL * self.options

    def line(self) -> str:
        if self.error:
            return f"{self.model:16s} {self.options} options: failed: {self.error}"
        r = self.ratios
        return (
            f"{self.model:16s} {self.options} options  {self.path:10s} {self.queries} queries, "
            f"~{self.prompt_tokens:.0f} prompt tokens  fast {statistics.median(self.fast_s) / self.queries * 1e3:6.1f} "
            f"ms/query  naive {statistics.median(self.naive_s) / self.queries * 1e3:6.1f} ms/query  "
            f"max |Δll| {self.max_diff:.1e}  goal ≥{GOAL * self.options:.1f}x "
            f"{'met' if self.goal_met else 'NOT met'}  ratio {self.ratio:.2f}x ({min(r):.2f}–{max(r):.2f})"
        )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--models", default="", help=f"comma-separated tiny families and/or {SHIPPED} (default: all of them)"
    )
    parser.add_argument("--queries", type=int, default=3, help="8-shot queries per format (caption/foil, MCQA)")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds per format (at least 3)")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (default: every core)")
    parser.add_argument("--hidden", type=int, default=256, help="language model width of the tiny checkpoints")
    parser.add_argument("--layers", type=int, default=4, help="language model depth of the tiny checkpoints")
    parser.add_argument("--setting", default="8-similar", help="few-shot setting the prompts are planned with")
    args = parser.parse_args(argv)
    if args.rounds < 3:
        parser.error("--rounds must be at least 3: one round's ratio says little on a shared machine")
    return args


def planned_requests(bench, setting: str, fmt: str, n_options: int, count: int) -> list:
    """``count`` ppl requests of ``fmt`` with ``n_options`` options, as a run plans them."""
    from mmctx.models.base import ScoreRequest
    from mmctx.prompts.presets import get_preset
    from mmctx.run.plan import GenerationLimits, plan_requests
    from mmctx.run.settings import Setting

    plan = plan_requests(bench, [Setting.parse(setting)], ["ppl"], get_preset("fewmmbench"), 0, GenerationLimits())
    matching = [r for r in plan if r.format == fmt and len(r.prompt.options.texts) == n_options]
    return [ScoreRequest(r.prompt.messages, r.prompt.options.texts) for r in matching[:count]]


def load(model: str, args: argparse.Namespace, workdir: Path):
    """The HF backend of a tiny family (built at the benchmark's size) or of a built-in model."""
    from mmctx.models.hf import HFBackend
    from mmctx.models.tiny import build_tiny_vlm

    if model.startswith("builtin:"):
        return HFBackend.from_spec(model, device="cpu", dtype="float32", batch_size=8)
    checkpoint = build_tiny_vlm(workdir / model, family=model, hidden=args.hidden, layers=args.layers)
    return HFBackend(str(checkpoint), device="cpu", dtype="float32", batch_size=8)


def measure(model: str, bench, args: argparse.Namespace, workdir: Path) -> list[SpeedRow]:
    """One row per format; a model that cannot be built, loaded or scored gives rows that say why."""
    rows = [SpeedRow(model, n) for _, n in FORMATS]
    try:
        backend = load(model, args, workdir)
    except Exception as exc:  # noqa: BLE001 - the table goes on; the row names the failure
        for row in rows:
            row.error = f"{type(exc).__name__}: {exc}"
        return rows
    for row, (fmt, n_options) in zip(rows, FORMATS):
        try:
            requests = planned_requests(bench, args.setting, fmt, n_options, args.queries)
            if not requests:
                raise RuntimeError(f"no {fmt} request with {n_options} options was planned")
            time_rounds(backend, requests, args.rounds, row)
        except Exception as exc:  # noqa: BLE001
            row.error = f"{type(exc).__name__}: {exc}"
    return rows


def time_rounds(backend, requests: list, rounds: int, row: SpeedRow) -> None:
    """Warm up, then ``rounds`` rounds; fills ``row`` and checks that both sides agree.

    Within a round each query is scored both ways back to back, which way first alternating
    from query to query and from round to round, so that a burst of other work on the machine
    lands on both sides alike; a round's ratio is of its summed seconds.
    """
    from mmctx.models.hf import EXACT_TOLERANCE

    sides = {"fast": lambda r: backend.score([r])[0], "naive": backend.score_naive}
    backend.score(requests[:1])  # a model's first scored query chooses its path
    backend.score_naive(requests[0])
    row.path, row.queries = backend.option_path or "undecided", len(requests)
    for i in range(rounds):
        results: dict[str, list] = {"fast": [], "naive": []}
        seconds = {"fast": 0.0, "naive": 0.0}
        for j, request in enumerate(requests):
            for side in ("fast", "naive") if (i + j) % 2 == 0 else ("naive", "fast"):
                start = time.perf_counter()
                results[side].append(sides[side](request))
                seconds[side] += time.perf_counter() - start
        row.fast_s.append(seconds["fast"])
        row.naive_s.append(seconds["naive"])
        row.max_diff = max(row.max_diff, compare(results["fast"], results["naive"]))
    tolerance = EXACT_TOLERANCE[backend.dtype]
    if not row.max_diff <= tolerance:
        raise RuntimeError(f"scores differ by {row.max_diff:.2e} nats (tolerance {tolerance:g})")
    row.prompt_tokens = sum(s.prompt_tokens for s in results["fast"]) / len(requests)


def compare(fast: list, naive: list) -> float:
    """The largest |Δ log-likelihood|; token counts, prompt tokens and errors must be identical."""
    for f, n in zip(fast, naive, strict=True):
        if f.error or n.error:
            raise RuntimeError(f.error or n.error)
        if (f.token_counts, f.prompt_tokens) != (n.token_counts, n.prompt_tokens):
            raise RuntimeError(
                f"token counts / prompt tokens differ: {f.token_counts}/{f.prompt_tokens} "
                f"vs {n.token_counts}/{n.prompt_tokens}"
            )
    return max(abs(a - b) for f, n in zip(fast, naive) for a, b in zip(f.loglikelihoods, n.loglikelihoods))


def markdown(rows: list[SpeedRow]) -> str:
    lines = [
        "| model | options | scoring path | prompt tokens (mean) | fast ms/query | reference ms/query "
        "| max \\|Δ\\| | goal (0.8 × options) | ratio, median (min–max) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r.error:
            lines.append(f"| {r.model} | {r.options} | **failed**: {r.error} | | | | | | |")
            continue
        fast, naive = (statistics.median(s) / r.queries * 1e3 for s in (r.fast_s, r.naive_s))
        lines.append(
            f"| {r.model} | {r.options} | {r.path} | {r.prompt_tokens:.0f} | {fast:.1f} | {naive:.1f} "
            f"| {r.max_diff:.1e} | {GOAL * r.options:.1f}x {'met' if r.goal_met else '**not met**'} "
            f"| {r.ratio:.2f}x ({min(r.ratios):.2f}–{max(r.ratios):.2f}) |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    from mmctx.data.shapes import build_benchmark
    from mmctx.models.tiny import tiny_families

    known = [*tiny_families(), SHIPPED]
    names = [n.strip() for n in args.models.split(",") if n.strip()] or known
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown models {unknown}; choose from {', '.join(known)}")
    torch.set_num_threads(args.threads or max(1, os.cpu_count() or 1))
    workdir = Path(tempfile.mkdtemp(prefix="mmctx-families-speed-"))
    bench = build_benchmark(workdir / "bench", queries_per_task=max(args.queries, 2), seed=0)
    print(
        f"CPU fp32, {torch.get_num_threads()} threads; tiny checkpoints hidden={args.hidden} layers={args.layers}, "
        f"{SHIPPED} as shipped; {args.setting} ppl, {args.queries} queries per format; "
        f"{args.rounds} alternating rounds after a warm-up; ratio = reference s / fast s, median (min–max)",
        flush=True,
    )
    rows = []
    for name in names:
        for row in measure(name, bench, args, workdir):
            rows.append(row)
            print(row.line(), flush=True)
    print()
    print(markdown(rows), end="")
    return 1 if any(r.error for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
