"""VSR (Visual Spatial Reasoning): single spatial statements about COCO images, labelled true/false.

Each line of ``data/splits/random/{train,dev,test}.jsonl`` is one JSON object: ``image`` (a COCO 2017
file name), ``caption`` (the statement), ``label`` (``1`` true, ``0`` false), ``relation`` and the
annotation votes. A VSR item is one statement, not a caption/foil pair, so FewMMBench asks it as a
binary verification (paper, §4.2: "For samples from the VSR dataset …, which contain a single
caption-image pair labeled as true or false, we adapt the prompt to a binary verification format:
'Does this sentence accurately describe the image?'"): ``statement`` is the caption, the answer
is "Yes" for label 1 and "No" for label 0.

Only the *random* split is read. Its three files together hold every validated statement; the
*zeroshot* split re-partitions a subset of the same statements (concept-disjoint), so reading it too
would put each of those statements in the pool twice. Images are looked up in ``data/images/``,
where VSR's data README puts them (its Dropbox zip, or the COCO train+val images it selects).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mmctx.data.sources.base import Conversion, SourceContext, SourceInfo
from mmctx.data.sources.reader import Reader
from mmctx.schema import BINARY_CHOICES, Sample

SPLITS = ("train", "dev", "test")

INFO = SourceInfo(
    name="vsr",
    title="VSR",
    license="Apache-2.0 (annotations); images from MS-COCO 2017 under COCO's terms",
    published="https://github.com/cambridgeltl/visual-spatial-reasoning (data/splits/; images per data/README.md)",
    layout="vsr/ = a clone of the VSR repository: data/splits/random/{train,dev,test}.jsonl, "
    "images in data/images/<image> (COCO 2017 train and val file names, one flat folder)",
    subsets={f"random_{split}": ("spatial_relations", "binary") for split in SPLITS},
)

# Kept in meta as given; the two vote lists are JSON-encoded strings in the split files.
KEEP = ("image", "image_link", "relation", "annotator_id", "reference_frame", "subj", "obj")
VOTES = ("vote_true_validator_id", "vote_false_validator_id")


def convert(ctx: SourceContext) -> Conversion:
    out = Conversion()
    reader = Reader(ctx, INFO.name, out)
    files = {f"random_{split}": f"data/splits/random/{split}.jsonl" for split in SPLITS}
    for subset, path in reader.present(files).items():
        for line, record in reader.jsonl(path):
            sample = _sample(reader, subset, path, line, record)
            if sample is not None:
                out.samples.append(sample)
    return out


def _sample(reader: Reader, subset: str, path: Path, line: int, record: dict[str, Any]) -> Sample | None:
    where = f"line {line}"
    label = record.get("label")
    if isinstance(label, bool) or not isinstance(label, int) or label not in (0, 1):
        reader.error(path, where, "label", f"expected 1 (true) or 0 (false), got {label!r}")
        return None
    statement = reader.text(record.get("caption"), path, where, "caption")
    image = reader.image(record.get("image"), path, where, "image", under="data/images")
    if statement is None or image is None:
        return None
    meta: dict[str, Any] = {"source_file": reader.file(path), "key": line, "subset": subset, "label": label}
    meta |= {k: record[k] for k in KEEP if k in record}
    meta |= {k: _votes(record[k]) for k in VOTES if k in record}
    return Sample(
        id=f"{INFO.name}/{subset}/{line}",
        task=INFO.subsets[subset][0],
        source=INFO.title,
        format="binary",
        images=[reader.rel(image)],
        statement=statement.strip(),
        choices=list(BINARY_CHOICES),
        answer="Yes" if label == 1 else "No",
        meta=meta,
    )


def _votes(value: Any) -> Any:
    """``"[2, 9]"`` -> ``[2, 9]``; anything else as given (the votes only document the label)."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value
