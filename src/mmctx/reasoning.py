"""Reasoning traces in model output: the one definition of what a trace is.

Reasoning models wrap their thinking in tags before (or instead of) answering. Which tag
depends on the model family and its fine-tuning data:

* ``<think>`` (DeepSeek-R1, Qwen3, QwQ), ``<thinking>`` and ``<reasoning>`` (many fine-tunes
  and system prompts), ``<reflection>`` (Reflection-style models, often nested inside
  ``<thinking>``), ``<thought>``; any case, blanks allowed before ``>``;
* Kimi's ``◁think▷ … ◁/think▷``;
* ``<|begin_of_thought|> … <|end_of_thought|>`` (Sky-T1 / OpenThoughts).

A trace takes three shapes in a response, and all three are reasoning, not answer:

1. a whole block, opening and closing tag (a block runs to the first closing tag of its own
   kind, so a ``<reflection>`` inside a ``<thinking>`` goes with it);
2. a closing tag only: chat templates often open the trace inside the prompt, so everything
   before the last stray closing tag is reasoning;
3. an opening tag only: generation stopped mid-thought (the token limit), so everything from
   the first stray opening tag on is reasoning, however answer-like it looks.

Everything that reads model output for an answer or keeps it as a demonstration's rationale
uses this module, so a tag form added here is handled everywhere at once.
"""

from __future__ import annotations

import re

__all__ = ["TRACE_BLOCK", "TRACE_CLOSE", "TRACE_OPEN", "TRACE_TAGS", "strip_traces", "trace_spans"]

TRACE_TAGS: tuple[str, ...] = ("think", "thinking", "thought", "reasoning", "reflection")

_TAGS = "|".join(TRACE_TAGS)
TRACE_OPEN = re.compile(rf"<(?:{_TAGS})\s*>|◁think▷|<\|begin_of_thought\|>", re.I)
TRACE_CLOSE = re.compile(rf"</(?:{_TAGS})\s*>|◁/think▷|<\|end_of_thought\|>", re.I)
TRACE_BLOCK = re.compile(
    rf"<(?P<tag>{_TAGS})\s*>.*?</(?P=tag)\s*>|◁think▷.*?◁/think▷|<\|begin_of_thought\|>.*?<\|end_of_thought\|>",
    re.I | re.S,
)


def trace_spans(text: str) -> list[tuple[int, int]]:
    """The reasoning in ``text`` as sorted, non-overlapping ``(start, end)`` spans; [] without a trace."""
    blocks = [m.span() for m in TRACE_BLOCK.finditer(text)]

    def inside(pos: int) -> bool:
        return any(a <= pos < b for a, b in blocks)

    spans = list(blocks)
    start = 0
    closes = [m for m in TRACE_CLOSE.finditer(text) if not inside(m.start())]
    if closes:
        start = closes[-1].end()
        spans.append((0, start))
    opened = next((m for m in TRACE_OPEN.finditer(text, start) if not inside(m.start())), None)
    if opened is not None:
        spans.append((opened.start(), len(text)))
    merged: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def strip_traces(text: str) -> str:
    """``text`` without its reasoning; a removed block leaves a blank so the words around it stay apart."""
    pieces: list[str] = []
    pos = 0
    for a, b in trace_spans(text):
        pieces.append(text[pos:a])
        pos = b
    pieces.append(text[pos:])
    return " ".join(pieces) if len(pieces) > 1 else pieces[0]
