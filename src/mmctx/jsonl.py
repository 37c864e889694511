"""The one JSONL reader: every ``.jsonl`` file mmctx reads goes through here.

Records are split on ``\\n`` only. ``str.splitlines`` (and anything built on it) also breaks at
U+2028, U+2029, U+0085, ``\\x0b``, ``\\x0c`` and ``\\x1c``–``\\x1e``, which ``json.dumps(...,
ensure_ascii=False)`` writes raw inside strings, so a question or a model reply holding one of
them would be cut in two. A trailing ``\\r`` (CRLF files) and a leading BOM are tolerated; blank
lines are skipped; a line that is not JSON raises `JsonlError` naming the file and line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["JsonlError", "iter_jsonl", "read_jsonl", "split_records"]


class JsonlError(ValueError):
    """A ``.jsonl`` line that is not a JSON value (or not an object where one is required)."""

    def __init__(self, path: str | Path, line: int, message: str) -> None:
        super().__init__(f"{path}:{line}: {message}")
        self.path = str(path)
        self.line = line


def split_records(text: str) -> Iterator[tuple[int, str]]:
    """``(1-based line number, line)`` per non-blank line of ``text``, split on ``\\n`` only."""
    if text.startswith("\ufeff"):
        text = text[1:]
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.rstrip("\r")
        if line.strip():
            yield number, line


def iter_jsonl(path: str | Path, objects: bool = True) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` per record of a ``.jsonl`` file.

    Streams the file in binary and splits on ``b"\\n"`` so memory stays one line deep whatever the
    file's size. With ``objects`` (the default) every value must be a JSON object.
    """
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            raw = raw.rstrip(b"\r\n")
            if not raw.strip():
                continue
            try:
                value = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as exc:
                raise JsonlError(path, number, f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
            except json.JSONDecodeError as exc:
                raise JsonlError(path, number, f"not JSON ({exc.msg}, column {exc.colno})") from None
            if objects and not isinstance(value, dict):
                raise JsonlError(path, number, f"expected a JSON object, got {type(value).__name__}")
            yield number, value


def read_jsonl(path: str | Path, objects: bool = True) -> list[Any]:
    """Every record of a ``.jsonl`` file, in order (see `iter_jsonl`)."""
    return [value for _, value in iter_jsonl(path, objects=objects)]
