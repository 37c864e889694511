"""ARO's Visual Genome Relation and Attribution: one true caption and one swapped foil per box.

Each file is one JSON list of records (``image_path``, ``bbox_x/y/w/h``, ``true_caption``,
``false_caption``, plus ``relation_name`` or ``attributes``). ARO's own loader crops every image
to the record's box "to remove the irrelevant details in the scene" for both subsets, so the
sample image is that crop, written once as PNG under ``ROOT/_mmctx/aro/``. ARO lists its options
as ``[false, true]``; here the choices are ``[true_caption, false_caption]`` and the answer is
the true caption's text, so nothing depends on that order.
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

from PIL import Image

from mmctx.data.sources.base import Conversion, SourceContext, SourceInfo, write_derived
from mmctx.data.sources.reader import Reader
from mmctx.schema import Sample

INFO = SourceInfo(
    name="aro",
    title="ARO",
    license="MIT (annotations and code); images from Visual Genome / GQA, CC BY 4.0",
    published="https://github.com/mertyg/vision-language-models-are-bows (JSON and vgr_vga_images.zip on Google Drive)",
    layout="aro/visual_genome_relation.json, aro/visual_genome_attribution.json, aro/images/<image_path>",
    subsets={
        "vg_relation": ("spatial_relations", "caption_foil"),
        "vg_attribution": ("attribute_recognition", "caption_foil"),
    },
)

FILES = {"vg_relation": "visual_genome_relation.json", "vg_attribution": "visual_genome_attribution.json"}
BOX = ("bbox_x", "bbox_y", "bbox_w", "bbox_h")
KNOWN = {"image_path", "true_caption", "false_caption", "relation_name", "attributes", *BOX}


def convert(ctx: SourceContext) -> Conversion:
    return Reader(ctx, INFO.name, Conversion()).convert_lists(FILES, _sample)


def _sample(reader: Reader, subset: str, path: Path, index: int, record: Any) -> Sample | None:
    where = f"index {index}"
    record = reader.record(record, path, where)
    if record is None:
        return None
    true = reader.text(record.get("true_caption"), path, where, "true_caption")
    false = reader.text(record.get("false_caption"), path, where, "false_caption")
    if true is None or false is None:
        return None
    if true.strip().casefold() == false.strip().casefold():
        reader.error(path, where, "false_caption", "identical to true_caption")
        return None
    meta: dict[str, Any] = {"source_file": reader.file(path), "key": index, "subset": subset}
    # ARO groups its accuracy by these, so its loader cannot run without them either.
    if subset == "vg_relation":
        relation = reader.text(record.get("relation_name"), path, where, "relation_name")
        if relation is None:
            return None
        meta["relation_name"] = relation
    else:
        attributes = record.get("attributes")
        if not (isinstance(attributes, list) and len(attributes) == 2 and all(isinstance(a, str) for a in attributes)):
            reader.error(path, where, "attributes", f"expected a list of 2 attribute strings, got {attributes!r}")
            return None
        meta["attributes"] = attributes
    box = _box(reader, record, path, where)
    source = reader.image(record.get("image_path"), path, where, "image_path", under="images")
    if box is None or source is None:
        return None
    crop = _crop(reader, source, box, path, where)
    if crop is None:
        return None
    meta |= {"image_path": record["image_path"], "bbox": list(box)}
    meta |= {k: v for k, v in record.items() if k not in KNOWN}  # unverified extra keys (an image id?) kept as is
    return Sample(
        id=f"{INFO.name}/{subset}/{index}",
        task=INFO.subsets[subset][0],
        source=INFO.title,
        format="caption_foil",
        images=[write_derived(reader.ctx, INFO.name, crop, ".png")],
        choices=[true, false],
        answer=true,
        meta=meta,
    )


def _box(reader: Reader, record: dict[str, Any], path: Path, where: str) -> tuple[float, ...] | None:
    values = []
    for key in BOX:
        value = record.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
            reader.error(path, where, key, f"expected a non-negative finite number, got {value!r}")
            return None
        values.append(value)
    if values[2] <= 0 or values[3] <= 0:
        reader.error(path, where, "bbox_w" if values[2] <= 0 else "bbox_h", "box has no area")
        return None
    return tuple(values)


def _crop(reader: Reader, source: Path, box: tuple[float, ...], path: Path, where: str) -> bytes | None:
    """PNG bytes of the box, cropped as ARO does (an overhang is padded black, as PIL pads)."""
    x, y, w, h = box
    try:
        with Image.open(source) as image:
            image = image.convert("RGB")
            if x >= image.width or y >= image.height:
                reader.error(
                    path,
                    where,
                    "bbox_x" if x >= image.width else "bbox_y",
                    f"box starts outside the {image.width}x{image.height} image",
                )
                return None
            crop = image.crop((x, y, x + w, y + h))
    except OSError as exc:
        reader.error(path, where, "image_path", f"unreadable image: {exc}")
        return None
    buffer = io.BytesIO()
    crop.save(buffer, format="PNG")  # no timestamp chunks: same crop, same bytes, same file
    return buffer.getvalue()
