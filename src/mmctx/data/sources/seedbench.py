"""SEED-Bench: 4-way multiple-choice questions, one evaluation dimension per question.

The release is one JSON object ``{"questions": [...], "question_type": {name: id}}`` (the
official eval also accepts a bare list). A question has ``question``, ``choice_a``–``choice_d``,
the gold ``answer`` as a letter, ``question_type_id`` (the dimension) and ``data_id`` (the
image: a CC3M file name *without extension* for dimensions 1–9, as the zips hold them).
FewMMBench uses six image dimensions; Visual Referring Expression (13) exists only in
SEED-Bench-2, so both releases are read. Where both are present, v2's copies of v1 questions
(``version == "v1"``) are skipped so no question appears twice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mmctx.data.sources.base import Conversion, SourceContext, SourceInfo
from mmctx.data.sources.reader import Reader
from mmctx.schema import Sample

V1, V2 = "SEED-Bench.json", "SEED-Bench_v2_level1_2_3.json"

INFO = SourceInfo(
    name="seedbench",
    title="SEED-Bench",
    license="CC BY-NC 4.0 (data, per the HF cards; code Apache-2.0); images under their sources' terms (CC3M, VCR)",
    published="https://huggingface.co/datasets/AILab-CVC/SEED-Bench (v1), .../AILab-CVC/SEED-Bench-2 (v2)",
    layout=(
        f"seedbench/{V1} + seedbench/SEED-Bench-image/<data_id> (SEED-Bench-image.zip); and/or "
        f"seedbench/{V2} + seedbench/cc3m-image/<data_id> (cc3m-image.zip, data_source 'cc3m') + "
        "seedbench/SEED-Bench-2-image/<data_id> (SEED-Bench-2-image.zip.*, other sources)"
    ),
    subsets={
        "instance_identity": ("object_recognition", "mcqa"),
        "instance_attributes": ("attribute_recognition", "mcqa"),
        "instance_counting": ("counting", "mcqa"),
        "spatial_relation": ("spatial_relations", "mcqa"),
        "visual_reasoning": ("commonsense", "mcqa"),
        "visual_referring_expression": ("commonsense", "mcqa"),
    },
)

# question_type_id -> subset: the FewMMBench dimensions (paper section 3.1); ids 1-9 are shared by v1 and v2.
DIMENSIONS = {
    2: "instance_identity",
    3: "instance_attributes",
    5: "instance_counting",
    6: "spatial_relation",
    8: "visual_reasoning",
    13: "visual_referring_expression",  # SEED-Bench-2 only (v1's 10-12 are video dimensions)
}
CHOICES = {"A": "choice_a", "B": "choice_b", "C": "choice_c", "D": "choice_d"}
# The zips hold extension-less JPEGs; re-packaged copies often add one.
SUFFIXES = (".jpg", ".jpeg", ".png")


def convert(ctx: SourceContext) -> Conversion:
    out = Conversion()
    reader = Reader(ctx, INFO.name, out)
    files = reader.present({V1: V1, V2: V2})
    loaded = {name: _questions(reader, path) for name, path in files.items()}
    v1_read = loaded.get(V1) is not None  # an unreadable v1 file must not cost v2 its copies
    for name, questions in loaded.items():
        for index, record in enumerate(questions or []):
            sample = _sample(reader, files[name], index, record, v1_read=v1_read)
            if sample is not None:
                out.samples.append(sample)
    return out


def _questions(reader: Reader, path: Path) -> list[Any] | None:
    data = reader.json_file(path)
    if isinstance(data, dict) and isinstance(data.get("questions"), list):
        return data["questions"]
    if isinstance(data, list):
        return data
    if data is not None:
        reader.error(path, "top level", "questions", "expected {'questions': [...]} or a list of questions")
    return None


def _sample(reader: Reader, path: Path, index: int, record: Any, v1_read: bool) -> Sample | None:
    record = reader.record(record, path, f"index {index}")
    if record is None:
        return None
    key = str(record.get("question_id", ""))
    where = f"question_id {key}" if key else f"index {index}"
    dimension = record.get("question_type_id")
    if isinstance(dimension, str) and dimension.isdigit():  # the HF v1 loader types it as a string
        dimension = int(dimension)
    if not isinstance(dimension, int):
        reader.error(path, where, "question_type_id", f"expected a dimension id, got {dimension!r}")
        return None
    subset = DIMENSIONS.get(dimension)
    if subset is None:
        reader.skip("question_type_id not a FewMMBench dimension")
        return None
    v2 = path.name == V2
    if v2 and v1_read and record.get("version") == "v1":
        reader.skip(f"v2 copy of a v1 question ({V1} read)")
        return None
    if not key:
        reader.error(path, where, "question_id", "missing")
        return None
    question = reader.text(record.get("question"), path, where, "question")
    options = {letter: record.get(name) for letter, name in CHOICES.items()}
    for letter, name in CHOICES.items():
        if reader.text(options[letter], path, where, name) is None:
            return None
    picked = reader.lettered(options, record.get("answer"), path, where, "choice_a..choice_d", "answer")
    images = _images(reader, path, where, record, v2)
    sample_id = f"{INFO.name}/{subset}/{key}"
    if question is None or picked is None or images is None or not reader.claim(sample_id, path, where, "question_id"):
        return None
    meta = {"source_file": reader.file(path), "key": key, "subset": subset, "question_type_id": dimension}
    meta |= {k: record[k] for k in ("data_id", "data_source", "data_type", "level", "version") if k in record}
    return Sample(
        id=sample_id,
        task=INFO.subsets[subset][0],
        source=INFO.title,
        format="mcqa",
        images=images,
        question=question,
        choices=picked[0],
        answer=picked[1],
        meta=meta,
    )


def _images(reader: Reader, path: Path, where: str, record: dict[str, Any], v2: bool) -> list[str] | None:
    """``data_id`` under the image root of its release: one name, or (v2) a list of relative paths."""
    root = "SEED-Bench-image"
    if v2:
        root = "cc3m-image" if record.get("data_source") == "cc3m" else "SEED-Bench-2-image"
    refs = record.get("data_id")
    refs = refs if isinstance(refs, list) and refs else [refs]
    found = [reader.image(ref, path, where, "data_id", under=root, suffixes=SUFFIXES) for ref in refs]
    if any(f is None for f in found):
        return None
    return [reader.rel(f) for f in found if f is not None]
