"""A judge reading CoT reasoning: a seeded sample, cached and resumable calls, the judge pinned in the
manifest, replies that never parse kept as judge errors, the counts and the report's table."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from mmctx.analysis.cot_failures import ALL_SETTINGS, cot_judgement_counts
from mmctx.models.base import Capabilities, Generation, ModelInfo
from mmctx.prompts.messages import ImagePart
from mmctx.reporting.cot_tables import cot_judgements_markdown
from mmctx.reporting.folder import write_report
from mmctx.scoring.cot_judging import CotJudgement, judge_cot_reasoning, read_cot_judgements
from mmctx.scoring.results import score_run

GOOD = json.dumps({"reasoning_correct": True, "why": "each step holds"})
BAD = json.dumps({"reasoning_correct": "false", "why": "the circle is not red"})


class Killed(BaseException):
    """The process dying mid-pass (not an error a backend reports, which the runner records)."""


class ScriptedJudge:
    """A judge backend: replies by a rule over the prompt, counts its calls, may fail mid-way."""

    def __init__(self, reply=lambda text: GOOD, max_images: int | None = None, fail_after: int | None = None):
        self.info = ModelInfo("scripted-judge", "r1", "test", {"temperature": 0.0})
        self.capabilities = Capabilities(max_images, True, False, True, None)
        self.max_concurrency = 1  # small committed batches (4 calls each)
        self.reply, self.fail_after = reply, fail_after
        self.calls: list = []

    def generate(self, requests):
        if self.fail_after is not None and len(self.calls) >= self.fail_after:
            raise Killed
        self.calls += requests
        return [Generation(text=self.reply(_text(r))) for r in requests]

    def score(self, requests):
        raise NotImplementedError


def _text(request) -> str:
    return "".join(getattr(p, "text", "") for m in request.messages for p in m.content)


@pytest.fixture(scope="module")
def cot_run(shapes_bench, tmp_path_factory) -> Path:
    from mmctx.run.plan import GenerationLimits
    from mmctx.tasks.fewshot import evaluate

    run = tmp_path_factory.mktemp("cot-judging") / "run"
    evaluate(shapes_bench, "builtin:tiny-idefics3", run, settings="0-shot,4-similar-cot,8-similar-cot",
             scorers="generate", limit=2, tasks=["attribute_recognition", "counting", "plurality"],
             limits=GenerationLimits(4, 8), show_progress=False)  # fmt: skip
    return run


@pytest.fixture
def run(cot_run, tmp_path) -> Path:
    """A fresh copy of the CoT run for each test (judging writes into the folder)."""
    return Path(shutil.copytree(cot_run, tmp_path / "run"))


def test_a_seeded_sample_of_cot_responses_is_judged_and_the_judge_pinned(run: Path) -> None:
    cot = [r for r in score_run(run) if r.cot_tags is not None]
    assert len(cot) == 12  # 3 tasks x 2 queries x 2 CoT settings; 0-shot is not CoT
    judge = ScriptedJudge()
    judged = judge_cot_reasoning(run, judge, sample=5, seed=3)
    # one call per distinct judge prompt: two settings' identical responses to a query are asked once
    assert len(judged) == 5 and 1 <= len(judge.calls) <= 5
    assert {j.setting for j in judged} <= {"4-similar-cot", "8-similar-cot"}
    order = [r.request_id for r in cot]
    assert [j.request_id for j in judged] == sorted((j.request_id for j in judged), key=order.index)  # plan order
    assert all(j.reasoning_correct is True and j.judge_outcome == "scored" and j.judge_key for j in judged)
    assert read_cot_judgements(run) == judged
    pinned = json.loads((run / "manifest.json").read_text())["cot_judge"]
    assert pinned == {"model": {"name": "scripted-judge", "revision": "r1", "backend": "test",
                                "settings": {"temperature": 0.0}}, "judge": "cot-reasoning", "sample": 5, "seed": 3}  # fmt: skip
    # the same seed draws the same sample; another seed (almost surely) another
    again = judge_cot_reasoning(run, ScriptedJudge(), sample=5, seed=3)
    assert [j.request_id for j in again] == [j.request_id for j in judged]
    other = judge_cot_reasoning(run, ScriptedJudge(), sample=5, seed=4)
    assert [j.request_id for j in other] != [j.request_id for j in judged]
    # a sample larger than the CoT responses judges them all
    assert len(judge_cot_reasoning(run, ScriptedJudge(), sample=100)) == 12


def test_judging_is_cached_and_resumes_after_a_kill(run: Path, tmp_path: Path) -> None:
    whole = ScriptedJudge()
    uninterrupted = judge_cot_reasoning(shutil.copytree(run, tmp_path / "whole"), whole, sample=12)
    asked = len(whole.calls)  # distinct judge prompts
    assert asked > 4
    with pytest.raises(Killed):
        judge_cot_reasoning(run, ScriptedJudge(fail_after=4), sample=12)  # the first batch of 4 is committed
    resumed = ScriptedJudge()
    judged = judge_cot_reasoning(run, resumed, sample=12)
    assert len(resumed.calls) == asked - 4  # only what the killed pass had not stored
    assert judged == uninterrupted
    replay = ScriptedJudge()
    assert judge_cot_reasoning(run, replay, sample=12) == judged and replay.calls == []
    # another judge model is asked afresh: the cache is keyed by the judge model
    other = ScriptedJudge()
    other.info = ModelInfo("another-judge", "r1", "test", {})
    judge_cot_reasoning(run, other, sample=12)
    assert len(other.calls) == asked


def test_unparseable_replies_are_kept_as_judge_errors(run: Path) -> None:
    judged = judge_cot_reasoning(run, ScriptedJudge(reply=lambda text: BAD), sample=12)
    assert {j.reasoning_correct for j in judged} == {False}  # "false" as a string parses too
    assert {j.why for j in judged} == {"the circle is not red"}
    garbled = ScriptedJudge(reply=lambda text: "no JSON here")
    garbled.info = ModelInfo("garbling-judge", "r1", "test", {})
    errors = judge_cot_reasoning(run, garbled, sample=3)
    assert len(errors) == 3 and len(garbled.calls) == 3 * len({_text(r) for r in garbled.calls})  # 3 attempts each
    assert all(j.reasoning_correct is None and j.judge_outcome == "judge_error" for j in errors)
    assert all("not JSON" in j.why for j in errors)


def test_the_judge_sees_the_query_images_when_it_takes_images(run: Path) -> None:
    seeing = ScriptedJudge()
    judge_cot_reasoning(run, seeing, sample=2)
    parts = [p for r in seeing.calls for m in r.messages for p in m.content]
    assert any(isinstance(p, ImagePart) for p in parts)
    assert all(Path(p.path).is_file() for p in parts if isinstance(p, ImagePart))
    text = _text(seeing.calls[0])
    assert "Correct option:" in text and "Reply with JSON only" in text and "Think step by step" in text
    blind = ScriptedJudge(max_images=0)
    judge_cot_reasoning(run, blind, sample=2)
    assert not any(isinstance(p, ImagePart) for r in blind.calls for m in r.messages for p in m.content)
    assert "an image you cannot see" in _text(blind.calls[0])


def _judgement(setting: str, outcome: str, correct: bool | None) -> CotJudgement:
    return CotJudgement("r", "q", "counting", setting, outcome, (), correct, "", "scored", "cot-reasoning", "k")


def test_counts_and_table() -> None:
    judged = [
        _judgement("4-similar-cot", "correct", True),
        _judgement("4-similar-cot", "wrong", True),  # right reasoning, wrong answer
        _judgement("4-similar-cot", "unparsed", True),  # so is an unparsed one
        _judgement("4-similar-cot", "correct", False),  # wrong reasoning, right answer
        _judgement("8-similar-cot", "wrong", False),
        _judgement("8-similar-cot", "wrong", None),  # a judge error: out of the shares
    ]
    rows = {r.setting: r for r in cot_judgement_counts(judged)}
    assert list(rows) == ["4-similar-cot", "8-similar-cot", ALL_SETTINGS]
    four = rows["4-similar-cot"]
    assert (four.judged, four.reasoning_correct, four.right_reasoning_wrong_answer) == (4, 3, 2)
    assert four.wrong_reasoning_right_answer == 1
    assert (rows["8-similar-cot"].judged, rows["8-similar-cot"].judge_errors) == (1, 1)
    assert (rows[ALL_SETTINGS].judged, rows[ALL_SETTINGS].judge_errors) == (5, 1)
    text = cot_judgements_markdown([("m|1", cot_judgement_counts(judged))])
    assert "| m\\|1 | 4-similar-cot | 4 | 0 | 3 (75%) | 2 (50%) | 1 (25%) |" in text
    assert cot_judgement_counts([]) == [] and cot_judgements_markdown([("m", [])]) == ""


def test_the_report_shows_the_judged_counts(run: Path, tmp_path: Path) -> None:
    judge_cot_reasoning(run, ScriptedJudge(reply=lambda text: BAD), sample=4)
    paths = write_report([("tiny", run)], tmp_path / "report", latex=False, figures=False)
    assert tmp_path / "report" / "cot_judgements.csv" in paths
    report = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    assert "## CoT reasoning, as a judge reads it" in report
    with open(tmp_path / "report" / "cot_judgements.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert rows[-1]["setting"] == ALL_SETTINGS and rows[-1]["judged"] == "4" and rows[-1]["reasoning_correct"] == "0"


def test_api_and_cli(run: Path) -> None:
    """`mmctx judge-cot` with a real (untrained) model as the judge: its replies never parse."""
    from typer.testing import CliRunner

    from mmctx.cli import app

    result = CliRunner().invoke(app, ["judge-cot", str(run), "--judge", "builtin:tiny-idefics3", "--sample", "2"])
    assert result.exit_code == 0, result.output
    # rich wraps the summary line at the terminal's width, which a long run path reaches
    assert "2 CoT responses judged" in " ".join(result.output.split()) and "| judged |" in result.output
    assert [j.judge_outcome for j in read_cot_judgements(run)] == ["judge_error", "judge_error"]
    assert json.loads((run / "manifest.json").read_text())["cot_judge"]["model"]["name"] == "builtin:tiny-idefics3"
