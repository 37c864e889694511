"""Names from runs and benchmarks written into Markdown: as text, never as markup.

Task, subset, setting, scorer and model names come from files anyone can write. In Markdown
(``report.md``, the tables ``mmctx`` prints, the viewer's summary) such a name must read back as
exactly itself, so `markdown_text`:

- writes ``&``, ``<`` and ``>`` as HTML entities: Markdown passes raw HTML through, so a task
  named ``<img src=x onerror=...>`` would otherwise be an element in any renderer that allows HTML;
- backslash-escapes what would change the structure or the formatting: ``|`` (a new table
  cell), ``\\``, ``*``, ``` ` ```, ``[``, ``]``, ``~``, ``#``, and ``_`` where it could open or
  close emphasis (not between two letters or digits, where CommonMark never reads it);
- turns line breaks (``\\n``, ``\\r``, U+2028, U+2029, U+0085, …) into spaces, as a table row or
  list item is one line.

`markdown_plain` undoes it, for the viewer, which renders these tables itself with `html.escape`.
"""

from __future__ import annotations

import html
import re
from typing import Any

__all__ = ["markdown_plain", "markdown_text"]

_BREAKS = re.compile(r"[\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]+")
_SPECIAL = re.compile(r"[\\|*`\[\]~#]|(?<![^\W_])_|_(?![^\W_])")
_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")  # a backslash before ASCII punctuation, as CommonMark reads it


def markdown_text(value: Any) -> str:
    """``value`` as Markdown text that renders as exactly ``str(value)`` (line breaks as spaces)."""
    text = _BREAKS.sub(" ", str(value))
    text = _SPECIAL.sub(lambda m: "\\" + m.group(0), text)
    return html.escape(text, quote=False)


def markdown_plain(markdown: str) -> str:
    """The text a `markdown_text` string stands for: backslash escapes dropped, entities decoded."""
    return html.unescape(_ESCAPED.sub(r"\1", markdown))
