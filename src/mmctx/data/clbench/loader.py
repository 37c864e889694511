"""Read and write a CLBench-V-style suite: one JSONL of normalised records + an images folder.

    SUITE/
      samples.jsonl   one record per line (every ``*.jsonl`` in the folder is read, sorted)
      images/...      files referenced by relative path

A record (the paper's "unified normalized record"; its code is not public, so this is ours):

    {"id": "rm-short-0001", "subset": "ReasonMap-Short",
     "context": [{"type": "text", "text": "...", "title": ""}, {"type": "image", "path": "images/map.png"}],
     "question": "According to the subway map, ...",
     "gold": {...}, "answer": "display text",
     "answer_type": "route", "evaluator": "route", "level": "L0",      # default: the subset's
     "choices": [...], "meta": {...}}

Instead of ``context`` a record may carry the paper's own form, a ``query`` whose ``<image>``
placeholders are replaced by ``images`` in order. ``answer_type``, ``evaluator`` and ``level``
default to the registry's values for a known subset (`mmctx.data.clbench.suite`); a record of an
unknown subset must give all three.

Structural errors (bad JSON, a missing id or subset, an unknown block type) stop loading with
the file, line and field. Content problems (an empty rubric list, a missing image) do not: the
record loads, `Benchmark.validate` names it, and a run scores it ``invalid_sample``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mmctx.data.clbench.suite import subset_or_none
from mmctx.schema import Benchmark, ContextBlock, Sample

SAMPLES_FILE = "samples.jsonl"
IMAGE_PLACEHOLDER = "<image>"


class SuiteFormatError(ValueError):
    """A record that cannot be read at all; names the file, line and field."""


def load_clbench(path: Path, name: str | None = None) -> Benchmark:
    """A suite folder (or one ``.jsonl`` file beside its images) as a `Benchmark` of open queries."""
    path = Path(path)
    files = [path] if path.is_file() else sorted(path.glob("*.jsonl"))
    root = path.parent if path.is_file() else path
    if not files:
        raise SuiteFormatError(f"{path}: no .jsonl records found")
    samples = [s for f in files for s in _read_file(f)]
    return Benchmark(name=name or root.name, queries=samples, demos=[], root=root, description="CLBench-V-style suite")


def _read_file(path: Path) -> list[Sample]:
    out = []
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            where = f"{path}:{lineno}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise SuiteFormatError(f"{where}: not UTF-8 ({exc})") from None
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise SuiteFormatError(f"{where}: not JSON ({exc})") from None
            out.append(record_to_sample(record, where))
    return out


def record_to_sample(record: dict[str, Any], where: str = "record") -> Sample:
    if not isinstance(record, dict):
        raise SuiteFormatError(f"{where}: a record must be a JSON object")
    rid = record.get("id")
    if not isinstance(rid, str) or not rid.strip():
        raise SuiteFormatError(f"{where}: field 'id' is missing or empty")
    where = f"{where} [{rid}]"
    subset = record.get("subset")
    if not isinstance(subset, str) or not subset.strip():
        raise SuiteFormatError(f"{where}: field 'subset' is missing or empty")
    known = subset_or_none(subset)
    defaults = {"answer_type": known.answer_type, "evaluator": known.evaluator, "level": known.level} if known else {}
    missing = [k for k in ("answer_type", "evaluator", "level") if not record.get(k) and k not in defaults]
    if missing:
        raise SuiteFormatError(
            f"{where}: subset {subset!r} is not a CLBench-V subset, so the record must give {missing}"
        )
    blocks = _blocks(record, where)
    gold = record.get("gold")
    answer = record.get("answer")
    if answer is None:
        answer = _display(gold)
    try:
        return Sample(
            id=rid,
            task=known.name if known else subset,
            source=known.name if known else subset,
            format="open",
            question=str(record.get("question", "")),
            choices=[str(c) for c in record.get("choices", [])],
            answer=str(answer),
            blocks=blocks,
            answer_type=record.get("answer_type") or defaults.get("answer_type"),
            gold=gold,
            evaluator=record.get("evaluator") or defaults["evaluator"],
            level=record.get("level") or defaults["level"],
            meta=dict(record.get("meta") or {}),
        )
    except ValueError as exc:
        raise SuiteFormatError(f"{where}: {exc}") from None


def _blocks(record: dict[str, Any], where: str) -> list[ContextBlock]:
    if "context" in record and "query" in record:
        raise SuiteFormatError(
            f"{where}: give either 'context' blocks or a 'query' with <image> placeholders, not both"
        )
    if "query" in record:
        return blocks_from_query(str(record["query"]), list(record.get("images") or []), where)
    blocks = []
    for i, b in enumerate(record.get("context") or []):
        kind = b.get("type") if isinstance(b, dict) else None
        if kind == "text":
            blocks.append(ContextBlock(kind="text", text=str(b.get("text", "")), title=str(b.get("title", ""))))
        elif kind == "image":
            blocks.append(ContextBlock(kind="image", image=str(b.get("path", "")), title=str(b.get("title", ""))))
        else:
            raise SuiteFormatError(f"{where}: context[{i}].type must be 'text' or 'image', not {kind!r}")
    return blocks


def blocks_from_query(query: str, images: list[str], where: str = "record") -> list[ContextBlock]:
    """The paper's form: text with ``<image>`` placeholders, filled by ``images`` in order."""
    pieces = query.split(IMAGE_PLACEHOLDER)
    if len(pieces) - 1 != len(images):
        raise SuiteFormatError(f"{where}: 'query' has {len(pieces) - 1} <image> placeholders for {len(images)} images")
    blocks: list[ContextBlock] = []
    for i, text in enumerate(pieces):
        if text.strip():
            blocks.append(ContextBlock(kind="text", text=text.strip("\n")))
        if i < len(images):
            blocks.append(ContextBlock(kind="image", image=str(images[i])))
    return blocks


def _display(gold: Any) -> str:
    if isinstance(gold, dict) and "value" in gold:
        return f"{gold['value']}{gold.get('unit', '')}"
    if isinstance(gold, list):
        return "; ".join(str(g) for g in gold)
    if isinstance(gold, dict):
        return json.dumps(gold, ensure_ascii=False)[:200]
    return "" if gold is None else str(gold)


def sample_to_record(sample: Sample) -> dict[str, Any]:
    context = [
        {"type": "text", "text": b.text, **({"title": b.title} if b.title else {})}
        if b.kind == "text"
        else {"type": "image", "path": b.image, **({"title": b.title} if b.title else {})}
        for b in sample.blocks
    ]
    record = {
        "id": sample.id,
        "subset": sample.task,
        "context": context,
        "question": sample.question,
        "gold": sample.gold,
        "answer": sample.answer,
        "answer_type": sample.answer_type,
        "evaluator": sample.evaluator,
        "level": sample.level,
    }
    if sample.choices:
        record["choices"] = sample.choices
    if sample.meta:
        record["meta"] = sample.meta
    return record


def write_clbench(samples: list[Sample], out: Path) -> Path:
    """Write ``samples`` as ``OUT/samples.jsonl``; their images must already lie under ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / SAMPLES_FILE
    tmp = path.with_suffix(".jsonl.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for s in samples:
            f.write(json.dumps(sample_to_record(s), ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path
