"""Yes/no verdicts for yes/no-like option sets ("Yes", "No.", "Incorrect, ...", "True").

A verdict word counts only as a real word in a plain position: at the very start
of the answer (after ordinary blanks or punctuation, never control characters),
or as a closing one-word sentence. Elsewhere a yes/no word counts as a (second)
verdict only when it stands alone -- followed by punctuation, the end, or another
verdict word ("Yes No") -- so "Yes, there is no dog" is a plain yes, while an
answer asserting both polarities ("Yes No", "Yes. Actually, no.") is contradictory.
"correct", "incorrect" and "wrong" open answers as verdicts but are too often
adjectives about something else ("the other caption is wrong") to count as a
second verdict.
"""

from __future__ import annotations

import re

from .negation import negated_before
from .vocabulary import NO, YES

_WORDS = "|".join(sorted(YES | NO, key=len, reverse=True))
_AFTER = r"(?=[ \t]*(?:$|[\n.,!?;:)\]\"'*]|(?:" + _WORDS + r")\b))"
# After the word: a blank or the end, maybe after closing quotes and punctuation ("No.", "Yes, ...");
# "No]es", "No.sY" are fragments of noise.
_WORD_END = r"(?=[\"')\]]*(?:$|[ \t\n]|[.,!?;:]+(?:$|[ \t\n])))"
_LEADING = re.compile(rf"[ \t\n\"'(\[#>:.,!?\-]*(?P<w>{_WORDS}){_WORD_END}", re.I)
_CLOSING = re.compile(rf"[ \t\"'(]*(?P<w>{_WORDS})[ \t.!\"')]*", re.I)
_PLAIN = "|".join(sorted((YES | NO) - {"correct", "incorrect", "wrong"}, key=len, reverse=True))
_STANDALONE = re.compile(rf"(?<![^\W_])(?P<w>{_PLAIN}){_AFTER}", re.I)


def _word(m: re.Match[str] | None) -> tuple[bool, str] | None:
    return None if m is None else (m.group("w").casefold() in YES, m.group("w"))


def leading_verdict(s: str) -> tuple[bool, str] | None:
    """(polarity, word) for an answer that opens with a yes/no word, else None."""
    return _word(_LEADING.match(s))


def closing_verdict(sentence: str) -> tuple[bool, str] | None:
    """(polarity, word) for a closing sentence that is only a yes/no word ("... a dog.\\nYes.")."""
    return _word(_CLOSING.fullmatch(sentence))


def polarities(s: str) -> set[bool]:
    """Polarities of the standalone, un-negated yes/no words in ``s``."""
    return {m.group("w").casefold() in YES for m in _STANDALONE.finditer(s) if not negated_before(s, m.start())}


def verdict(s: str, first: bool) -> bool | None:
    """The verdict ``first`` unless ``s`` also asserts the opposite (then None: contradictory)."""
    return None if (not first) in polarities(s) else first
