"""A new extraction rule is one function with `extraction_rule`: it joins the chain where it is
placed, is recorded by name on the results it decides, and leaves the built-in chain as it was."""

from __future__ import annotations

import re

import pytest

from mmctx.extract import (
    EXTRACTOR_VERSION,
    RULES,
    Ctx,
    extract_choice,
    extraction_rule,
    extractor_version,
    register_rule,
    rule_names,
    unregister_rule,
)
from mmctx.scoring.results import score_request

OPTIONS = ["red", "green", "blue"]
REPLY = "Weighing the swatches against each other.\nFinal choice -> B"


@pytest.fixture
def final_choice():
    @extraction_rule("final_choice", before="no_match")
    def final_choice(ctx: Ctx) -> int | None:
        m = re.search(r"final choice\s*->\s*\(?([A-Za-z0-9]+)\)?", ctx.text, re.I)
        return ctx.label_index.get(m.group(1).casefold()) if m else None

    yield final_choice
    unregister_rule("final_choice")


def _request() -> dict:
    return {"id": "r1", "query_id": "q1", "task": "attribute_recognition", "setting": "0-shot", "scorer": "generate",
            "gold": 1, "options": OPTIONS, "labels": ["A", "B", "C"]}  # fmt: skip


def test_a_reply_no_rule_reads_is_extracted_by_the_new_rule_and_recorded_by_name(final_choice):
    found = extract_choice(REPLY, OPTIONS)
    assert (found.index, found.rule) == (1, "final_choice")
    scored = score_request(_request(), {"text": REPLY})
    assert (scored.outcome, scored.pred, scored.rule) == ("correct", 1, "final_choice")


def test_without_the_rule_the_same_reply_is_no_match():
    assert (extract_choice(REPLY, OPTIONS).index, extract_choice(REPLY, OPTIONS).rule) == (None, "no_match")
    assert score_request(_request(), {"text": REPLY}).outcome == "unparsed"


def test_the_rule_sits_where_it_was_placed_and_the_builtin_chain_is_unchanged(final_choice):
    assert rule_names() == (*RULES[:-1], "final_choice", "no_match")
    assert RULES[-1] == "no_match" and "final_choice" not in RULES
    # Rules earlier in the chain still decide first: an answer marker wins over the new line.
    assert extract_choice("Answer: C\nFinal choice -> B", OPTIONS).rule == "answer_marker"
    # The checks every decision passes apply to it too: B called wrong elsewhere is ambiguous.
    assert extract_choice("B is wrong.\nFinal choice -> B", OPTIONS).rule == "ambiguous"


def test_a_run_can_record_which_rules_decided(final_choice):
    assert extractor_version() == f"{EXTRACTOR_VERSION}+rules:{','.join(rule_names())}"
    unregister_rule("final_choice")
    assert extractor_version() == EXTRACTOR_VERSION and rule_names() == RULES
    register_rule("final_choice", final_choice, before="no_match")  # the fixture takes it out again


def test_a_run_records_the_chain_it_ran_with_and_still_resumes_without_it(shapes_bench, tmp_path, final_choice):
    """The manifest's ``extractor_version`` names the plugin rule; it is provenance, not part of what
    makes two runs the same, so the run resumes once the rule is gone (and keeps what it recorded)."""
    import json

    from mmctx.tasks.fewshot import evaluate

    run = dict(settings="0-shot", scorers="generate", limit=1, tasks=["object_recognition"], show_progress=False)
    evaluate(shapes_bench, "builtin:tiny-llava", tmp_path / "run", **run)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["extractor_version"] == f"{EXTRACTOR_VERSION}+rules:{','.join(rule_names())}"
    assert "final_choice" in manifest["extractor_version"]
    unregister_rule("final_choice")
    try:
        again = evaluate(shapes_bench, "builtin:tiny-llava", tmp_path / "run", **run)
        assert again.stats.cached == again.stats.planned
        assert json.loads((tmp_path / "run" / "manifest.json").read_text()) == manifest
        evaluate(shapes_bench, "builtin:tiny-llava", tmp_path / "plain", **run)
        assert json.loads((tmp_path / "plain" / "manifest.json").read_text())["extractor_version"] == EXTRACTOR_VERSION
    finally:
        register_rule("final_choice", final_choice, before="no_match")  # the fixture takes it out again


def test_placement_errors_are_refused_naming_the_rule():
    def never(ctx: Ctx) -> None:
        return None

    with pytest.raises(ValueError, match="nothing after 'no_match' runs"):
        register_rule("late", never, after="no_match")
    with pytest.raises(ValueError, match="no rule 'answer_line' to place it by"):
        register_rule("misplaced", never, before="answer_line")
    with pytest.raises(ValueError, match="'ordinal' is registered already"):
        register_rule("ordinal", never)
    assert rule_names() == RULES


def test_a_rule_placed_after_a_named_rule_runs_right_after_it():
    register_rule("after_empty", lambda ctx: None, after="empty")
    try:
        assert rule_names()[:3] == ("empty", "after_empty", "answer_marker")
    finally:
        unregister_rule("after_empty")
    assert rule_names() == RULES


def test_a_rule_returning_something_else_than_an_index_fails_loudly():
    register_rule("broken", lambda ctx: "B", before="no_match")
    try:
        with pytest.raises(ValueError, match="'broken' returned 'B'"):
            extract_choice("something unreadable", OPTIONS)
    finally:
        unregister_rule("broken")
