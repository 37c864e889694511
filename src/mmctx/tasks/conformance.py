"""Family conformance: every tiny family through the real run paths, checked against the model itself.

`check_family` builds a family's tiny checkpoint (`mmctx.models.tiny`), a small shapes-world
benchmark, and runs the whole few-shot grid (0/4/8-shot, random and similar demos, similar with
CoT) with both scorers through `mmctx.tasks.fewshot.evaluate`, exactly as ``mmctx run`` does. Then
it checks what a user of that family relies on:

* **loads**: the checkpoint loads through its family adapter (named in the row);
* **generate**: every generation is stored without error and holds only new text (neither the
  query's question echoed back nor a special token);
* **ppl exact**: on the largest prompts (8-shot), the run's stored option log-likelihoods equal
  one full forward per option through the processor (`HFBackend.score_naive`) within 1e-4 in
  fp32, and a fresh backend with batch size 1 gives the same scores as batch size N;
* **path**: which option-scoring path the backend chose (packed, copied or per option);
* **images**: every image of every prompt reaches the processor in prompt order, each demo's
  images inside its own user turn, and the processor accepts them (it checks placeholders
  against images);
* **context**: one multi-image CLBench-V toy subset (MIRBench) through the context-run path
  ends with no ``error`` outcome.

``mmctx models --check`` prints the rows as a Markdown table (`conformance_markdown`).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

TOLERANCE = 1e-4
GRID = "0-shot,4-random,4-similar,4-similar-cot,8-random,8-similar,8-similar-cot"
TASKS = ["attribute_recognition", "counting"]
CONTEXT_SUBSET = "MIRBench"


@dataclass
class FamilyRow:
    family: str
    mirrors: str = ""
    adapter: str = ""
    loads: bool = False
    generate: bool = False
    ppl_exact: bool = False
    ppl_max_diff: float | None = None
    path: str = ""
    images: bool = False
    max_images: int = 0
    context: bool = False
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.loads and self.generate and self.ppl_exact and self.images and self.context


def check_family(name: str, workdir: Path, queries_per_task: int = 1) -> FamilyRow:
    """Build, run and check one registered tiny family under ``workdir``; never raises for a model failure."""
    from mmctx.models.tiny import build_tiny_vlm, tiny_families

    family = tiny_families()[name]
    row = FamilyRow(family=name, mirrors=family.mirrors)
    workdir = Path(workdir)
    started = time.perf_counter()
    try:
        checkpoint = build_tiny_vlm(workdir / "checkpoint", family=name)
        backend = _load(checkpoint, batch_size=4)
        row.loads, row.adapter = True, backend.adapter.family
        bench = _benchmark(workdir / "bench", queries_per_task)
        _grid(row, backend, bench, workdir / "run")
        _context(row, backend, workdir)
    except Exception as exc:  # noqa: BLE001 - a family that fails is a row that says why
        row.problems.append(f"{type(exc).__name__}: {exc}")
    row.seconds = time.perf_counter() - started
    return row


def _load(checkpoint: Path, batch_size: int):
    from mmctx.models.hf import HFBackend

    return HFBackend(str(checkpoint), device="cpu", dtype="float32", batch_size=batch_size)


def _benchmark(out: Path, queries_per_task: int):
    from mmctx.data.disk import load_benchmark
    from mmctx.data.shapes import build_benchmark

    if not (out / "benchmark.json").exists():
        build_benchmark(out, queries_per_task=queries_per_task, seed=0)
    return load_benchmark(out)


def _grid(row: FamilyRow, backend, bench, run_dir: Path) -> None:
    from mmctx.models.base import ScoreRequest
    from mmctx.models.store import ResponseStore
    from mmctx.run.plan import GenerationLimits
    from mmctx.tasks.fewshot import evaluate

    evaluate(
        bench.root, str(backend.info.name), run_dir, settings=GRID, scorers="generate,ppl", tasks=TASKS,
        limits=GenerationLimits(8, 24), batch_size=4, device="cpu", dtype="float32", show_progress=False,
        backend_factory=lambda *a, **k: backend,
    )  # fmt: skip
    plan = _plan(bench)
    with ResponseStore(run_dir / "responses.sqlite") as store:
        generated, scored = store.by_kind("generate"), store.by_kind("ppl")
    row.path = backend.option_path or ""
    gen_errors = [rid for rid, g in generated.items() if g["error"]]
    questions = {r.id: _last_user_text(r.prompt.messages) for r in plan if r.scorer == "generate"}
    echoes = [rid for rid, g in generated.items() if _echoes(g.get("text") or "", questions.get(rid, ""), backend)]
    row.generate = bool(generated) and not gen_errors and not echoes
    if gen_errors:
        row.problems.append(f"generate errors: {generated[gen_errors[0]]['error']}")
    if echoes:
        row.problems.append(f"generations holding special tokens or the prompt: {echoes[:3]}")
    ppl_errors = [rid for rid, s in scored.items() if s["error"]]
    if ppl_errors:
        row.problems.append(f"ppl errors: {scored[ppl_errors[0]]['error']}")
    largest = [r for r in plan if r.scorer == "ppl" and r.setting.startswith("8-")][:3]
    one = _load(Path(backend.info.name), batch_size=1)
    diffs = []
    for r in largest:
        request = ScoreRequest(r.prompt.messages, r.prompt.options.texts)
        naive = backend.score_naive(request).loglikelihoods
        stored = scored[r.id]["loglikelihoods"]
        alone = one.score([request])[0].loglikelihoods
        diffs += [abs(a - b) for a, b in zip(stored, naive)] + [abs(a - b) for a, b in zip(alone, stored)]
    row.ppl_max_diff = max(diffs) if diffs else None
    row.ppl_exact = bool(diffs) and not ppl_errors and row.ppl_max_diff <= TOLERANCE
    row.images, row.max_images = _images_in_order(row, backend, plan)


def _plan(bench):
    from mmctx.prompts.presets import get_preset
    from mmctx.run.plan import GenerationLimits, plan_requests
    from mmctx.run.settings import parse_scorers, parse_settings

    return plan_requests(
        bench, parse_settings(GRID), parse_scorers("generate,ppl"), get_preset("fewmmbench"), 0,
        GenerationLimits(8, 24), tasks=TASKS,
    )  # fmt: skip


def _echoes(text: str, question: str, backend) -> bool:
    """Whether a generation holds a special token or the prompt's last question (decoding kept more than new tokens).

    Decoding strips special tokens, so an echoed prompt shows by its text: a random-weight model
    does not write the query's question back by chance.
    """
    specials = [t for t in backend.tokenizer.all_special_tokens if len(t) > 1]
    return any(t in text for t in specials) or (len(question) >= 12 and question in text)


def _last_user_text(messages) -> str:
    user = [m for m in messages if m.role == "user"]
    return user[-1].text.strip() if user else ""


def _images_in_order(row: FamilyRow, backend, plan) -> tuple[bool, int]:
    """Every prompt's images reach the processor in order, each inside the turn that shows it."""
    most, ok = 0, True
    checked = 0
    for r in plan:
        parts = [p for m in r.prompt.messages for p in m.images]
        most = max(most, len(parts))
        conversation, pictures = backend._hf_messages(r.prompt.messages)
        per_turn = [sum(1 for c in m["content"] if c["type"] == "image") for m in conversation]
        expected = [len(m.images) for m in r.prompt.messages]
        sent = [hashlib.sha256(p.tobytes()).hexdigest() for p in pictures]
        shown = [_pixels_hash(p.path) for p in parts]
        if per_turn != expected or sent != shown:
            row.problems.append(f"{r.id}: images out of order or out of their turns")
            ok = False
        if checked < 2 and r.setting.startswith("8-"):  # the processor checks placeholders against images
            backend._process([backend._template(conversation, True)], [pictures])
            checked += 1
    return ok, most


def _pixels_hash(path) -> str:
    from PIL import Image

    with Image.open(path) as im:
        return hashlib.sha256(im.convert("RGB").tobytes()).hexdigest()


def _context(row: FamilyRow, backend, workdir: Path) -> None:
    from mmctx.data.clbench.toy import write_toy_suite
    from mmctx.tasks.context import ContextConfig, run_context

    suite = write_toy_suite(workdir / "suite")
    config = ContextConfig(
        suite=str(workdir / "suite"), suite_name=suite.name, suite_sha256=suite.fingerprint(), max_new_tokens=16,
        subsets=[CONTEXT_SUBSET], batch_size=2,
    )  # fmt: skip
    stats = run_context(suite, backend, workdir / "context-run", config, show_progress=False)
    row.context = stats.planned > 0 and stats.outcomes.get("error", 0) == 0 and stats.errors == 0
    if not row.context:
        row.problems.append(f"context run outcomes {stats.outcomes}")


def conformance_markdown(rows: list[FamilyRow], remote_only: list[tuple[str, str]] = ()) -> str:
    """The conformance table; ``remote_only`` lists (family, why) rows that are not checked."""

    def mark(ok: bool) -> str:
        return "yes" if ok else "**no**"

    lines = [
        "| family | mirrors | adapter | loads | generate | ppl exact (max diff) | scoring path | images in order"
        " | max images | context run | seconds |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        diff = f"{r.ppl_max_diff:.1e}" if r.ppl_max_diff is not None else "—"
        lines.append(
            f"| {r.family} | {r.mirrors} | {r.adapter or '—'} | {mark(r.loads)} | {mark(r.generate)} | "
            f"{mark(r.ppl_exact)} ({diff}) | {r.path or '—'} | {mark(r.images)} | {r.max_images} | "
            f"{mark(r.context)} | {r.seconds:.0f} |"
        )
    for name, why in remote_only:
        lines.append(f"| {name} (remote code) | — | {name} | not checked: {why} | | | | | | | |")
    return "\n".join(lines) + "\n"


TABLE_BEGIN, TABLE_END = "<!-- conformance-table:begin -->", "<!-- conformance-table:end -->"


class UnknownFamily(ValueError):
    pass


def check_families(
    families: list[str] | None, on_start: Callable[[str], None] = lambda name: None
) -> tuple[list[FamilyRow], list[tuple[str, str]]]:
    """Build each tiny family (all by default) in a scratch folder and check it; also the adapters
    left unchecked because they run a repository's own code, as (family, why) pairs."""
    import tempfile

    from mmctx.models.adapters import all_adapters
    from mmctx.models.tiny import tiny_families

    known = tiny_families()
    unknown = [f for f in families or [] if f not in known]
    if unknown:
        raise UnknownFamily(f"unknown tiny family {unknown[0]!r}; choose from {', '.join(known)}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="mmctx-check-") as scratch:
        for name in families or list(known):
            on_start(name)
            rows.append(check_family(name, Path(scratch) / name))
    remote = [(a.family, "runs its own code (stub-processor rendering tests only)") for a in all_adapters()
              if a.needs_remote_code]  # fmt: skip
    return rows, remote


def with_table(path: Path, table: str) -> str:
    """``path``'s text with the table between its markers replaced (docs/families.md); the table alone otherwise."""
    old = path.read_text() if path.exists() else ""
    if TABLE_BEGIN not in old or TABLE_END not in old:
        return table
    head, rest = old.split(TABLE_BEGIN, 1)
    return f"{head}{TABLE_BEGIN}\n{table}{TABLE_END}{rest.split(TABLE_END, 1)[1]}"
