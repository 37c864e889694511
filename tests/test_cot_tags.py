"""CoT failure tags: the rules on a hand-written corpus, the registry, storage on results.

``tests/fixtures/cot_corpus.jsonl`` holds hand-written responses, each with the options and labels
it answers, its gold, its ``truncated`` flag, the tags it must get (in registry order) and a note
saying what it tests: every tag, clean responses and near misses of each rule.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from mmctx.run.files import REQUESTS, RESULTS
from mmctx.scoring.cot_tags import (
    MIN_REASONING_WORDS,
    REPETITION_MIN_NGRAMS,
    REPETITION_THRESHOLD,
    cot_tag,
    cot_tag_descriptions,
    cot_tag_names,
    is_cot_setting,
    read_cot_response,
    register_cot_tag,
    repetition_rate,
    tag_cot_response,
    unregister_cot_tag,
)
from mmctx.scoring.results import score_request, summarize, write_scores

CORPUS = Path(__file__).parent / "fixtures" / "cot_corpus.jsonl"
ENTRIES = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
BUILTIN_TAGS = (
    "empty_response", "no_reasoning", "no_final_answer", "malformed_answer_line", "contradicts_reasoning",
    "nonexistent_option", "repetition_loop", "truncated",
)  # fmt: skip


# --- the corpus ---------------------------------------------------------------------------------


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["id"] for e in ENTRIES])
def test_corpus_response_gets_exactly_its_tags(entry: dict) -> None:
    response = read_cot_response(entry["response"], entry["options"], entry["labels"], entry["truncated"])
    assert list(tag_cot_response(response)) == entry["tags"], entry["note"]


def test_corpus_covers_every_tag_clean_responses_and_near_misses() -> None:
    assert len(ENTRIES) >= 40
    assert len({e["id"] for e in ENTRIES}) == len(ENTRIES)
    assert cot_tag_names() == BUILTIN_TAGS
    for tag in BUILTIN_TAGS:
        assert sum(tag in e["tags"] for e in ENTRIES) >= 2, tag
    assert sum(not e["tags"] for e in ENTRIES) >= 15  # clean responses, near misses among them
    assert sum(e["note"].startswith("near miss") for e in ENTRIES) >= 15
    assert sum(len(e["tags"]) >= 2 for e in ENTRIES) >= 4  # responses failing in several ways at once
    for e in ENTRIES:
        assert len(e["options"]) == len(e["labels"]) and 0 <= e["gold"] < len(e["options"]), e["id"]
        assert e["tags"] == [t for t in BUILTIN_TAGS if t in e["tags"]], f"{e['id']}: tags in registry order"


# --- definitions --------------------------------------------------------------------------------


def test_repetition_rate_is_the_share_of_repeated_word_4grams() -> None:
    assert repetition_rate("") == 0.0 and repetition_rate("one two three") == 0.0  # no 4-gram at all
    assert repetition_rate("a b c d e f g") == 0.0  # four 4-grams, all distinct
    # "x y z w x y z w": five 4-grams, four distinct -> one repeats
    assert repetition_rate("x y z w x y z w") == pytest.approx(1 / 5)
    assert repetition_rate("Go on. GO ON, go on! go on") == pytest.approx(1 - 2 / 5)  # case and punctuation aside
    assert repetition_rate("a b c " * 40) > 0.95
    assert repetition_rate("x_y_z_w_x_y_z_w") == pytest.approx(1 / 5)  # underscores separate words


def test_loop_needs_enough_4grams_and_the_threshold() -> None:
    short = " ".join(["stop"] * (REPETITION_MIN_NGRAMS + 2))  # 19 four-grams, all the same
    assert repetition_rate(short) > REPETITION_THRESHOLD
    assert "repetition_loop" not in _tags(short)
    assert "repetition_loop" in _tags(short + " stop")  # one word more: 20 four-grams


def _tags(text: str, truncated: bool = False) -> tuple[str, ...]:
    return tag_cot_response(read_cot_response(text, ["red", "blue", "green", "yellow"], list("ABCD"), truncated))


def test_reasoning_word_threshold() -> None:
    reasoning = " ".join(["word"] * (MIN_REASONING_WORDS - 1))
    assert "no_reasoning" in _tags(f"{reasoning}.\nAnswer: B")
    assert "no_reasoning" not in _tags(f"{reasoning} more.\nAnswer: B")


def test_parts_of_a_response() -> None:
    r = read_cot_response(
        "<think>The circle is blue.</think>The sky is blue too, so the answer is B.\nFinal answer: **B**",
        ["red", "blue"],
        ["A", "B"],
    )
    assert r.parts.answer_line is not None and r.parts.answer_line.text == "Final answer: B"
    assert r.parts.answer_line.stated == "B"
    assert r.reasoning == "The circle is blue.\nThe sky is blue too, so the answer is B."
    assert (r.reasoning_choice, r.final_answer, r.extraction.index) == (1, 1, 1)


def test_is_cot_setting() -> None:
    assert is_cot_setting("4-similar-cot") and is_cot_setting("0-shot-cot") and is_cot_setting("8-similar-cot#o2")
    assert not is_cot_setting("4-similar") and not is_cot_setting("0-shot") and not is_cot_setting("not a setting")


def test_every_tag_has_a_description() -> None:
    descriptions = cot_tag_descriptions()
    assert list(descriptions) == list(BUILTIN_TAGS) and all(descriptions.values())


# --- the registry -------------------------------------------------------------------------------


def test_a_registered_tag_applies_and_can_be_taken_out() -> None:
    @cot_tag("mentions_colour_words", "names two or more colours")
    def colours(r) -> bool:
        return sum(c in r.text.lower() for c in ("red", "blue", "green")) >= 2

    try:
        assert cot_tag_names()[-1] == "mentions_colour_words"
        assert _tags("The circle is blue, not red.\nAnswer: B") == ("mentions_colour_words",)
        with pytest.raises(ValueError, match="registered already"):
            register_cot_tag("mentions_colour_words", "again", colours)
        with pytest.raises(ValueError, match="unnamed"):
            register_cot_tag("", "no name", colours)
    finally:
        unregister_cot_tag("mentions_colour_words")
    assert cot_tag_names() == BUILTIN_TAGS
    with pytest.raises(KeyError):
        unregister_cot_tag("mentions_colour_words")


# --- storage ------------------------------------------------------------------------------------


def _request(setting: str, qid: str = "q1", task: str = "counting", scorer: str = "generate") -> dict:
    return {
        "id": f"{setting}/{scorer}/{qid}", "query_id": qid, "task": task, "source": "hand", "setting": setting,
        "scorer": scorer, "gold": 1, "options": ["red", "blue", "green", "yellow"], "labels": list("ABCD"),
        "format": "mcqa", "demo_ids": [], "prompt": [{"role": "user", "content": [{"type": "text", "text": "?"}]}],
        "key": f"k-{setting}-{qid}",
    }  # fmt: skip


def test_score_request_tags_cot_responses_only() -> None:
    answer = {"text": "Answer: E", "truncated": True}
    cot = score_request(_request("4-similar-cot"), answer)
    assert cot.cot_tags == ("no_reasoning", "malformed_answer_line", "nonexistent_option", "truncated")
    assert score_request(_request("4-similar"), answer).cot_tags is None  # not a CoT setting
    assert score_request(_request("4-similar-cot"), None).cot_tags is None  # no response to read
    assert score_request(_request("4-similar-cot"), {"text": "", "error": "boom"}).cot_tags is None
    clean = score_request(_request("4-similar-cot#o1"), {"text": "The circle is painted blue.\nAnswer: B"})
    assert clean.cot_tags == () and clean.outcome == "correct"


def test_tags_are_written_and_results_stored_before_tags_still_load(tmp_path: Path) -> None:
    from mmctx.reporting.viewer import load_run

    requests = [_request("4-similar-cot", "q1"), _request("4-similar", "q1"), _request("4-similar-cot", "q2")]
    responses = [{"text": "B"}, {"text": "B"}, {"text": "The circle is blue and round.\nAnswer: B"}]
    results = [score_request(q, a) for q, a in zip(requests, responses)]
    (tmp_path / REQUESTS).write_text("".join(json.dumps(q) + "\n" for q in requests), encoding="utf-8")
    write_scores(tmp_path, results, summarize(results))
    stored = [json.loads(line) for line in (tmp_path / RESULTS).read_text().splitlines()]
    assert [row["cot_tags"] for row in stored] == [["no_reasoning"], None, []]
    # no response store in the folder: the viewer reads results.jsonl, tags as tuples
    assert load_run(tmp_path).results == results

    # results.jsonl as written before tags existed: no cot_tags field at all
    old = [{k: v for k, v in row.items() if k != "cot_tags"} for row in stored]
    (tmp_path / RESULTS).write_text("".join(json.dumps(row) + "\n" for row in old), encoding="utf-8")
    loaded = load_run(tmp_path).results
    assert [r.cot_tags for r in loaded] == [None, None, None]
    assert [replace(r, cot_tags=None) for r in results] == loaded
