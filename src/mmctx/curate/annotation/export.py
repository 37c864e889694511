"""Which demonstrations are validated, and which annotator gets which form.

The paper samples 50 demonstrations per task at random from those with a CoT rationale and has
three annotators rate every one of them. `plan_export` does the same with a seed: per task, a
uniform sample without replacement of the demos carrying a rationale; every annotator rates
every sampled demo, each in an order of their own (so position effects do not line up across
annotators). The plan is saved as ``export.json`` beside the forms, and the filled forms are
checked against it when they come back.

Each sampled demo is recorded with a hash of what the form shows (images, text, rationale):
ratings are of that text, so a demo whose rationale was rewritten since is not dropped on the
strength of them.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mmctx.curate.annotation.criteria import CRITERIA
from mmctx.prompts.build import derived_seed
from mmctx.schema import Benchmark, ImagePathError, Sample

EXPORT_FILE = "export.json"
# Written in export.json and in every ratings file, so a stray JSON file is told apart.
FORMAT = "mmctx-demo-validation"
FORMAT_VERSION = 1


class ExportError(ValueError):
    """An export that cannot be made as asked, or an ``export.json`` that cannot be read."""


@dataclass(frozen=True)
class ExportedDemo:
    id: str
    task: str
    shown_sha256: str  # `shown_sha256` of the demo when exported


@dataclass(frozen=True)
class AnnotatorForm:
    annotator: str
    html: str  # the form's file name in the export folder
    csv: str  # the spreadsheet form's file name
    ratings: str  # the name the HTML form saves its ratings under
    order: tuple[str, ...]  # demo ids, in the order the forms show them


@dataclass(frozen=True)
class AnnotationExport:
    export_id: str
    benchmark: str  # the benchmark folder, as an absolute path when exported
    benchmark_name: str
    benchmark_sha256: str  # `Benchmark.fingerprint` when exported
    seed: int
    per_task: int  # demos asked for per task
    criteria: tuple[str, ...]
    demos: tuple[ExportedDemo, ...]
    annotators: tuple[AnnotatorForm, ...]
    short_tasks: dict[str, int] = field(default_factory=dict)  # task -> demos it had, where fewer than asked

    def demo(self, demo_id: str) -> ExportedDemo | None:
        return next((d for d in self.demos if d.id == demo_id), None)

    def form(self, annotator: str) -> AnnotatorForm | None:
        return next((a for a in self.annotators if a.annotator == annotator), None)

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": FORMAT_VERSION, **asdict(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AnnotationExport:
        return cls(
            export_id=data["export_id"],
            benchmark=data["benchmark"],
            benchmark_name=data["benchmark_name"],
            benchmark_sha256=data["benchmark_sha256"],
            seed=data["seed"],
            per_task=data["per_task"],
            criteria=tuple(data["criteria"]),
            demos=tuple(ExportedDemo(**d) for d in data["demos"]),
            annotators=tuple(AnnotatorForm(**{**a, "order": tuple(a["order"])}) for a in data["annotators"]),
            short_tasks=dict(data.get("short_tasks", {})),
        )


def shown_sha256(demo: Sample, bench: Benchmark) -> str:
    """Hash of what a form shows of ``demo``: its image files' bytes, text, options, answer, rationale."""
    h = hashlib.sha256()
    for rel in demo.images:
        h.update(hashlib.sha256(bench.image_path(rel).read_bytes()).digest())
    rationale = demo.rationale.model_dump(include={"reasoning", "answer"}) if demo.rationale else None
    shown = [demo.id, demo.question, demo.statement, demo.choices, demo.answer, rationale]
    h.update(json.dumps(shown, ensure_ascii=False).encode())
    return h.hexdigest()


def sample_demos(bench: Benchmark, per_task: int, seed: int) -> tuple[list[Sample], dict[str, int]]:
    """Per task, ``per_task`` demos with a rationale drawn uniformly without replacement.

    Returns the sample (tasks in the benchmark's order, demos in table order within a task) and
    the tasks that had fewer than ``per_task`` such demos (all of theirs are taken).
    """
    if per_task < 1:
        raise ExportError(f"--sample must be at least 1, got {per_task}")
    by_task: dict[str, list[Sample]] = {}
    for demo in bench.demos:
        if demo.rationale is not None:
            by_task.setdefault(demo.task, []).append(demo)
    if not by_task:
        raise ExportError(f"{bench.root}: no demo has a rationale; there is nothing to validate")
    order = [t for t in bench.tasks if t in by_task] + [t for t in by_task if t not in bench.tasks]
    chosen: list[Sample] = []
    short: dict[str, int] = {}
    for task in order:
        pool = by_task[task]
        if len(pool) < per_task:
            short[task] = len(pool)
        rng = random.Random(derived_seed(seed, "demo-validation", task))
        picked = set(rng.sample(range(len(pool)), min(per_task, len(pool))))
        chosen += [d for i, d in enumerate(pool) if i in picked]
    return chosen, short


def plan_export(bench: Benchmark, per_task: int, annotators: int, seed: int) -> AnnotationExport:
    """The sample, the annotators' forms and their orders; nothing is written."""
    if annotators < 2:
        raise ExportError(f"--annotators must be at least 2 (agreement needs two), got {annotators}")
    demos, short = sample_demos(bench, per_task, seed)
    ids = [d.id for d in demos]
    fingerprint = bench.fingerprint()
    key = json.dumps([fingerprint, seed, per_task, annotators, ids])
    export_id = hashlib.sha256(key.encode()).hexdigest()[:16]
    forms = []
    for n in range(1, annotators + 1):
        name = str(n)
        order = list(ids)
        random.Random(derived_seed(seed, "demo-validation-order", name)).shuffle(order)
        stem = f"annotator-{name}"
        forms.append(AnnotatorForm(name, f"{stem}.html", f"{stem}.csv", f"{stem}.ratings.json", tuple(order)))
    return AnnotationExport(
        export_id=export_id,
        benchmark=str(Path(bench.root).resolve()),
        benchmark_name=bench.name,
        benchmark_sha256=fingerprint,
        seed=seed,
        per_task=per_task,
        criteria=tuple(c.name for c in CRITERIA),
        demos=tuple(ExportedDemo(d.id, d.task, _shown_sha256_or_fail(d, bench)) for d in demos),
        annotators=tuple(forms),
        short_tasks=short,
    )


def _shown_sha256_or_fail(demo: Sample, bench: Benchmark) -> str:
    try:
        return shown_sha256(demo, bench)
    except (ImagePathError, OSError) as exc:
        raise ExportError(f"demos[{demo.id}].images: {exc}") from None


def save_export(export: AnnotationExport, folder: Path) -> Path:
    path = Path(folder) / EXPORT_FILE
    path.write_text(json.dumps(export.to_json(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def load_export(path: Path) -> AnnotationExport:
    """Read ``export.json``; errors name the file."""
    path = Path(path)
    try:
        data = json.loads(path.read_bytes().decode("utf-8-sig"))
    except FileNotFoundError:
        raise ExportError(f"{path}: no such file; pass the folder `mmctx annotate export` wrote") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ExportError(f"{path}: not a JSON file ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ExportError(f'{path}: not an export of `mmctx annotate export` (no "format": "{FORMAT}")')
    if data.get("version", 0) > FORMAT_VERSION:
        raise ExportError(f"{path}: written by a newer mmctx (version {data['version']})")
    try:
        return AnnotationExport.from_json(data)
    except (KeyError, TypeError) as exc:
        raise ExportError(f"{path}: malformed export ({type(exc).__name__}: {exc})") from None
