"""The annotators' forms: ``mmctx annotate export BENCH --sample N --annotators K --out DIR``.

    DIR/
      export.json                 the sample and the assignment (`mmctx.curate.annotation.export`)
      annotator-<k>.html          the form: every sampled demo with its images, question,
                                  options, gold answer and rationale, and the criteria to rate
      annotator-<k>.csv           the same items as a spreadsheet, rating columns left empty
      images/<sha256>.png|jpg     the images the spreadsheet rows name

The HTML form is one file that opens from disk and loads nothing: images are embedded as
``data:`` URLs, decoded and re-encoded by Pillow first (`mmctx.reporting.viewer.reencode_image`,
so nothing but pixels reaches the page). Every text of the benchmark is untrusted and written
with `html.escape`; the form's own data travels as JSON in a ``<script type="application/json">``
block that no string can close (`json_for_html`). A Content-Security-Policy admits only the
page's own style and script, by hash, and images from ``data:``. The script keeps the ratings in
the browser's local storage as they are given (a closed tab loses nothing) and *Save ratings*
downloads them as ``annotator-<k>.ratings.json``, the file ``mmctx annotate import`` reads.

In the CSV, a display cell starting with ``=``, ``+``, ``-``, ``@`` or a control character gets
a leading ``'``, so a spreadsheet shows it as text instead of evaluating it as a formula; the
columns import reads (``export_id``, ``annotator``, ``demo_id`` and the ratings) are never altered.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import html
import io
from dataclasses import dataclass
from pathlib import Path

from mmctx.curate.annotation.criteria import CRITERIA, Criterion
from mmctx.curate.annotation.export import (
    EXPORT_FILE,
    FORMAT,
    FORMAT_VERSION,
    AnnotationExport,
    AnnotatorForm,
    ExportError,
    plan_export,
    save_export,
)
from mmctx.curate.annotation.forms import ID_FIELDS, NOTE
from mmctx.reporting.viewer import ImageRefused, json_for_html, reencode_image
from mmctx.schema import Benchmark, ImagePathError, Sample

__all__ = ["CSV_COLUMNS", "ExportOutcome", "export_forms", "form_html", "form_rows"]

IMAGES_DIR = "images"
CSV_COLUMNS: tuple[str, ...] = (
    *ID_FIELDS[:2],
    "item",
    ID_FIELDS[2],
    "task",
    "images",
    "question",
    "options",
    "gold_answer",
    "rationale",
    *(c.name for c in CRITERIA),
    NOTE,
)
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n")


@dataclass(frozen=True)
class ShownImage:
    data_url: str
    file: str  # relative to the export folder


@dataclass(frozen=True)
class ExportOutcome:
    export: AnnotationExport
    folder: Path
    files: tuple[Path, ...]


def export_forms(bench: Benchmark, out: Path, per_task: int, annotators: int, seed: int = 0) -> ExportOutcome:
    """Sample, write every annotator's HTML and CSV form and ``export.json`` under ``out``.

    A folder that already holds an export is refused: forms already handed out would no longer
    match it.
    """
    out = Path(out)
    if (out / EXPORT_FILE).exists():
        raise ExportError(f"{out} already holds an export ({EXPORT_FILE}); choose another --out folder")
    export = plan_export(bench, per_task, annotators, seed)
    demos = {d.id: d for d in bench.demos}
    out.mkdir(parents=True, exist_ok=True)
    images = _write_images(bench, [demos[d.id] for d in export.demos], out)
    files = []
    for form in export.annotators:
        shown = [demos[i] for i in form.order]
        (out / form.html).write_text(form_html(export, form, shown, images), encoding="utf-8")
        _write_csv(out / form.csv, form_rows(export, form, shown, images))
        files += [out / form.html, out / form.csv]
    files.append(save_export(export, out))
    return ExportOutcome(export, out, tuple(files))


def _write_images(bench: Benchmark, demos: list[Sample], out: Path) -> dict[str, ShownImage]:
    """Each image of ``demos`` once, re-encoded: its data URL and its file under ``out/images``."""
    shown: dict[str, ShownImage] = {}
    for demo in demos:
        for i, rel in enumerate(demo.images):
            if rel in shown:
                continue
            try:
                data, ext = reencode_image(bench.image_path(rel).read_bytes())
            except (ImagePathError, ImageRefused, OSError) as exc:
                raise ExportError(f"demos[{demo.id}].images[{i}]: {rel!r} cannot be shown: {exc}") from None
            name = f"{IMAGES_DIR}/{hashlib.sha256(data).hexdigest()}{ext}"
            (out / IMAGES_DIR).mkdir(exist_ok=True)
            (out / name).write_bytes(data)
            mime = "image/jpeg" if ext == ".jpg" else "image/png"
            shown[rel] = ShownImage(f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}", name)
    return shown


# ---- the spreadsheet form -------------------------------------------------------------------


def _letter(i: int) -> str:
    return chr(ord("A") + i) if i < 26 else str(i + 1)


def _as_text_cell(value: str) -> str:
    return "'" + value if value.startswith(_FORMULA_START) else value


def form_rows(
    export: AnnotationExport, form: AnnotatorForm, demos: list[Sample], images: dict[str, ShownImage]
) -> list[dict[str, str]]:
    """One row per demo, in the form's order, with the rating cells empty."""
    rows = []
    for item, demo in enumerate(demos, start=1):
        options = "\n".join(f"{_letter(i)}. {c}" for i, c in enumerate(demo.choices))
        gold = (
            f"{_letter(demo.choices.index(demo.answer))}. {demo.answer}" if demo.answer in demo.choices else demo.answer
        )
        display = {
            "task": demo.task,
            "images": " ".join(images[rel].file for rel in demo.images),
            "question": "\n".join(t for t in (demo.question, demo.statement) if t),
            "options": options,
            "gold_answer": gold,
            "rationale": demo.rationale.reasoning if demo.rationale else "",
        }
        row = {"export_id": export.export_id, "annotator": form.annotator, "item": str(item), "demo_id": demo.id}
        row |= {k: _as_text_cell(v) for k, v in display.items()}
        row |= {c.name: "" for c in CRITERIA} | {NOTE: ""}
        rows.append(row)
    return rows


def _write_csv(path: Path, rows: list[dict[str, str]]) -> None:
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=list(CSV_COLUMNS), quoting=csv.QUOTE_MINIMAL, lineterminator="\r\n")
    writer.writeheader()
    writer.writerows(rows)
    # utf-8-sig: spreadsheet programs read a CSV without a BOM in the system's legacy encoding.
    path.write_text(buffer.getvalue(), encoding="utf-8-sig", newline="")


# ---- the HTML form --------------------------------------------------------------------------

_STYLE = """
html { scroll-padding-bottom: 5rem; }
body { font: 15px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 60rem; padding: 1rem 1.5rem 5rem; color: #1b1b1b; }
h1 { font-size: 1.4rem; }
.criteria dt { font-weight: 600; margin-top: .5rem; }
.item { border-top: 2px solid #888; margin-top: 2rem; padding-top: 1rem; }
.item h2 { font-size: 1.1rem; margin: 0; }
.about { color: #555; font-size: .85rem; word-break: break-all; }
.images img { max-width: 100%; max-height: 24rem; margin: .5rem .5rem 0 0; border: 1px solid #ccc; }
.text, .reasoning { white-space: pre-wrap; overflow-wrap: anywhere; }
.reasoning { background: #f4f4f0; padding: .5rem .75rem; border-left: 3px solid #aaa; }
.gold { font-weight: 600; }
fieldset { border: 1px solid #bbb; margin: .75rem 0; }
fieldset label { display: inline-block; margin-right: 1.25rem; }
textarea { box-sizing: border-box; width: 100%; min-height: 2.5rem; }
footer { position: fixed; bottom: 0; left: 0; right: 0; background: #fff; border-top: 1px solid #aaa; padding: .6rem 1.5rem; }
footer button { font-size: 1rem; margin-right: 1rem; }
"""

_SCRIPT = """
(() => {
  "use strict";
  const data = JSON.parse(document.getElementById("form-data").textContent);
  const storageKey = "mmctx-demo-validation:" + data.export_id + ":" + data.annotator;
  const items = Array.from(document.querySelectorAll("section.item"));
  const status = document.getElementById("status");

  function collect() {
    return items.map((section, i) => {
      const row = {demo_id: data.demo_ids[i]};
      for (const name of data.criteria) {
        const checked = section.querySelector("input[data-criterion='" + name + "']:checked");
        row[name] = checked ? checked.value : null;
      }
      row.note = section.querySelector("textarea").value;
      return row;
    });
  }

  function unrated(rows) {
    return rows.flatMap((row, i) => data.criteria.some((name) => row[name] === null) ? [i + 1] : []);
  }

  function update() {
    const rows = collect();
    const left = unrated(rows);
    let text = (rows.length - left.length) + " of " + rows.length + " items rated";
    if (left.length) {
      text += "; not yet: " + left.slice(0, 15).join(", ") + (left.length > 15 ? ", …" : "");
    }
    status.textContent = text;
    try { localStorage.setItem(storageKey, JSON.stringify(rows)); } catch (e) { /* storage off: nothing kept */ }
  }

  function restore() {
    let saved = null;
    try { saved = JSON.parse(localStorage.getItem(storageKey) || "null"); } catch (e) { saved = null; }
    if (!Array.isArray(saved)) { return; }
    saved.forEach((row, i) => {
      if (!row || i >= items.length || row.demo_id !== data.demo_ids[i]) { return; }
      for (const name of data.criteria) {
        for (const input of items[i].querySelectorAll("input[data-criterion='" + name + "']")) {
          input.checked = input.value === row[name];
        }
      }
      items[i].querySelector("textarea").value = typeof row.note === "string" ? row.note : "";
    });
  }

  function save() {
    const rows = collect();
    const out = {
      format: data.format, version: data.version, export_id: data.export_id,
      annotator: data.annotator, saved: new Date().toISOString(), ratings: rows,
    };
    const blob = new Blob([JSON.stringify(out, null, 2) + "\\n"], {type: "application/json"});
    const link = document.createElement("a");
    link.href = URL.createObjectURL(blob);
    link.download = data.ratings_file;
    document.body.appendChild(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 60000);
    const left = unrated(rows).length;
    status.textContent = "saved as " + data.ratings_file + (left ? " (" + left + " items not rated yet)" : "");
  }

  document.addEventListener("change", update);
  document.addEventListener("input", update);
  document.getElementById("save").addEventListener("click", save);
  restore();
  update();
})();
"""


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


CSP = (
    f"default-src 'none'; img-src data:; style-src {_csp_hash(_STYLE)}; script-src {_csp_hash(_SCRIPT)}; "
    "base-uri 'none'; form-action 'none'"
)


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _criteria_html() -> str:
    entries = []
    for c in CRITERIA:
        scale = "; ".join(_e(label) for label in c.labels)
        entries.append(f"<dt>{_e(c.title)}</dt><dd>{_e(c.question)} Scale: {scale}.</dd>")
    return f'<dl class="criteria">{"".join(entries)}</dl>'


def _rating_html(item: int, c: Criterion) -> str:
    choices = "".join(
        f'<label><input type="radio" name="item-{item}-{c.name}" value="{_e(value)}" data-criterion="{c.name}"> '
        f"{_e(label)}</label>"
        for value, label in zip(c.values, c.labels)
    )
    return f"<fieldset><legend>{_e(c.title)}: {_e(c.question)}</legend>{choices}</fieldset>"


def _item_html(item: int, total: int, demo: Sample, images: dict[str, ShownImage]) -> str:
    parts = [
        f'<section class="item" id="item-{item}">',
        f"<h2>Item {item} of {total}</h2>",
        f'<p class="about">demo {_e(demo.id)} · {_e(demo.task)} · {_e(demo.format)}</p>',
    ]
    if demo.images:
        imgs = "".join(
            f'<img src="{images[rel].data_url}" alt="image {i} of {len(demo.images)}">'
            for i, rel in enumerate(demo.images, start=1)
        )
        parts.append(f'<div class="images">{imgs}</div>')
    if demo.question:
        parts.append(f'<p><strong>Question</strong></p><p class="text">{_e(demo.question)}</p>')
    if demo.statement:
        parts.append(f'<p><strong>Statement</strong></p><p class="text">{_e(demo.statement)}</p>')
    heading = "Captions" if demo.format == "caption_foil" else "Options"
    options = "".join(f'<li class="text">{_e(c)}</li>' for c in demo.choices)
    parts.append(f'<p><strong>{heading}</strong></p><ol type="A">{options}</ol>')
    gold = demo.answer
    if demo.answer in demo.choices:
        gold = f"{_letter(demo.choices.index(demo.answer))}. {demo.answer}"
    parts.append(f'<p class="gold">Gold answer: {_e(gold)}</p>')
    reasoning = demo.rationale.reasoning if demo.rationale else ""
    final = demo.rationale.answer if demo.rationale else ""
    if final in demo.choices:
        final = f"{_letter(demo.choices.index(final))}. {final}"
    parts.append(
        f'<p><strong>Reasoning chain</strong></p><div class="reasoning text">{_e(reasoning)}</div>'
        f"<p>Final answer of the reasoning chain: {_e(final)}</p>"
    )
    parts += [_rating_html(item, c) for c in CRITERIA]
    parts.append(f'<label>Note (optional)<textarea name="item-{item}-note"></textarea></label>')
    parts.append("</section>")
    return "\n".join(parts)


def form_html(export: AnnotationExport, form: AnnotatorForm, demos: list[Sample], images: dict[str, ShownImage]) -> str:
    """The annotator's whole form as one HTML page."""
    data = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "export_id": export.export_id,
        "annotator": form.annotator,
        "ratings_file": form.ratings,
        "criteria": [c.name for c in CRITERIA],
        "demo_ids": [d.id for d in demos],
    }
    items = "\n".join(_item_html(i, len(demos), d, images) for i, d in enumerate(demos, start=1))
    title = f"Demonstration validation: {export.benchmark_name}, annotator {form.annotator}"
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(title)}</title>
<style>{_STYLE}</style>
</head>
<body>
<header>
<h1>{_e(title)}</h1>
<p>Each item below is a demonstration: its image(s), its question and options, the gold answer, and
a model-written reasoning chain that ends in a final answer. Rate every item on both criteria,
on your own, without consulting the other annotators.</p>
{_criteria_html()}
<p>Your ratings are kept in this browser as you go. When you are done, press <em>Save ratings</em>
and send the file it saves, <code>{_e(form.ratings)}</code>, back. Export {_e(export.export_id)}.</p>
</header>
<main>
{items}
</main>
<footer><button type="button" id="save">Save ratings</button><span id="status" role="status"></span></footer>
<script type="application/json" id="form-data">{json_for_html(data)}</script>
<script>{_SCRIPT}</script>
</body>
</html>
"""
