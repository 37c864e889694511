"""The built-in rules in chain order, and the checks every decision for an option must pass."""

from __future__ import annotations

from .context import Ctx
from .decision import Decision, Rule
from .registry import register_rule, rule_chain, rule_names
from .rejections import rejected_options
from .revisions import revision_after
from .rules import (
    rule_answer_marker,
    rule_bare_letter,
    rule_bracketed_label,
    rule_empty,
    rule_final_line_label,
    rule_hedged,
    rule_label_with_text,
    rule_no_match,
    rule_option_text,
    rule_ordinal,
    rule_yes_no,
)  # fmt: skip

# The built-in rules, in their documented order (`mmctx.extract`); a plugin rule joins the
# chain with `extraction_rule` (:mod:`.registry`), placed before or after one of these.
BUILTIN_RULES: tuple[tuple[str, Rule], ...] = (
    ("empty", rule_empty),
    ("answer_marker", rule_answer_marker),
    ("hedged", rule_hedged),
    ("bare_letter", rule_bare_letter),
    ("label_with_text", rule_label_with_text),
    ("final_line_label", rule_final_line_label),
    ("bracketed_label", rule_bracketed_label),
    ("option_text", rule_option_text),
    ("yes_no", rule_yes_no),
    ("ordinal", rule_ordinal),
    ("no_match", rule_no_match),
)
for _name, _rule in BUILTIN_RULES:
    if _name not in rule_names():  # a reload of this module must not register them twice
        register_rule(_name, _rule)

RULES: tuple[str, ...] = tuple(name for name, _ in BUILTIN_RULES)


def decide(ctx: Ctx) -> Decision:
    """The first rule that decides wins; a chosen option must survive a later self-correction
    (-> ``hedged``) and must not be rejected elsewhere in the response (-> ``ambiguous``)."""
    for _, rule in rule_chain():
        found = rule(ctx)
        if found is None:
            continue
        if found.index is not None:
            if revision := revision_after(ctx, found.end, found.index):
                return Decision(None, "hedged", revision)
            if (rejection := rejected_options(ctx).get(found.index)) is not None:
                return Decision(None, "ambiguous", f"{found.span} / {rejection}"[:200])
        return found
    raise AssertionError("unreachable: no_match always decides")  # pragma: no cover
