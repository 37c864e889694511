"""Failure taxonomy (CLBench-V §6.2): tag CSVs, counts per level, and the failure-tagging judge."""

from __future__ import annotations

import csv
from collections import Counter

import pytest

from mmctx.analysis.failures import (
    FAILURE_TYPES,
    FailureTagger,
    counts_by_level,
    failure_table_markdown,
    read_tags_csv,
    write_tag_template,
)
from mmctx.prompts.messages import TextPart
from mmctx.schema import Sample
from mmctx.scoring.evaluators.base import Judge, JudgeReplyError


def _rows():
    return [
        {"id": "a", "subset": "ZeroBench", "level": "L0", "table_level": "L0", "outcome": "scored", "score": 1.0},
        {"id": "b", "subset": "ZeroBench", "level": "L0", "table_level": "L0", "outcome": "scored", "score": 0.0,
         "prediction": "42\nsee   above"},
        {"id": "c", "subset": "MIRBench", "level": "L0–L1", "table_level": "L0", "outcome": "unparsed", "score": 0.0},
        {"id": "d", "subset": "PRISMM-Bench", "level": "L1–L2", "table_level": "L1", "outcome": "scored",
         "score": 0.0},
        {"id": "e", "subset": "Paper Conclusion", "level": "L2", "table_level": "L2", "outcome": "scored",
         "score": 0.5},
    ]  # fmt: skip


def test_six_types():
    assert list(FAILURE_TYPES) == ["evidence_missing", "evidence_misbinding", "context_misuse", "prior_override",
                                   "incomplete_induction", "format_failure"]  # fmt: skip
    assert all(FAILURE_TYPES.values())


def test_template_and_round_trip(tmp_path):
    path = write_tag_template(_rows(), tmp_path / "tags.csv")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["id"] for r in rows] == ["b", "c", "d", "e"]  # a is fully correct; e (0.5) is partial
    assert all(r["tag"] == "" for r in rows)
    assert rows[0]["prediction"] == "42 see above"
    assert read_tags_csv(path) == {}  # nothing labelled yet
    tags = ["Evidence missing", "format-failure", "context_misuse", ""]
    for r, t in zip(rows, tags):
        r["tag"] = t
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert read_tags_csv(path) == {"b": "evidence_missing", "c": "format_failure", "d": "context_misuse"}


def test_minimal_columns_and_note(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("id,tag,note\nb,prior_override,looked it up\n", encoding="utf-8")
    assert read_tags_csv(path) == {"b": "prior_override"}


def test_unknown_tag_names_row(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("id,tag\nb,evidence_missing\nc,hallucination\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"t\.csv:3 \(id 'c'\): unknown tag 'hallucination'"):
        read_tags_csv(path)


def test_bad_files(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("id,label\nb,x\n", encoding="utf-8")
    with pytest.raises(ValueError, match="missing column"):
        read_tags_csv(path)
    path.write_text("id,tag\nb,evidence_missing\nb,prior_override\n", encoding="utf-8")
    with pytest.raises(ValueError, match="tagged"):
        read_tags_csv(path)


def test_counts_by_level():
    tags = {"b": "evidence_missing", "c": "format_failure", "d": "incomplete_induction", "e": "incomplete_induction"}
    counts = counts_by_level(_rows(), tags)
    assert list(counts) == ["L0", "L1", "L2"]
    assert counts["L0"] == Counter({"evidence_missing": 1, "format_failure": 1})
    assert counts["L1"] == Counter({"incomplete_induction": 1})
    by_paper_level = counts_by_level(_rows(), tags, level_key="level")
    assert list(by_paper_level) == ["L0", "L2", "L0–L1", "L1–L2"]
    with pytest.raises(ValueError, match="not in the results"):
        counts_by_level(_rows(), {"zz": "prior_override"})
    table = failure_table_markdown(counts)
    assert table.splitlines()[0] == "| Failure type | L0 | L1 | L2 | Total |"
    assert "| incomplete induction | 0 | 1 | 1 | 2 |" in table
    assert table.splitlines()[-1] == "| **Total** | 2 | 1 | 1 | 4 |"


def _sample():
    return Sample(id="d", task="PRISMM-Bench", source="prismm", format="open", question="What is inconsistent?",
                  answer="B", level="L1–L2", evaluator="choice")  # fmt: skip


def test_tagger_is_a_judge_and_prompts():
    tagger = FailureTagger.from_results([{**_rows()[3], "evaluator": "choice", "detail": {"gold": "B", "got": "C"}}])
    assert isinstance(tagger, Judge)
    assert tagger.precheck(_sample(), "C") is None
    prompt = tagger.prompt(_sample(), "Answer: C")
    text = "".join(p.text for m in prompt for p in m.content if isinstance(p, TextPart))
    for needle in ("What is inconsistent?", "Gold answer:\nB", "Answer: C", '"got": "C"', "incomplete_induction",
                   "outcome scored"):  # fmt: skip
        assert needle in text
    assert prompt[0].role == "system" and prompt[1].role == "user"


def test_tagger_parse_and_verdict():
    tagger = FailureTagger()
    reply = 'Thinking {not json}.\n```json\n{"tag": "Prior override", "why": "used memory"}\n```'
    parsed = tagger.parse(reply)
    assert parsed == {"tag": "prior_override", "why": "used memory"}
    v = tagger.verdict(_sample(), "C", parsed)
    assert v.outcome == "scored" and v.score == 0.0 and v.prediction == "prior_override"
    assert v.detail == {"tag": "prior_override", "why": "used memory"}
    assert tagger.parse('{"tag": "format_failure"}') == {"tag": "format_failure", "why": ""}
    bad_replies = ["no json here", '{"tag": "hallucination", "why": "x"}', '{"why": "x"}', '{"tag": "x", "why": 3}']
    bad_replies.append('{"tag": "context_misuse", "why": 3}')
    for bad in bad_replies:
        with pytest.raises(JudgeReplyError):
            tagger.parse(bad)
