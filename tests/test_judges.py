"""The CLBench-V judges and the extractor, without a model: prompts, reply parsing, verdict rules."""

from __future__ import annotations

import json

import pytest

from mmctx.schema import Sample
from mmctx.scoring.evaluators import base
from mmctx.scoring.evaluators.base import Evaluator, Judge, JudgeReplyError
from mmctx.scoring.evaluators.extractor import EXTRACTION_TYPES, extraction_prompt, parse_extraction
from mmctx.scoring.evaluators.judged import (
    CONCLUSIONS,
    MMLONGBENCH,
    RUBRIC,
    SEMANTIC,
    ConclusionsJudge,
    RubricJudge,
    SemanticJudge,
    exact_match,
    extract_final_answer,
    json_object,
    paper_score,
    split_conclusions,
)


def item(gold, answer_type: str = "string", evaluator: str = "semantic", question: str = "What city?") -> Sample:
    display = gold if isinstance(gold, str) else json.dumps(gold)
    return Sample(
        id="s1",
        task="t",
        source="src",
        format="open",
        question=question,
        answer=display,
        gold=gold,
        answer_type=answer_type,
        evaluator=evaluator,
        level="L1",
    )


def get_evaluator(name: str) -> Evaluator:
    """The registered evaluator, looked up without loading the other built-in modules (not this file's subject)."""
    return base._REGISTRY[name]


def text_of(prompt) -> str:
    [message] = prompt
    assert message.role == "user" and not message.images
    return message.text


# ---- registry ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["semantic", "mmlongbench", "rubric", "conclusions"])
def test_evaluators_are_registered_with_judges(name):
    evaluator = get_evaluator(name)
    assert (
        evaluator
        is {"semantic": SEMANTIC, "mmlongbench": MMLONGBENCH, "rubric": RUBRIC, "conclusions": CONCLUSIONS}[name]
    )
    assert isinstance(evaluator, Evaluator) and isinstance(evaluator.judge, Judge)
    assert evaluator.free_form is (name in ("semantic", "mmlongbench"))


def test_judge_names_differ_so_caches_and_groups_do_not_mix():
    names = [get_evaluator(n).judge.name for n in ("semantic", "mmlongbench", "rubric", "conclusions")]
    assert len(set(names)) == 4
    assert get_evaluator("semantic").judge.max_new_tokens == 16


# ---- rule extraction -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "response, answer, rule",
    [
        (
            'Sure.\n```json\n{"Observation": "a sign", "Comprehensive Answer": "x", "Final Answer": "5.4%"}\n```',
            "5.4%",
            "json_final_answer",
        ),
        ("Working: \\boxed{12} first.\n**Final Answer:** 42", "42", "answer_line"),
        ("so the result is \\boxed{\\frac{1}{2}}.", "\\frac{1}{2}", "boxed"),
        ("<think>Answer: 3</think>I pick <answer> 7 </answer>", "7", "answer_tag"),
        ("Answer:\n\nBerlin", "Berlin", "answer_line"),
        ("Answer: 1\nOn reflection:\nAnswer: 2", "2", "answer_line"),
    ],
)
def test_rule_extraction(response, answer, rule):
    assert extract_final_answer(response) == type(extract_final_answer(response))(answer, rule, "")


def test_no_rule_matches_gives_an_issue_for_the_repair_prompt():
    found = get_evaluator("semantic").extract(item("Paris"), "I am not sure what this is.")
    assert not found.parsed and "Answer:" in found.issue
    assert not extract_final_answer("   ").parsed


# ---- semantic judge ---------------------------------------------------------------------------------


def test_semantic_prompt_carries_question_gold_and_answer():
    text = text_of(SemanticJudge().prompt(item(["Paris", "Paris, France"], question="Capital of France?"), "paree"))
    assert "Capital of France?" in text and "Paris" in text and "Paris, France" in text and "paree" in text
    assert "True" in text and "False" in text and "equivalent" in text


def test_semantic_prompt_spells_out_list_and_number_golds():
    assert "every item is required" in text_of(SemanticJudge().prompt(item(["a", "b"], "list"), "a"))
    assert "3.5 km" in text_of(SemanticJudge().prompt(item({"value": 3.5, "unit": "km"}, "number"), "3.5"))


@pytest.mark.parametrize(
    "reply, equivalent",
    [
        ("True", True),
        ("false", False),
        ("TRUE.", True),
        ("**False**", False),
        ("<True>", True),
        ("```\nTrue\n```", True),
        ("The two answers name the same city.\nTrue", True),
        (" 'false' ", False),
    ],
)
def test_semantic_parse_accepts(reply, equivalent):
    assert SemanticJudge().parse(reply) == {"equivalent": equivalent}


@pytest.mark.parametrize("reply", ["", "Maybe", "True or False", "The answer is True", "yes", "Truee"])
def test_semantic_parse_rejects(reply):
    with pytest.raises(JudgeReplyError):
        SemanticJudge().parse(reply)


def test_semantic_precheck_decides_exact_and_empty_answers_without_a_call():
    judge = SemanticJudge()
    assert judge.precheck(item("Paris"), "  ").outcome == "unparsed"
    exact = judge.precheck(item("The Louvre"), "the louvre.")
    assert (exact.outcome, exact.score, exact.detail["mode"]) == ("scored", 1.0, "exact")
    assert judge.precheck(item(["NYC", "New York City"]), "**New York City**").score == 1.0
    assert judge.precheck(item("Paris"), "the French capital") is None
    verdict = judge.verdict(item("Paris"), "the French capital", judge.parse("True"))
    assert (verdict.score, verdict.detail["mode"]) == (1.0, "judge")


def test_exact_match_for_lists_and_numbers():
    assert exact_match(item(["red", "Blue"], "list"), "blue, red")
    assert not exact_match(item(["red", "blue"], "list"), "red")
    assert exact_match(item({"value": 1200.0}, "number"), "1,200")
    assert exact_match(item({"value": 10.0, "rel_tol": 0.05}, "number"), "about 10.4 units")
    assert not exact_match(item({"value": 10.0}, "number"), "10 or 11")


def test_semantic_score_without_a_judge_is_the_baseline_match():
    evaluator = get_evaluator("semantic")
    hit, miss = evaluator.score(item("Paris"), "PARIS"), evaluator.score(item("Paris"), "the French capital")
    assert (hit.score, hit.detail["mode"]) == (1.0, "baseline")
    assert (miss.outcome, miss.score, miss.detail["mode"]) == ("scored", 0.0, "baseline")
    assert evaluator.score(item("Paris"), "").outcome == "unparsed"


def test_mmlongbench_not_answerable_is_decided_by_rule():
    evaluator = get_evaluator("mmlongbench")
    judge = evaluator.judge
    na = item("Not answerable", evaluator="mmlongbench")
    assert judge.precheck(na, "Not answerable").score == 1.0
    assert judge.precheck(na, "not answerable.").score == 1.0
    assert judge.precheck(na, "The question cannot be answered").detail["mode"] == "not_answerable"
    assert judge.precheck(item("5", evaluator="mmlongbench"), "five") is None
    assert evaluator.score(na, "Not answerable").score == 1.0 and evaluator.typed_extraction


def test_mmlongbench_not_answerable_paraphrase_goes_to_the_judge():
    evaluator = get_evaluator("mmlongbench")
    judge = evaluator.judge
    na = item("Not answerable", evaluator="mmlongbench")
    paraphrase = "The document does not provide this information."
    assert judge.precheck(na, paraphrase) is None  # not scored 0 by the exact-phrase shortcut
    assert judge.precheck(na, "5") is None  # any non-exact answer to a "Not answerable" gold is judged
    prompt = text_of(judge.prompt(na, paraphrase))
    assert "only a prediction stating that the question cannot be answered is equivalent" in prompt
    assert paraphrase in prompt and "Not answerable" in prompt
    hit = judge.verdict(na, paraphrase, judge.parse("True"))
    assert (hit.outcome, hit.score, hit.detail["mode"]) == ("scored", 1.0, "judge")
    miss = judge.verdict(na, "5", judge.parse("False"))
    assert (miss.score, miss.detail["mode"]) == (0.0, "judge")
    # without a judge the paraphrase matches nothing: 0, and the detail says so
    base_ = evaluator.score(na, paraphrase)
    assert (base_.outcome, base_.score, base_.detail["mode"]) == ("scored", 0.0, "baseline")
    exact = evaluator.score(na, "unanswerable")
    assert (exact.score, exact.detail["mode"]) == (1.0, "baseline")


def test_mmlongbench_not_answerable_prediction_against_a_real_gold_scores_zero():
    evaluator = get_evaluator("mmlongbench")
    judge = evaluator.judge
    gold = item("5", evaluator="mmlongbench")
    for said in ("Not answerable", "not answerable.", "Cannot be answered from the document"):
        v = judge.precheck(gold, said)
        assert (v.outcome, v.score, v.detail["mode"]) == ("scored", 0.0, "not_answerable")
        b = evaluator.score(gold, said)
        assert (b.outcome, b.score, b.detail["mode"]) == ("scored", 0.0, "baseline")
    # the plain semantic judge has no such rule: the phrase is judged like any answer
    assert SEMANTIC.judge.precheck(item("5"), "Not answerable") is None


# ---- rubric judge -------------------------------------------------------------------------------------

RUBRICS = ["States the total as 42.", "Uses the context's definition of a widget.", "Answers in one sentence."]


def rubric_reply(statuses, overall, fence: bool = False) -> str:
    body = json.dumps(
        {
            "Grading Rationale": "checked each",
            "List of Requirement Satisfaction Status": statuses,
            "Overall Score": overall,
        }
    )
    return f"```json\n{body}\n```" if fence else body


def test_rubric_prompt_shows_numbered_rubrics_and_response_only():
    sample = item(RUBRICS, "rubrics", "rubric", question="SECRET QUESTION TEXT")
    text = text_of(RubricJudge().prompt(sample, "The total is 42."))
    assert "1. States the total as 42.\n2. Uses the context's definition of a widget.\n3. Answers" in text
    assert "The total is 42." in text and "SECRET QUESTION TEXT" not in text
    assert "all-or-nothing" in text and "Overall Score" in text and "List of Requirement Satisfaction Status" in text
    assert "exactly 3 entries" in text


def test_rubric_parse_accepts_fenced_json():
    parsed = RubricJudge().parse(rubric_reply(["yes", "YES", "no"], 0, fence=True))
    assert parsed == {"overall": 0, "statuses": ["yes", "yes", "no"], "rationale": "checked each"}


@pytest.mark.parametrize(
    "reply",
    [
        "The response is good. Score: 1",
        json.dumps({"Grading Rationale": "x", "List of Requirement Satisfaction Status": ["yes"]}),
        json.dumps({"List of Requirement Satisfaction Status": "yes", "Overall Score": 1}),
        json.dumps({"List of Requirement Satisfaction Status": ["partly"], "Overall Score": 1}),
        json.dumps({"List of Requirement Satisfaction Status": ["yes"], "Overall Score": 2}),
        json.dumps(["yes"]),
    ],
)
def test_rubric_parse_rejects(reply):
    with pytest.raises(JudgeReplyError):
        RubricJudge().parse(reply)


def test_rubric_is_all_or_nothing_and_records_disagreement():
    judge, sample = RubricJudge(), item(RUBRICS, "rubrics", "rubric")
    full = judge.verdict(sample, "a", judge.parse(rubric_reply(["yes"] * 3, 1)))
    assert full.score == 1.0 and full.detail["statuses"] == ["yes"] * 3 and "disagreement" not in full.detail
    one_no = judge.verdict(sample, "a", judge.parse(rubric_reply(["yes", "no", "yes"], 1)))
    assert one_no.score == 0.0 and "[2]" in one_no.detail["disagreement"]
    overall_zero = judge.verdict(sample, "a", judge.parse(rubric_reply(["yes"] * 3, 0)))
    assert overall_zero.score == 0.0 and "disagreement" in overall_zero.detail
    assert overall_zero.detail["rationale"] == "checked each"
    with pytest.raises(JudgeReplyError, match="2 requirement statuses for 3 rubrics"):
        judge.verdict(sample, "a", judge.parse(rubric_reply(["yes", "yes"], 1)))


def test_rubric_prechecks_and_evaluator():
    judge = RubricJudge()
    assert judge.precheck(item([], "rubrics", "rubric"), "x").outcome == "invalid_sample"
    empty = judge.precheck(item(RUBRICS, "rubrics", "rubric"), " ")
    assert (empty.outcome, empty.score, empty.detail["reason"]) == ("scored", 0.0, "empty answer")
    assert judge.precheck(item(RUBRICS, "rubrics", "rubric"), "x") is None
    evaluator = get_evaluator("rubric")
    found = evaluator.extract(item(RUBRICS, "rubrics", "rubric"), "<think>draft</think>\nFinal text.\nLine 2.")
    assert (found.answer, found.rule) == ("Final text.\nLine 2.", "whole_response")
    verdict = evaluator.score(item(RUBRICS, "rubrics", "rubric"), "x")
    assert verdict.outcome == "judge_error" and "needs a judge" in verdict.detail["reason"]


# ---- conclusions judge ---------------------------------------------------------------------------------

REFS = ["Drug A lowers blood pressure.", "The effect lasts 6 weeks.", "Side effects are rare.", "Men respond more."]


def test_conclusions_prompt_is_appendix_b():
    text = text_of(ConclusionsJudge().prompt(item(REFS, "conclusions", "conclusions"), "A lowers BP\nIt is safe"))
    assert "Reference conclusions:\n1. Drug A lowers blood pressure.\n2. The effect lasts 6 weeks." in text
    assert "Predicted conclusions:\n1. A lowers BP\n2. It is safe" in text
    assert "Count how many predicted conclusions correctly match distinct reference conclusions." in text
    assert "Match by scientific claim, not wording." in text
    assert "Each reference and prediction can be matched at most once." in text
    assert '"correct_count": <int>' in text and '"rationale": "<str>"' in text


@pytest.mark.parametrize(
    "reply, count",
    [
        ('{"correct_count": 2, "rationale": "two"}', 2),
        ('```json\n{"correct_count": 0, "rationale": ""}\n```', 0),
        ('Here: {"correct_count": 3.0, "rationale": "r"}', 3),
    ],
)
def test_conclusions_parse_accepts(reply, count):
    assert ConclusionsJudge().parse(reply)["correct_count"] == count


@pytest.mark.parametrize(
    "reply",
    [
        "two of them",
        '{"rationale": "x"}',
        '{"correct_count": "2"}',
        '{"correct_count": 2.5}',
        '{"correct_count": true}',
        "[2]",
    ],
)
def test_conclusions_parse_rejects(reply):
    with pytest.raises(JudgeReplyError):
        ConclusionsJudge().parse(reply)


@pytest.mark.parametrize(
    "n_hit, n_pred, n_ref, score",
    [(3, 3, 4, 0.75), (3, 4, 5, 0.4), (4, 4, 4, 1.0), (3, 6, 4, 0.0), (2, 8, 4, 0.0), (0, 2, 3, 0.0), (1, 1, 4, 0.25)],
)
def test_paper_score_formula_with_floor_and_over_prediction_penalty(n_hit, n_pred, n_ref, score):
    assert paper_score(n_hit, n_pred, n_ref) == pytest.approx(score)


def test_conclusions_verdict_counts_and_range():
    judge, sample = ConclusionsJudge(), item(REFS, "conclusions", "conclusions")
    answer = "A lowers BP\nLasts six weeks\nWomen respond more\nIt cures cancer\nIt is cheap"
    verdict = judge.verdict(sample, answer, judge.parse('{"correct_count": 2, "rationale": "r"}'))
    assert verdict.score == 0.0  # (2 - 3) / 4 floored
    assert (verdict.detail["n_hit"], verdict.detail["n_extra"], verdict.detail["n_ref"]) == (2, 3, 4)
    fewer = judge.verdict(sample, "A lowers BP\nLasts six weeks", judge.parse('{"correct_count": 2}'))
    assert fewer.score == 0.5 and fewer.detail["n_extra"] == 0
    for bad in (3, -1):  # more hits than predictions; negative
        with pytest.raises(JudgeReplyError):
            judge.verdict(sample, "A lowers BP\nLasts six weeks", {"correct_count": bad, "rationale": ""})
    assert judge.precheck(item([], "conclusions", "conclusions"), "x").outcome == "invalid_sample"
    assert judge.precheck(sample, "\n \n").outcome == "unparsed"


def test_conclusion_splitting():
    numbered = "Here are my conclusions:\n1. A rises\n   with B.\n2) C falls\n  - in mice\n\n**3.** D\nConclusion 4: E"
    assert split_conclusions(numbered) == ["A rises with B.", "C falls in mice", "D", "E"]
    assert split_conclusions("- a\n* b\n• c") == ["a", "b", "c"]
    assert split_conclusions("Para one\nline two.\n\nPara two.") == ["Para one line two.", "Para two."]
    evaluator = get_evaluator("conclusions")
    found = evaluator.extract(item(REFS, "conclusions", "conclusions"), "1. X up\n2. Y down")
    assert (found.answer, found.rule) == ("X up\nY down", "conclusion_list")
    missing = evaluator.extract(item(REFS, "conclusions", "conclusions"), "<think>only thoughts</think>")
    assert not missing.parsed and "numbered" in missing.issue
    assert evaluator.score(item(REFS, "conclusions", "conclusions"), "X").outcome == "judge_error"


# ---- extractor ---------------------------------------------------------------------------------------------


def test_extraction_prompt_is_appendix_b():
    text = text_of(extraction_prompt("How many pages?", "Counting... there are 12 pages."))
    assert text.startswith("Given a question and model response, extract only the final answer.")
    assert "Prefer content inside <answer>...</answer> or boxed expressions." in text
    assert "Otherwise extract the last decisive answer span." in text
    assert "If there is no clear final answer, output [NO_FINAL_ANSWER]." in text
    assert "How many pages?" in text and "there are 12 pages." in text and '"type"' not in text
    typed = text_of(extraction_prompt("Q?", "R.", typed=True))
    assert '"answer"' in typed and '"type"' in typed and all(t in typed for t in EXTRACTION_TYPES)


@pytest.mark.parametrize(
    "reply, typed, answer, rule",
    [
        ("12", False, "12", "extractor"),
        ("Extracted answer: Paris", False, "Paris", "extractor"),
        ("[NO_FINAL_ANSWER]", False, None, "extractor"),
        ('{"answer": 12, "type": "integer"}', True, "12", "extractor:integer"),
        ('```json\n{"answer": ["a", "b"], "type": "list"}\n```', True, '["a", "b"]', "extractor:list"),
        ('{"answer": "", "type": "fail to answer"}', True, None, "extractor"),
        ('{"answer": "n/a", "type": "Not answerable"}', True, "Not answerable", "extractor:not answerable"),
        ("[NO_FINAL_ANSWER]", True, None, "extractor"),
    ],
)
def test_parse_extraction(reply, typed, answer, rule):
    found = parse_extraction(reply, typed)
    assert (found.answer, found.rule) == (answer, rule)
    assert found.parsed or found.issue


@pytest.mark.parametrize(
    "reply, typed",
    [
        ("", False),
        ("   ", False),
        ("The answer is 12 (integer)", True),
        ('{"answer": 1, "type": "number"}', True),
        ('{"answer": null, "type": "string"}', True),
    ],
)
def test_parse_extraction_rejects(reply, typed):
    with pytest.raises(JudgeReplyError):
        parse_extraction(reply, typed)


def test_json_object_tolerates_prose_and_fences_only():
    assert json_object('Result:\n{"a": 1}\nDone.') == {"a": 1}
    with pytest.raises(JudgeReplyError):
        json_object("{not json}")
