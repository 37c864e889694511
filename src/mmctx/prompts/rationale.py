"""Prompts that ask a model to explain a demonstration's answer (CoT rationale generation).

The first attempt asks the question as a CoT query would. A retry *injects* the gold answer
and asks for the explanation of it, as the FewMMBench authors did. Either way the model is
told not to name options by letter: the rationale is shown later with the options in another
order, and only the final ``Answer:`` line (re-rendered at run time) may carry a letter.
"""

from __future__ import annotations

from pathlib import Path

from mmctx.prompts.build import ShownOptions, item_text, sample_images, shown_options
from mmctx.prompts.messages import Message, Prompt, TextPart
from mmctx.prompts.presets import Preset
from mmctx.schema import Sample

NO_LETTERS = "In your reasoning, refer to options by their text, never by their letter."


def rationale_prompt(
    sample: Sample, preset: Preset, seed: int, root: Path, inject: bool
) -> tuple[Prompt, ShownOptions]:
    shown = shown_options(sample, preset, seed)
    text = item_text(sample, shown, preset, "cot")
    if inject:
        gold = shown.texts[shown.gold]
        text += (
            f'\nThe correct answer is "{gold}". Explain step by step, from what the image shows, why it is '
            f"correct, then give the final answer on the last line as 'Answer: {shown.labels[shown.gold]}'."
        )
    text += f"\n{NO_LETTERS}"
    return (Message("user", tuple(sample_images(sample, root) + [TextPart(text)])),), shown
