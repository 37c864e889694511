"""CV-Bench's Relative Distance questions as commonsense MCQA (FewMMBench, section 3.1).

A snapshot of the HF repository ``nyu-visionx/CV-Bench`` is read in one of its published shapes,
the first found of: ``test_3d.jsonl`` (current), ``test.jsonl`` (2024 revision, 2D and 3D together),
each with images under ``img/`` named by ``filename``; or ``test_3d.parquet`` / ``test.parquet``
with the images embedded (decoded once under ``ROOT/_mmctx/cvbench/``). Only one file is read, so
two revisions side by side do not duplicate items. Records of the other tasks (Count, Relation,
Depth) are counted as skipped. ``answer`` is ``"(A)"``-style; the sample stores the choice text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from mmctx.data.sources.base import Conversion, SourceContext, SourceInfo, write_derived
from mmctx.data.sources.reader import Reader
from mmctx.schema import Sample

INFO = SourceInfo(
    name="cvbench",
    title="CV-Bench",
    license="Apache-2.0 (dataset card); images under ADE20K, COCO and Omni3D terms",
    published="https://huggingface.co/datasets/nyu-visionx/CV-Bench",
    layout="cvbench/test_3d.jsonl + cvbench/img/3D/distance/… (or test.jsonl + img/, or test_3d.parquet, or test.parquet)",
    subsets={"relative_distance": ("commonsense", "mcqa")},
)

SUBSET = "relative_distance"
TASK = "Distance"  # CV-Bench's name for Relative Distance
CANDIDATES = ("test_3d.jsonl", "test.jsonl", "test_3d.parquet", "test.parquet")
ANSWER = re.compile(r"\(([A-Z])\)")
KEPT = (
    "type",
    "task",
    "source",
    "source_dataset",
    "source_filename",
    "bbox",
    "target_class",
    "target_size",
    "prompt",
    "filename",
)


def convert(ctx: SourceContext) -> Conversion:
    out = Conversion()
    reader = Reader(ctx, INFO.name, out)
    path = reader.first(CANDIDATES)
    if path is None:
        return out
    records: Iterator[tuple[str, dict[str, Any]]]
    if path.suffix == ".jsonl":
        records = ((f"line {number}", record) for number, record in reader.jsonl(path))
    else:
        records = _parquet_rows(reader, path)
    for where, record in records:
        task = record.get("task")
        if task != TASK:
            if not isinstance(task, str):
                reader.error(path, where, "task", f"expected a task name, got {task!r}")
            else:
                reader.skip(f"task {task} (not {TASK})")
            continue
        sample = _sample(reader, path, where, record)
        if sample is not None:
            out.samples.append(sample)
    return out


def _sample(reader: Reader, path: Path, where: str, record: dict[str, Any]) -> Sample | None:
    idx = reader.integer(record.get("idx"), path, where, "idx")
    sample_id = f"{INFO.name}/{SUBSET}/{idx}"
    # Claimed before the other checks: a repeated idx is an error even where its first record was bad.
    if idx is None or not reader.claim(sample_id, path, where, "idx"):
        return None
    question = reader.text(record.get("question"), path, where, "question")
    choices = reader.options(record.get("choices"), path, where, "choices")
    image = _image(reader, path, where, record)
    if question is None or choices is None or image is None:
        return None
    answer = record.get("answer")
    match = ANSWER.fullmatch(answer.strip()) if isinstance(answer, str) else None
    letter = match.group(1) if match else ""
    if not match or ord(letter) - ord("A") >= len(choices):
        reader.error(path, where, "answer", f"expected '(A)'..'({chr(ord('A') + len(choices) - 1)})', got {answer!r}")
        return None
    meta = {"source_file": reader.file(path), "key": idx, "subset": SUBSET, "answer_letter": letter}
    meta |= {k: record[k] for k in KEPT if k in record}
    return Sample(
        id=sample_id,
        task=INFO.subsets[SUBSET][0],
        source=INFO.title,
        format="mcqa",
        images=[image],
        question=question,
        choices=choices,
        answer=choices[ord(letter) - ord("A")],
        meta=meta,
    )


def _image(reader: Reader, path: Path, where: str, record: dict[str, Any]) -> str | None:
    """The sample image path: embedded bytes (parquet) are written out, ``filename`` is resolved."""
    embedded = record.get("image")
    if path.suffix == ".parquet":
        data = embedded.get("bytes") if isinstance(embedded, dict) else None
        if not data:
            reader.error(path, where, "image", "no embedded image bytes")
            return None
        suffix = PurePosixPath(embedded.get("path") or "").suffix or _sniff(data)
        return write_derived(reader.ctx, INFO.name, data, suffix)
    # The card says images sit in img/ "corresponding to the filename field"; whether the field
    # itself starts with "img/" is unverified, so both readings are tried, "img/" first.
    ref = record.get("filename")
    if isinstance(ref, str) and not ref.startswith("img/") and (reader.folder / "img" / ref).is_file():
        ref = f"img/{ref}"
    full = reader.image(ref, path, where, "filename")
    return reader.rel(full) if full is not None else None


def _parquet_rows(reader: Reader, path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    row = 0
    try:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=64):
            for record in batch.to_pylist():
                yield f"row {row}", record
                row += 1
    except (OSError, ValueError, pa.ArrowException) as exc:  # a broken file: rows read so far stand
        reader.error(path, f"row {row}", "(parquet)", f"unreadable: {exc}")


def _sniff(data: bytes) -> str:
    return ".jpg" if data[:3] == b"\xff\xd8\xff" else ".png"
