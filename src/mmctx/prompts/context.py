"""Context-learning prompts (CLBench-V, appendix B): system prompt, task templates, answer-format
suffixes, and the format-repair turn.

One user turn carries the whole context in reading order — text blocks and images interleaved as
the record lists them — then the task text and the answer-format suffix. Templates preserve the
source's own query and add only the minimal format constraint, as the paper does. The paper's
placeholders were lost from its text in several templates; where we filled them in, the template
says so in a comment.

Truncation is off by default: a context that does not fit is reported as ``context_overflow``.
A named strategy (``head``, ``middle``) may be chosen instead; it cuts *text* blocks to a token
budget counted by a named tokenizer, keeps every image, and the run records strategy, budget
and tokenizer.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from mmctx.answers import ANSWER_TYPES
from mmctx.prompts.messages import ImagePart, Message, Part, Prompt, TextPart
from mmctx.schema import ContextBlock, Sample, resolve_image

DEFAULT_SYSTEM = "You are a careful multimodal assistant. Follow the user's output format exactly."

# Task templates. ``{question}`` is the record's question (the source's own query); ``{options}``
# the record's choices as "A. ..." lines when it has them (else they are in the question already).
TEMPLATES: dict[str, str] = {
    "plain": "{question}",
    "options": "{question}{options}",
    "reasonmap": "{question}",  # ReasonMap's short/long query already states its route format
    "reasonmap_plus": "{question}",
    "zerobench": "Question: {question}\nPut the final answer in curly braces: {{final answer}}.",
    "mirbench": "Question: {question}\nOptions:{options}\nRespond with:\nOption: <letter>\nReason: <reason>",
    "pix2fact": (
        "Analyze the image(s), question, and crawled webpage information. Return a JSON object with "
        '"Observation", "Comprehensive Answer", and "Final Answer".\nQuestion: {question}'
    ),
    "prismm": (
        "You are provided with a full scientific paper that may contain an inconsistency.\n"
        "Question: {question}\nOptions:{options}\nPlease select the single best letter."
    ),
    "browsecomp": "[Question] {question}",
    # CL-bench's task follows its context documents ("Component 2: Conversation Transcript").
    "clbench": "{question}",
    # The two new datasets: the record's question is the whole task text when the builder wrote
    # it (`mmctx.data.clbench.construct`); else the appendix-B task below is used.
    "roe": "{task}",
    "paper_conclusion": "{task}",
}

DEFAULT_TASKS: dict[str, str] = {
    "roe": (
        "Perform DuPont analysis for the provided financial report and compute ROE. Extract net profit, "
        "revenue, total assets, and equity. Compute profit margin, asset turnover, equity multiplier, and ROE. "
        "Show the calculation process."
    ),
    "paper_conclusion": (
        "You are an expert research analyst. Infer the main experimental conclusions of a research paper from "
        "the provided method description, experimental setup, result tables, and figures. Identify main "
        "comparisons and trends, then return 4-8 concise conclusions supported by the experiments, as a "
        "numbered list."
    ),
}

# Answer-format suffixes: what the evaluator parses, and what the repair prompt asks for. A subset
# names one by key. "mcq", "short", "roe" and "route" are the paper's (appendix B); every answer
# type lists its own instruction under its suffix key (`mmctx.answers`: "mcq" is the option
# instruction, "short" the number and string one), so a registered type brings its suffix along.
# "roe" is the one suffix of a subset (Financial Report ROE, number items) that is no type's.
SUBSET_SUFFIXES: dict[str, str] = {
    "": "",
    "roe": "End with exactly one final line: ROE: <value>%",
}


class _Suffixes(Mapping[str, str]):
    """Suffix key -> instruction: the subset-only suffixes, then every registered answer type's."""

    def _table(self) -> dict[str, str]:
        return {**SUBSET_SUFFIXES, **{t.suffix: t.instruction for t in ANSWER_TYPES.values()}}

    def __getitem__(self, key: str) -> str:
        return self._table()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


class _AnswerTypeSuffixes(Mapping[str, str]):
    """Answer type -> the suffix key its items are asked with when their subset gives none that fits."""

    def __getitem__(self, answer_type: str) -> str:
        return ANSWER_TYPES[answer_type].suffix

    def __iter__(self) -> Iterator[str]:
        return iter(ANSWER_TYPES)

    def __len__(self) -> int:
        return len(ANSWER_TYPES)


SUFFIXES: Mapping[str, str] = _Suffixes()
# The answer-format instruction each answer type is asked with when its subset gives none that
# fits (see `suffix_key`). Every registered answer type has one (read live from `mmctx.answers`).
ANSWER_TYPE_SUFFIXES: Mapping[str, str] = _AnswerTypeSuffixes()

# What the repair prompt names as the required format when a template carries its own.
TEMPLATE_FORMATS: dict[str, str] = {
    "zerobench": "the final answer in curly braces: {final answer}",
    "mirbench": "a line 'Option: <letter>' followed by a line 'Reason: <reason>'",
    "pix2fact": 'a JSON object with "Observation", "Comprehensive Answer", and "Final Answer"',
    "paper_conclusion": "a numbered list of 4-8 concise conclusions",
    "clbench": "a direct answer to the task",
}

REPAIR_TEMPLATE = (
    "Your previous response could not be parsed for evaluation.\n"
    "Task: {task}\n"
    "Format issue: {issue}\n"
    "Required format: {required}\n"
    "Rewrite only the final answer in the required format. Do not solve a different problem."
)

TRUNCATIONS: tuple[str, ...] = ("none", "head", "middle")


@dataclass(frozen=True)
class TaskFormat:
    """How one subset is asked: template key, suffix key, and its human task name."""

    template: str
    suffix: str
    task: str


def options_text(sample: Sample) -> str:
    return "".join(f"\n{chr(ord('A') + i)}. {c}" for i, c in enumerate(sample.choices))


def suffix_key(fmt: TaskFormat, answer_type: str | None) -> str:
    """The suffix an item of ``answer_type`` is asked with under ``fmt``.

    The subset's suffix, except where it does not say how this item answers: the generic
    ``short`` line ("Answer: <answer>") becomes the answer type's own form (a CourtSI point item
    is told "Answer: (x, y, z)", an option item "Answer: <letter>"), and no suffix under a
    template that states no format either (a subset the registry lacks) becomes the answer
    type's instruction. An answer type without one is an error, never a prompt without a format.
    """
    if answer_type is None:
        return fmt.suffix
    own = ANSWER_TYPE_SUFFIXES.get(answer_type)
    if own is None:
        raise ValueError(
            f"no answer-format instruction for answer type {answer_type!r}; known: {sorted(ANSWER_TYPE_SUFFIXES)}"
        )
    if fmt.suffix == "short" or (not fmt.suffix and fmt.template not in TEMPLATE_FORMATS):
        return own
    return fmt.suffix


def task_text(sample: Sample, fmt: TaskFormat) -> str:
    """The task part of the user turn: template filled, then the answer-format suffix."""
    template = TEMPLATES[fmt.template]
    task = sample.question.strip() or DEFAULT_TASKS.get(fmt.template, "")
    body = template.format(question=sample.question, options=options_text(sample), task=task)
    suffix = SUFFIXES[suffix_key(fmt, sample.answer_type)]
    # A record whose question already states the required format (a built ROE item) is not told twice.
    if not suffix or _states(body, suffix):
        return body
    return f"{body}\n\n{suffix}"


def _states(body: str, suffix: str) -> bool:
    """Whether ``body`` already asks to end with ``suffix``'s final-line marker (``ROE:``, ``Answer:``)."""
    found = re.search(r"final line: (\w+):", suffix)
    return found is not None and re.search(rf"End with[^\n]*\b{found.group(1)}:", body) is not None


def required_format(fmt: TaskFormat, answer_type: str | None = None) -> str:
    """What the repair prompt names as the required format: the item's suffix (`suffix_key`), else the template's."""
    key = suffix_key(fmt, answer_type)
    return SUFFIXES[key] or TEMPLATE_FORMATS.get(fmt.template, "the format the task asks for")


def _image(root: Path, rel: str) -> ImagePart:
    # Lexical rules only (absolute paths, ".."): whether links may leave the root is the suite's
    # policy, checked when it is validated, before any prompt is built.
    return ImagePart.from_path(resolve_image(Path(root), rel, confine_links=False))


def context_parts(blocks: list[ContextBlock], root: Path) -> list[Part]:
    parts: list[Part] = []
    for block in blocks:
        if block.title:
            parts.append(TextPart(f"{block.title}\n"))
        if block.kind == "image":
            parts.append(_image(root, block.image))
            parts.append(TextPart("\n"))
        else:
            parts.append(TextPart(block.text.rstrip("\n") + "\n\n"))
    return parts


def build_context_prompt(
    sample: Sample,
    root: Path,
    fmt: TaskFormat,
    system: str | None = DEFAULT_SYSTEM,
    blocks: list[ContextBlock] | None = None,
) -> Prompt:
    """System prompt (if any), then one user turn: the context in order, the task, the suffix."""
    parts = context_parts(sample.blocks if blocks is None else blocks, root)
    parts.append(TextPart(task_text(sample, fmt)))
    parts.extend(_image(root, rel) for rel in sample.images)
    user = Message("user", tuple(_merge_text(parts)))
    return ((Message("system", (TextPart(system),)),) if system else ()) + (user,)


def _merge_text(parts: list[Part]) -> list[Part]:
    """Adjacent text parts joined: backends see one text run between images."""
    out: list[Part] = []
    for p in parts:
        if isinstance(p, TextPart) and out and isinstance(out[-1], TextPart):
            out[-1] = TextPart(out[-1].text + p.text)
        else:
            out.append(p)
    return out


def repair_prompt(original: Prompt, response: str, task: str, issue: str, required: str) -> Prompt:
    """The paper's follow-up turn: the first exchange, then the repair request."""
    text = REPAIR_TEMPLATE.format(task=task, issue=issue or "the answer could not be found", required=required)
    return (*original, Message("assistant", (TextPart(response),)), Message("user", (TextPart(text),)))


_WORD_SPLIT = re.compile(r"(\s+)")


def truncate_blocks(
    blocks: list[ContextBlock], budget: int, count_tokens: Callable[[str], int], strategy: str
) -> tuple[list[ContextBlock], int]:
    """Text blocks cut to ``budget`` tokens in all (images kept); returns the blocks and tokens dropped.

    ``head`` keeps the beginning of the context; ``middle`` keeps its beginning and end and drops
    the middle (where, by "lost in the middle", evidence is used least). Every image stays where it
    was; one marker block shows where text was cut, so a reader of the prompt sees that it happened.
    """
    if strategy not in TRUNCATIONS:
        raise ValueError(f"unknown truncation {strategy!r}; choose from {TRUNCATIONS}")
    counts = [count_tokens(b.text) if b.kind == "text" else 0 for b in blocks]
    total = sum(counts)
    if strategy == "none" or total <= budget:
        return list(blocks), 0
    first = budget if strategy == "head" else budget // 2
    front = _allot(counts, first)
    back = [0] * len(counts) if strategy == "head" else _allot(counts[::-1], budget - first)[::-1]
    out: list[ContextBlock] = []
    marked = False
    for block, n, f, k in zip(blocks, counts, front, back):
        if block.kind == "image" or f + k >= n:
            out.append(block)
            continue
        if f:
            out.append(block.model_copy(update={"text": _cut_words(block.text, f, count_tokens, from_end=False)}))
        if not marked:
            out.append(TRUNCATION_MARK)
            marked = True
        if k:
            out.append(ContextBlock(kind="text", text=_cut_words(block.text, k, count_tokens, from_end=True)))
    kept = sum(count_tokens(b.text) for b in out if b.kind == "text" and b is not TRUNCATION_MARK)
    return out, max(0, total - kept)


TRUNCATION_MARK = ContextBlock(kind="text", text="[... context truncated ...]")


def _allot(counts: list[int], budget: int) -> list[int]:
    """Tokens kept per block, filling ``budget`` from the first block on."""
    kept = []
    for n in counts:
        take = min(n, budget)
        kept.append(take)
        budget -= take
    return kept


def _cut_words(text: str, budget: int, count_tokens: Callable[[str], int], from_end: bool) -> str:
    """The longest run of whole words from the start (or end) of ``text`` within ``budget`` tokens."""
    pieces = _WORD_SPLIT.split(text)
    if from_end:
        pieces = pieces[::-1]
    lo, hi = 0, len(pieces)
    while lo < hi:  # binary search: the tokenizer is the expensive part
        mid = (lo + hi + 1) // 2
        chunk = "".join(pieces[:mid][::-1] if from_end else pieces[:mid])
        if count_tokens(chunk) <= budget:
            lo = mid
        else:
            hi = mid - 1
    chosen = pieces[:lo]
    return "".join(chosen[::-1] if from_end else chosen)
