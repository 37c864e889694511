"""Dropping the demos annotators rated below a threshold from the CoT demonstration pool.

A dropped demo loses its rationale and is marked as the rationale filter marks the ones it
rejects (``meta.rationale_status``, here ``rejected_by_annotators``, with the export, criterion,
mean and threshold under ``meta.human_validation``), so CoT settings skip it and take the next
demo with a rationale in stored order, as they do for any demo without one. The annotators
judged the demo as a CoT demonstration; it stays in the demo keys for settings without CoT.

The benchmark is rewritten in place (its fingerprint changes, so a run folder made on it before
will not resume on it: `mmctx.run.runner.open_run_manifest` refuses a different benchmark) and
the change is appended to its curation log (`mmctx.curate.log`) with the rationales removed,
so none is lost. Ratings are of the text the forms showed: a demo whose shown content changed
since the export is refused, not dropped. Dropping again with the same ratings changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mmctx.curate.annotation.criteria import criterion
from mmctx.curate.annotation.export import AnnotationExport, shown_sha256
from mmctx.curate.log import append_entry
from mmctx.schema import Benchmark, Sample

REJECTED = "rejected_by_annotators"  # the value of ``meta.rationale_status`` of a dropped demo
LOG_ACTION = "drop_rationales"


class DropError(ValueError):
    """The drop cannot be applied to this benchmark (wrong benchmark, demos changed since the export)."""


@dataclass(frozen=True)
class DropRule:
    """Drop a demo whose mean rating on ``criterion`` is below ``threshold``."""

    criterion: str
    threshold: float

    def __post_init__(self) -> None:
        criterion(self.criterion)  # an unknown name is refused here, before any form is read


@dataclass(frozen=True)
class DroppedDemo:
    demo_id: str
    criterion: str  # the first rule that fired
    mean: float
    threshold: float


@dataclass(frozen=True)
class DropOutcome:
    dropped: tuple[DroppedDemo, ...]  # dropped now
    already: tuple[str, ...]  # dropped by an earlier import of the same export
    benchmark_sha256_before: str
    benchmark_sha256_after: str
    # query id -> {demo-key strategy: demos with a rationale left}, for every list that lost one
    left_with_rationale: dict[str, dict[str, int]]
    log_entry: dict[str, Any] | None  # None when nothing changed


def demos_below(means: Mapping[str, Mapping[str, float]], rules: list[DropRule]) -> list[DroppedDemo]:
    """Demos (``means``: demo id -> criterion -> mean rating) that fall below some rule, in order."""
    out = []
    for demo_id, by_criterion in means.items():
        for rule in rules:
            mean = by_criterion[rule.criterion]
            if mean < rule.threshold:
                out.append(DroppedDemo(demo_id, rule.criterion, mean, rule.threshold))
                break
    return out


def drop_rationales(
    bench_root: Path,
    export: AnnotationExport,
    export_dir: Path,
    rules: list[DropRule],
    below: list[DroppedDemo],
    summary: dict[str, Any],
) -> DropOutcome:
    """Remove the rationales of ``below`` from the benchmark at ``bench_root`` and log it.

    ``summary`` (the agreement statistics the decision rests on) goes into the log entry.
    """
    from mmctx.data.disk import load_benchmark, read_header, save_benchmark

    bench = load_benchmark(bench_root)
    before = bench.fingerprint()
    index = {d.id: i for i, d in enumerate(bench.demos)}
    problems, already, todo = [], [], []
    for item in below:
        if item.demo_id not in index:
            problems.append(f"demo {item.demo_id!r} is not in {bench_root}")
            continue
        demo = bench.demos[index[item.demo_id]]
        if _dropped_by(demo, export):
            already.append(item.demo_id)
            continue
        exported = export.demo(item.demo_id)
        if exported is None or shown_sha256(demo, bench) != exported.shown_sha256:
            problems.append(
                f"demo {item.demo_id!r} changed since export {export.export_id}: its ratings are of other content"
            )
            continue
        todo.append((item, demo))
    if problems:
        raise DropError(f"cannot drop from {bench_root}:\n" + "\n".join(f"  - {p}" for p in problems))
    if not todo:
        return DropOutcome((), tuple(already), before, before, {}, None)

    removed = []
    for item, demo in todo:
        meta = {
            **demo.meta,
            "rationale_status": REJECTED,
            "human_validation": {"export_id": export.export_id, **asdict(item)},
        }
        bench.demos[index[item.demo_id]] = demo.model_copy(update={"rationale": None, "meta": meta})
        removed.append({**asdict(item), "rationale": demo.rationale.model_dump() if demo.rationale else None})
    table_format = read_header(Path(bench_root) / "benchmark.json").get("tables", "jsonl")
    save_benchmark(bench, bench_root, table_format)
    _refresh_layout(bench, Path(bench_root))
    after = bench.fingerprint()
    entry = append_entry(
        bench_root,
        LOG_ACTION,
        reason="human validation of demonstrations (FewMMBench appendix B.3)",
        export_id=export.export_id,
        export_dir=str(Path(export_dir).resolve()),
        rules=[asdict(r) for r in rules],
        dropped=removed,
        benchmark_sha256_before=before,
        benchmark_sha256_after=after,
        agreement=summary,
    )
    left = _left_with_rationale(bench, {item.demo_id for item, _ in todo})
    return DropOutcome(tuple(item for item, _ in todo), tuple(already), before, after, left, entry)


def _dropped_by(demo: Sample, export: AnnotationExport) -> bool:
    record = demo.meta.get("human_validation")
    return demo.rationale is None and isinstance(record, dict) and record.get("export_id") == export.export_id


def _left_with_rationale(bench: Benchmark, dropped: set[str]) -> dict[str, dict[str, int]]:
    """Per query and demo-key list that held a dropped demo, how many demos with a rationale it has left."""
    out: dict[str, dict[str, int]] = {}
    for query in bench.queries:
        for strategy, keys in query.demo_keys.items():
            if dropped.intersection(keys):
                out.setdefault(query.id, {})[strategy] = sum(bench.demo(k).rationale is not None for k in keys)
    return out


def _refresh_layout(bench: Benchmark, root: Path) -> None:
    """Rewrite the released FewMMBench layout when the folder has one, so its rationales match."""
    from mmctx.curate.pipeline import LAYOUT_DIR

    if (root / LAYOUT_DIR).is_dir():
        from mmctx.data.fewmmbench import save_fewmmbench_layout

        save_fewmmbench_layout(bench, root / LAYOUT_DIR, skip_unsupported=True)
