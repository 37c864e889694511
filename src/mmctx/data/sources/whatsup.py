"""What'sUp: spatial captions whose first option is always the true one (the README says so).

Two record shapes, six files:
* Controlled A/B: a JSON list of ``{"image_path": "data/controlled_images/<obj1>_<prep>_<obj2>.jpeg",
  "caption_options": [true, foil, foil, foil]}``. The four captions differ only in the preposition,
  so the sample keeps all four as ``caption_foil`` choices, the true caption first.
* COCO-QA / VG-QA, one and two objects: a JSON list of ``[image_id, correct, wrong]``; the image is
  ``val2017/{image_id:012d}.jpg`` (COCO) or ``vg_images/{image_id}.jpg`` (Visual Genome).

The dataset folder is the loaders' ``data/`` directory, so the ``data/`` prefix of the controlled
``image_path`` is dropped before resolving it.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

from mmctx.data.sources.base import Conversion, SourceContext, SourceInfo
from mmctx.data.sources.reader import Reader
from mmctx.schema import Sample

INFO = SourceInfo(
    name="whatsup",
    title="What'sUp",
    license="MIT (annotations and code); images: authors' photos (A), CLEVR CC BY 4.0 (B), COCO, Visual Genome",
    published="https://github.com/amitakamath/whatsup_vlms (JSON and images on Google Drive)",
    layout=(
        "whatsup/{controlled_images_dataset,controlled_clevr_dataset,coco_qa_one_obj,coco_qa_two_obj,"
        "vg_qa_one_obj,vg_qa_two_obj}.json, whatsup/controlled_images/, whatsup/controlled_clevr/, "
        "whatsup/val2017/, whatsup/vg_images/ (the contents of the loaders' data/ folder)"
    ),
    subsets={
        subset: ("spatial_relations", "caption_foil")
        for subset in (
            "controlled_a",
            "controlled_b",
            "coco_qa_one_obj",
            "coco_qa_two_obj",
            "vg_qa_one_obj",
            "vg_qa_two_obj",
        )
    },
)

FILES = {
    "controlled_a": "controlled_images_dataset.json",
    "controlled_b": "controlled_clevr_dataset.json",
    "coco_qa_one_obj": "coco_qa_one_obj.json",
    "coco_qa_two_obj": "coco_qa_two_obj.json",
    "vg_qa_one_obj": "vg_qa_one_obj.json",
    "vg_qa_two_obj": "vg_qa_two_obj.json",
}
ROOT_PREFIX = "data/"  # the loaders' ARO_ROOT, baked into the controlled image paths
PREPOSITIONS = {"on", "under", "left_of", "right_of", "in-front_of", "behind"}


def convert(ctx: SourceContext) -> Conversion:
    out = Conversion()
    reader = Reader(ctx, INFO.name, out)
    for subset, path, index, record in reader.list_records(FILES):
        build = _controlled if subset.startswith("controlled") else _qa
        found = build(reader, subset, path, index, record)
        if found is not None:
            image, choices, meta = found
            out.samples.append(
                Sample(
                    id=f"{INFO.name}/{subset}/{index}",
                    task=INFO.subsets[subset][0],
                    source=INFO.title,
                    format="caption_foil",
                    images=[reader.rel(image)],
                    choices=choices,
                    answer=choices[0],  # "the first option is always the correct one"
                    meta={"source_file": reader.file(path), "key": index, "subset": subset, **meta},
                )
            )
    return out


Found = tuple[Path, list[str], dict[str, Any]]


def _controlled(reader: Reader, subset: str, path: Path, index: int, record: Any) -> Found | None:
    where = f"index {index}"
    record = reader.record(record, path, where)
    if record is None:
        return None
    choices = reader.options(record.get("caption_options"), path, where, "caption_options")
    ref = record.get("image_path")
    if isinstance(ref, str) and ref.startswith(ROOT_PREFIX):
        ref = ref[len(ROOT_PREFIX) :]
    image = reader.image(ref, path, where, "image_path")
    if choices is None or image is None:
        return None
    meta: dict[str, Any] = {"image_path": record["image_path"]}
    # The file name carries the object pair and the true preposition, which What'sUp's pair and
    # set accuracies group by; a name that does not parse just leaves them out.
    parts = PurePosixPath(ref).stem.split("_")
    preposition = "_".join(parts[1:-1])
    if len(parts) >= 3 and preposition in PREPOSITIONS:
        meta |= {"objects": [parts[0], parts[-1]], "preposition": preposition}
    return image, choices, meta


def _qa(reader: Reader, subset: str, path: Path, index: int, record: Any) -> Found | None:
    where = f"index {index}"
    if not (isinstance(record, list) and len(record) == 3):
        reader.error(path, where, "(record)", f"expected [image_id, correct, wrong], got {record!r}")
        return None
    image_id, correct, wrong = record
    choices = reader.options([correct, wrong], path, where, "captions")
    # Ids are ints; a digit string works in the official loader too (it formats with str()).
    if isinstance(image_id, bool) or not (
        isinstance(image_id, int) or (isinstance(image_id, str) and image_id.isdigit())
    ):
        reader.error(path, where, "image_id", f"expected an integer image id, got {image_id!r}")
        return None
    name = f"val2017/{str(image_id).zfill(12)}.jpg" if subset.startswith("coco") else f"vg_images/{image_id}.jpg"
    image = reader.image(name, path, where, "image_id")
    if choices is None or image is None:
        return None
    return image, choices, {"image_id": image_id}
