"""VALSE: one caption and one minimally edited foil per image, ten phenomenon files.

Each ``data/<phenomenon>.json`` is one JSON object ``{key: record}``. A record has no label: its
``caption`` is always the true sentence and its ``foil`` the false one, so a sample's choices are
``[caption, foil]`` and its answer is the caption (texts as written, surrounding spaces trimmed).
VALSE's README declares a record valid only when at least two of three annotators chose the
caption and not the foil (``mturk.caption >= 2``); the others are counted in ``skipped``, as its
own evaluation drops them.

Both sentences start with a capital letter, whatever the file wrote: VALSE's files are not
consistent (in 70 of the 535 valid relations pairs and 10 of the 505 existence pairs the caption
starts lower-case and the foil is capitalised, never the reverse), so as written "pick the
lower-case option" would answer those items without the image. The authors' predecessor
in-context code capitalises both too. Only the first character changes; ``meta`` keeps the
original fields as written.

Images are not part of VALSE. ``image_file`` is a bare file name, and the folder it lives in
depends on the dataset the phenomenon was built from; the folders are those of VALSE's own
``config.py``, so a clone of the repository with the images unpacked where it expects them works
as is. ``foil-it.json`` (noun phrases, FOIL-COCO) feeds no FewMMBench task and is not read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mmctx.data.sources.base import Conversion, SourceContext, SourceInfo
from mmctx.data.sources.reader import Reader
from mmctx.schema import Sample

# file stem -> (FewMMBench task, image folder under data/ as in VALSE's config.py)
FILES: dict[str, tuple[str, str]] = {
    "existence": ("object_recognition", "visual7w/images"),
    "plurals": ("plurality", "plurals/test_images"),
    "counting-hard": ("counting", "visual7w/images"),
    "counting-small-quant": ("counting", "visual7w/images"),
    "counting-adversarial": ("counting", "visual7w/images"),
    "relations": ("spatial_relations", "relations/test_images"),
    "action-replacement": ("action_recognition", "actions/images_512"),
    "actant-swap": ("action_recognition", "actions/images_512"),
    "coreference-standard": ("coreference", "coref/release_too_many_is_this_in_color/images"),
    "coreference-hard": ("coreference", "coref/release_v18/test_images"),
}

INFO = SourceInfo(
    name="valse",
    title="VALSE",
    license="MIT (annotations); images under the terms of Visual7W, MS-COCO, SWiG/imSitu and VisDial",
    published="https://github.com/Heidelberg-NLP/VALSE (data/*.json; images from each original dataset)",
    layout="valse/ = a clone of the VALSE repository: data/<phenomenon>.json, and the images under data/ "
    "as VALSE's config.py expects: "
    + "; ".join(f"{stem}.json -> data/{folder}/<image_file>" for stem, (_, folder) in FILES.items()),
    subsets={stem: (task, "caption_foil") for stem, (task, _) in FILES.items()},
)

VALID = "mturk.caption < 2"  # the skip rule, named as VALSE's README states the filter
# Original fields worth keeping next to provenance; the rest (NLI scores, …) stay in the JSON.
KEEP = (
    "dataset",
    "original_split",
    "dataset_idx",
    "linguistic_phenomena",
    "image_file",
    "classes",
    "classes_foil",
    "mturk",
    "orig_caption",
    "only_caption",
    "foil_method",
    "foiling_method",
    "provenance_of_foils",
)


def convert(ctx: SourceContext) -> Conversion:
    out = Conversion()
    reader = Reader(ctx, INFO.name, out)
    for subset, path in reader.present({stem: f"data/{stem}.json" for stem in FILES}).items():
        data = reader.json_file(path)
        if data is None:
            continue
        if not isinstance(data, dict):
            reader.error(path, "top level", "(json)", f"expected a JSON object of records, got {type(data).__name__}")
            continue
        for key, record in data.items():
            sample = _sample(reader, subset, path, key, record)
            if sample is not None:
                out.samples.append(sample)
    return out


def _sample(reader: Reader, subset: str, path: Path, key: str, record: Any) -> Sample | None:
    where = f"key {key}"
    record = reader.record(record, path, where)
    if record is None:
        return None
    mturk = record.get("mturk")
    if not isinstance(mturk, dict):
        reader.error(path, where, "mturk", f"expected an object of annotator votes, got {mturk!r}")
        return None
    votes = reader.integer(mturk.get("caption"), path, where, "mturk.caption")
    if votes is None:
        return None
    if votes < 2:  # decided before the other fields: an excluded record is never used, so never an error
        reader.skip(VALID)
        return None
    caption = reader.text(record.get("caption"), path, where, "caption")
    foil = reader.text(record.get("foil"), path, where, "foil")
    image = reader.image(record.get("image_file"), path, where, "image_file", under=f"data/{FILES[subset][1]}")
    if caption is None or foil is None or image is None:
        return None
    caption, foil = capitalised(caption.strip()), capitalised(foil.strip())
    if caption.casefold() == foil.casefold():
        reader.error(path, where, "foil", "identical to the caption")
        return None
    meta = {"source_file": reader.file(path), "key": key, "subset": subset}
    meta |= {k: record[k] for k in KEEP if k in record}
    return Sample(
        id=f"{INFO.name}/{subset}/{key}",
        task=FILES[subset][0],
        source=INFO.title,
        format="caption_foil",
        images=[reader.rel(image)],
        choices=[caption, foil],
        answer=caption,
        meta=meta,
    )


def capitalised(text: str) -> str:
    """``text`` with its first character upper-cased and the rest as written."""
    return text[:1].upper() + text[1:]
