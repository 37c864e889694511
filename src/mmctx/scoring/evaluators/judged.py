"""Judged evaluators: the three CLBench-V judges (paper §3.4, §5, appendix B) and the evaluators using them.

A `Judge` here is a prompt, a parser and a verdict rule; it holds no model. `mmctx.scoring.judging`
sends the prompts, caches the replies and re-asks when a reply does not parse. A judge's
``verdict`` may also raise `JudgeReplyError` when a reply parses but contradicts the item (a
status list of the wrong length, a count larger than the lists): the runner treats that exactly
like an unparseable reply, since asking again is the only remedy in both cases.

  - `SemanticJudge`: strict semantic equivalence of an extracted answer with the gold, ``True`` /
    ``False`` (Pix2Fact, BrowseComp-V3, general open answers; MMLongBench-Pic with its
    "Not answerable" rule, and MMLongBench-Doc's per-format rules as its judge-free baseline).
    Exact matches are decided without a call. With the "Not answerable"
    rule: an exact not-answerable phrase against a "Not answerable" gold scores 1 without a
    call; any other answer to such a gold (a paraphrase like "The document does not provide
    this information.") goes to the judge, whose prompt carries the rule; a not-answerable
    phrase against a real gold scores 0 without a call. Without a judge (the evaluator's
    ``score``) a paraphrase matches nothing and scores 0, ``mode="baseline"``.
  - `RubricJudge`: CL-bench's all-or-nothing rubric grading. As in CL-bench's ``eval.py`` the
    judge sees the rubrics and the response only — neither the context nor the question.
  - `ConclusionsJudge`: the list-count judge of paper-conclusion inference; the score is
    Eq. 2, ``max(0, (N_hit - N_extra) / N_ref)``.

Registered evaluators: ``semantic``, ``mmlongbench``, ``rubric``, ``conclusions``.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, ClassVar

from mmctx.extract.prepare import clean, norm, strip_reasoning
from mmctx.prompts.messages import Message, Prompt, TextPart
from mmctx.schema import Sample
from mmctx.scoring.evaluators.base import Extraction, JudgeReplyError, Verdict, register
from mmctx.scoring.evaluators.mmlongbench import answer_format, gold_texts, mmlongbench_score

# ---- reply parsing shared by the judges and the extractor ----------------------------------------

_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*[ \t]*\n?(.*?)\n?```\s*$", re.S)


def strip_fences(reply: str) -> str:
    """The reply without one surrounding Markdown code fence (```json … ```), stripped."""
    text = reply.strip()
    match = _FENCE.match(text)
    return match.group(1).strip() if match else text


def json_object(reply: str) -> dict[str, Any]:
    """The JSON object a judge replied with; fences and prose around one object are tolerated.

    Judges told to "output ONLY JSON" still wrap it in fences or add a sentence; CL-bench strips
    fences only. Anything that does not yield one object raises `JudgeReplyError`.
    """
    text = strip_fences(reply)
    try:
        value = json.loads(text)
    except ValueError:
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end <= start:
            raise JudgeReplyError(f"not JSON: {_shorten(reply)!r}") from None
        try:
            value = json.loads(text[start : end + 1])
        except ValueError as exc:
            raise JudgeReplyError(f"not JSON ({exc}): {_shorten(reply)!r}") from None
    if not isinstance(value, dict):
        raise JudgeReplyError(f"JSON is a {type(value).__name__}, not an object: {_shorten(reply)!r}")
    return value


def _shorten(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def user_prompt(text: str) -> Prompt:
    """Judge prompts are one user message of text (as CL-bench sends them)."""
    return (Message("user", (TextPart(text),)),)


# ---- rule extraction of a final answer -------------------------------------------------------------

_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.I | re.S)
_ANSWER_LINE = re.compile(r"^[ \t>#*_-]*(?:final[ \t]+)?answer[ \t*_]*[:：][ \t*_]*(.*)$", re.I | re.M)
_BOXED = "\\boxed{"
_NO_ANSWER_ISSUE = "no final line starting with 'Answer:' (nor <answer> tags, \\boxed{} or JSON 'Final Answer')"


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{…}``, braces balanced; None if there is none (or it never closes)."""
    start = text.rfind(_BOXED)
    if start < 0:
        return None
    depth, i = 1, start + len(_BOXED)
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i:j].strip()
    return None


def final_answer_json(text: str) -> str | None:
    """The value of the last JSON object's "Final Answer" key (Pix2Fact's reply format), if any.

    Keys are compared ignoring case, spaces and underscores ("final_answer" counts). Every ``{``
    is tried as the start of an object, so the object may sit in a fence or after prose.
    """
    decoder = json.JSONDecoder()
    found: str | None = None
    i = text.find("{")
    while i >= 0:
        try:
            value, end = decoder.raw_decode(text, i)
        except ValueError:
            i = text.find("{", i + 1)
            continue
        if isinstance(value, dict):
            for key, v in value.items():
                if re.sub(r"[\s_]", "", str(key)).casefold() == "finalanswer" and v not in (None, "", []):
                    found = ", ".join(map(str, v)) if isinstance(v, list) else str(v).strip()
        i = text.find("{", end)
    return found


def answer_line(text: str) -> str | None:
    """The last "Answer:" (or "Final Answer:") line's value; an empty value takes the next non-empty line."""
    value: str | None = None
    for match in _ANSWER_LINE.finditer(text):
        rest = clean(match.group(1))
        if not rest:
            following = [line for line in text[match.end() :].split("\n") if line.strip()]
            rest = clean(following[0]) if following else ""
        if rest:
            value = last_boxed(rest) or rest
    return value


def extract_final_answer(response: str) -> Extraction:
    """The final answer of a free-form response by rules, in the order the task formats ask for it.

    JSON "Final Answer" (Pix2Fact), then ``<answer>…</answer>``, then the last "Answer:" line
    (the numeric / short-answer suffix), then the last ``\\boxed{}``. Reasoning traces are
    stripped first. When nothing matches, the issue names the expected format for the repair prompt.
    """
    text = strip_reasoning(response)
    if not text:
        return Extraction(None, issue="the response is empty")
    value = final_answer_json(text)
    if value:
        return Extraction(value, rule="json_final_answer")
    tags = [t.strip() for t in _ANSWER_TAG.findall(text) if t.strip()]
    if tags:
        return Extraction(clean(tags[-1]), rule="answer_tag")
    value = answer_line(text)
    if value:
        return Extraction(value, rule="answer_line")
    boxed = last_boxed(text)
    if boxed:
        return Extraction(clean(boxed), rule="boxed")
    return Extraction(None, issue=_NO_ANSWER_ISSUE)


# ---- gold answers and the baseline match -------------------------------------------------------------

# MMLongBench-Doc's unanswerable items: gold "Not answerable" (and predictions saying so).
NOT_ANSWERABLE: frozenset[str] = frozenset(
    {
        "not answerable",
        "unanswerable",
        "not answerable from the document",
        "the question is not answerable",
        "cannot be answered",
        "the question cannot be answered",
        "cannot be answered from the document",
    }
)
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+]?\.\d+")


def gold_aliases(sample: Sample) -> list[str]:
    """Every accepted gold text: the string, the alias list, the number's value, else the display answer."""
    gold = sample.gold
    if sample.answer_type == "number" and isinstance(gold, dict) and "value" in gold:
        return [_format_number(gold["value"])]
    if isinstance(gold, str) and gold.strip():
        return [gold]
    if isinstance(gold, list) and sample.answer_type != "list" and gold:
        return [str(g) for g in gold]
    return [sample.answer] if sample.answer.strip() else []


def gold_display(sample: Sample) -> str:
    """The gold as the semantic judge reads it (aliases, all-items lists and units spelled out)."""
    gold = sample.gold
    if sample.answer_type == "list" and isinstance(gold, list):
        return "; ".join(map(str, gold)) + "  (a list: every item is required, in any order)"
    if sample.answer_type == "number" and isinstance(gold, dict) and "value" in gold:
        unit = str(gold.get("unit") or "").strip()
        return _format_number(gold["value"]) + (f" {unit}" if unit else "")
    aliases = gold_aliases(sample)
    if len(aliases) > 1:
        return f"{aliases[0]}  (equally accepted: {'; '.join(aliases[1:])})"
    return aliases[0] if aliases else ""


def _format_number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _numbers(text: str) -> list[float]:
    return [float(m.replace(",", "")) for m in _NUMBER.findall(text)]


def _number_match(sample: Sample, answer: str) -> bool:
    """One number in the answer within the gold's tolerance (exact when none is given)."""
    gold = sample.gold
    found = _numbers(answer)
    if len(found) != 1:
        return False
    rel, abs_ = float(gold.get("rel_tol", 0) or 0), float(gold.get("abs_tol", 0) or 0)
    return math.isclose(found[0], float(gold["value"]), rel_tol=max(rel, 1e-9), abs_tol=abs_)


def _items(text: str) -> set[str]:
    """A list answer's items, normalised: a JSON list, else split on newlines, semicolons or commas."""
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    parts = value if isinstance(value, list) else re.split(r"[\n;,]", text)
    return {n for n in (norm(clean(str(p))) for p in parts) if n}


def exact_match(sample: Sample, answer: str) -> bool:
    """The normalised exact match (case, spacing, surrounding punctuation, markdown ignored)."""
    if not answer.strip():
        return False
    if sample.answer_type == "list" and isinstance(sample.gold, list):
        return _items(answer) == {norm(str(g)) for g in sample.gold}
    if sample.answer_type == "number" and isinstance(sample.gold, dict) and "value" in sample.gold:
        return _number_match(sample, answer)
    said = norm(clean(answer))
    return any(said == norm(clean(a)) for a in gold_aliases(sample))


def _not_answerable(text: str) -> bool:
    return norm(clean(text)) in NOT_ANSWERABLE


# ---- the semantic-equivalence judge ---------------------------------------------------------------

_SEMANTIC_PROMPT = """\
You are a strict grader. Decide whether the predicted answer to the question is semantically \
equivalent to the gold answer.

Rules:
- Equivalent means the same entity, value, or set of items. Differences in wording, case, \
formatting, abbreviation, or equivalent units of the same quantity do not matter.
- Numbers must agree; rounding to the precision of the gold answer is acceptable.
- A prediction that is vaguer or broader than the gold, hedges between several answers, is \
partly wrong, or misses part of a required list is NOT equivalent.
- Judge only equivalence to the gold answer, not whether the gold answer is right.{extra}

Question:
{question}

Gold answer:
{gold}

Predicted answer:
{answer}

Reply with exactly one word: True if the predicted answer is equivalent to the gold answer, \
otherwise False."""

_NOT_ANSWERABLE_RULE = (
    '\n- If the gold answer is "Not answerable", only a prediction stating that the question '
    "cannot be answered is equivalent."
)
_BOOL_WORD = re.compile(r"^[\W_]*(true|false)[\W_]*$", re.I)


@dataclass(frozen=True)
class SemanticJudge:
    """Strict semantic equivalence, ``True``/``False``; exact matches and empty answers need no call."""

    name: str = "semantic"
    max_new_tokens: int = 16
    not_answerable: bool = False  # MMLongBench-Pic: exact "Not answerable" phrases decided by rule, paraphrases judged

    def precheck(self, sample: Sample, answer: str) -> Verdict | None:
        if not answer.strip():
            return Verdict.failed("unparsed", "empty answer")
        if self.not_answerable:
            ruled = _not_answerable_verdict(sample, answer)
            if ruled is not None:
                return ruled
        if exact_match(sample, answer):
            return Verdict.scored(1.0, answer, mode="exact")
        return None

    def prompt(self, sample: Sample, answer: str) -> Prompt:
        extra = _NOT_ANSWERABLE_RULE if self.not_answerable else ""
        text = _SEMANTIC_PROMPT.format(
            extra=extra, question=sample.question.strip(), gold=gold_display(sample), answer=answer.strip()
        )
        return user_prompt(text)

    def parse(self, reply: str) -> dict[str, Any]:
        """``{"equivalent": bool}`` from "True"/"False": any case, punctuation, fences; else the last line."""
        text = strip_fences(reply)
        lines = [line for line in text.split("\n") if line.strip()]
        for candidate in (text, lines[-1] if lines else ""):
            match = _BOOL_WORD.match(candidate.strip())
            if match:
                return {"equivalent": match.group(1).casefold() == "true"}
        raise JudgeReplyError(f"expected True or False, got {_shorten(reply)!r}")

    def verdict(self, sample: Sample, answer: str, parsed: dict[str, Any]) -> Verdict:
        return Verdict.scored(1.0 if parsed["equivalent"] else 0.0, answer, mode="judge")


def _not_answerable_verdict(sample: Sample, answer: str) -> Verdict | None:
    """MMLongBench-Doc's rule where matching settles it: a None leaves the answer to the judge.

    Gold and answer both an exact not-answerable phrase → 1; the answer such a phrase but the
    gold a real answer → 0. A "Not answerable" gold against any other answer is NOT decided
    here: a paraphrase ("the document does not say") may be equivalent, so the judge decides.
    """
    gold_na = any(_not_answerable(a) for a in gold_aliases(sample))
    said_na = _not_answerable(answer)
    if said_na:
        return Verdict.scored(1.0 if gold_na else 0.0, answer, mode="not_answerable")
    return None


@dataclass(frozen=True)
class SemanticEvaluator:
    """Rule extraction (free form: an extractor model may follow), then the semantic judge.

    Without a judge, ``score`` is the paper's "baseline match": the normalised exact match, or,
    for MMLongBench (``baseline="mmlongbench"``), MMLongBench-Doc's own rules per answer format
    (`mmctx.scoring.evaluators.mmlongbench`: integers exact, floats within 1 % or as percentages,
    strings by ANLS ≥ 0.5 with partial credit, lists order-free), after the not-answerable rule.
    """

    name: str
    judge: SemanticJudge
    answer_types: ClassVar[tuple[str, ...]] = ("string", "number", "list")
    free_form: bool = True
    typed_extraction: bool = False  # MMLongBench asks the extractor for the answer's type too
    baseline: str = "exact"  # "exact" (normalised exact match) or "mmlongbench" (MMLongBench-Doc's rules)

    def extract(self, sample: Sample, response: str) -> Extraction:
        return extract_final_answer(response)

    def score(self, sample: Sample, answer: str) -> Verdict:
        if not answer.strip():
            return Verdict.failed("unparsed", "empty answer")
        if self.judge.not_answerable:
            ruled = _not_answerable_verdict(sample, answer)
            if ruled is not None:
                return Verdict(ruled.outcome, ruled.score, ruled.prediction, {**ruled.detail, "mode": "baseline"})
        if self.baseline == "mmlongbench":
            return _mmlongbench_baseline(sample, answer)
        return Verdict.scored(1.0 if exact_match(sample, answer) else 0.0, answer, mode="baseline")


def _mmlongbench_baseline(sample: Sample, answer: str) -> Verdict:
    """MMLongBench-Doc's score under the item's answer format; the best alias when the gold has several."""
    try:
        fmt = answer_format(sample)
    except ValueError as exc:
        return Verdict.failed("invalid_sample", str(exc), prediction=answer, mode="baseline")
    golds = gold_texts(sample)
    if not golds:
        return Verdict.failed("invalid_sample", "the item has no gold answer", prediction=answer, mode="baseline")
    score = max(mmlongbench_score(g, answer, fmt) for g in golds)
    return Verdict.scored(score, answer, mode="baseline", answer_format=fmt)


# ---- the CL-bench rubric judge ----------------------------------------------------------------------

_RUBRIC_PROMPT = """\
From now on you are a rigorous instruction-following grading teacher. Grade the student's \
response strictly against the 【Rubrics】.

Grading criteria
This is a strict, all-or-nothing grading system. The final score is binary. A score of 1 \
requires the response to fully satisfy every requirement in the 【Rubrics】; if even one \
requirement is not fully met, the score is 0.

Grading process (do not skip a step)
Step 1: List every explicit requirement of the 【Rubrics】 item by item (content, format, \
quantity, order, …) and any implicit requirement (style, logical structure), with a concrete \
criterion for each.
Step 2: Check, one by one, whether the student's response fully satisfies each requirement.
Step 3: Self-reflection before scoring: completeness (no requirement skipped), strictness \
("fully satisfied" only, no leniency), consistency (rationale agrees with the score), \
objectivity (facts, not speculation).

Content to be graded
【Rubrics】:
{rubrics}
【Student Response】:
{response}

Output ONLY the following JSON and nothing else. The status list has exactly {n} entries, \
one per rubric in order, each "yes" or "no":
{{
  "Grading Rationale": "your detailed grading rationale",
  "List of Requirement Satisfaction Status": ["yes", "no", ...],
  "Overall Score": 0 or 1
}}"""

_STATUS_KEY = "List of Requirement Satisfaction Status"
_STATUS = {"yes": "yes", "no": "no", "true": "yes", "false": "no"}


def rubric_list(sample: Sample) -> list[str]:
    """The item's rubrics as plain strings (CL-bench's dict form reads ``rubric_criteria``), empties dropped."""
    gold = sample.gold if isinstance(sample.gold, list) else []
    texts = [str(r.get("rubric_criteria", "")) if isinstance(r, dict) else str(r) for r in gold]
    return [t.strip() for t in texts if t.strip()]


def _overall(value: Any) -> int:
    if isinstance(value, bool):
        raise JudgeReplyError(f"'Overall Score' must be 0 or 1, not {value!r}")
    if isinstance(value, (int, float)) and value in (0, 1):
        return int(value)
    if isinstance(value, str) and value.strip() in ("0", "1"):
        return int(value.strip())
    raise JudgeReplyError(f"'Overall Score' must be 0 or 1, not {value!r}")


def _status(value: Any) -> str:
    key = str(value).strip().strip(".").casefold() if not isinstance(value, bool) else str(value).casefold()
    if key not in _STATUS:
        raise JudgeReplyError(f"a requirement status must be 'yes' or 'no', not {value!r}")
    return _STATUS[key]


@dataclass(frozen=True)
class RubricJudge:
    """CL-bench's all-or-nothing grading: 1 only if the overall score is 1 and every rubric is "yes"."""

    name: str = "rubric"
    max_new_tokens: int = 2048  # a rationale plus one status per rubric (CL-bench has up to 114)

    def precheck(self, sample: Sample, answer: str) -> Verdict | None:
        if not rubric_list(sample):
            return Verdict.failed("invalid_sample", "the item has no rubrics")
        if not answer.strip():
            return Verdict.scored(0.0, "", reason="empty answer")  # CL-bench: 0 without a judge call
        return None

    def prompt(self, sample: Sample, answer: str) -> Prompt:
        rubrics = rubric_list(sample)
        numbered = "\n".join(f"{i}. {r}" for i, r in enumerate(rubrics, 1))
        return user_prompt(_RUBRIC_PROMPT.format(rubrics=numbered, response=answer.strip(), n=len(rubrics)))

    def parse(self, reply: str) -> dict[str, Any]:
        data = json_object(reply)
        if "Overall Score" not in data:
            raise JudgeReplyError("the reply has no 'Overall Score'")
        statuses = data.get(_STATUS_KEY)
        if not isinstance(statuses, list):
            raise JudgeReplyError(f"'{_STATUS_KEY}' must be a list, not {statuses!r}")
        return {
            "overall": _overall(data["Overall Score"]),
            "statuses": [_status(s) for s in statuses],
            "rationale": str(data.get("Grading Rationale", "")),
        }

    def verdict(self, sample: Sample, answer: str, parsed: dict[str, Any]) -> Verdict:
        n = len(rubric_list(sample))
        statuses: list[str] = parsed["statuses"]
        if len(statuses) != n:
            raise JudgeReplyError(f"{len(statuses)} requirement statuses for {n} rubrics")
        failed = [i for i, s in enumerate(statuses, 1) if s != "yes"]
        overall = parsed["overall"]
        detail: dict[str, Any] = {"statuses": statuses, "overall": overall, "rationale": parsed["rationale"]}
        if overall == 1 and failed:
            detail["disagreement"] = f"overall score 1, but rubric(s) {failed} marked 'no'; scored 0"
        elif overall == 0 and not failed:
            detail["disagreement"] = "overall score 0, though every rubric is marked 'yes'; scored 0"
        return Verdict.scored(1.0 if overall == 1 and not failed else 0.0, answer, **detail)


@dataclass(frozen=True)
class RubricEvaluator:
    """The whole final answer (reasoning stripped) goes to the rubric judge; nothing is scored without one."""

    name: str = "rubric"
    judge: RubricJudge = RubricJudge()
    free_form: bool = False
    requires_judge: bool = True
    answer_types: ClassVar[tuple[str, ...]] = ("rubrics",)

    def extract(self, sample: Sample, response: str) -> Extraction:
        return Extraction(strip_reasoning(response), rule="whole_response")

    def score(self, sample: Sample, answer: str) -> Verdict:
        return Verdict.failed("judge_error", "rubric evaluator needs a judge")


# ---- the paper-conclusion list-count judge ----------------------------------------------------------

_CONCLUSIONS_PROMPT = """\
You are an expert scientific reviewer. Compare the conclusions predicted for a research paper \
with the paper's reference conclusions ({n_ref} reference, {n_pred} predicted).

Reference conclusions:
{reference}

Predicted conclusions:
{predicted}

Count how many predicted conclusions correctly match distinct reference conclusions. Match by \
scientific claim, not wording. Each reference and prediction can be matched at most once.
Output JSON: {{"correct_count": <int>, "rationale": "<str>"}}"""

_ITEM_START = re.compile(
    r"^\s*(?:\*\*|__)?(?:(\d{1,2})\s*[.)]|(?:conclusion|finding)\s*\d{1,2}\s*[:.)]|([-*•]))(?:\*\*|__)?\s+(.*)$", re.I
)


def conclusion_lines(answer: str) -> list[str]:
    """The predicted conclusions of a judge-ready answer: its non-empty lines."""
    return [line.strip() for line in answer.split("\n") if line.strip()]


def split_conclusions(text: str) -> list[str]:
    """Predicted conclusions: numbered items ("1." / "1)" / "Conclusion 1:"), else bullets, else paragraphs.

    An item runs on over following lines until the next item or a blank line; text before the
    first item (a preamble) is dropped. Items come back on one line each, markdown removed.
    """
    lines = text.split("\n")
    starts = [_ITEM_START.match(line) for line in lines]
    numbered = [m for m in starts if m and not m.group(2)]
    kind = "numbered" if numbered else "bullet" if any(starts) else None
    if kind is None:
        paragraphs = re.split(r"\n\s*\n", text)
        return [p for p in (_one_line(p) for p in paragraphs) if p]
    items: list[list[str]] = []
    current: list[str] | None = None
    for line, match in zip(lines, starts):
        if match and (kind == "bullet" or not match.group(2)):
            current = [match.group(3)]
            items.append(current)
        elif not line.strip():
            current = None
        elif current is not None:
            current.append(match.group(3) if match else line)  # a sub-bullet joins its item
    return [i for i in (_one_line(" ".join(parts)) for parts in items) if i]


def _one_line(text: str) -> str:
    return " ".join(clean(text).split())


@dataclass(frozen=True)
class ConclusionsJudge:
    """The list-count judge; the verdict is Eq. 2 with N_hit = correct_count and N_extra = N_pred - N_hit."""

    name: str = "conclusions"
    max_new_tokens: int = 512

    def precheck(self, sample: Sample, answer: str) -> Verdict | None:
        if not _references(sample):
            return Verdict.failed("invalid_sample", "the item has no reference conclusions")
        if not conclusion_lines(answer):
            return Verdict.failed("unparsed", "no predicted conclusions")
        return None

    def prompt(self, sample: Sample, answer: str) -> Prompt:
        refs, preds = _references(sample), conclusion_lines(answer)
        text = _CONCLUSIONS_PROMPT.format(
            n_ref=len(refs), n_pred=len(preds), reference=_numbered(refs), predicted=_numbered(preds)
        )
        return user_prompt(text)

    def parse(self, reply: str) -> dict[str, Any]:
        data = json_object(reply)
        if "correct_count" not in data:
            raise JudgeReplyError("the reply has no 'correct_count'")
        count = data["correct_count"]
        if isinstance(count, float) and count.is_integer():
            count = int(count)
        if isinstance(count, bool) or not isinstance(count, int):
            raise JudgeReplyError(f"'correct_count' must be an integer, not {count!r}")
        return {"correct_count": count, "rationale": str(data.get("rationale", ""))}

    def verdict(self, sample: Sample, answer: str, parsed: dict[str, Any]) -> Verdict:
        n_ref, n_pred = len(_references(sample)), len(conclusion_lines(answer))
        hit = parsed["correct_count"]
        if not 0 <= hit <= min(n_ref, n_pred):
            raise JudgeReplyError(f"correct_count {hit} outside [0, {min(n_ref, n_pred)}] ({n_ref} ref, {n_pred} pred)")
        return Verdict.scored(
            paper_score(hit, n_pred, n_ref),
            answer,
            n_hit=hit,
            n_extra=n_pred - hit,
            n_ref=n_ref,
            n_pred=n_pred,
            rationale=parsed["rationale"],
        )


def paper_score(n_hit: int, n_pred: int, n_ref: int) -> float:
    """Eq. 2: ``max(0, (N_hit - N_extra) / N_ref)``, N_extra = N_pred - N_hit: over-prediction costs."""
    return max(0.0, (n_hit - (n_pred - n_hit)) / n_ref)


def _references(sample: Sample) -> list[str]:
    gold = sample.gold if isinstance(sample.gold, list) else []
    return [str(g).strip() for g in gold if str(g).strip()]


def _numbered(items: list[str]) -> str:
    return "\n".join(f"{i}. {t}" for i, t in enumerate(items, 1))


@dataclass(frozen=True)
class ConclusionsEvaluator:
    """Splits the response into predicted conclusions and hands them, one per line, to the list-count judge.

    The answer passed on (and stored as the prediction) is the conclusions joined by newlines;
    the judge counts its non-empty lines as N_pred.
    """

    name: str = "conclusions"
    judge: ConclusionsJudge = ConclusionsJudge()
    free_form: bool = False
    requires_judge: bool = True
    answer_types: ClassVar[tuple[str, ...]] = ("conclusions",)

    def extract(self, sample: Sample, response: str) -> Extraction:
        items = split_conclusions(strip_reasoning(response))
        if not items:
            return Extraction(None, issue="no conclusions found: list them as numbered lines ('1. ...')")
        return Extraction("\n".join(items), rule="conclusion_list")

    def score(self, sample: Sample, answer: str) -> Verdict:
        return Verdict.failed("judge_error", "conclusions evaluator needs a judge")


SEMANTIC = register(SemanticEvaluator("semantic", SemanticJudge()))
MMLONGBENCH = register(
    SemanticEvaluator(
        "mmlongbench",
        SemanticJudge(name="semantic_mmlongbench", not_answerable=True),
        typed_extraction=True,
        baseline="mmlongbench",
    )
)
RUBRIC = register(RubricEvaluator())
CONCLUSIONS = register(ConclusionsEvaluator())
