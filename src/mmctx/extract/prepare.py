"""Text preparation: control characters, reasoning traces, special tokens, markdown.

What counts as a reasoning trace is defined once, in :mod:`mmctx.reasoning`.

``str.splitlines``, ``str.strip`` and regex ``\\s`` treat ``\\x0b``, ``\\x0c``,
``\\x1c``-``\\x1f``, ``\\x85``, ``\\u2028`` and ``\\u2029`` as line breaks or blanks,
which let byte noise from an untrained model look like a short line holding a
lone "No". So :func:`mark_noise` first folds ``\\r\\n`` to ``\\n`` and replaces every
other control character (a lone ``\\r`` included) and the Unicode line/paragraph
separators by U+FFFD: visible noise that separates words but is never a blank.
After it the only blanks are space, tab, newline and the Unicode spaces, and
:func:`lines` splits on ``\\n`` alone.
"""

from __future__ import annotations

import re

from mmctx.reasoning import TRACE_BLOCK, TRACE_CLOSE, TRACE_OPEN, strip_traces

NOISE_MARK = "\ufffd"
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")

SPECIAL_TOKENS = re.compile(
    r"<\|[^|<>\n]{0,40}\|>|</s>|<eos>|<pad>|<end_of_turn>|<start_of_turn>(?:model)?|<end_of_utterance>"
)
# The trace patterns under the names callers that mark traces themselves import.
THINK_OPEN, THINK_CLOSE, _THINK_BLOCK = TRACE_OPEN, TRACE_CLOSE, TRACE_BLOCK
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\uff1a": ":"})
_LATEX_WRAP = re.compile(r"\\(?:text|textbf|textit|mathrm|mathbf|mathit|operatorname)\s*\{([^{}]*)\}")
_EMPHASIS = re.compile(r"[*`]+|(?<!\w)__|__(?!\w)")
_HEADING = re.compile(r"^[ \t]{0,3}(?:#{1,6}|>)[ \t]*", re.M)


def mark_noise(text: str) -> str:
    """Fold ``\\r\\n`` to ``\\n``; every other control character becomes U+FFFD."""
    return _CONTROL.sub(NOISE_MARK, text.replace("\r\n", "\n"))


def lines(text: str) -> list[str]:
    """Split on ``\\n`` (and ``\\r\\n``) only, never on the other characters ``splitlines`` knows."""
    return text.replace("\r\n", "\n").split("\n")


def strip_reasoning(text: str) -> str:
    """Drop reasoning traces (every form :mod:`mmctx.reasoning` knows) and special tokens.

    Traces go first: ``<|begin_of_thought|>`` looks like any other special token, and
    dropping it as one would leave its reasoning in the answer part.
    """
    text = SPECIAL_TOKENS.sub(" ", strip_traces(text))
    return text.translate(_QUOTES).strip()


def clean(text: str) -> str:
    """Drop markdown emphasis, headings and LaTeX text wrappers; keep content."""
    for _ in range(2):  # \boxed{\text{B}}: unwrap one nesting level per pass
        text = _LATEX_WRAP.sub(r"\1", text)
    text = _EMPHASIS.sub("", text)
    text = _HEADING.sub("", text)
    return text.strip()


def norm(text: str) -> str:
    """Case- and spacing-insensitive form for comparing a whole answer with an option."""
    return " ".join(text.casefold().split()).strip(" .,;:!?\"'()[]{}")
