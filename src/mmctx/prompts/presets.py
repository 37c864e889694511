"""Named prompt presets. A preset is chosen by name and recorded in every run.

Each sample format has an item template (what a user turn says about one sample) and three
answer styles:

- ``letter``: generation without reasoning; the model answers with the option's letter
  (``Yes``/``No`` for binary verification).
- ``cot``: generation with reasoning; the model reasons step by step, then ends with a line
  ``Answer: <letter>``. Demonstrations show their rationale followed by that line.
- ``text``: option ranking by log-likelihood (the ``ppl`` scorer). The scored continuation is
  the option's own text, so demonstrations answer with their option text too: the demo turns
  show the model exactly the form of answer whose likelihood is measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

AnswerStyle = Literal["letter", "cot", "text"]


@dataclass(frozen=True)
class FormatTemplate:
    """How one sample format is asked, and the closing instruction per answer style."""

    item: str  # str.format fields: question, options, statement, context
    instructions: dict[str, str]


@dataclass(frozen=True)
class Preset:
    name: str
    preamble: str
    formats: dict[str, FormatTemplate]
    single_turn: bool = False
    labels: tuple[str, ...] = ("A", "B", "C", "D", "E", "F", "G", "H")
    description: str = ""


_CHOICE_INSTRUCTIONS = {
    "letter": "Answer with the option's letter from the given choices directly.",
    "cot": "Think step by step, then give your final answer on the last line as 'Answer: <letter>'.",
    "text": "Answer with the text of the correct option.",
}

_FORMATS = {
    "mcqa": FormatTemplate(item="{question}\n{options}", instructions=_CHOICE_INSTRUCTIONS),
    "caption_foil": FormatTemplate(
        item="Which caption matches the image?\n{options}", instructions=_CHOICE_INSTRUCTIONS
    ),
    "binary": FormatTemplate(
        item='Does this sentence accurately describe the image? "{statement}"',
        instructions={
            "letter": "Answer Yes or No.",
            "cot": "Think step by step, then give your final answer on the last line as 'Answer: Yes' or 'Answer: No'.",
            "text": "Answer Yes or No.",
        },
    ),
}

_PREAMBLE = (
    "You are shown images with questions about them. Each question comes with its own image(s). "
    "Answer the last question; earlier questions and their answers are examples."
)

PRESETS: dict[str, Preset] = {
    "fewmmbench": Preset(
        name="fewmmbench",
        preamble=_PREAMBLE,
        formats=_FORMATS,
        description="Demos as user/assistant turns carrying their own images; query last.",
    ),
    "fewmmbench-single-turn": Preset(
        name="fewmmbench-single-turn",
        preamble=_PREAMBLE,
        formats=_FORMATS,
        single_turn=True,
        description="Demos and query concatenated in one user turn, each demo followed by 'Answer: ...'.",
    ),
}


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown prompt preset {name!r}; choose from {sorted(PRESETS)}") from None
