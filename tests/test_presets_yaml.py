"""Prompt presets as data: every built-in preset renders exactly the stored golden prompts.

The golden file (``tests/data/preset_prompts.json``) holds, for every built-in preset, sample
format and answer style, the full conversation `build_prompt` makes for a fixed query after two
fixed demonstrations (images included, as content hashes), plus the option order shown.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from mmctx.prompts.build import build_prompt
from mmctx.prompts.messages import to_jsonable
from mmctx.prompts.presets import PRESETS, get_preset
from mmctx.schema import Rationale, Sample

GOLDEN = Path(__file__).parent / "data" / "preset_prompts.json"
BUILTINS = Path(__file__).parent / "data" / "preset_builtins.json"  # every field of every built-in preset
STYLES = ("letter", "cot", "text")
IMAGE_BYTES = b"a fixed image: only its content hash reaches the prompt"


def _sample(sid: str, fmt: str, **fields) -> Sample:
    return Sample(id=sid, task="t", source="s", format=fmt, images=["img.bin"], **fields)


def _samples(fmt: str) -> tuple[Sample, list[Sample]]:
    """A query and two demos of ``fmt``; the second demo carries a context line."""
    if fmt == "binary":
        make = lambda sid, statement, answer, **kw: _sample(  # noqa: E731
            sid, fmt, statement=statement, choices=["Yes", "No"], answer=answer,
            rationale=Rationale(reasoning=f"Looking at {sid}, it is so.", answer=answer), **kw,
        )  # fmt: skip
        return make("q", "A red circle is left of a square.", "No"), [
            make("d1", "There are two stars.", "Yes"),
            make("d2", "The triangle is blue.", "No", context="Shapes on a grid."),
        ]
    choices = ["a red circle", "a blue square", "a green star", "a yellow triangle"]
    make = lambda sid, question, answer, **kw: _sample(  # noqa: E731
        sid, fmt, question=question, choices=choices if fmt == "mcqa" else choices[:2], answer=answer,
        rationale=Rationale(reasoning=f"Step one for {sid}.\nStep two.", answer=answer), **kw,
    )  # fmt: skip
    return make("q", "What is left of the star?", choices[1]), [
        make("d1", "What is on top?", choices[0]),
        make("d2", "What is largest?", choices[1], context="Count only filled shapes."),
    ]


def render_all(root: Path) -> dict:
    """Every built-in preset × format × answer style, as JSON: what the golden file stores."""
    (root / "img.bin").write_bytes(IMAGE_BYTES)
    out = {}
    for name in sorted(PRESETS):
        preset = get_preset(name)
        for fmt in sorted(preset.formats):
            query, demos = _samples(fmt)
            for style in STYLES:
                built = build_prompt(query, demos, preset, style, seed=3, root=root)
                out[f"{name}/{fmt}/{style}"] = {
                    "messages": to_jsonable(built.messages),
                    "order": list(built.options.order),
                    "labels": list(built.options.labels),
                }
    return out


def test_builtin_presets_render_the_golden_prompts_byte_for_byte(tmp_path):
    expected = json.loads(GOLDEN.read_text(encoding="utf-8"))
    rendered = render_all(tmp_path)
    assert sorted(rendered) == sorted(expected)  # no preset, format or style lost or added
    for key, want in expected.items():
        assert rendered[key] == want, key


def test_golden_file_covers_both_turn_layouts_and_every_style():
    expected = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert {k.split("/")[0] for k in expected} >= {"fewmmbench", "fewmmbench-single-turn"}
    assert {k.split("/")[1] for k in expected} == {"mcqa", "caption_foil", "binary"}
    assert {k.split("/")[2] for k in expected} == set(STYLES)
    single = expected["fewmmbench-single-turn/mcqa/letter"]["messages"]
    assert [m["role"] for m in single] == ["system", "user"]
    multi = expected["fewmmbench/mcqa/cot"]["messages"]
    assert [m["role"] for m in multi] == ["system", "user", "assistant", "user", "assistant", "user"]


def test_builtin_presets_keep_every_field():
    expected = json.loads(BUILTINS.read_text(encoding="utf-8"))
    assert sorted(PRESETS) == sorted(expected)
    for name, want in expected.items():
        got = dataclasses.asdict(get_preset(name))
        got["labels"] = list(got["labels"])  # a tuple in the record, a list in JSON
        assert {field: got[field] for field in want} == want


@pytest.mark.parametrize("name", ["fewmmbench", "fewmmbench-single-turn"])
def test_builtin_presets_are_reachable_by_name(name):
    assert get_preset(name).name == name
