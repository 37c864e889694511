"""MMBench: a TSV of multiple-choice questions with base64-encoded images.

Columns (header row, tab-separated as ``pandas.to_csv(sep="\\t")`` writes them, so empty cells
are NaN and quoted cells may span lines): ``index, question, hint, A, B, C, D, answer, category,
image, source, l2-category, comment, split``. Two VLMEvalKit conventions matter:

* circular evaluation stores each question once per option rotation, copies at
  ``index + k * 1_000_000``; the copies are collapsed to the row with the smallest index;
* an ``image`` cell of at most 64 characters is the ``index`` of the row whose image it reuses.

Images are decoded and written once, content-addressed, under ``ROOT/_mmctx/mmbench/``.
"""

from __future__ import annotations

import base64
import binascii
import io
from pathlib import Path

from PIL import Image

from mmctx.data.sources.base import Conversion, SourceContext, SourceInfo, write_derived
from mmctx.data.sources.reader import Reader
from mmctx.schema import Sample

# English splits that carry answers, most preferred first; only the first present is read,
# since they hold the same questions under the same indices.
FILES = ("MMBench_DEV_EN.tsv", "MMBench_DEV_EN_V11.tsv", "mmbench_dev_en_20231003.tsv", "mmbench_dev_20230712.tsv")

INFO = SourceInfo(
    name="mmbench",
    title="MMBench",
    license="Apache-2.0 (code and annotations); questions and images from many sources (column `source`)",
    published="https://github.com/open-compass/MMBench (TSV download links in its README)",
    layout=f"mmbench/<one of {', '.join(FILES)}> (images are inside the TSV)",
    subsets={
        "attribute_recognition": ("attribute_recognition", "mcqa"),
        "social_relation": ("commonsense", "mcqa"),
        "physical_relation": ("commonsense", "mcqa"),
        "nature_relation": ("commonsense", "mcqa"),
        "spatial_relationship": ("spatial_relations", "mcqa"),
    },
)

REQUIRED = ("index", "question", "A", "B", "answer", "category", "image")
CIRCULAR = 1_000_000
REFERENCE_MAX = 64  # VLMEvalKit: an image cell this short names another row's index
# Columns kept in meta (name, column); the hyphenated l2 column is renamed in the lmms-lab copy.
KEPT = (
    ("l2_category", "l2-category"),
    ("l2_category", "L2-category"),
    ("origin", "source"),
    ("split", "split"),
    ("comment", "comment"),
)


def convert(ctx: SourceContext) -> Conversion:
    out = Conversion()
    reader = Reader(ctx, INFO.name, out)
    path = reader.first(FILES)
    if path is None:
        return out
    rows = _rows(reader, path)
    images = {index: row["image"] for index, _, row in rows}
    kept: dict[int, tuple[int, int, dict[str, str]]] = {}
    for index, line, row in rows:
        base = index % CIRCULAR
        if base in kept:
            reader.skip("circular copy (same index mod 1e6)")
            if index < kept[base][0]:  # keep the original whatever the row order
                kept[base] = (index, line, row)
        else:
            kept[base] = (index, line, row)
    for index, _line, row in sorted(kept.values(), key=lambda r: r[1]):  # file order
        sample = _sample(reader, path, index, row, images)
        if sample is not None:
            out.samples.append(sample)
    return out


def _rows(reader: Reader, path: Path) -> list[tuple[int, int, dict[str, str]]]:
    """(index, line, row) per row; a row that cannot be read costs only that row."""
    rows: list[tuple[int, int, dict[str, str]]] = []
    for line, row in reader.table_rows(path, "\t", REQUIRED):
        cells = {k: (v or "").strip() for k, v in row.items() if k is not None}
        try:
            rows.append((int(float(cells["index"])), line, cells))
        except ValueError:
            reader.error(path, f"line {line}", "index", f"expected an integer, got {cells['index']!r}")
    return rows


def _sample(reader: Reader, path: Path, index: int, row: dict[str, str], images: dict[int, str]) -> Sample | None:
    where = f"index {index}"
    subset = row["category"]
    if subset not in INFO.subsets:
        reader.skip("category not used by FewMMBench")
        return None
    if not row["answer"]:
        reader.skip("no answer (test split)")
        return None
    question = reader.text(row["question"], path, where, "question")
    letters = [c for c in ("A", "B", "C", "D", "E") if c in row]
    picked = reader.lettered({c: row[c] for c in letters}, row["answer"], path, where, "A..D", "answer")
    image = _image(reader, path, where, row["image"], images)
    sample_id = f"{INFO.name}/{subset}/{index}"
    if question is None or picked is None or image is None or not reader.claim(sample_id, path, where, "index"):
        return None
    meta = {"source_file": reader.file(path), "key": index, "subset": subset}
    meta |= {name: row[column] for name, column in KEPT if row.get(column)}
    return Sample(
        id=sample_id,
        task=INFO.subsets[subset][0],
        source=INFO.title,
        format="mcqa",
        images=[image],
        question=question,
        context=row.get("hint", ""),
        choices=picked[0],
        answer=picked[1],
        meta=meta,
    )


def _image(reader: Reader, path: Path, where: str, cell: str, images: dict[int, str]) -> str | None:
    """The decoded image of ``cell``, following a reference to another row's image."""
    if len(cell) <= REFERENCE_MAX:
        referenced = images.get(int(cell), "") if cell.isdigit() else ""
        if len(referenced) <= REFERENCE_MAX:
            reader.error(path, where, "image", f"{cell!r} is neither base64 image data nor the index of a row with one")
            return None
        cell = referenced
    try:
        data = base64.b64decode(cell, validate=True)
        with Image.open(io.BytesIO(data)) as im:
            kind = im.format or ""
            im.verify()
    except (binascii.Error, ValueError, OSError, SyntaxError) as exc:  # PIL raises SyntaxError on some broken PNGs
        reader.error(path, where, "image", f"not a base64-encoded image: {exc}")
        return None
    suffix = {"JPEG": ".jpg", "PNG": ".png", "GIF": ".gif", "BMP": ".bmp", "WEBP": ".webp"}.get(kind, ".img")
    return write_derived(reader.ctx, INFO.name, data, suffix)
