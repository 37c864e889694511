"""GVTBench Multi-Class Identification: "Does <object> exist in the image?" over COCO and VCR images.

``GVTBench/coco_mci.json`` and ``GVTBench/vcr_mci.json`` are each one JSON list of records
``{image_id, text_in, text_out, n_obj_exist}``. ``text_in`` is the question (kept verbatim, typos
such as "exis" included), ``text_out`` the answer ``"Yes."`` or ``"No."``.

Format: FewMMBench uses MCI among its object-recognition *MCQA* sources (§3.1: "Additionally, we
include the Multi-Class Identification task from GVTBench …, where models must determine the
presence of specified objects"; Table 2 lists GVTBench under Multiple Choice QA). So each record
is an ``mcqa`` sample with choices ``["Yes", "No"]``; the answer drops the period GVT writes.
The binary format does not fit: its prompt verifies a *statement*, and ``text_in`` is a question.

Images follow GVT's own ``write_task_from_anno.py``: COCO ids are ints naming
``val2017/{image_id:012d}.jpg``; VCR ids are paths under ``vcr1images/``. Both folders are the top
folders of the official zips, unpacked into ``gvtbench/``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mmctx.data.sources.base import Conversion, SourceContext, SourceInfo
from mmctx.data.sources.reader import Reader
from mmctx.schema import Sample

FILES = {"coco_mci": "GVTBench/coco_mci.json", "vcr_mci": "GVTBench/vcr_mci.json"}
ANSWERS = {"yes": "Yes", "no": "No"}

INFO = SourceInfo(
    name="gvtbench",
    title="GVTBench",
    license="Apache-2.0 (annotations); images from MS-COCO (COCO terms) and VCR (VCR license, research use)",
    published="https://github.com/TencentARC/GVT (GVTBench/*.json); "
    "images from cocodataset.org (val2017) and visualcommonsense.com (vcr1images)",
    layout="gvtbench/ = a clone of the GVT repository: GVTBench/{coco_mci,vcr_mci}.json, "
    "with COCO images in val2017/<image_id:012d>.jpg and VCR images in vcr1images/<image_id>",
    subsets={subset: ("object_recognition", "mcqa") for subset in FILES},
)


def convert(ctx: SourceContext) -> Conversion:
    return Reader(ctx, INFO.name, Conversion()).convert_lists(FILES, _sample)


def _sample(reader: Reader, subset: str, path: Path, index: int, record: Any) -> Sample | None:
    where = f"index {index}"  # each file is a single line, so a line number would say nothing
    record = reader.record(record, path, where)
    if record is None:
        return None
    question = reader.text(record.get("text_in"), path, where, "text_in")
    given = record.get("text_out")
    answer = ANSWERS.get(given.strip().rstrip(".").strip().casefold()) if isinstance(given, str) else None
    if answer is None:
        reader.error(path, where, "text_out", f'expected "Yes." or "No.", got {given!r}')
    image = _image(reader, subset, path, where, record.get("image_id"))
    if question is None or answer is None or image is None:
        return None
    meta = {"source_file": reader.file(path), "key": index, "subset": subset, "image_id": record["image_id"]}
    if "n_obj_exist" in record:  # GVT bins difficulty by it
        meta["n_obj_exist"] = record["n_obj_exist"]
    return Sample(
        id=f"{INFO.name}/{subset}/{index}",
        task=INFO.subsets[subset][0],
        source=INFO.title,
        format="mcqa",
        images=[reader.rel(image)],
        question=question.strip(),
        choices=["Yes", "No"],
        answer=answer,
        meta=meta,
    )


def _image(reader: Reader, subset: str, path: Path, where: str, image_id: Any) -> Path | None:
    if subset == "coco_mci":
        number = reader.integer(image_id, path, where, "image_id")
        if number is None:
            return None
        if number < 0:
            reader.error(path, where, "image_id", f"expected a non-negative COCO image id, got {number}")
            return None
        return reader.image(f"{number:012d}.jpg", path, where, "image_id", under="val2017")
    return reader.image(image_id, path, where, "image_id", under="vcr1images")
