"""Dropping queries from a benchmark, with the reason for each, as CLBench-V's rejection sampling does.

The caller decides which queries go and why (e.g. the items a set of blind runs answers without
vision, `mmctx.analysis.blind`); this module removes them. The benchmark is rewritten in place,
so its fingerprint changes and a run folder made on it before refuses to resume on it
(`mmctx.run.runner.open_run_manifest`). The removed records go whole into the curation log
(`mmctx.curate.log`), with their reasons, so none is lost. Dropping queries that are already
gone changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class QueryDropError(ValueError):
    """The drop cannot be applied (a query id the benchmark never had)."""


@dataclass(frozen=True)
class QueryDropOutcome:
    dropped: tuple[str, ...]  # query ids removed now
    already: tuple[str, ...]  # ids asked for that an earlier drop removed
    benchmark_sha256_before: str
    benchmark_sha256_after: str
    log_entry: dict[str, Any] | None  # None when nothing changed


def drop_queries(
    bench_root: Path,
    reasons: Mapping[str, Any],
    action: str,
    reason: str,
    **log_fields: Any,
) -> QueryDropOutcome:
    """Remove the queries ``reasons`` names (query id -> why, JSON) from the benchmark at ``bench_root``.

    ``action`` and ``reason`` head the log entry; ``log_fields`` (what the decision rests on) go with them.
    An id that is neither in the benchmark nor removed by an earlier entry of the log is refused.
    """
    from mmctx.curate.log import append_entry, read_log
    from mmctx.data.disk import load_benchmark, read_header, save_benchmark

    root = Path(bench_root)
    bench = load_benchmark(root)
    before = bench.fingerprint()
    present = {q.id for q in bench.queries}
    removed_earlier = {d["id"] for e in read_log(root) for d in e.get("dropped_queries", [])}
    unknown = sorted(set(reasons) - present - removed_earlier)
    if unknown:
        shown = ", ".join(repr(u) for u in unknown[:5]) + (" …" if len(unknown) > 5 else "")
        raise QueryDropError(f"cannot drop from {root}: {len(unknown)} query id(s) it never had: {shown}")
    todo = [q for q in bench.queries if q.id in reasons]
    already = tuple(sorted(set(reasons) - present))
    if not todo:
        return QueryDropOutcome((), already, before, before, None)
    bench.queries = [q for q in bench.queries if q.id not in reasons]
    table_format = read_header(root / "benchmark.json").get("tables", "jsonl")
    save_benchmark(bench, root, table_format)
    _refresh_layout(bench, root)
    after = bench.fingerprint()
    entry = append_entry(
        root,
        action,
        reason=reason,
        **log_fields,
        dropped_queries=[{"id": q.id, "why": reasons[q.id], "record": q.model_dump(mode="json")} for q in todo],
        benchmark_sha256_before=before,
        benchmark_sha256_after=after,
    )
    return QueryDropOutcome(tuple(q.id for q in todo), already, before, after, entry)


def _refresh_layout(bench, root: Path) -> None:
    """Rewrite the released FewMMBench layout when the folder has one, so it lists the same queries."""
    from mmctx.curate.pipeline import LAYOUT_DIR

    if (root / LAYOUT_DIR).is_dir():
        from mmctx.data.fewmmbench import save_fewmmbench_layout

        save_fewmmbench_layout(bench, root / LAYOUT_DIR, skip_unsupported=True)
