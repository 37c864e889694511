"""Turn a free-form model response into a multiple-choice option index.

The extractor is a chain of small named rules tried in order; the first rule
that reaches a decision wins, and its name is recorded on the result so every
score can be traced back to the rule that produced it. A decision is either an
option index or an explicit refusal (``"empty"``, ``"hedged"``,
``"ambiguous"``, ``"no_match"``). There is no random fallback: an unparsed
answer stays unparsed, and the caller counts it as wrong and reports the
unparsed rate (random fallbacks, as in several public harnesses, move
scores by points and hide parser bugs).

Rule chain (``RULES``, in order):

``empty``            nothing left after stripping ``<think>`` traces / special tokens.
``answer_marker``    ``Answer: B``, ``the answer is B``, ``\\boxed{B}``, ``B is correct``...;
                     the LAST marker that resolves wins, because chain-of-thought
                     restates options before concluding.
``hedged``           "A or B", "not sure", "no wait", "either ... or" with no marker.
``bare_letter``      the whole response is a label: ``B``, ``(B)``, ``**B**``, ``Option B``.
``label_with_text``  ``B. red``; if the text names another option -> ``ambiguous``.
``final_line_label`` reasoning followed by a last line/sentence that is a bare label.
``bracketed_label``  exactly one bracketed/bold/``option X`` label in prose.
``option_text``      exactly one option's text is mentioned (longest match, numbers ==
                     number words, negated mentions like "not red" ignored).
``yes_no``           leading yes/no/true/false word when the options are yes/no-like.
``ordinal``          "the first caption", "caption 2", "the latter".
``no_match``         nothing decided.

A lone letter inside prose ("I think a circle") is never read as a label.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

__all__ = ["EXTRACTOR_VERSION", "RULES", "Extraction", "extract_choice"]

# Bump whenever a rule's behaviour changes, so cached scores can be invalidated.
EXTRACTOR_VERSION = "1"


@dataclass(frozen=True)
class Extraction:
    """Outcome of answer extraction.

    ``index`` points into the options as shown to the model, or is ``None``
    when the response could not be parsed; ``rule`` names the rule that decided
    (for ``None``: ``"empty"``, ``"hedged"``, ``"ambiguous"`` or ``"no_match"``);
    ``span`` is the text that rule matched, for viewers and debugging.
    """

    index: int | None
    rule: str
    span: str = ""

    @property
    def parsed(self) -> bool:
        return self.index is not None


# --------------------------------------------------------------------------- #
# Vocabulary
# --------------------------------------------------------------------------- #

_UNITS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
    "nineteen": 19,
}  # fmt: skip
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
_NUMBER_WORDS = {**_UNITS, **_TENS}
# "the red one", "which one": here "one" is a pronoun, not the number 1.
_ONE_AS_PRONOUN_AFTER = frozenset(
    "the this that which each every any another other no same only first second third last".split()
)
# A mention right after these is a rejection ("not red", "isn't red"), not a choice.
_NEGATIONS = frozenset({"not", "no", "never", "nor", "neither", "t"})  # "t" from "isn't"

# Text just before a label/ordinal that turns it into a rejection: "not (A)", "isn't the first one".
_NOT_BEFORE = re.compile(r"(?:\bnot|n't|\bnor)\s+(?:the\s+)?$", re.I)

_YES = frozenset({"yes", "yeah", "yep", "yup", "true", "correct", "affirmative"})
_NO = frozenset({"no", "nope", "nah", "false", "incorrect", "wrong", "negative"})
# Only these count when deciding whether an option *set* is yes/no-like.
_YES_OPTION = frozenset({"yes", "true", "correct"})
_NO_OPTION = frozenset({"no", "false", "incorrect"})

_ORDINALS = {
    "first": 0, "1st": 0, "second": 1, "2nd": 1, "third": 2, "3rd": 2, "fourth": 3, "4th": 3,
    "fifth": 4, "5th": 4, "sixth": 5, "6th": 5, "seventh": 6, "7th": 6, "eighth": 7, "8th": 7,
    "ninth": 8, "9th": 8, "tenth": 9, "10th": 9,
}  # fmt: skip
_ORDINAL_ALT = "|".join(sorted(_ORDINALS, key=len, reverse=True)) + "|last"
_REF_NOUNS = r"caption|option|choice|image|picture|photo|sentence|description|statement"

# "It's B.", "I think (B)": still essentially just the label.
_BARE_FILLER = (
    r"(?:i\s+think|i\s+believe|i'?d\s+say|i\s+would\s+say|i\s+(?:choose|pick|select)|it'?s|it\s+is"
    r"|that'?s|that\s+is|probably|likely|definitely|so|therefore|thus|hence)"
)
# "A dog", "I think": these labels double as ordinary English words, so they
# only count as labels when something marks them as such.
_WORDLIKE_LABELS = frozenset({"a", "i"})
# ... unless followed by one of these ("Answer: A because ...").
_LABEL_FOLLOWERS = frozenset(
    "because since as is was would should seems appears and which for given due it this that".split()
)

# --------------------------------------------------------------------------- #
# Text preparation
# --------------------------------------------------------------------------- #

_SPECIAL_TOKENS = re.compile(
    r"<\|[^|<>\n]{0,40}\|>|</s>|<eos>|<pad>|<end_of_turn>|<start_of_turn>(?:model)?|<end_of_utterance>"
)
_THINK_BLOCK = re.compile(r"<(think|thinking|reasoning)>.*?</\1\s*>", re.I | re.S)
_THINK_OPEN = re.compile(r"<(?:think|thinking|reasoning)>", re.I)
_THINK_CLOSE = re.compile(r"</(?:think|thinking|reasoning)\s*>", re.I)
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\uff1a": ":"})
_LATEX_WRAP = re.compile(r"\\(?:text|textbf|textit|mathrm|mathbf|mathit|operatorname)\s*\{([^{}]*)\}")
_EMPHASIS = re.compile(r"[*`]+|(?<!\w)__|__(?!\w)")
_HEADING = re.compile(r"^[ \t]{0,3}(?:#{1,6}|>)[ \t]*", re.M)


def _strip_reasoning(text: str) -> str:
    text = _SPECIAL_TOKENS.sub(" ", text)
    text = _THINK_BLOCK.sub(" ", text)
    # Chat templates often open <think> inside the prompt, so the response
    # carries only the closing tag: everything before it is reasoning.
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        text = text[closes[-1].end() :]
    # An unclosed <think> means generation stopped mid-thought: what follows is
    # not an answer, however answer-like it looks.
    opened = _THINK_OPEN.search(text)
    if opened:
        text = text[: opened.start()]
    return text.translate(_QUOTES).strip()


def _clean(text: str) -> str:
    """Drop markdown emphasis, headings and LaTeX text wrappers; keep content."""
    for _ in range(2):  # \boxed{\text{B}}: unwrap one nesting level per pass
        text = _LATEX_WRAP.sub(r"\1", text)
    text = _EMPHASIS.sub("", text)
    text = _HEADING.sub("", text)
    return text.strip()


def _norm(text: str) -> str:
    return " ".join(text.casefold().split()).strip(" .,;:!?\"'()[]{}")


# --------------------------------------------------------------------------- #
# Tokens: words and numbers with offsets, number words mapped to digits
# --------------------------------------------------------------------------- #

_WORD = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_]+")


@dataclass(frozen=True)
class _Tok:
    text: str
    start: int
    end: int


def _tokenize(s: str) -> list[_Tok]:
    raw = [(m.group().casefold(), m.start(), m.end()) for m in _WORD.finditer(s)]
    out: list[_Tok] = []
    i = 0
    while i < len(raw):
        word, start, end = raw[i]
        if word in _TENS and i + 1 < len(raw):
            nxt, nstart, nend = raw[i + 1]
            if nxt in _UNITS and 0 < _UNITS[nxt] < 10 and s[end:nstart].strip() in ("", "-"):
                out.append(_Tok(str(_TENS[word] + _UNITS[nxt]), start, nend))
                i += 2
                continue
        if word in _NUMBER_WORDS and not (word == "one" and any(t.text in _ONE_AS_PRONOUN_AFTER for t in out[-2:])):
            word = str(_NUMBER_WORDS[word])
        out.append(_Tok(word, start, end))
        i += 1
    return out


@dataclass(frozen=True)
class _Hit:
    option: int
    start: int  # token positions, end exclusive
    end: int


def _raw_option_hits(toks: Sequence[_Tok], option_tokens: Sequence[tuple[str, ...]]) -> list[_Hit]:
    words = [t.text for t in toks]
    hits = [
        _Hit(i, p, p + len(seq))
        for i, seq in enumerate(option_tokens)
        if seq
        for p in range(len(words) - len(seq) + 1)
        if words[p] == seq[0] and tuple(words[p : p + len(seq)]) == seq
    ]
    # "dark red" mentions "red" too; only the longest option covering a span counts.
    # A covering hit starts at most (longest option - 1) tokens earlier, so look only there.
    by_start: dict[int, list[_Hit]] = {}
    for h in hits:
        by_start.setdefault(h.start, []).append(h)
    longest = max((len(seq) for seq in option_tokens), default=0)

    def covered(h: _Hit) -> bool:
        return any(
            o.option != h.option and o.end >= h.end and o.end - o.start > h.end - h.start
            for start in range(max(0, h.end - longest), h.start + 1)
            for o in by_start.get(start, ())
        )

    return [h for h in hits if not covered(h)]


# --------------------------------------------------------------------------- #
# Per-call context: options, labels, and the label-dependent regexes
# --------------------------------------------------------------------------- #


@dataclass
class _Ctx:
    raw: str  # reasoning stripped, markdown intact (bold labels live here)
    text: str  # cleaned
    options: list[str]
    labels: list[str]  # stripped display labels, e.g. "A", "1"

    @cached_property
    def label_index(self) -> dict[str, int]:
        return {label.casefold(): i for i, label in enumerate(self.labels)}

    @cached_property
    def option_tokens(self) -> list[tuple[str, ...]]:
        return [tuple(t.text for t in _tokenize(o)) for o in self.options]

    @cached_property
    def option_norm(self) -> list[str]:
        return [_norm(o) for o in self.options]

    @cached_property
    def polarity(self) -> dict[bool, int] | None:
        """{True: index of the yes-like option, False: no-like}, if the set is yes/no-like."""
        if len(self.options) != 2:
            return None
        found: dict[bool, int] = {}
        for i, toks in enumerate(self.option_tokens):
            if len(toks) != 1 or (toks[0] not in _YES_OPTION and toks[0] not in _NO_OPTION):
                return None
            found[toks[0] in _YES_OPTION] = i
        return found if len(found) == 2 else None

    @cached_property
    def text_tokens(self) -> list[_Tok]:
        return _tokenize(self.text)

    # Label alternations: case-insensitive where context marks the label
    # (brackets, markers, whole response); case-sensitive for prose, where only
    # the label exactly as displayed ("B", not "b") is plausible.
    @cached_property
    def _alt(self) -> str:
        return "|".join(re.escape(label) for label in sorted(self.labels, key=len, reverse=True))

    @cached_property
    def bare_re(self) -> re.Pattern[str]:
        return re.compile(
            rf"(?:{_BARE_FILLER}[\s,:]+)*(?:(?:the\s+)?(?:option|choice|answer|letter)\s*[:#]?\s*)?"
            rf"[(\[{{<\"']?\s*(?P<label>{self._alt})\s*[)\]}}>\"']?[\s.:;,!)]*",
            re.I,
        )

    @cached_property
    def lead_re(self) -> re.Pattern[str]:
        # "B. red", "(B) red", "B) red", "B: red", "B - red", "B, because"; "B.5" is not a label.
        return re.compile(
            rf"(?:(?:option|choice)\s+)?"
            rf"(?:[(\[]\s*(?P<l1>{self._alt})\s*[)\]]|(?P<l2>{self._alt})(?P<delim>\.(?=\s)|\s*[:)\],;]|\s+[-\u2013\u2014](?=\s)))"
            rf"[\s.:,)\-\u2013\u2014]*(?P<rest>.*)",
            re.I | re.S,
        )

    @cached_property
    def space_lead_re(self) -> re.Pattern[str]:
        return re.compile(rf"(?P<label>{self._alt})\s+(?P<rest>\S.*)", re.I | re.S)

    @cached_property
    def stray_re(self) -> re.Pattern[str]:
        return re.compile(rf"(?<![\w'])(?P<label>{self._alt})(?![\w'])")

    @cached_property
    def bracketed_re(self) -> re.Pattern[str]:
        return re.compile(
            rf"(?<!\w)(?:\(\s*(?P<a>{self._alt})\s*\)|\[\s*(?P<b>{self._alt})\s*\](?!\()"
            rf"|\*\*\s*\(?(?P<c>{self._alt})\)?[.:]?\s*\*\*)"
            rf"|\b(?:option|choice|letter)\s*[(\[]?(?P<d>{self._alt})[)\]]?(?![\w'])",
            re.I,
        )

    @cached_property
    def label_or_re(self) -> re.Pattern[str]:
        one = rf"[(\[]?(?:{self._alt})[)\]]?"
        return re.compile(
            rf"(?<![\w'])[(\[]?(?P<x>{self._alt})[)\]]?[.,]?(?:\s*/\s*|\s+or\s+|,\s*or\s+)(?:maybe\s+|perhaps\s+)?"
            rf"[(\[]?(?P<y>{self._alt})[)\]]?(?![\w'])"
            rf"|\bboth\s+(?:options?\s+)?{one}\s+and\s+{one}(?![\w'])"
        )

    @cached_property
    def postfix_re(self) -> re.Pattern[str]:
        # "B is correct", "the first caption is the best match"
        return re.compile(
            rf"(?<![\w'])(?P<ans>[(\[]?(?:{self._alt})[)\]]?"
            rf"|(?:the\s+)?(?:{_ORDINAL_ALT})\s+(?:one|{_REF_NOUNS})"
            rf"|(?:{_REF_NOUNS})\s+[(\[]?(?:{self._alt}|\d{{1,2}})[)\]]?)"
            rf"\s+(?:is|seems\s+to\s+be|would\s+be)\s+(?:the\s+)?"
            rf"(?:correct|right|best|true|better|answer|most\s+(?:likely|appropriate|accurate|suitable))\b",
            re.I,
        )


def _label_of(ctx: _Ctx, label: str) -> int:
    return ctx.label_index[label.casefold()]


def _bare_label(s: str, ctx: _Ctx) -> int | None:
    m = ctx.bare_re.fullmatch(s.strip())
    return _label_of(ctx, m.group("label")) if m else None


def _label_lead(s: str, ctx: _Ctx) -> tuple[int, str] | None:
    """A leading delimited label and the text after it: "B. red" -> (1, "red")."""
    m = ctx.lead_re.match(s)
    if not m:
        return None
    label = m.group("l1") or m.group("l2")
    if label.casefold() == "i" and (m.group("delim") or "").strip() in (",", ";"):
        return None  # "I, for one, ..." is the pronoun
    return _label_of(ctx, label), m.group("rest")


def _exact_option(s: str, ctx: _Ctx) -> int | None:
    norm, toks = _norm(s), tuple(t.text for t in _tokenize(s))
    matches = {
        i
        for i in range(len(ctx.options))
        if (norm and norm == ctx.option_norm[i]) or (toks and toks == ctx.option_tokens[i])
    }
    return matches.pop() if len(matches) == 1 else None


def _option_hits(s: str, ctx: _Ctx, toks: list[_Tok] | None = None) -> tuple[list[_Tok], list[_Hit]]:
    toks = _tokenize(s) if toks is None else toks
    hits = _raw_option_hits(toks, ctx.option_tokens)
    words = [t.text for t in toks]
    return toks, [h for h in hits if not (h.start > 0 and words[h.start - 1] in _NEGATIONS)]


def _hit_span(s: str, toks: list[_Tok], hit: _Hit) -> str:
    return s[toks[hit.start].start : toks[hit.end - 1].end]


def _used_as_word(label: str, following: str) -> bool:
    """The article or pronoun ("A dog", "I see"), not the label."""
    return label.casefold() in _WORDLIKE_LABELS and re.match(r"\s+[a-z]", following) is not None


def _stray_labels(s: str, ctx: _Ctx) -> set[int]:
    """Labels written as standalone tokens in prose, minus article/pronoun uses."""
    return {
        _label_of(ctx, m.group("label"))
        for m in ctx.stray_re.finditer(s)
        if not _used_as_word(m.group("label"), s[m.end() :])
    }


# --------------------------------------------------------------------------- #
# Hedges
# --------------------------------------------------------------------------- #

_HEDGE = re.compile(
    r"\b(?:not\s+(?:sure|certain)|unsure|uncertain"
    r"|(?:can\s*not|can't|could\s*not|couldn't)\s+(?:tell|determine|decide|say|be\s+(?:sure|certain|determined))"
    r"|cannot\s+be\s+determined|unable\s+to\s+(?:tell|determine|decide|answer)"
    r"|impossible\s+to\s+(?:tell|determine|say)|(?:hard|difficult)\s+to\s+(?:tell|say|determine)"
    r"|no\s+way\s+to\s+(?:tell|know)|(?:i\s+)?do\s*n[o']?t\s+know"
    r"|not\s+enough\s+information|insufficient\s+information"
    r"|no,?\s+wait|wait,?\s+no|or\s+(?:maybe|perhaps|possibly)|yes\s+and\s+no|yes\s+or\s+no"
    r"|either\b[^.\n]{0,80}?\bor|neither\b[^.\n]{0,80}?\bnor)\b",
    re.I,
)


def _hedge_span(s: str, ctx: _Ctx) -> str:
    """The hedging text in ``s``, or "" if it commits to something."""
    for m in _HEDGE.finditer(s):
        # "Cannot be determined" may itself be an option; choosing it is not a hedge.
        if not any(_norm(m.group()) in o for o in ctx.option_norm):
            return m.group()
    for m in ctx.label_or_re.finditer(s):
        if _NOT_BEFORE.search(s[max(0, m.start() - 12) : m.start()]):
            continue  # "not A or B" rules options out; it does not waver between them
        if m.group("x") is None or m.group("x").casefold() != m.group("y").casefold():
            return m.group()
    toks = _tokenize(s)
    hits = _raw_option_hits(toks, ctx.option_tokens)
    starts: dict[int, list[_Hit]] = {}
    for h in hits:
        starts.setdefault(h.start, []).append(h)
    for a in hits:
        if a.end >= len(toks) or toks[a.end].text != "or":
            continue
        if a.start > 0 and toks[a.start - 1].text in _NEGATIONS:
            continue  # "not red or green" rules both out
        for b in starts.get(a.end + 1, ()):
            if b.option != a.option:
                return s[toks[a.start].start : toks[b.end - 1].end]
    return ""


# --------------------------------------------------------------------------- #
# Resolving the text after an answer marker
# --------------------------------------------------------------------------- #

_LEAD_JUNK = re.compile(r"^[\s:=>\-\u2013\u2014\"'$]+")
_FILLER = re.compile(rf"^(?:(?:{_BARE_FILLER}|clearly|this\s+is)\b[\s,:]*)+", re.I)
_NEGATED_START = re.compile(r"(?:not|neither|none)\b", re.I)
_CLAUSE_END = re.compile(r"[.;!?\n]|,\s|\s(?:because|since|as|but|while|whereas)\s", re.I)

# (index or None, outcome in {"ok", "hedged", "ambiguous"}, matched text); None = undecided
_Resolution = tuple[int | None, str, str] | None


_LIST_JOINER = re.compile(r"^[\s,;&+]*(?:and\s+)?")


def _starts_with_other_label(rest: str, index: int, ctx: _Ctx) -> bool:
    """A list of labels ("B and C", "B, C"), not one answer."""
    head = _LIST_JOINER.sub("", rest, count=1)
    m = ctx.stray_re.match(head)
    if not m or _used_as_word(m.group("label"), head[m.end() :]):
        return False
    return _label_of(ctx, m.group("label")) != index


def _check_label_text(index: int, rest: str, ctx: _Ctx, *, strict: bool) -> _Resolution:
    """A label followed by text: the text must not name a different option.

    ``strict`` (no answer marker around) also looks at the whole rest: other
    labels there mean this is probably a restated option list ("A. red\\nB.
    blue ...") rather than an answer, so the decision is left to later rules
    (the conclusion may follow); a rest that only talks about a different
    option contradicts the label.
    """
    if _starts_with_other_label(rest, index, ctx):
        return None, "ambiguous", rest.strip()
    _, hits = _option_hits(rest, ctx)
    leading = [h for h in hits if h.start == 0]
    if leading:
        first = max(leading, key=lambda h: h.end)
        if first.option != index:
            return None, "ambiguous", rest.strip()
    if strict:
        if _stray_labels(rest, ctx) - {index}:
            return None
        mentioned = {h.option for h in hits}
        if mentioned and index not in mentioned:
            return None, "ambiguous", rest.strip()
    return index, "ok", rest.strip()


def _leading_option(s: str, ctx: _Ctx) -> int | None:
    _, hits = _option_hits(s, ctx)
    leading = [h for h in hits if h.start == 0]
    return max(leading, key=lambda h: h.end).option if leading else None


def _resolve_span(span: str, ctx: _Ctx) -> _Resolution:
    s = _FILLER.sub("", _LEAD_JUNK.sub("", span)).strip()
    if not s:
        return None
    if (i := _exact_option(s, ctx)) is not None:
        return i, "ok", s
    if _NEGATED_START.match(s):  # "the answer is not A": says what it isn't
        return None
    if hedge := _hedge_span(s, ctx):
        return None, "hedged", hedge
    if (i := _bare_label(s, ctx)) is not None:
        return i, "ok", s
    if lead := _label_lead(s, ctx):
        return _check_label_text(*lead, ctx, strict=False)
    if m := ctx.space_lead_re.match(s):
        index, rest = _label_of(ctx, m.group("label")), m.group("rest")
        wordlike = m.group("label").casefold() in _WORDLIKE_LABELS
        following = _leading_option(rest, ctx)
        if following is not None:
            # "A cat": reading "A" as an article gives a clean answer; a
            # non-word label followed by text must agree with it.
            if wordlike or following == index:
                return following, "ok", s
            return None, "ambiguous", s
        first_word = rest.split(None, 1)[0].strip(".,;:!?").casefold()
        if not wordlike or first_word in _LABEL_FOLLOWERS:
            if _starts_with_other_label(rest, index, ctx):
                return None, "ambiguous", s
            return index, "ok", m.group("label")
    if (i := _leading_option(s, ctx)) is not None:
        return i, "ok", s
    if (i := _yes_no_word(s, ctx)) is not None:
        return i, "ok", s
    if (ordinal := _ordinal_refs(s, ctx)) is not None:
        return ordinal
    clause = _CLAUSE_END.split(s, maxsplit=1)[0]
    toks, hits = _option_hits(clause, ctx)
    found = {h.option for h in hits}
    if len(found) == 1:
        return found.pop(), "ok", _hit_span(clause, toks, hits[0])
    if len(found) > 1:
        return None, "ambiguous", clause
    return None


# --------------------------------------------------------------------------- #
# Shared pieces of the yes/no and ordinal rules
# --------------------------------------------------------------------------- #


def _yes_no_word(s: str, ctx: _Ctx) -> int | None:
    if ctx.polarity is None:
        return None
    toks = _tokenize(s)
    if not toks:
        return None
    word = toks[0].text
    if word in _YES or word in _NO:
        return ctx.polarity[word in _YES]
    return None


_ORDINAL_RE = re.compile(rf"\b(?P<ord>{_ORDINAL_ALT})\s+(?:one|answer|text|{_REF_NOUNS})\b", re.I)
_REF_RE = re.compile(
    rf"\b(?:{_REF_NOUNS})\s*(?:#|no\.|number)?\s*[(\[]?(?P<ref>[^\W\d_]|\d{{1,2}})[)\]]?(?![\w'])", re.I
)
_FORMER_RE = re.compile(r"\bthe\s+(?P<which>former|latter)\b", re.I)


def _ordinal_refs(s: str, ctx: _Ctx) -> _Resolution:
    n = len(ctx.options)
    found: dict[int, str] = {}

    def add(index: int | None, m: re.Match[str]) -> None:
        if index is not None and 0 <= index < n and not _NOT_BEFORE.search(s[max(0, m.start() - 12) : m.start()]):
            found.setdefault(index, m.group())

    for m in _ORDINAL_RE.finditer(s):
        word = m.group("ord").casefold()
        add(n - 1 if word == "last" else _ORDINALS[word], m)
    for m in _REF_RE.finditer(s):
        ref = m.group("ref")
        if ref.islower() and _used_as_word(ref, s[m.end() :]):
            continue  # "in the image a dog sleeps"
        if ref.casefold() in ctx.label_index:
            add(ctx.label_index[ref.casefold()], m)
        elif ref.isdigit():
            add(int(ref) - 1, m)  # "caption 1" is 1-based when labels are not digits
        elif ref.isascii() and ref.isalpha():
            add(ord(ref.casefold()) - ord("a"), m)  # "caption B" with digit labels
    if n == 2:
        for m in _FORMER_RE.finditer(s):
            add(0 if m.group("which").casefold() == "former" else 1, m)
    if len(found) == 1:
        index, text = found.popitem()
        return index, "ok", text
    if len(found) > 1:
        return None, "ambiguous", "; ".join(found.values())
    return None


# --------------------------------------------------------------------------- #
# The rules
# --------------------------------------------------------------------------- #

_Rule = Callable[[_Ctx], "Extraction | None"]


def _decided(res: _Resolution, rule: str) -> Extraction | None:
    if res is None:
        return None
    index, outcome, span = res
    return Extraction(index, rule if outcome == "ok" else outcome, span)


def _rule_empty(ctx: _Ctx) -> Extraction | None:
    return Extraction(None, "empty") if not ctx.text else None


_MARKERS = (
    re.compile(r"\b(?:final\s+|correct\s+|my\s+)?answer\s*(?:is\s*)?:", re.I),
    re.compile(r"\bfinal\s+answer[ \t]*(?=\n)", re.I),
    re.compile(
        r"\banswer\s+(?:is|would\s+be|should\s+be|must\s+be|will\s+be|seems\s+to\s+be|appears\s+to\s+be)\b", re.I
    ),
    re.compile(
        r"\b(?:correct|right|best|true|matching|most\s+likely|most\s+appropriate|most\s+accurate)\s+"
        r"(?:option|choice|caption|description|statement|one)\s+(?:is|would\s+be|should\s+be|must\s+be|will\s+be)\b",
        re.I,
    ),
    re.compile(r"\bI(?:\s+would|\s+will|'d|'ll)?\s+(?:choose|pick|select|go\s+with)\b", re.I),
)
_BOXED = re.compile(r"\\boxed\s*\{(?P<inner>[^{}]*)\}")


def _line_after(text: str, pos: int) -> str:
    """Rest of the line after ``pos``; the next non-empty line if that is blank ("Final Answer\\nB")."""
    rest = text[pos:]
    line, _, after = rest.partition("\n")
    if line.strip():
        return line
    return next((ln for ln in after.splitlines() if ln.strip()), "")


def _rule_answer_marker(ctx: _Ctx) -> Extraction | None:
    candidates: list[tuple[int, str, str]] = []  # (position, what matched, text to resolve)
    for rx in _MARKERS:
        for m in rx.finditer(ctx.text):
            after = _line_after(ctx.text, m.end())
            candidates.append((m.start(), f"{m.group()} {after.strip()}", after))
    for m in _BOXED.finditer(ctx.text):
        candidates.append((m.start(), m.group(), m.group("inner")))
    for m in ctx.postfix_re.finditer(ctx.text):
        candidates.append((m.start(), m.group(), m.group("ans")))
    # The last marker wins: CoT walks through the options before concluding,
    # and a marker followed by nothing resolvable ("the answer is clear") is skipped.
    for _, shown, span in sorted(candidates, key=lambda c: c[0], reverse=True):
        res = _resolve_span(span, ctx)
        if res is not None:
            index, outcome, _ = res
            return Extraction(index, "answer_marker" if outcome == "ok" else outcome, shown[:200])
    return None


def _rule_hedged(ctx: _Ctx) -> Extraction | None:
    hedge = _hedge_span(ctx.text, ctx)
    return Extraction(None, "hedged", hedge) if hedge else None


def _rule_bare_letter(ctx: _Ctx) -> Extraction | None:
    i = _bare_label(ctx.text, ctx)
    return Extraction(i, "bare_letter", ctx.text) if i is not None else None


def _rule_label_with_text(ctx: _Ctx) -> Extraction | None:
    if _exact_option(ctx.text, ctx) is not None:  # "1.5" is an option, not label "1" + "5"
        return None
    lead = _label_lead(ctx.text, ctx)
    if lead is None:
        # "B\n\nExplanation: ...": a first line that is just the label, then reasoning.
        first, _, rest = ctx.text.partition("\n")
        if (index := _bare_label(first, ctx)) is not None:
            lead = (index, rest)
    if lead is None or not lead[1].strip():
        return None
    ext = _decided(_check_label_text(*lead, ctx, strict=True), "label_with_text")
    return ext if ext is None else Extraction(ext.index, ext.rule, ctx.text[:200])


_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|,\s*(?=(?:so|therefore|thus|hence)\b)", re.I)
_CONNECTIVE = re.compile(
    r"^(?:so|therefore|thus|hence|overall|consequently|in\s+conclusion|in\s+summary)\b[\s,:]*"
    r"(?:(?:it'?s|it\s+is|we\s+get|i\s+(?:choose|pick|select))\s+)?",
    re.I,
)


def _rule_final_line_label(ctx: _Ctx) -> Extraction | None:
    lines = [line.strip() for line in ctx.text.splitlines() if line.strip()]
    last_sentences = [p for p in _SENTENCE_SPLIT.split(lines[-1]) if p.strip()]
    if len(lines) + len(last_sentences) < 3:
        return None  # a one-piece response is bare_letter's call
    conclusion = _CONNECTIVE.sub("", last_sentences[-1].strip())
    last = _bare_label(conclusion, ctx)
    if last is None:
        return None
    # "A\n...\nB": two bare-label lines that disagree is a change of mind, not an answer.
    # (Whole lines only: "A. red" in a restated option list is not a bare "A.")
    others = {i for line in lines[:-1] if (i := _bare_label(_CONNECTIVE.sub("", line), ctx)) is not None}
    if others - {last}:
        return Extraction(None, "ambiguous", conclusion)
    return Extraction(last, "final_line_label", conclusion)


def _rule_bracketed_label(ctx: _Ctx) -> Extraction | None:
    found: dict[int, str] = {}
    for source in (ctx.raw, ctx.text):
        for m in ctx.bracketed_re.finditer(source):
            if _NOT_BEFORE.search(source[max(0, m.start() - 12) : m.start()]):
                continue  # "not (A)" rejects A
            label = m.group("a") or m.group("b") or m.group("c") or m.group("d")
            if label == m.group("d") and label.islower() and _used_as_word(label, source[m.end() :]):
                continue  # "the other option a friend suggested"
            found.setdefault(_label_of(ctx, label), m.group())
    if len(found) == 1:
        index, span = found.popitem()
        return Extraction(index, "bracketed_label", span)
    return None  # none, or several (a restated option list): let later rules look


def _rule_option_text(ctx: _Ctx) -> Extraction | None:
    if ctx.polarity is not None:
        return None  # "Yes, no doubt": for yes/no sets the leading word decides (yes_no)
    if (i := _exact_option(ctx.text, ctx)) is not None:
        return Extraction(i, "option_text", ctx.text)
    toks, hits = _option_hits(ctx.text, ctx, ctx.text_tokens)
    found = {h.option for h in hits}
    if len(found) == 1:
        return Extraction(found.pop(), "option_text", _hit_span(ctx.text, toks, hits[0]))
    if len(found) > 1:
        return Extraction(None, "ambiguous", ", ".join(sorted({_hit_span(ctx.text, toks, h) for h in hits})))
    return None


def _rule_yes_no(ctx: _Ctx) -> Extraction | None:
    if ctx.polarity is None:
        return None
    if (i := _yes_no_word(ctx.text, ctx)) is not None:
        return Extraction(i, "yes_no", ctx.text_tokens[0].text)
    # "... so there is a dog.\nYes." -- a closing one-word verdict
    last = _SENTENCE_SPLIT.split(ctx.text.strip().splitlines()[-1].strip())[-1]
    toks = _tokenize(last)
    if len(toks) == 1 and (toks[0].text in _YES or toks[0].text in _NO):
        return Extraction(ctx.polarity[toks[0].text in _YES], "yes_no", last)
    return None


def _rule_ordinal(ctx: _Ctx) -> Extraction | None:
    return _decided(_ordinal_refs(ctx.text, ctx), "ordinal")


def _rule_no_match(ctx: _Ctx) -> Extraction | None:
    return Extraction(None, "no_match")


_CHAIN: tuple[tuple[str, _Rule], ...] = (
    ("empty", _rule_empty),
    ("answer_marker", _rule_answer_marker),
    ("hedged", _rule_hedged),
    ("bare_letter", _rule_bare_letter),
    ("label_with_text", _rule_label_with_text),
    ("final_line_label", _rule_final_line_label),
    ("bracketed_label", _rule_bracketed_label),
    ("option_text", _rule_option_text),
    ("yes_no", _rule_yes_no),
    ("ordinal", _rule_ordinal),
    ("no_match", _rule_no_match),
)

RULES: tuple[str, ...] = tuple(name for name, _ in _CHAIN)


# --------------------------------------------------------------------------- #
# Entry point
# --------------------------------------------------------------------------- #

_LABEL_STRIP = " \t()[]{}.:"


def _default_labels(n: int) -> list[str]:
    if n > 26:
        raise ValueError(f"{n} options need explicit labels (defaults stop at 'Z')")
    return [chr(ord("A") + i) for i in range(n)]


def extract_choice(text: str, options: Sequence[str], labels: Sequence[str] | None = None) -> Extraction:
    """Extract the chosen option from a free-form response.

    Args:
        text: the raw model response (may contain ``<think>`` traces, markdown, LaTeX).
        options: option texts in the order they were SHOWN to the model.
        labels: how the options were labelled in the prompt ("A", "B", ... by
            default; digits such as "1", "2" for caption tasks). Brackets and
            trailing dots are ignored, so "(A)" and "A." both mean "A".

    Returns:
        An :class:`Extraction`; ``index`` is ``None`` when the response does
        not commit to exactly one option. Deterministic: no randomness anywhere.

    Raises:
        ValueError: on a caller error (no options, label/option count mismatch,
            empty or duplicate labels), never because of the response text.
    """
    options = list(options)
    if not options:
        raise ValueError("extract_choice needs at least one option")
    shown = _default_labels(len(options)) if labels is None else [str(label).strip(_LABEL_STRIP) for label in labels]
    if len(shown) != len(options):
        raise ValueError(f"{len(shown)} labels for {len(options)} options")
    if any(not label for label in shown) or len({label.casefold() for label in shown}) != len(shown):
        raise ValueError(f"labels must be non-empty and distinct (case-insensitively): {shown!r}")

    raw = _strip_reasoning(text or "")
    ctx = _Ctx(raw=raw, text=_clean(raw), options=options, labels=shown)
    for _, rule in _CHAIN:
        if (result := rule(ctx)) is not None:
            return result
    raise AssertionError("unreachable: no_match always decides")  # pragma: no cover
