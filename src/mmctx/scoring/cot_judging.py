"""A judge's reading of CoT reasoning: is the reasoning of a sample of CoT responses correct?

The failure tags (`mmctx.scoring.cot_tags`) see a response's form; whether what it reasons is
true of the image takes a reader. `judge_cot_reasoning` draws a seeded sample of a few-shot
run's CoT responses, shows a judge each query as the model saw it (its images, when the judge
takes images, and its text), the gold option and the response, and asks for
``{"reasoning_correct": true|false, "why": "..."}``. It writes:

- ``RUN/cot_judges.sqlite``: the judge's replies, cached by judge model, judge name and rendered
  prompt (`mmctx.scoring.judging.JudgeRunner`), committed batch by batch: a killed pass resumes
  without asking a stored call again, and a pass repeated over the same sample asks nothing;
- ``RUN/cot_judgements.jsonl``: one row per judged response (`CotJudgement`);
- the manifest's ``cot_judge``: the judge model as loaded, the judge's name, the sample size
  and seed, so every judgement can be traced to what made it.

A reply that never parses within the judge's attempts is kept as ``judge_error`` with
``reasoning_correct`` null, never dropped.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mmctx.jsonl import read_jsonl
from mmctx.models.base import Backend
from mmctx.models.store import ResponseStore, backend_secrets
from mmctx.prompts.messages import ImagePart, Message, Prompt, TextPart
from mmctx.run.files import COT_JUDGE_STORE, COT_JUDGEMENTS, MANIFEST
from mmctx.run.manifest import read_manifest
from mmctx.run.runner import _write_atomic, run_lock
from mmctx.schema import Sample
from mmctx.scoring.evaluators.base import JudgeReplyError, Verdict
from mmctx.scoring.evaluators.judged import json_object
from mmctx.scoring.judging import JudgeRunner
from mmctx.scoring.results import SampleResult, load_requests, score_run

__all__ = ["DEFAULT_SAMPLE", "CotJudgement", "ReasoningJudge", "judge_cot_reasoning", "read_cot_judgements"]

DEFAULT_SAMPLE = 50  # responses judged per run unless asked otherwise

_PROMPT = """You check the reasoning of a model's answer to a multiple-choice question about {seen}.

Question as the model saw it:
{question}

Options:
{options}

Correct option: {gold}

The model's response:
<<<
{response}
>>>

Is the model's reasoning correct: does every statement it makes about {what} hold, and does each step
follow from the ones before? Judge the reasoning, not only the final answer: correct reasoning
can end in a wrong answer, and a right answer can follow wrong reasoning. A response with no
reasoning at all is not correct reasoning.

Reply with JSON only: {{"reasoning_correct": true or false, "why": "one sentence"}}"""


@dataclass(frozen=True)
class ReasoningJudge:
    """The judge's prompt and reply format (the `mmctx.scoring.evaluators.Judge` protocol).

    The `Sample` it is handed is the query as the model saw it: ``question`` the query turn's
    text, ``meta["image_parts"]`` its images (``{"path", "sha256"}``), ``choices`` the options as
    shown with their labels, ``answer`` the gold option.
    """

    name: str = "cot-reasoning"
    max_new_tokens: int = 256
    with_images: bool = True  # False for a judge that takes no images: it judges the logic only

    def precheck(self, sample: Sample, answer: str) -> Verdict | None:
        return None  # an empty response is asked too: the judge says it has no correct reasoning

    def prompt(self, sample: Sample, answer: str) -> Prompt:
        seen = "an image" if self.with_images else "an image you cannot see"
        what = "the image" if self.with_images else "the question"
        text = _PROMPT.format(
            seen=seen,
            question=sample.question.strip(),
            options="\n".join(sample.choices),
            gold=sample.answer,
            response=answer.strip() or "(empty)",
            what=what,
        )
        parts = sample.meta.get("image_parts", []) if self.with_images else []
        images = [ImagePart(path=p["path"], sha256=p["sha256"]) for p in parts]
        return (Message("user", (*images, TextPart(text))),)

    def parse(self, reply: str) -> dict[str, Any]:
        found = json_object(reply)
        value = found.get("reasoning_correct")
        if isinstance(value, str) and value.strip().casefold() in ("true", "false"):
            value = value.strip().casefold() == "true"
        if not isinstance(value, bool):
            raise JudgeReplyError(f"'reasoning_correct' must be true or false, got {value!r}")
        return {"reasoning_correct": value, "why": str(found.get("why", ""))}

    def verdict(self, sample: Sample, answer: str, parsed: dict[str, Any]) -> Verdict:
        correct = parsed["reasoning_correct"]
        return Verdict.scored(1.0 if correct else 0.0, "correct" if correct else "incorrect", why=parsed["why"])


@dataclass(frozen=True)
class CotJudgement:
    """One judged CoT response: the result as scored, and the judge's reading of its reasoning."""

    request_id: str
    query_id: str
    task: str
    setting: str
    outcome: str  # the answer's: correct | wrong | unparsed
    cot_tags: tuple[str, ...]
    reasoning_correct: bool | None  # None: the judge gave no usable reply (judge_error)
    why: str
    judge_outcome: str  # scored | judge_error
    judge: str
    judge_key: str


def judge_cot_reasoning(
    run_dir: str | Path, judge: Backend, sample: int = DEFAULT_SAMPLE, seed: int = 0, attempts: int = 3
) -> list[CotJudgement]:
    """Judge the reasoning of up to ``sample`` CoT responses of a few-shot run (see the module docstring).

    The sample is drawn with ``seed`` from the CoT results that have a response, and judged in
    plan order. Holds the run folder while it writes.
    """
    run_dir = Path(run_dir)
    with run_lock(run_dir):
        manifest = read_manifest(run_dir).fields
        requests = {r["id"]: r for r in load_requests(run_dir)}
        chosen = _draw([r for r in score_run(run_dir) if r.cot_tags is not None], sample, seed)
        reader = ReasoningJudge(with_images=judge.capabilities.max_images != 0)
        items = [(_query(requests[r.request_id]), r.response) for r in chosen]
        with ResponseStore(run_dir / COT_JUDGE_STORE, secrets=backend_secrets(judge)) as store:
            verdicts = JudgeRunner(judge, store, attempts).judge(reader, items)
        out = [_judgement(r, v, reader.name) for r, v in zip(chosen, verdicts)]
        text = "".join(json.dumps(asdict(j), ensure_ascii=False) + "\n" for j in out)
        _write_atomic(run_dir / COT_JUDGEMENTS, text)
        pinned = {"model": asdict(judge.info), "judge": reader.name, "sample": sample, "seed": seed}
        if manifest.get("cot_judge") != pinned:
            _write_atomic(run_dir / MANIFEST, json.dumps({**manifest, "cot_judge": pinned}, indent=2) + "\n")
    return out


def read_cot_judgements(run_dir: str | Path) -> list[CotJudgement]:
    """A run's judgements (``[]`` when it was never judged)."""
    path = Path(run_dir) / COT_JUDGEMENTS
    if not path.is_file():
        return []
    return [CotJudgement(**(row | {"cot_tags": tuple(row["cot_tags"])})) for row in read_jsonl(path)]


def _draw(results: list[SampleResult], size: int, seed: int) -> list[SampleResult]:
    if size < 1:
        raise ValueError(f"a sample of {size} responses judges nothing")
    if len(results) <= size:
        return results
    picked = set(random.Random(seed).sample(range(len(results)), size))
    return [r for i, r in enumerate(results) if i in picked]


def _query(request: dict) -> Sample:
    """The query turn of a request as the judge is shown it (see `ReasoningJudge`)."""
    turn = request["prompt"][-1]["content"]
    text = "".join(p.get("text", "") for p in turn if p.get("type") == "text")
    images = [{"path": p["path"], "sha256": p["sha256"]} for p in turn if p.get("type") == "image" and p.get("path")]
    options = [f"{label}. {option}" for label, option in zip(request["labels"], request["options"])]
    return Sample(
        id=request["id"], task=request["task"], source=request.get("source", ""), format="mcqa", question=text,
        choices=options, answer=options[request["gold"]], meta={"image_parts": images},
    )  # fmt: skip


def _judgement(result: SampleResult, verdict: Verdict, judge: str) -> CotJudgement:
    scored = verdict.outcome == "scored"
    return CotJudgement(
        request_id=result.request_id, query_id=result.query_id, task=result.task, setting=result.setting,
        outcome=result.outcome, cot_tags=tuple(result.cot_tags or ()),
        reasoning_correct=verdict.score == 1.0 if scored else None,
        why=str(verdict.detail.get("why", "")) if scored else str(verdict.detail.get("reason", "")),
        judge_outcome=verdict.outcome, judge=judge, judge_key=str(verdict.detail.get("judge_key", "")),
    )  # fmt: skip
