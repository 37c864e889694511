"""The answer-extraction prompt of appendix B, for free-form responses the rules could not read.

`extraction_prompt` builds the request; `parse_extraction` reads the extractor model's reply.
The plain form returns the answer text; the typed form (MMLongBench, as MMLongBench-Doc's own
extractor) also returns the answer's type, one of `EXTRACTION_TYPES`, as JSON. Either way
``[NO_FINAL_ANSWER]`` (or type "fail to answer") means the response has no answer: an
unparsed `Extraction`, not an error. A typed reply that is not the JSON asked for raises
`JudgeReplyError`, so `mmctx.scoring.judging` asks again.

Successful extractions carry ``rule="extractor"`` (plain) or ``rule="extractor:<type>"`` (typed),
so the type MMLongBench's scoring may want survives in the record.
"""

from __future__ import annotations

import json
import re

from mmctx.prompts.messages import Prompt
from mmctx.scoring.evaluators.base import Extraction, JudgeReplyError
from mmctx.scoring.evaluators.judged import json_object, strip_fences, user_prompt

NO_FINAL_ANSWER = "[NO_FINAL_ANSWER]"
EXTRACTION_TYPES: tuple[str, ...] = ("integer", "float", "string", "list", "not answerable", "fail to answer")
# Names in the cache key (the extractor is a "judge" to the runner), and its reply budget.
EXTRACTOR = "extractor"
EXTRACTOR_TYPED = "extractor_typed"
EXTRACT_MAX_NEW_TOKENS = 256

_INSTRUCTION = (
    "Given a question and model response, extract only the final answer. Prefer content inside "
    "<answer>...</answer> or boxed expressions. Otherwise extract the last decisive answer span. "
    f"If there is no clear final answer, output {NO_FINAL_ANSWER}."
)
_PLAIN_OUTPUT = "Output only the extracted answer (or [NO_FINAL_ANSWER]), with nothing before or after it."
_TYPED_OUTPUT = (
    "Also give the answer's type, one of: integer, float, string, list, not answerable, fail to answer. "
    'Use "not answerable" when the response states that the question cannot be answered from the document, '
    'and "fail to answer" when it gives no final answer. For type list, give the answer as a JSON list.\n'
    'Output only JSON: {"answer": <the extracted answer>, "type": "<type>"}'
)
_LABEL = re.compile(r"^(?:extracted\s+answer|final\s+answer|answer)\s*[:：]\s*", re.I)


def extraction_prompt(question: str, response: str, typed: bool = False) -> Prompt:
    """One user message: the appendix-B instruction, the output form, then the question and response."""
    output = _TYPED_OUTPUT if typed else _PLAIN_OUTPUT
    text = f"{_INSTRUCTION}\n{output}\n\nQuestion:\n{question.strip()}\n\nModel response:\n{response.strip()}"
    return user_prompt(text)


def parse_extraction(reply: str, typed: bool = False) -> Extraction:
    """The extractor's reply as an `Extraction`; raises `JudgeReplyError` when it must be asked again."""
    text = strip_fences(reply)
    if NO_FINAL_ANSWER in text and (not typed or not text.lstrip().startswith("{")):
        return _no_answer("the extractor found no final answer")
    return _typed(text) if typed else _plain(text)


def _no_answer(issue: str) -> Extraction:
    return Extraction(None, rule="extractor", issue=issue)


def _plain(text: str) -> Extraction:
    answer = _LABEL.sub("", text.strip()).strip().strip('"').strip()
    if not answer:
        raise JudgeReplyError("the extractor replied with nothing")
    return Extraction(answer, rule="extractor")


def _typed(text: str) -> Extraction:
    data = json_object(text)
    kind = str(data.get("type", "")).strip().casefold()
    if kind not in EXTRACTION_TYPES:
        raise JudgeReplyError(f"extraction type must be one of {list(EXTRACTION_TYPES)}, not {data.get('type')!r}")
    if kind == "fail to answer":
        return _no_answer("the extractor found no final answer (fail to answer)")
    if kind == "not answerable":
        return Extraction("Not answerable", rule="extractor:not answerable")
    value = data.get("answer")
    if value is None or (isinstance(value, str) and not value.strip()) or value == []:
        raise JudgeReplyError(f"type {kind!r} with no answer")
    if str(value).strip() == NO_FINAL_ANSWER:
        return _no_answer("the extractor found no final answer")
    answer = json.dumps(value, ensure_ascii=False) if isinstance(value, (list, dict)) else str(value).strip()
    return Extraction(answer, rule=f"extractor:{kind}")
