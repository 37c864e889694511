"""Per-call context: the prepared response, the options, their labels and the label regexes."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from .prepare import norm
from .tokens import Tok, tokenize
from .vocabulary import BARE_FILLER, NO_OPTION, ORDINAL_ALT, REF_NOUNS, YES_OPTION

# How a piece of text resolved: (index or None, outcome in {"ok", "hedged", "ambiguous"},
# matched text); None when the piece decides nothing.
Resolution = tuple[int | None, str, str] | None


@dataclass
class Ctx:
    raw: str  # turns cut, reasoning stripped, markdown intact (bold labels live here)
    text: str  # cleaned
    options: list[str]
    labels: list[str]  # stripped display labels, e.g. "A", "1"

    @cached_property
    def label_index(self) -> dict[str, int]:
        return {label.casefold(): i for i, label in enumerate(self.labels)}

    @cached_property
    def option_tokens(self) -> list[tuple[str, ...]]:
        return [tuple(t.text for t in tokenize(o)) for o in self.options]

    @cached_property
    def option_norm(self) -> list[str]:
        return [norm(o) for o in self.options]

    @cached_property
    def polarity(self) -> dict[bool, int] | None:
        """{True: index of the yes-like option, False: no-like}, if the set is yes/no-like."""
        if len(self.options) != 2:
            return None
        found: dict[bool, int] = {}
        for i, toks in enumerate(self.option_tokens):
            if len(toks) != 1 or (toks[0] not in YES_OPTION and toks[0] not in NO_OPTION):
                return None
            found[toks[0] in YES_OPTION] = i
        return found if len(found) == 2 else None

    @cached_property
    def text_tokens(self) -> list[Tok]:
        return tokenize(self.text)

    # Label alternations: case-insensitive where context marks the label
    # (brackets, markers, whole response); case-sensitive for prose, where only
    # the label exactly as displayed ("B", not "b") is plausible.
    @cached_property
    def alt(self) -> str:
        return "|".join(re.escape(label) for label in sorted(self.labels, key=len, reverse=True))

    @cached_property
    def bare_re(self) -> re.Pattern[str]:
        return re.compile(
            rf"(?:{BARE_FILLER}[\s,:]+)*(?:(?:the\s+)?(?:option|choice|answer|letter)\s*[:#]?\s*)?"
            rf"[(\[{{<\"']?\s*(?P<label>{self.alt})\s*[)\]}}>\"']?[\s.:;,!)]*",
            re.I,
        )

    @cached_property
    def lead_re(self) -> re.Pattern[str]:
        # "B. red", "(B) red", "B) red", "B: red", "B - red", "B, because", "(B)\u2014red";
        # "B.5" is not a label, and a blank or a dash must follow the delimiter.
        return re.compile(
            rf"(?:(?:option|choice)\s+)?"
            rf"(?:[(\[]\s*(?P<l1>{self.alt})\s*[)\]]"
            rf"|(?P<l2>{self.alt})(?P<delim>\.(?=\s)|\s*[:)\],;]|\s+[-\u2013\u2014](?=\s)))"
            rf"(?=[.:,;)\]]*(?:\s|$|[-\u2013\u2014]))"  # "B,}_1g7l" is noise, not "B, ..."
            rf"[\s.:,)\-\u2013\u2014]*(?P<rest>.*)",
            re.I | re.S,
        )

    @cached_property
    def space_lead_re(self) -> re.Pattern[str]:
        return re.compile(rf"(?P<label>{self.alt})\s+(?P<rest>\S.*)", re.I | re.S)

    @cached_property
    def stray_re(self) -> re.Pattern[str]:
        return re.compile(rf"(?<![\w'])(?P<label>{self.alt})(?![\w'])")

    @cached_property
    def bracketed_re(self) -> re.Pattern[str]:
        return re.compile(
            rf"(?<!\w)(?:\(\s*(?P<a>{self.alt})\s*\)|\[\s*(?P<b>{self.alt})\s*\](?!\()"
            rf"|\*\*\s*\(?(?P<c>{self.alt})\)?[.:]?\s*\*\*)"
            rf"|\b(?:option|choice|letter)\s*[(\[]?(?P<d>{self.alt})[)\]]?(?![\w'])",
            re.I,
        )

    @cached_property
    def label_or_re(self) -> re.Pattern[str]:
        one = rf"[(\[]?(?:{self.alt})[)\]]?"
        return re.compile(
            rf"(?<![\w'])[(\[]?(?P<x>{self.alt})[)\]]?[.,]?(?:\s*/\s*|\s+or\s+|,\s*or\s+)(?:maybe\s+|perhaps\s+)?"
            rf"[(\[]?(?P<y>{self.alt})[)\]]?(?![\w'])"
            rf"|\bboth\s+(?:options?\s+)?{one}\s+and\s+{one}(?![\w'])"
        )

    @cached_property
    def postfix_re(self) -> re.Pattern[str]:
        # "B is correct", "the first caption is the best match"
        return re.compile(
            rf"(?<![\w'])(?P<ans>[(\[]?(?:{self.alt})[)\]]?"
            rf"|(?:the\s+)?(?:{ORDINAL_ALT})\s+(?:one|{REF_NOUNS})"
            rf"|(?:{REF_NOUNS})\s+[(\[]?(?:{self.alt}|\d{{1,2}})[)\]]?)"
            rf"\s+(?:is|seems\s+to\s+be|would\s+be)\s+(?:the\s+)?"
            rf"(?:correct|right|best|true|better|answer|most\s+(?:likely|appropriate|accurate|suitable))\b",
            re.I,
        )

    @cached_property
    def mention_re(self) -> re.Pattern[str]:
        """Any label mention: bracketed or "option B" in any case, or bare exactly as displayed."""
        return re.compile(
            rf"(?<![\w'])(?:(?i:[(\[]\s*(?P<a>{self.alt})\s*[)\]]|(?:option|choice|letter|answer)\s+(?P<b>{self.alt}))"
            rf"|(?P<c>{self.alt}))(?![\w'])"
        )
