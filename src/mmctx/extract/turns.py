"""The ``cut_turns`` step: drop conversation turns the model made up after its answer.

Base models do not stop at the end of their turn: they go on writing
``User: ...`` / ``Assistant: ...`` (or ``<|im_start|>user``, ``</s>``, ...) and
answer their own invented questions, so "the last answer marker wins" would read
the answer to a question nobody asked. The response is cut at the first turn
boundary that follows some content, before any rule looks at it. This step never
decides anything itself; a response that *opens* with someone else's turn
(``User: ...``, ``Question: ...``) holds no answer and comes out empty.
"""

from __future__ import annotations

import re

from mmctx.reasoning import TRACE_CLOSE, TRACE_OPEN

from .prepare import SPECIAL_TOKENS
from .vocabulary import ASSISTANT_ROLES, ROLES

_BOUNDARY = re.compile(
    rf"^[ \t]*(?P<role>{'|'.join(ROLES)})[ \t]*:"  # a line "User: ..." / "Q: ..."
    r"|<\|im_start\|>[ \t]*(?P<im_role>[a-z]+)?"
    r"|<\|(?P<tok_role>user|assistant|system)\|>"
    r"|<start_of_turn>(?P<sot_role>[a-z]+)?"
    r"|</s>|<end_of_utterance>|<end_of_turn>|<\|(?:im_end|eot_id|endoftext|end)\|>",
    re.I | re.M,
)


def _role(m: re.Match[str]) -> str | None:
    role = m.group("role") or m.group("im_role") or m.group("tok_role") or m.group("sot_role")
    return role.casefold() if role else None


def _has_content(s: str) -> bool:
    return bool(SPECIAL_TOKENS.sub("", s).strip())


def _reasoning_end(text: str) -> int:
    """End of a leading reasoning trace: role lines inside it are the model thinking, not new turns."""
    close = TRACE_CLOSE.search(text)
    if close is None:
        return 0
    opened = TRACE_OPEN.search(text, 0, close.start())
    if opened is None or not _has_content(text[: opened.start()]):
        return close.end()
    return 0


def cut_turns(text: str) -> str:
    """The response up to the first made-up turn; a leading assistant role tag is dropped."""
    start = _reasoning_end(text)
    content_from = start
    for m in _BOUNDARY.finditer(text, start):
        if _has_content(text[content_from : m.start()]):
            return text[:start] + text[content_from : m.start()]
        role = _role(m)
        if role is not None and role not in ASSISTANT_ROLES:
            return text[:start]  # the response opens with someone else's turn: no answer in it
        content_from = m.end()  # "Assistant: B", "<|im_start|>assistant\nB", a stray leading "</s>"
    return text[:start] + text[content_from:]
