"""The record reader every source converter uses.

A `Reader` is bound to one dataset folder and one `Conversion`. A helper that finds a problem
appends a `SourceError` (file relative to the dataset folder, where, field) and returns ``None``
(``False`` for `claim`), so a converter reads as a straight line of checks and a bad record never
stops the others.

Bytes that are not UTF-8 cost only the record that holds them. Files are decoded with Python's
``surrogateescape`` handler, which keeps each bad byte as one lone surrogate (U+DC80–U+DCFF, never
produced by valid UTF-8), so the rest of the file still reads; a line (JSONL, text), a table row
(TSV/CSV) or a record of a whole-file JSON document holding one is reported with its file, line,
column and byte offset, and the others go on. In a whole-file JSON document the record is the
element of the first list on the way to the bad string, or the value of an object whose values are
all objects (VALSE's ``{key: record}``); a bad byte outside any record rejects the file, naming
where. A skipped list element is replaced by `DROPPED`, so the records after it keep their index
(several converters build ids from it); `list_records` and `record` pass over it silently, as its
error is already reported.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import itertools
import json
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from mmctx.data.sources.base import Conversion, SourceContext, SourceError
from mmctx.jsonl import split_records
from mmctx.schema import Sample

K = TypeVar("K")

# What ``surrogateescape`` decodes a byte that is not UTF-8 to.
UNDECODABLE = re.compile("[\udc80-\udcff]")
Route = tuple[str | int, ...]  # keys and indices from a JSON document's root to a value


class _Dropped:
    """Stands in a JSON list for a record skipped for bytes that are not UTF-8 (already reported)."""

    def __repr__(self) -> str:
        return "<record skipped: not UTF-8>"


DROPPED = _Dropped()


@dataclasses.dataclass
class Reader:
    ctx: SourceContext
    source: str  # the dataset's folder name under the sources root
    out: Conversion
    _ids: set[str] = dataclasses.field(default_factory=set)  # sample ids produced so far, for `claim`

    @property
    def folder(self) -> Path:
        return self.ctx.folder(self.source)

    def file(self, path: Path) -> str:
        """``path`` relative to the dataset folder, as errors and ``meta["source_file"]`` name it."""
        return path.relative_to(self.folder).as_posix()

    def rel(self, full: Path) -> str:
        """Sample image path (relative to the sources root) of a file under the dataset folder.

        Lexical (`SourceContext.rel`): `image` already refused ``..`` and absolute references, and
        resolving would break where an image folder is a symlink to a shared copy of COCO or VG.
        """
        return self.ctx.rel(full)

    # -- outcomes -------------------------------------------------------------------------------

    def error(self, path: Path, where: str, field: str, message: str) -> None:
        self.out.errors.append(SourceError(self.source, self.file(path), where, field, message))

    def skip(self, rule: str, count: int = 1) -> None:
        """Count records the dataset's own rules exclude (not errors)."""
        self.out.skipped[rule] += count

    def missing_all(self, expected: Sequence[str]) -> None:
        """One error for a folder holding none of a dataset's files (a wrong root, usually)."""
        message = f"none of the expected files found: {', '.join(expected)}"
        self.out.errors.append(SourceError(self.source, ".", "folder", "(files)", message))

    def claim(self, sample_id: str, path: Path, where: str, field: str) -> bool:
        """False (and an error) when ``sample_id`` was already produced: ids must be unique per source."""
        if sample_id in self._ids:
            self.error(path, where, field, f"duplicate key: sample id {sample_id!r} already used")
            return False
        self._ids.add(sample_id)
        return True

    # -- files ----------------------------------------------------------------------------------

    def present(self, files: Mapping[K, str]) -> dict[K, Path]:
        """The files (relative to the dataset folder) that exist, by key; none at all is `missing_all`."""
        found = {key: self.folder / name for key, name in files.items() if (self.folder / name).is_file()}
        if not found:
            self.missing_all(list(files.values()))
        return found

    def first(self, names: Sequence[str]) -> Path | None:
        """The first of ``names`` (alternative revisions of one file) that exists; none is `missing_all`."""
        path = next((self.folder / name for name in names if (self.folder / name).is_file()), None)
        if path is None:
            self.missing_all(list(names))
        return path

    def decoded(self, path: Path) -> str | None:
        """The file's text, a leading BOM removed; each byte that is not UTF-8 kept as a lone surrogate."""
        try:
            data = path.read_bytes()
        except OSError as exc:
            self.error(path, "file", "(file)", f"unreadable: {exc}")
            return None
        return data.decode("utf-8", errors="surrogateescape").removeprefix("\ufeff")

    def json_file(self, path: Path) -> Any | None:
        """A whole JSON document; a syntax error names the parser's line.

        A record holding bytes that are not UTF-8 is skipped with an error naming it, the field,
        and the byte's line, column and offset (see the module's docstring); the rest is returned.
        """
        text = self.decoded(path)
        if text is None:
            return None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            if UNDECODABLE.match(text, exc.pos):  # a bad byte outside any string
                place = _position(text, exc.pos)
                self.error(path, f"line {place[0]}", "(encoding)", _not_utf8(text[exc.pos], place, "file"))
            else:
                self.error(path, f"line {exc.lineno}", "(json)", f"invalid JSON: {exc.msg} (column {exc.colno})")
            return None
        if UNDECODABLE.search(text) is None:
            return data
        return self._drop_undecodable(path, text, data)

    def _drop_undecodable(self, path: Path, text: str, data: Any) -> Any | None:
        """``data`` without the records holding bytes that are not UTF-8; None if one lies outside any record."""
        bad = list(_undecodable_strings(data, ()))
        places = _positions(text)
        # Bad strings come in file order; each takes as many places as it holds bad bytes. The counts
        # differ only where the document also escapes a lone surrogate ("\udcff"), also not text.
        counts = [len(UNDECODABLE.findall(held)) for _, held in bad]
        firsts: list[tuple[int, int, int] | None] = [None] * len(bad)
        if sum(counts) == len(places):
            firsts = [places[taken - n] for taken, n in zip(itertools.accumulate(counts), counts)]
        dropped: dict[tuple[int, str | int], tuple[list[Any] | dict[str, Any], str | int]] = {}
        tables: dict[int, bool] = {}  # `_is_table`, asked once per object (the data is not changed until the end)
        for (route, held), place in zip(bad, firsts):
            char = UNDECODABLE.search(held).group()  # type: ignore[union-attr]
            found = _record_at(data, route, tables)
            if found is None:
                where = f"line {place[0]}" if place else "file"
                self.error(path, where, _field(route) or "(key)", _not_utf8(char, place, "file"))
                return None
            container, step, depth = found
            if (id(container), step) in dropped:
                continue  # one error per record
            dropped[(id(container), step)] = (container, step)
            where = f"index {step}" if isinstance(container, list) else f"key {_shown(str(step))}"
            self.error(path, where, _field(route[depth + 1 :]) or "(key)", _not_utf8(char, place, "record"))
        for container, step in dropped.values():
            if isinstance(container, list):
                container[step] = DROPPED  # type: ignore[index]  # keeps the index of every later record
            else:
                del container[step]  # type: ignore[arg-type]
        return data

    def json_list(self, path: Path) -> list[Any] | None:
        """A JSON file whose top level is a list of records."""
        data = self.json_file(path)
        if data is not None and not isinstance(data, list):
            self.error(path, "top level", "(json)", f"expected a JSON list of records, got {type(data).__name__}")
            return None
        return data

    def convert_lists(self, files: dict[str, str], parse: Callable[..., Sample | None]) -> Conversion:
        """``parse(reader, subset, path, index, record)`` over every record of JSON-list files."""
        for subset, path, index, record in self.list_records(files):
            sample = parse(self, subset, path, index, record)
            if sample is not None:
                self.out.samples.append(sample)
        return self.out

    def list_records(self, files: dict[str, str]) -> Iterator[tuple[str, Path, int, Any]]:
        """``(subset, path, index, record)`` over every present file holding a JSON list of records."""
        for subset, path in self.present(files).items():
            for index, record in enumerate(self.json_list(path) or []):
                if record is not DROPPED:
                    yield subset, path, index, record

    def lines(self, path: Path) -> Iterator[tuple[int, str]]:
        """(1-based line number, line without its end) per non-blank line; CRLF and a BOM are tolerated.

        Split on "\\n" only (`mmctx.jsonl.split_records`). A line holding bytes that are not UTF-8
        is an error naming its line and column, and the others go on.
        """
        text = self.decoded(path)
        if text is None:
            return
        for number, line in split_records(text):
            bad = UNDECODABLE.search(line)
            if bad is not None:
                column = len(line[: bad.start()].encode("utf-8", "surrogateescape")) + 1
                self.error(
                    path,
                    f"line {number}",
                    "(encoding)",
                    f"not UTF-8: byte 0x{_byte(bad.group())} at column {column}; line skipped",
                )
                continue
            yield number, line

    def table_rows(
        self, path: Path, delimiter: str, required: Sequence[str] = ()
    ) -> Iterator[tuple[int, dict[str, str | None]]]:
        """(first line, row by column) per row of a CSV/TSV file with a header row.

        A header lacking a ``required`` column is one error and no rows; a row that is not
        parseable, or holds bytes that are not UTF-8, is an error naming its line, and the others go on.
        """
        text = self.decoded(path)
        if text is None:
            return
        csv.field_size_limit(2**31 - 1)  # a cell may hold a whole base64 image
        table = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter)
        header = table.fieldnames or []
        if any(UNDECODABLE.search(name) for name in header):
            self.error(path, "line 1", "(encoding)", "not UTF-8: the header row; file skipped")
            return
        missing = [c for c in required if c not in header]
        if missing:
            self.error(path, "line 1", ",".join(missing), f"header lacks column(s) {missing}")
            return
        while True:
            start = table.line_num + 1
            try:
                row = next(table)
            except StopIteration:
                return
            except csv.Error as exc:
                self.error(path, f"line {table.line_num}", "(table)", f"unparseable row: {exc}")
                continue
            bad = next((k for k, v in row.items() if isinstance(v, str) and UNDECODABLE.search(v)), None)
            if bad is not None:
                byte = _byte(UNDECODABLE.search(row[bad] or "").group())  # type: ignore[union-attr]
                message = f"not UTF-8: byte 0x{byte} in column {bad!r}; row skipped"
                self.error(path, f"line {start}", "(encoding)", message)
                continue
            yield start, row

    def jsonl(self, path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
        """(1-based line number, object) per non-blank line; a bad line is an error, not the end."""
        for number, line in self.lines(path):
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                self.error(path, f"line {number}", "(json)", f"invalid JSON: {exc.msg} (column {exc.colno})")
                continue
            record = self.record(value, path, f"line {number}")
            if record is not None:
                yield number, record

    # -- fields ---------------------------------------------------------------------------------

    def record(self, value: Any, path: Path, where: str) -> dict[str, Any] | None:
        """A record that must be a JSON object (`DROPPED`: None, its error already reported)."""
        if value is DROPPED:
            return None
        if not isinstance(value, dict):
            self.error(path, where, "(record)", f"expected a JSON object, got {type(value).__name__}")
            return None
        return value

    def text(self, value: Any, path: Path, where: str, field: str) -> str | None:
        """A non-empty string field."""
        if not isinstance(value, str) or not value.strip():
            self.error(path, where, field, f"expected a non-empty string, got {value!r}")
            return None
        return value

    def integer(self, value: Any, path: Path, where: str, field: str) -> int | None:
        """An integer field (JSON ``true`` is a bool to Python, and not a count or an id)."""
        if isinstance(value, bool) or not isinstance(value, int):
            self.error(path, where, field, f"expected an integer, got {value!r}")
            return None
        return value

    def options(self, value: Any, path: Path, where: str, field: str) -> list[str] | None:
        """2–4 distinct non-empty strings (distinct ignoring case and surrounding spaces, as the schema checks)."""
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            self.error(path, where, field, f"expected a list of non-empty strings, got {value!r}")
            return None
        if not 2 <= len(value) <= 4:
            self.error(path, where, field, f"expected 2–4 options, got {len(value)}")
            return None
        dupes = [v for v, n in Counter(v.strip().casefold() for v in value).items() if n > 1]
        if dupes:
            self.error(path, where, field, f"duplicate option(s) {dupes!r}")
            return None
        return value

    def lettered(
        self, options: dict[str, Any], answer: Any, path: Path, where: str, fields: str, answer_field: str
    ) -> tuple[list[str], str] | None:
        """(choices, answer text) from ``{letter: text}`` options (empty ones dropped) and a gold letter."""
        choices = self.options([t for t in options.values() if t], path, where, fields)
        if choices is None:
            return None
        letter = answer.strip().upper() if isinstance(answer, str) else answer
        if letter not in options or not options[letter]:
            given = [k for k, t in options.items() if t]
            self.error(path, where, answer_field, f"expected one of the letters {given}, got {answer!r}")
            return None
        return choices, options[letter]

    def image(
        self, ref: Any, path: Path, where: str, field: str, under: str = "", suffixes: Sequence[str] = ()
    ) -> Path | None:
        """The existing file ``ref`` names, relative to ``folder/under``; never outside the folder.

        ``suffixes`` are tried after the bare name, for datasets whose references omit the extension.
        """
        if not isinstance(ref, str) or not ref.strip():
            self.error(path, where, field, f"expected an image path, got {ref!r}")
            return None
        if not is_safe_relative(ref):
            self.error(path, where, field, f"{ref!r} must be a relative path inside the dataset folder")
            return None
        for suffix in ("", *suffixes):
            full = self.folder / under / f"{ref}{suffix}"
            if full.is_file():
                return full
        tried = f" (also tried {', '.join(suffixes)})" if suffixes else ""
        shown = PurePosixPath(under, ref).as_posix()
        self.error(path, where, field, f"image {shown!r} not found in the dataset folder{tried}")
        return None


def is_safe_relative(ref: str) -> bool:
    """No absolute path, drive, backslash root or ``..`` component."""
    if ref.startswith(("/", "\\")) or (len(ref) > 1 and ref[1] == ":"):
        return False
    return ".." not in PurePosixPath(ref.replace("\\", "/")).parts


# -- bytes that are not UTF-8 ---------------------------------------------------------------------


def _byte(char: str) -> str:
    """The raw byte (two hex digits) that ``surrogateescape`` decoded to ``char``."""
    return f"{ord(char) - 0xDC00:02x}"


def _shown(text: str) -> str:
    """``text`` printable and writable as UTF-8: each bad byte becomes U+FFFD."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _position(text: str, index: int) -> tuple[int, int, int]:
    """(1-based line, 1-based byte column, 0-based byte offset in the file, BOM excluded) of ``text[index]``."""
    start = text.rfind("\n", 0, index) + 1
    column = len(text[start:index].encode("utf-8", "surrogateescape")) + 1
    offset = len(text[:index].encode("utf-8", "surrogateescape"))
    return text.count("\n", 0, index) + 1, column, offset


def _positions(text: str) -> list[tuple[int, int, int]]:
    """`_position` of every bad byte in ``text``, in one pass (a file in another encoding has thousands)."""
    places = []
    line, line_offset, offset, last = 1, 0, 0, 0
    for match in UNDECODABLE.finditer(text):
        chunk = text[last : match.start()]
        size = len(chunk.encode("utf-8", "surrogateescape"))
        newline = chunk.rfind("\n")
        if newline >= 0:
            line += chunk.count("\n")
            line_offset = offset + len(chunk[: newline + 1].encode("utf-8", "surrogateescape"))
        offset += size
        places.append((line, offset - line_offset + 1, offset))
        last = match.start()
    return places


def _not_utf8(char: str, place: tuple[int, int, int] | None, what: str) -> str:
    """The message for a bad byte (``char`` as ``surrogateescape`` decoded it) at ``place`` (`_position`)."""
    if place is None:
        return f"not UTF-8: byte 0x{_byte(char)}; {what} skipped"
    line, column, offset = place
    return f"not UTF-8: byte 0x{_byte(char)} at line {line}, column {column} (byte offset {offset}); {what} skipped"


def _undecodable_strings(value: Any, route: Route) -> Iterator[tuple[Route, str]]:
    """(route, the string) per string or object key holding a bad byte, in document (file) order."""
    if isinstance(value, str):
        if UNDECODABLE.search(value):
            yield route, value
    elif isinstance(value, dict):
        for key, item in value.items():
            if UNDECODABLE.search(key):
                yield (*route, key), key
            yield from _undecodable_strings(item, (*route, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _undecodable_strings(item, (*route, index))


def _is_table(value: Any, seen: dict[int, bool]) -> bool:
    """An object of records keyed by id (VALSE's ``{key: record}``): every value an object.

    ``seen`` remembers the answer per object, so a file of many bad records stays linear.
    """
    if not isinstance(value, dict):
        return False
    if id(value) not in seen:
        seen[id(value)] = bool(value) and all(isinstance(v, dict) for v in value.values())
    return seen[id(value)]


def _record_at(
    data: Any, route: Route, seen: dict[int, bool]
) -> tuple[list[Any] | dict[str, Any], str | int, int] | None:
    """(container, step, depth) of the record holding the value at ``route``; None outside any record."""
    node = data
    for depth, step in enumerate(route):
        if isinstance(node, list) or _is_table(node, seen):
            return node, step, depth
        node = node[step]
    return None


def _field(route: Route) -> str:
    """A route as a field name: ``more[1]``, ``task_instance.context``."""
    text = ""
    for step in route:
        text += f"[{step}]" if isinstance(step, int) else (f".{_shown(step)}" if text else _shown(step))
    return text
