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

Structural errors stop loading with the file, line, record id and field, so ``mmctx clbench
validate`` reports them and ``mmctx clbench run`` stops before it loads a model: bad JSON, a line
that is not an object, a missing id or subset, a field of the wrong JSON type (``"choices": 5``,
``"meta": [...]``), an unknown block type, a number that is not finite anywhere in the record
(Python's JSON reader accepts ``NaN`` and ``Infinity``; JSON has neither, and a tolerance of
``Infinity`` would accept every answer), and a suite with no records at all. Content problems
(an empty rubric list, a missing image) do not: the record loads, `Benchmark.validate` names
it, and a run scores it ``invalid_sample``, as the paper counts such items.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from mmctx.data.clbench.suite import subset_or_none
from mmctx.jsonl import JsonlError, iter_jsonl
from mmctx.schema import ANSWER_TYPES, Benchmark, ContextBlock, Sample

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
    if not samples:
        # Refused here, so a run stops before loading a model for zero items.
        raise SuiteFormatError(f"{path}: no records in {', '.join(f.name for f in files)}")
    return Benchmark(name=name or root.name, queries=samples, demos=[], root=root, description="CLBench-V-style suite")


def _read_file(path: Path) -> list[Sample]:
    try:
        return [record_to_sample(record, f"{path}:{lineno}") for lineno, record in iter_jsonl(path)]
    except JsonlError as exc:
        raise SuiteFormatError(str(exc)) from None


def _type_name(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "a boolean", type(None): "null"}.get(
        type(value), f"a {type(value).__name__}"
    )


def _bad_field(where: str, field: str, expected: str, value: Any) -> SuiteFormatError:
    return SuiteFormatError(f"{where}: field {field!r} must be {expected}, not {_type_name(value)}")


def _non_finite(value: Any, field: str) -> tuple[str, float] | None:
    """The first number in ``value`` that is NaN or infinite, with its field path (``gold.abs_tol``)."""
    if isinstance(value, float) and not math.isfinite(value):
        return field, value
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, inner in items:
        found = _non_finite(inner, f"{field}.{key}" if isinstance(key, str) else f"{field}[{key}]")
        if found:
            return found
    return None


def _text(record: dict[str, Any], field: str, where: str, prefix: str = "") -> str:
    """An optional text field (absent or null reads as empty); ``prefix`` places it (``context[2].``)."""
    value = record.get(field)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _bad_field(where, prefix + field, "text", value)
    return value


def _scalar_list(record: dict[str, Any], field: str, where: str, what: str) -> list[str]:
    """An optional list of texts (numbers are written as text: an option may be ``3``)."""
    value = record.get(field)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _bad_field(where, field, f"a list of {what}", value)
    for i, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, (str, int, float)):
            raise _bad_field(where, f"{field}[{i}]", "text", item)
    return [str(item) for item in value]


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
    for field, value in record.items():
        found = _non_finite(value, field)
        if found:
            raise SuiteFormatError(
                f"{where}: field {found[0]!r} is {json.dumps(found[1])}; "
                "numbers must be finite (JSON has no NaN or Infinity)"
            )
    for field in ("answer_type", "evaluator", "level"):
        if record.get(field) is not None and not isinstance(record[field], str):
            raise _bad_field(where, field, "text", record[field])
    # The registry is read live: an evaluator module that brings its own answer type registers it.
    if record.get("answer_type") and record["answer_type"] not in ANSWER_TYPES:
        raise SuiteFormatError(
            f"{where}: field 'answer_type' must be one of {list(ANSWER_TYPES)}, not {record['answer_type']!r}"
        )
    meta = record.get("meta")
    if meta is not None and not isinstance(meta, dict):
        raise _bad_field(where, "meta", "an object", meta)
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
    elif isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
        raise _bad_field(where, "answer", "display text", answer)
    try:
        return Sample(
            id=rid,
            task=known.name if known else subset,
            source=known.name if known else subset,
            format="open",
            question=_text(record, "question", where),
            choices=_scalar_list(record, "choices", where, "options"),
            answer=str(answer),
            blocks=blocks,
            answer_type=record.get("answer_type") or defaults.get("answer_type"),
            gold=gold,
            evaluator=record.get("evaluator") or defaults["evaluator"],
            level=record.get("level") or defaults["level"],
            meta=dict(meta or {}),
        )
    except ValueError as exc:
        raise SuiteFormatError(f"{where}: {exc}") from None


def _blocks(record: dict[str, Any], where: str) -> list[ContextBlock]:
    if "context" in record and "query" in record:
        raise SuiteFormatError(
            f"{where}: give either 'context' blocks or a 'query' with <image> placeholders, not both"
        )
    if "query" in record:
        images = _scalar_list(record, "images", where, "image paths")
        return blocks_from_query(_text(record, "query", where), images, where)
    context = record.get("context")
    if context is None:
        return []
    if not isinstance(context, list):
        raise _bad_field(where, "context", "a list of blocks", context)
    blocks = []
    for i, b in enumerate(context):
        if not isinstance(b, dict):
            raise _bad_field(where, f"context[{i}]", "an object", b)
        kind = b.get("type")
        at = f"context[{i}]."
        title = _text(b, "title", where, at)
        if kind == "text":
            blocks.append(ContextBlock(kind="text", text=_text(b, "text", where, at), title=title))
        elif kind == "image":
            blocks.append(ContextBlock(kind="image", image=_text(b, "path", where, at), title=title))
        else:
            raise SuiteFormatError(f"{where}: field 'context[{i}].type' must be 'text' or 'image', not {kind!r}")
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
