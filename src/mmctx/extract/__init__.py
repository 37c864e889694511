"""Turn a free-form model response into a multiple-choice option index.

The extractor is a chain of small named rules tried in order; the first rule
that reaches a decision wins, and its name is recorded on the result so every
score can be traced back to the rule that produced it. A decision is either an
option index or an explicit refusal (``"empty"``, ``"hedged"``,
``"ambiguous"``, ``"contradictory"``, ``"no_match"``). There is no random fallback: an unparsed
answer stays unparsed, and the caller counts it as wrong and reports the
unparsed rate (random fallbacks, as in several public harnesses, move
scores by points and hide parser bugs).

Preparation, in this order (steps, not rules: they decide nothing):

``mark_noise``       control characters other than tab/newline become U+FFFD (noise,
                     never a blank or a line break); lines are split on ``\\n`` only.
``cut_turns``        cut at the first turn the model made up itself (a line ``User:``,
                     ``Assistant:``, ``Human:``, ``GPT:``, ``System:``, ``Question:``,
                     ``Q:``, or ``<|im_start|>``, ``<|user|>``, ``</s>``,
                     ``<end_of_utterance>``, ``<|im_end|>``...) -- :mod:`.turns`; a
                     response opening with someone else's turn comes out ``empty``.
``strip_reasoning``  reasoning traces (``<think>``, ``<thinking>``, ``<reasoning>``,
                     ``<reflection>``, ... whole, closing-only or unclosed; defined once in
                     :mod:`mmctx.reasoning`) and special tokens go; then markdown and LaTeX
                     wrappers are unwrapped -- :mod:`.prepare`.

Rule chain (``RULES``, in order):

``empty``            nothing left after the preparation.
``answer_marker``    ``Answer: B``, ``the answer is B``, ``\\boxed{B}``, ``B is correct``...;
                     the LAST marker that resolves wins, because chain-of-thought
                     restates options before concluding -- unless the reply's final-answer
                     statements (``Answer: X``, ``the answer is X``, ``\\boxed{X}``)
                     contradict each other: two different ones with no revision cue
                     between them ("Answer: A. Answer: B"), or a loop back to an answer
                     already abandoned ("the answer is A. No wait, the answer is B."
                     repeated) -> ``contradictory`` (:mod:`.contradictions`).
``hedged``           "A or B", "not sure", "no wait", "either ... or" with no marker.
``bare_letter``      the whole response is a label: ``B``, ``(B)``, ``**B**``, ``Option B``.
``label_with_text``  ``B. red``; if the text names another option -> ``ambiguous``.
``final_line_label`` reasoning followed by a last line/sentence/``;``-clause that is a bare label.
``bracketed_label``  exactly one bracketed/bold/``option X`` label in prose.
``option_text``      exactly one option's text is mentioned (longest match, numbers ==
                     number words).
``yes_no``           a yes/no/true/false word opening the answer (or closing it as a
                     one-word sentence) when the options are yes/no-like; an answer
                     asserting both ("Yes No") -> ``ambiguous``.
``ordinal``          "the first caption", "caption 2", "the latter".
``no_match``         nothing decided.

The chain is a registry (:mod:`.registry`): a new rule is one function registered with
``@extraction_rule("name", before="no_match")`` (or ``after=`` a named rule); ``RULES`` stays the
built-in chain, ``rule_names()`` is the chain as it runs now, plugins included, and
``extractor_version()`` names both the rules' version and any rule a plugin added, for a run to
record which rules decided its answers.

Every rule ignores *rejected* mentions (:mod:`.negation`): "not (A)", "A is wrong",
"(A) is incorrect", "B is not the answer", "C can be ruled out". A decision for an
option then has to pass two checks (:mod:`.chain`):

* a later self-correction naming another option ("The answer is B.\\nWait, it's C.")
  makes it ``hedged`` (:mod:`.revisions`); an explicit one ("Wait, the answer is C")
  is simply the last answer marker and wins, as long as the reply does not flip again
  without a cue or go back to B (then it is ``contradictory``);
* an option the response also calls wrong ("Answer: B ... B is incorrect") is
  ``ambiguous``.

A lone letter inside prose ("I think a circle") is never read as a label.
"""

from __future__ import annotations

from collections.abc import Sequence

from .chain import RULES, decide
from .context import Ctx
from .contradictions import asserts
from .decision import Decision
from .labels import marked_labels, written_label
from .parts import AnswerLine, ResponseParts, answer_part, find_answer_line, split_response, trace_text
from .registry import extraction_rule, register_rule, rule_names, unregister_rule
from .result import Extraction
from .revisions import revision_cue_after

__all__ = [
    "EXTRACTOR_VERSION",
    "RULES",
    "AnswerLine",
    "Ctx",
    "Decision",
    "Extraction",
    "ResponseParts",
    "answer_part",
    "asserts",
    "extract_choice",
    "extraction_rule",
    "extractor_version",
    "find_answer_line",
    "marked_labels",
    "register_rule",
    "revision_cue_after",
    "rule_names",
    "split_response",
    "trace_text",
    "unregister_rule",
    "written_label",
]

# Bump whenever a rule's behaviour changes, so cached scores can be invalidated.
EXTRACTOR_VERSION = "3"

_LABEL_STRIP = " \t()[]{}.:"


def extractor_version() -> str:
    """`EXTRACTOR_VERSION`, and the chain when it is not the built-in one ("3+rules:empty,…"),
    so a score stored with a plugin rule never passes for one scored without it."""
    names = rule_names()
    return EXTRACTOR_VERSION if names == RULES else f"{EXTRACTOR_VERSION}+rules:{','.join(names)}"


def _default_labels(n: int) -> list[str]:
    if n > 26:
        raise ValueError(f"{n} options need explicit labels (defaults stop at 'Z')")
    return [chr(ord("A") + i) for i in range(n)]


def extract_choice(text: str, options: Sequence[str], labels: Sequence[str] | None = None) -> Extraction:
    """Extract the chosen option from a free-form response.

    Args:
        text: the raw model response (may contain ``<think>`` traces, markdown, LaTeX,
            and conversation turns the model went on to invent).
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

    raw, cleaned = answer_part(text)
    found = decide(Ctx(raw=raw, text=cleaned, options=options, labels=shown))
    return Extraction(found.index, found.rule, found.span)
