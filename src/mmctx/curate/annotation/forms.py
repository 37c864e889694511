"""Reading filled forms back: the HTML form's saved ratings (JSON) or the spreadsheet form (CSV).

Every problem is collected, not only the first, and each names the file, the row (a CSV's
spreadsheet row, the header being row 1; a JSON file's ``ratings[i]``), the demo where it is
known, and the field: a missing rating, a rating off its scale, an unknown demo id, a demo
rated twice, a demo left out, a file of another export or of an annotator the export does not
have, and a file that is not a form at all.

A CSV form found in a folder with every rating cell empty is the blank form of an annotator who
used the HTML form instead: it is passed over (and counted), not reported as all missing.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmctx.curate.annotation.criteria import CRITERIA, Criterion
from mmctx.curate.annotation.export import EXPORT_FILE, FORMAT, AnnotationExport, ExportError, load_export
from mmctx.schema import listed

RATINGS_SUFFIX = ".ratings.json"
NOTE = "note"
# The columns and keys a form must carry besides the criteria.
ID_FIELDS = ("export_id", "annotator", "demo_id")


@dataclass(frozen=True)
class FormProblem:
    """One thing wrong with a filled form, pointing at the file, row and field."""

    file: str
    row: str  # "row 3" (CSV) or "ratings[2]" (JSON); empty for the whole file
    field: str
    message: str
    demo: str = ""

    def __str__(self) -> str:
        where = self.file
        if self.row:
            where += f": {self.row}" + (f" (demo {self.demo!r})" if self.demo else "")
        if self.field:
            where += f", {self.field}" if self.row else f": {self.field}"
        return f"{where}: {self.message}"


class FormError(ValueError):
    """Filled forms that cannot be used; carries every problem found."""

    def __init__(self, problems: list[FormProblem]):
        self.problems = problems
        super().__init__(listed(f"{len(problems)} problem(s) in the filled forms:", problems))


@dataclass(frozen=True)
class Rating:
    demo_id: str
    values: dict[str, str]  # criterion name -> scale value
    note: str = ""


@dataclass(frozen=True)
class FilledForm:
    path: Path
    annotator: str
    ratings: dict[str, Rating]  # demo id -> its rating


@dataclass(frozen=True)
class FormInputs:
    """What the paths given to ``mmctx annotate import`` hold."""

    export: AnnotationExport
    export_dir: Path
    files: list[Path]
    scanned: set[Path] = field(default_factory=set)  # files found in a folder rather than named


@dataclass(frozen=True)
class RatingTable:
    """Every annotator's rating of every sampled demo, by criterion."""

    export: AnnotationExport
    annotators: tuple[str, ...]  # those whose forms came back, in the export's order
    missing_annotators: tuple[str, ...]
    demo_ids: tuple[str, ...]  # the export's order
    values: dict[str, dict[str, dict[str, str]]]  # criterion -> demo id -> annotator -> value
    forms: tuple[FilledForm, ...]
    blank: tuple[Path, ...]  # untouched CSV forms passed over


def find_inputs(paths: Sequence[Path]) -> FormInputs:
    """The export and the form files among ``paths`` (folders are searched one level deep)."""
    exports: dict[Path, Path] = {}
    files: list[Path] = []
    scanned: set[Path] = set()
    for path in map(Path, paths):
        if path.is_dir():
            if (path / EXPORT_FILE).is_file():
                exports[(path / EXPORT_FILE).resolve()] = path
            found = sorted(path.glob(f"*{RATINGS_SUFFIX}")) + sorted(path.glob("*.csv"))
            files += found
            scanned |= {f.resolve() for f in found}
        elif path.is_file():
            files.append(path)
            if (path.parent / EXPORT_FILE).is_file():
                exports[(path.parent / EXPORT_FILE).resolve()] = path.parent
        else:
            raise ExportError(f"{path}: no such file or folder")
    if not exports:
        raise ExportError(
            f"no {EXPORT_FILE} found beside the forms given; pass the folder `mmctx annotate export` wrote"
        )
    loaded = {path: load_export(path) for path in exports}
    ids = {e.export_id for e in loaded.values()}
    if len(ids) > 1:
        raise ExportError(f"forms of more than one export given: {', '.join(str(p) for p in loaded)}")
    first = next(iter(loaded))
    unique: dict[Path, Path] = {}  # a file named and also found in its folder is read once, under the name given
    for f in files:
        unique.setdefault(f.resolve(), f)
    return FormInputs(loaded[first], exports[first], list(unique.values()), scanned)


def read_ratings(inputs: FormInputs) -> RatingTable:
    """Read and check every form; raises `FormError` listing every problem."""
    export = inputs.export
    problems: list[FormProblem] = []
    forms: list[FilledForm] = []
    blank: list[Path] = []
    for path in inputs.files:
        raw, file_problems = _read_raw(path)
        problems += file_problems
        if raw is None:
            continue
        if path.resolve() in inputs.scanned and path.suffix == ".csv" and _is_blank(raw):
            blank.append(path)
            continue
        form, form_problems = _check_form(raw, export)
        problems += form_problems
        if form is not None:
            forms.append(form)
    by_annotator: dict[str, list[FilledForm]] = {}
    for form in forms:
        by_annotator.setdefault(form.annotator, []).append(form)
    for annotator, same in by_annotator.items():
        if len(same) > 1:
            names = ", ".join(str(f.path) for f in same)
            problems.append(
                FormProblem(str(same[1].path), "", "annotator", f"annotator {annotator!r} has two forms: {names}")
            )
    if not problems and len(forms) < 2:
        got = ", ".join(str(f.path) for f in forms) or "none"
        problems.append(
            FormProblem(
                str(inputs.export_dir), "", "", f"agreement needs the forms of at least two annotators; found {got}"
            )
        )
    if problems:
        raise FormError(problems)
    return _table(export, forms, blank)


def _table(export: AnnotationExport, forms: list[FilledForm], blank: list[Path]) -> RatingTable:
    returned = {f.annotator: f for f in forms}
    annotators = tuple(a.annotator for a in export.annotators if a.annotator in returned)
    demo_ids = tuple(d.id for d in export.demos)
    values = {
        c.name: {d: {a: returned[a].ratings[d].values[c.name] for a in annotators} for d in demo_ids}
        for c in _criteria(export)
    }
    missing = tuple(a.annotator for a in export.annotators if a.annotator not in returned)
    ordered = tuple(returned[a] for a in annotators)
    return RatingTable(export, annotators, missing, demo_ids, values, ordered, tuple(blank))


def _criteria(export: AnnotationExport) -> list[Criterion]:
    return [c for c in CRITERIA if c.name in export.criteria]


# ---- one file -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _RawForm:
    """A form file as read, before any check: file-level ids and (where, cells) rows."""

    path: Path
    export_ids: list[tuple[str, Any]]  # (where, value)
    annotators: list[tuple[str, Any]]
    rows: list[tuple[str, dict[str, Any]]]


def _read_raw(path: Path) -> tuple[_RawForm | None, list[FormProblem]]:
    name = str(path)
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        return None, [FormProblem(name, "", "", f"cannot be read ({exc.strerror})")]
    except UnicodeDecodeError as exc:
        return None, [FormProblem(name, "", "", f"not UTF-8 ({exc.reason} at byte {exc.start})")]
    if path.suffix == ".json":
        return _read_json(path, text)
    if path.suffix == ".csv":
        return _read_csv(path, text)
    return None, [FormProblem(name, "", "", f"not a form: expected a {RATINGS_SUFFIX} or .csv file")]


def _read_json(path: Path, text: str) -> tuple[_RawForm | None, list[FormProblem]]:
    name = str(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, [FormProblem(name, "", "", f"not JSON ({exc.msg}, line {exc.lineno} column {exc.colno})")]
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None, [
            FormProblem(name, "", "format", f'not a ratings file of `mmctx annotate` (no "format": "{FORMAT}")')
        ]
    ratings = data.get("ratings")
    if not isinstance(ratings, list):
        return None, [FormProblem(name, "", "ratings", "missing, or not a list")]
    rows: list[tuple[str, dict[str, Any]]] = []
    problems = []
    for i, row in enumerate(ratings):
        if isinstance(row, dict):
            rows.append((f"ratings[{i}]", row))
        else:
            problems.append(FormProblem(name, f"ratings[{i}]", "", f"not an object but {type(row).__name__}"))
    return _RawForm(path, [("", data.get("export_id"))], [("", data.get("annotator"))], rows), problems


def _read_csv(path: Path, text: str) -> tuple[_RawForm | None, list[FormProblem]]:
    name = str(path)
    header_line = text.split("\n", 1)[0]
    # Spreadsheets in some locales save with ';' or tabs.
    delimiter = max(",;\t", key=header_line.count)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        table = list(reader)
    except csv.Error as exc:
        return None, [FormProblem(name, f"row {reader.line_num}", "", f"not a CSV file ({exc})")]
    if not table:
        return None, [FormProblem(name, "", "", "empty file")]
    header = [h.strip() for h in table[0]]
    needed = list(ID_FIELDS) + [c.name for c in CRITERIA]
    absent = [h for h in needed if h not in header]
    if absent:
        return None, [FormProblem(name, "row 1", ", ".join(absent), "missing column(s) in the header")]
    rows = []
    for number, cells in enumerate(table[1:], start=2):
        if not any(c.strip() for c in cells):
            continue  # a blank line a spreadsheet left at the end
        rows.append((f"row {number}", dict(zip(header, cells))))
    return _RawForm(
        path, [(w, r.get("export_id")) for w, r in rows], [(w, r.get("annotator")) for w, r in rows], rows
    ), []


def _is_blank(raw: _RawForm) -> bool:
    return all(not str(cells.get(c.name) or "").strip() for _, cells in raw.rows for c in CRITERIA)


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # a JSON number written by hand as 1.0
    return str(value).strip()


def _check_form(raw: _RawForm, export: AnnotationExport) -> tuple[FilledForm | None, list[FormProblem]]:
    name = str(raw.path)
    problems: list[FormProblem] = []
    # Which export and annotator: one value throughout the file.
    ids = {_text(v) for _, v in raw.export_ids}
    if ids != {export.export_id}:
        shown = ", ".join(repr(i) for i in sorted(ids)) or "none"
        problems.append(
            FormProblem(
                name, "", "export_id", f"the file belongs to export {shown}, not to this export {export.export_id!r}"
            )
        )
    annotators = {_text(v) for _, v in raw.annotators}
    known = [a.annotator for a in export.annotators]
    if len(annotators) != 1 or next(iter(annotators)) not in known:
        shown = ", ".join(repr(a) for a in sorted(annotators)) or "none"
        problems.append(
            FormProblem(name, "", "annotator", f"annotator {shown} is not one of this export's ({', '.join(known)})")
        )
    if problems:
        return None, problems  # ratings of another export or annotator are not checked row by row
    annotator = next(iter(annotators))
    form = export.form(annotator)
    assert form is not None
    assigned = set(form.order)
    ratings: dict[str, Rating] = {}
    first_seen: dict[str, str] = {}
    for where, cells in raw.rows:
        demo_id = _text(cells.get("demo_id"))
        if not demo_id:
            problems.append(FormProblem(name, where, "demo_id", "missing demo id"))
            continue
        if demo_id not in assigned:
            what = "not in this annotator's form" if export.demo(demo_id) else "not in this export"
            problems.append(FormProblem(name, where, "demo_id", f"unknown demo id {demo_id!r}: {what}", demo_id))
            continue
        if demo_id in first_seen:
            problems.append(FormProblem(name, where, "demo_id", f"rated twice (also {first_seen[demo_id]})", demo_id))
            continue
        first_seen[demo_id] = where
        values: dict[str, str] = {}
        for criterion in CRITERIA:
            raw_value = cells.get(criterion.name)
            if raw_value is None or not str(raw_value).strip():
                problems.append(FormProblem(name, where, criterion.name, "missing rating", demo_id))
                continue
            value = criterion.parse(raw_value)
            if value is None:
                problems.append(
                    FormProblem(
                        name, where, criterion.name, f"{raw_value!r} is not on the scale ({criterion.scale})", demo_id
                    )
                )
                continue
            values[criterion.name] = value
        if len(values) == len(CRITERIA):
            ratings[demo_id] = Rating(demo_id, values, str(cells.get(NOTE) or ""))
    left_out = [d for d in form.order if d not in first_seen]
    if left_out:
        shown = ", ".join(repr(d) for d in left_out[:10]) + (
            f" and {len(left_out) - 10} more" if len(left_out) > 10 else ""
        )
        problems.append(FormProblem(name, "", "demo_id", f"no rating of {len(left_out)} demo(s) of this form: {shown}"))
    return (None if problems else FilledForm(raw.path, annotator, ratings)), problems
