"""The record reader every source converter uses.

A `Reader` is bound to one dataset folder and one `Conversion`. A helper that finds a problem
appends a `SourceError` (file relative to the dataset folder, where, field) and returns ``None``
(``False`` for `claim`), so a converter reads as a straight line of checks and a bad record never
stops the others.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from mmctx.data.sources.base import Conversion, SourceContext, SourceError
from mmctx.schema import Sample

K = TypeVar("K")


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

    def json_file(self, path: Path) -> Any | None:
        """A whole JSON document; a syntax error names the parser's line."""
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            self.error(path, f"line {exc.lineno}", "(json)", f"invalid JSON: {exc.msg} (column {exc.colno})")
        except (OSError, UnicodeDecodeError) as exc:
            self.error(path, "file", "(file)", f"unreadable: {exc}")
        return None

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
                yield subset, path, index, record

    def lines(self, path: Path) -> Iterator[tuple[int, str]]:
        """(1-based line number, line without its end) per non-blank line; CRLF and a BOM are tolerated."""
        try:
            text = path.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            self.error(path, "file", "(file)", f"unreadable: {exc}")
            return
        # Split on "\n" only: str.splitlines would also break inside a line at \x0b, \x1c or U+2028.
        for number, line in enumerate(text.split("\n"), start=1):
            line = line.rstrip("\r")
            if line.strip():
                yield number, line

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
        """A record that must be a JSON object."""
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
