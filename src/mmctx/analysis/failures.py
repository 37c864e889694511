"""Failure taxonomy (CLBench-V §6.2): six failure types, hand or judge tagging, counts per level.

The paper inspects bad cases by hand and sorts them into six types (`FAILURE_TYPES`). Two ways
to tag a run's failures here:

  - by hand: `write_tag_template` writes the failed samples to a CSV with an empty ``tag``
    column; fill it in and read it back with `read_tags_csv` (unknown tags are an error that
    names the row, so a typo cannot silently become a seventh category);
  - by a judge: `FailureTagger` is a `Judge` (`mmctx.scoring.evaluators.base`) whose reply is
    ``{"tag": ..., "why": ...}``; the pipeline's judge runner calls, caches and retries it
    like any other judge, and the verdict carries the tag as its prediction.

Then `counts_by_level` and `failure_table_markdown` give the per-level distribution.
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mmctx.data.clbench.suite import LEVEL_ORDER
from mmctx.prompts.messages import Message, Prompt, TextPart
from mmctx.schema import Sample
from mmctx.scoring.evaluators.base import JudgeReplyError, Verdict

__all__ = [
    "CONTEXT_MISUSE",
    "EVIDENCE_MISBINDING",
    "EVIDENCE_MISSING",
    "FAILURE_TYPES",
    "FORMAT_FAILURE",
    "INCOMPLETE_INDUCTION",
    "PRIOR_OVERRIDE",
    "FailureTagger",
    "counts_by_level",
    "failed_rows",
    "failure_table_markdown",
    "normalise_tag",
    "read_tags_csv",
    "write_tag_template",
]

EVIDENCE_MISSING = "evidence_missing"
EVIDENCE_MISBINDING = "evidence_misbinding"
CONTEXT_MISUSE = "context_misuse"
PRIOR_OVERRIDE = "prior_override"
INCOMPLETE_INDUCTION = "incomplete_induction"
FORMAT_FAILURE = "format_failure"

# The paper's definitions (§6.2), in its order.
FAILURE_TYPES: dict[str, str] = {
    EVIDENCE_MISSING: "the model does not attend to the relevant visual region",
    EVIDENCE_MISBINDING: "evidence is attached to the wrong entity, figure, page, or option",
    CONTEXT_MISUSE: "the model reads the relevant information but applies it incorrectly",
    PRIOR_OVERRIDE: "the model relies on parametric knowledge despite contradictory context",
    INCOMPLETE_INDUCTION: "the model notices local facts but fails to infer the broader context-defined rule or "
    "conclusion",
    FORMAT_FAILURE: "the answer violates the expected output schema",
}

TEMPLATE_COLUMNS = ("id", "subset", "table_level", "outcome", "score", "prediction", "tag", "note")
PREDICTION_CHARS = 300  # enough of the answer to recognise it in a spreadsheet


def normalise_tag(value: str) -> str:
    """``"Evidence missing"``, ``"evidence-missing"`` → ``"evidence_missing"`` (hand labels vary in spelling)."""
    return "_".join(value.strip().casefold().replace("-", " ").split())


def failed_rows(rows: Iterable[Mapping[str, Any]], below: float = 1.0) -> list[Mapping[str, Any]]:
    """Samples that failed: any non-scored outcome, or a score under ``below`` (default: short of full credit)."""
    return [r for r in rows if r.get("outcome") != "scored" or float(r.get("score", 0.0)) < below]


def write_tag_template(rows: Iterable[Mapping[str, Any]], path: str | Path, below: float = 1.0) -> Path:
    """The failed samples as a CSV for hand labelling: `TEMPLATE_COLUMNS`, ``tag`` and ``note`` empty."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=TEMPLATE_COLUMNS)
        writer.writeheader()
        for r in failed_rows(rows, below):
            prediction = " ".join(str(r.get("prediction", "")).split())[:PREDICTION_CHARS]
            writer.writerow({
                "id": r["id"], "subset": r.get("subset", ""), "table_level": r.get("table_level", ""),
                "outcome": r.get("outcome", ""), "score": r.get("score", 0.0), "prediction": prediction,
                "tag": "", "note": "",
            })  # fmt: skip
    return path


def read_tags_csv(path: str | Path) -> dict[str, str]:
    """``{id: tag}`` from a CSV with columns ``id``, ``tag`` (``note`` and others ignored).

    Rows with an empty tag are skipped (a template labelled part-way). Tags are normalised by
    `normalise_tag`; one outside `FAILURE_TYPES` raises ValueError naming the line and value,
    as does an id tagged twice with different tags.
    """
    tags: dict[str, str] = {}
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        missing = {"id", "tag"} - set(reader.fieldnames or ())
        if missing:
            raise ValueError(f"{path}: missing column(s) {sorted(missing)}; need id, tag[, note]")
        for row in reader:
            line = reader.line_num
            raw, sample = (row.get("tag") or "").strip(), (row.get("id") or "").strip()
            if not raw:
                continue
            tag = normalise_tag(raw)
            if tag not in FAILURE_TYPES:
                raise ValueError(f"{path}:{line} (id {sample!r}): unknown tag {raw!r}; one of {list(FAILURE_TYPES)}")
            if not sample:
                raise ValueError(f"{path}:{line}: tag {raw!r} without an id")
            if tags.setdefault(sample, tag) != tag:
                raise ValueError(f"{path}:{line}: id {sample!r} tagged {tags[sample]!r} and {tag!r}")
    return tags


def counts_by_level(
    rows: Iterable[Mapping[str, Any]], tags: Mapping[str, str], level_key: str = "table_level"
) -> dict[str, Counter[str]]:
    """``{level: Counter(tag → count)}`` for the tagged samples, levels in L0, L1, L2 order.

    ``level_key`` picks the level: ``table_level`` (where Table 2 counts the sample) or ``level``
    (Table 1's, boundary cases separate). A tag whose id is not among ``rows`` raises ValueError:
    it almost always means the tags belong to another run.
    """
    level_of = {str(r["id"]): str(r.get(level_key) or "") for r in rows}
    unknown = [i for i in tags if i not in level_of]
    if unknown:
        raise ValueError(f"{len(unknown)} tagged id(s) not in the results: {unknown[:5]}")
    counts: dict[str, Counter[str]] = {}
    for sample, tag in tags.items():
        counts.setdefault(level_of[sample], Counter())[tag] += 1
    order = [lv for lv in LEVEL_ORDER if lv in counts] + sorted(set(counts) - set(LEVEL_ORDER))
    return {lv: counts[lv] for lv in order}


def failure_table_markdown(counts: Mapping[str, Counter[str]]) -> str:
    """Rows: the six failure types and a total; columns: levels present and a total."""
    levels = list(counts)
    head = ["Failure type"] + levels + ["Total"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for tag in FAILURE_TYPES:
        cells = [counts[lv][tag] for lv in levels]
        lines.append("| " + " | ".join([tag.replace("_", " ")] + [str(c) for c in cells + [sum(cells)]]) + " |")
    totals = [sum(counts[lv].values()) for lv in levels]
    lines.append("| " + " | ".join(["**Total**"] + [str(t) for t in totals + [sum(totals)]]) + " |")
    return "\n".join(lines) + "\n"


# --- judge --------------------------------------------------------------------------------------

SYSTEM = "You are a careful analyst of multimodal model failures. Reply with a single JSON object and nothing else."
DETAIL_CHARS = 2000  # evaluator detail can be long (rubric reasons); enough to show why it failed


def _definitions() -> str:
    return "\n".join(f"- {tag}: {text}." for tag, text in FAILURE_TYPES.items())


@dataclass(frozen=True)
class FailureTagger:
    """A `Judge` that assigns one of the six failure types to a failed answer.

    The judge sees the question, the gold answer, the model's answer and how the evaluator
    scored it (outcome, score, detail), not the full context (reports run to 100k tokens), so
    its tag is an inference from the answer; hand tags (`read_tags_csv`) remain the reference.
    ``results`` maps sample id → its results row, where the evaluator's verdict is read from;
    an id missing there falls back to ``sample.meta["evaluation"]`` if present.
    """

    results: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    name: str = "failure_tagger"
    max_new_tokens: int = 256

    @classmethod
    def from_results(cls, rows: Iterable[Mapping[str, Any]]) -> FailureTagger:
        return cls(results={str(r["id"]): r for r in rows})

    def precheck(self, sample: Sample, answer: str) -> Verdict | None:
        return None

    def _evaluation(self, sample: Sample) -> Mapping[str, Any]:
        return self.results.get(sample.id) or sample.meta.get("evaluation") or {}

    def prompt(self, sample: Sample, answer: str) -> Prompt:
        ev = self._evaluation(sample)
        gold = sample.answer or json.dumps(sample.gold, ensure_ascii=False, default=str)
        detail = json.dumps(ev.get("detail") or {}, ensure_ascii=False, default=str)[:DETAIL_CHARS]
        text = (
            "A multimodal model answered a context-learning task and the answer was judged wrong.\n"
            f"Task: {sample.task} (level {sample.level or ev.get('level', '?')})\n\n"
            f"Question:\n{sample.question}\n\n"
            f"Gold answer:\n{gold}\n\n"
            f"Model's answer:\n{answer or ev.get('prediction', '') or '(empty)'}\n\n"
            f"Evaluator: {ev.get('evaluator', sample.evaluator)}; outcome {ev.get('outcome', '?')}; "
            f"score {ev.get('score', '?')}; detail: {detail}\n\n"
            "Classify the main failure as exactly one of these types:\n"
            f"{_definitions()}\n\n"
            'Reply with JSON only: {"tag": "<one of the six names above>", "why": "<one sentence>"}'
        )
        return (Message("system", (TextPart(SYSTEM),)), Message("user", (TextPart(text),)))

    def parse(self, reply: str) -> dict[str, Any]:
        """The last JSON object in the reply with a ``tag``; raises `JudgeReplyError` if none or the tag is unknown."""
        found = _last_json_object(reply)
        if found is None:
            raise JudgeReplyError(f"no JSON object with a 'tag' in the reply: {reply[:200]!r}")
        tag = normalise_tag(str(found["tag"]))
        if tag not in FAILURE_TYPES:
            raise JudgeReplyError(f"unknown failure tag {found['tag']!r}; one of {list(FAILURE_TYPES)}")
        why = found.get("why", "")
        if not isinstance(why, str):
            raise JudgeReplyError(f"'why' must be a string, not {type(why).__name__}")
        return {"tag": tag, "why": why}

    def verdict(self, sample: Sample, answer: str, parsed: dict[str, Any]) -> Verdict:
        return Verdict.scored(0.0, prediction=parsed["tag"], tag=parsed["tag"], why=parsed.get("why", ""))


def _last_json_object(text: str) -> dict[str, Any] | None:
    """The last ``{...}`` in ``text`` that decodes to an object with a ``tag`` (skips reasoning, code fences)."""
    decoder = json.JSONDecoder()
    found = None
    index = text.find("{")
    while index != -1:
        try:
            value, end = decoder.raw_decode(text, index)
        except json.JSONDecodeError:
            index = text.find("{", index + 1)
            continue
        if isinstance(value, dict) and "tag" in value:
            found = value
        index = text.find("{", end)
    return found
