"""Build the interleaved few-shot conversation for one query.

Each demonstration is a user turn (its own images + its item text) followed by an assistant
turn (its answer, or rationale + answer); the query is the last user turn. Options are shown
in an order shuffled per sample with a seed derived from (seed, sample id), so a sample's
order never depends on which other samples are in the run.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from pathlib import Path

from mmctx.prompts.ablation import FULL, Ablation
from mmctx.prompts.messages import ImagePart, Message, Part, Prompt, TextPart
from mmctx.prompts.presets import AnswerStyle, Preset
from mmctx.schema import Benchmark, Problem, Sample, resolve_image


class PromptError(ValueError):
    """A sample cannot be rendered as asked (e.g. a CoT demo without a rationale)."""


@dataclass(frozen=True)
class ShownOptions:
    """The options as the model sees them: texts in shown order, their labels, and the permutation."""

    texts: tuple[str, ...]
    labels: tuple[str, ...]
    order: tuple[int, ...]  # order[shown position] = index in sample.choices
    gold: int  # shown position of the correct answer


@dataclass(frozen=True)
class BuiltPrompt:
    messages: Prompt
    options: ShownOptions
    demo_ids: tuple[str, ...]


def derived_seed(seed: int, *parts: str) -> int:
    """A stable integer seed from ``seed`` and names (Python's ``hash`` is salted per process)."""
    digest = hashlib.sha256(":".join([str(seed), *parts]).encode()).digest()
    return int.from_bytes(digest[:8], "big")


def preset_problem(sample: Sample, preset: Preset) -> tuple[str, str] | None:
    """``(field, message)`` when ``preset`` cannot ask ``sample``, else None.

    The one rule both `shown_options` (at run time) and `preset_problems` (at validation) apply,
    so ``mmctx validate`` refuses exactly what a run would.
    """
    if sample.format == "open":
        return "format", "open-answer items have no options; this preset cannot ask them"
    if sample.format not in preset.formats:
        return "format", f"preset {preset.name!r} has no template for format {sample.format!r}"
    if sample.format != "binary" and len(sample.choices) > len(preset.labels):
        return "choices", f"{len(sample.choices)} choices but preset {preset.name!r} has {len(preset.labels)} labels"
    return None


def preset_problems(bench: Benchmark, preset: Preset) -> list[Problem]:
    """Every record of ``bench`` that ``preset`` cannot render, by table, id and field."""
    problems = []
    for table, records in (("queries", bench.queries), ("demos", bench.demos)):
        for sample in records:
            found = preset_problem(sample, preset)
            if found:
                problems.append(Problem(table, sample.id, *found))
    return problems


def shown_options(sample: Sample, preset: Preset, seed: int, rotation: int = 0) -> ShownOptions:
    """The options in their seeded order; ``rotation`` > 0 shifts that order by as many places
    (the option-order variants of shortcut checks: each puts the gold answer somewhere else)."""
    found = preset_problem(sample, preset)
    if found:
        raise PromptError(f"sample {sample.id!r}: {found[1]}")
    order = list(range(len(sample.choices)))
    if sample.format != "binary":  # Yes/No keep their conventional order
        random.Random(derived_seed(seed, "options", sample.id)).shuffle(order)
        shift = rotation % len(order)
        order = order[shift:] + order[:shift]
    texts = tuple(sample.choices[i] for i in order)
    labels = texts if sample.format == "binary" else preset.labels[: len(texts)]
    return ShownOptions(texts=texts, labels=tuple(labels), order=tuple(order), gold=order.index(sample.answer_index))


def item_text(sample: Sample, options: ShownOptions, preset: Preset, style: AnswerStyle) -> str:
    template = preset.formats.get(sample.format)
    if template is None:
        raise PromptError(f"sample {sample.id!r}: preset {preset.name!r} has no template for format {sample.format!r}")
    listed = "\n".join(f"{label}. {text}" for label, text in zip(options.labels, options.texts))
    body = template.item.format(
        question=sample.question, statement=sample.statement, context=sample.context, options=listed
    )
    if sample.context:
        body = f"{sample.context}\n{body}"
    return f"{body}\n{template.instructions[style]}"


def _answer_text(sample: Sample, options: ShownOptions, style: AnswerStyle) -> str:
    label = options.labels[options.gold]
    if style == "letter":
        return label
    if style == "text":
        return options.texts[options.gold]
    if sample.rationale is None or not sample.rationale.reasoning.strip():
        raise PromptError(f"demo {sample.id!r}: a CoT setting needs a rationale, and this demo has none")
    shown = options.labels[options.texts.index(sample.rationale.answer)]
    return f"{sample.rationale.reasoning.strip()}\nAnswer: {shown}"


def sample_images(sample: Sample, root: Path) -> list[Part]:
    # Lexical rules only (absolute paths, ".."): whether links may leave the root is the
    # benchmark's policy, checked by `Benchmark.check` before any prompt is built.
    return [ImagePart.from_path(resolve_image(root, rel, confine_links=False)) for rel in sample.images]


def build_prompt(
    query: Sample,
    demos: list[Sample],
    preset: Preset,
    style: AnswerStyle,
    seed: int,
    root: Path,
    ablation: Ablation = FULL,
    option_order: int = 0,
) -> BuiltPrompt:
    """The conversation asking ``query`` after ``demos``, and how its options were shown.

    ``ablation`` removes or replaces images (`mmctx.prompts.ablation`); ``option_order`` rotates the
    query's shown options (`shown_options`). Demos keep their own order and images otherwise.
    """
    messages: list[Message] = []
    if preset.preamble:
        messages.append(Message("system", (TextPart(preset.preamble),)))
    turns: list[tuple[list[Part], str]] = []
    for demo in demos:
        shown = shown_options(demo, preset, seed)
        user = ablation.demo_images(sample_images(demo, root)) + [TextPart(item_text(demo, shown, preset, style))]
        turns.append((user, _answer_text(demo, shown, style)))
    query_options = shown_options(query, preset, seed, option_order)
    query_parts = ablation.query_images(sample_images(query, root)) + [
        TextPart(item_text(query, query_options, preset, style))
    ]
    if preset.single_turn:
        content: list[Part] = []
        lead = "\n" if style == "cot" else "\nAnswer: "  # a CoT answer already ends in its Answer line
        for user, answer in turns:
            content += user + [TextPart(f"{lead}{answer}\n\n")]
        messages.append(Message("user", tuple(content + query_parts)))
    else:
        for user, answer in turns:
            messages.append(Message("user", tuple(user)))
            messages.append(Message("assistant", (TextPart(answer),)))
        messages.append(Message("user", tuple(query_parts)))
    return BuiltPrompt(messages=tuple(messages), options=query_options, demo_ids=tuple(d.id for d in demos))
