"""Prompt presets as data: every built-in preset renders exactly the stored golden prompts.

The golden file (``tests/data/preset_prompts.json``) holds, for every built-in preset, sample
format and answer style, the full conversation `build_prompt` makes for a fixed query after two
fixed demonstrations (images included, as content hashes), plus the option order shown.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import replace
from pathlib import Path

import pytest

from mmctx.prompts.build import build_prompt, item_text, shown_options
from mmctx.prompts.messages import to_jsonable
from mmctx.prompts.presets import ITEM_FIELDS, PRESETS, PresetError, get_preset, register_preset
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


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_a_user_preset_extends_a_builtin_and_overrides_only_what_it_names(tmp_path):
    path = _write(
        tmp_path / "terse.yaml",
        "extends: fewmmbench\nformats:\n  mcqa:\n    instructions:\n      letter: Reply with one letter.\n",
    )
    base, preset = get_preset("fewmmbench"), get_preset(str(path))
    assert preset.name == "terse"  # the file's stem
    assert preset.formats["mcqa"].instructions["letter"] == "Reply with one letter."
    assert preset.formats["mcqa"].instructions["cot"] == base.formats["mcqa"].instructions["cot"]
    assert preset.formats["mcqa"].item == base.formats["mcqa"].item
    assert preset.formats["binary"] == base.formats["binary"]
    assert (preset.preamble, preset.labels, preset.single_turn) == (base.preamble, base.labels, base.single_turn)
    assert get_preset(path) == preset  # a Path works as well as its string
    # Its wording reaches the prompt.
    query, demos = _samples("mcqa")
    (tmp_path / "img.bin").write_bytes(IMAGE_BYTES)
    built = build_prompt(query, demos, preset, "letter", seed=0, root=tmp_path)
    assert built.messages[-1].text.endswith("\nReply with one letter.")


def test_extends_takes_a_path_relative_to_the_extending_file(tmp_path):
    (tmp_path / "base").mkdir()
    _write(tmp_path / "base" / "mine.yaml", "extends: fewmmbench\npreamble: Look closely.\nlabels: [P, Q, R, S]\n")
    child = _write(tmp_path / "child.yaml", "name: child-wording\nextends: base/mine.yaml\nsingle_turn: true\n")
    preset = get_preset(str(child))
    assert (preset.name, preset.preamble, preset.labels, preset.single_turn) == (
        "child-wording", "Look closely.", ("P", "Q", "R", "S"), True,
    )  # fmt: skip


def test_a_standalone_preset_file_needs_no_base(tmp_path):
    path = _write(
        tmp_path / "own.yaml",
        'preamble: ""\n'
        'labels: ["1", "2"]\n'
        "formats:\n"
        "  binary:\n"
        '    item: "Is it true that {statement}?"\n'
        "    instructions: {letter: Say Yes or No., cot: Reason then say Yes or No., text: Yes or No.}\n",
    )
    preset = get_preset(str(path))
    assert list(preset.formats) == ["binary"] and preset.labels == ("1", "2") and preset.preamble == ""


@pytest.mark.parametrize(
    ("text", "key", "says"),
    [
        ("extends: fewmmbench\nformats:\n  mcq: {item: '{question}'}\n", "formats.mcq", "unknown sample format"),
        ("extends: fewmmbench\nformats:\n  mcq: {item: '{question}'}\n", "formats.mcq", "did you mean 'mcqa'"),
        ("extends: fewmmbench\nformats:\n  open: {item: '{question}'}\n", "formats.open", "unknown sample format"),
        (
            "preamble: hi\nformats:\n  mcqa:\n    item: '{question}'\n    instructions: {letter: a, text: b}\n",
            "formats.mcqa.instructions",
            "missing the instruction for answer style 'cot'",
        ),
        ("extends: fewmmbench\nformats:\n  mcqa: {item: '{question} {choices}'}\n", "formats.mcqa.item", "{choices}"),
        ("extends: fewmmbench\nformats:\n  mcqa: {item: '{question} {}'}\n", "formats.mcqa.item", "field {}"),
        ("extends: fewmmbench\nformats:\n  mcqa: {item: '{question'}\n", "formats.mcqa.item", "str.format"),
        (
            "extends: fewmmbench\nformats:\n  mcqa: {instructions: {letterr: x}}\n",
            "formats.mcqa.instructions.letterr",
            "unknown answer style",
        ),
        ("extends: fewmmbench\npreambel: hi\n", "preambel", "did you mean 'preamble'"),
        ("extends: fewmmbench\nlabels: [A, A]\n", "labels", "distinct"),
        ("extends: fewmmbench\nsingle_turn: yes please\n", "single_turn", "true or false"),
        ("formats: {}\n", "preamble", "missing"),
        ("name: fewmmbench\nextends: fewmmbench\n", "name", "built-in preset's name"),
    ],
)
def test_invalid_presets_name_file_key_and_problem(tmp_path, text, key, says):
    path = _write(tmp_path / "bad.yaml", text)
    with pytest.raises(PresetError) as caught:
        get_preset(str(path))
    message = str(caught.value)
    assert str(path) in message
    assert any(line.strip().startswith(f"{key}:") and says in line for line in message.splitlines()), message


def test_every_problem_of_a_file_is_reported_at_once(tmp_path):
    path = _write(tmp_path / "bad.yaml", "extends: fewmmbench\ncolour: red\nformats:\n  mcq: {}\n  binary: 3\n")
    message = str(pytest.raises(PresetError, get_preset, str(path)).value)
    assert "colour:" in message and "formats.mcq:" in message and "formats.binary:" in message


@pytest.mark.parametrize(
    ("ref", "says"),
    [
        ("no-such-preset", "unknown prompt preset 'no-such-preset'"),
        ("missing.yaml", "no such preset file"),
    ],
)
def test_unknown_names_and_missing_files_are_refused(tmp_path, ref, says):
    with pytest.raises(PresetError, match=says):
        get_preset(ref)
    assert issubclass(PresetError, ValueError)  # callers that refuse bad arguments catch it


def test_broken_yaml_and_extends_cycles_are_refused(tmp_path):
    broken = _write(tmp_path / "broken.yaml", "formats: [unclosed\n")
    with pytest.raises(PresetError, match="not valid YAML"):
        get_preset(str(broken))
    _write(tmp_path / "a.yaml", "extends: b.yaml\n")
    _write(tmp_path / "b.yaml", "extends: a.yaml\n")
    with pytest.raises(PresetError, match="extends itself"):
        get_preset(str(tmp_path / "a.yaml"))


def test_fingerprint_follows_the_wording_not_the_file(tmp_path):
    base = get_preset("fewmmbench")
    same = _write(tmp_path / "same.yaml", "extends: fewmmbench\ndescription: another description\n")
    changed = _write(tmp_path / "changed.yaml", "extends: fewmmbench\npreamble: Look closely.\n")
    assert get_preset(str(same)).fingerprint() == base.fingerprint()
    assert get_preset(str(changed)).fingerprint() != base.fingerprint()
    assert get_preset("fewmmbench-single-turn").fingerprint() != base.fingerprint()
    # Editing a file in place changes what a run records.
    before = get_preset(str(same)).fingerprint()
    _write(same, "extends: fewmmbench\nformats:\n  binary: {instructions: {letter: 'Yes or No?'}}\n")
    assert get_preset(str(same)).fingerprint() != before


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_to_yaml_writes_a_self_contained_file_that_loads_back(tmp_path, name):
    preset = get_preset(name)
    copy = replace(preset, name=f"copy-of-{name}")
    path = _write(tmp_path / "copy.yaml", copy.to_yaml())
    assert "extends" not in path.read_text(encoding="utf-8")
    assert get_preset(str(path)) == copy
    assert get_preset(str(path)).fingerprint() == preset.fingerprint()


def test_item_fields_are_exactly_what_item_text_fills(tmp_path):
    """A template using every offered field renders; `item_text` fills each one."""
    template = " | ".join("{" + f + "}" for f in ITEM_FIELDS)
    path = _write(tmp_path / "all.yaml", f"extends: fewmmbench\nformats:\n  mcqa: {{item: '{template}'}}\n")
    preset = get_preset(str(path))
    query, _ = _samples("mcqa")
    query = query.model_copy(update={"statement": "S!", "context": "C!"})
    text = item_text(query, shown_options(query, preset, 0), preset, "letter")
    assert "What is left of the star? | A. " in text and " | S! | C!" in text


def test_registered_presets_are_reachable_by_name_but_builtins_cannot_be_replaced():
    mine = replace(get_preset("fewmmbench"), name="registered-wording", preamble="Hello.")
    try:
        register_preset(mine)
        assert get_preset("registered-wording") is mine
    finally:
        PRESETS.pop("registered-wording", None)
    with pytest.raises(PresetError, match="built-in"):
        register_preset(replace(mine, name="fewmmbench"))


TERSE = (
    "name: terse-wording\n"
    "extends: fewmmbench\n"
    "preamble: Study each picture before answering.\n"
    "labels: [P, Q, R, S, T, U, V, W]\n"
    "formats:\n"
    "  mcqa:\n"
    '    item: "Q: {question}\\n{options}"\n'
    "    instructions: {letter: Reply with one letter only.}\n"
)


def test_mmctx_run_and_validate_take_a_preset_file(shapes_bench, tmp_path):
    from typer.testing import CliRunner

    from mmctx.cli import app

    preset = _write(tmp_path / "terse.yaml", TERSE)
    cli = CliRunner()
    checked = cli.invoke(app, ["validate", str(shapes_bench), "--preset", str(preset)])
    assert checked.exit_code == 0, checked.output
    args = ["run", str(shapes_bench), "--model", "builtin:tiny-llava", "--out", str(tmp_path / "run"),
            "--preset", str(preset), "--settings", "0-shot,4-similar", "--scorers", "generate", "--limit", "1",
            "--tasks", "object_recognition", "--max-new-tokens", "2", "--no-progress"]  # fmt: skip
    ran = cli.invoke(app, args)
    assert ran.exit_code == 0, ran.output
    requests = [json.loads(line) for line in (tmp_path / "run" / "requests.jsonl").read_text().splitlines()]
    mcqa = [r for r in requests if r["format"] == "mcqa"]
    assert mcqa, "the run asked no multiple-choice item"
    for record in mcqa:
        texts = [p["text"] for m in record["prompt"] for p in m["content"] if p["type"] == "text"]
        assert texts[0] == "Study each picture before answering."
        assert texts[-1].startswith("Q: ") and texts[-1].endswith("\nReply with one letter only.")
        assert record["labels"][0] == "P"
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["config"]["preset"] == "terse-wording"


def test_mmctx_validate_names_a_bad_preset_file_and_its_key(shapes_bench, tmp_path):
    from typer.testing import CliRunner

    from mmctx.cli import app

    bad = _write(tmp_path / "bad.yaml", "extends: fewmmbench\nformats:\n  mcqa: {item: '{query}'}\n")
    result = CliRunner().invoke(app, ["validate", str(shapes_bench), "--preset", str(bad)])
    assert result.exit_code == 2
    assert "bad.yaml" in result.output and "formats.mcqa.item" in result.output and "{query}" in result.output


def test_resuming_a_run_refuses_a_preset_file_changed_since(shapes_bench, tmp_path):
    from typer.testing import CliRunner

    from mmctx.cli import app

    preset = _write(tmp_path / "terse.yaml", TERSE)
    args = ["run", str(shapes_bench), "--model", "builtin:tiny-llava", "--out", str(tmp_path / "run"),
            "--preset", str(preset), "--settings", "0-shot", "--scorers", "generate", "--limit", "1",
            "--tasks", "object_recognition", "--max-new-tokens", "2", "--no-progress"]  # fmt: skip
    cli = CliRunner()
    assert cli.invoke(app, args).exit_code == 0
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["config"]["preset_sha256"] == get_preset(str(preset)).fingerprint()
    assert cli.invoke(app, args).exit_code == 0  # the same file resumes
    _write(preset, TERSE.replace("Reply with one letter only.", "Give the letter."))
    resumed = cli.invoke(app, args)
    assert resumed.exit_code != 0
    assert "preset" in resumed.output


def test_a_run_made_before_presets_were_fingerprinted_still_resumes(shapes_bench, tmp_path):
    """A manifest without ``preset_sha256`` (a run made before it was recorded) resumes, unchanged;
    the same manifest with another recorded fingerprint is refused."""
    from typer.testing import CliRunner

    from mmctx.cli import app

    preset = _write(tmp_path / "terse.yaml", TERSE)
    args = ["run", str(shapes_bench), "--model", "builtin:tiny-llava", "--out", str(tmp_path / "run"),
            "--preset", str(preset), "--settings", "0-shot", "--scorers", "generate", "--limit", "1",
            "--tasks", "object_recognition", "--max-new-tokens", "2", "--no-progress"]  # fmt: skip
    cli = CliRunner()
    assert cli.invoke(app, args).exit_code == 0
    path = tmp_path / "run" / "manifest.json"
    manifest = json.loads(path.read_text())
    del manifest["config"]["preset_sha256"]
    path.write_text(json.dumps(manifest, indent=2) + "\n")
    resumed = cli.invoke(app, args)
    assert resumed.exit_code == 0, resumed.output
    assert "preset_sha256" not in json.loads(path.read_text())["config"]
    manifest["config"]["preset_sha256"] = "0" * 64
    path.write_text(json.dumps(manifest, indent=2) + "\n")
    refused = cli.invoke(app, args)
    assert refused.exit_code != 0 and "preset_sha256" in refused.output


def test_labels_may_be_numbers_but_not_yaml_booleans(tmp_path):
    numbered = _write(tmp_path / "numbered.yaml", "extends: fewmmbench\nlabels: [1, 2, 3, 4]\n")
    assert get_preset(str(numbered)).labels == ("1", "2", "3", "4")
    booleans = _write(tmp_path / "booleans.yaml", "extends: fewmmbench\nlabels: [Yes, No]\n")
    with pytest.raises(PresetError, match="labels: must be"):
        get_preset(str(booleans))


def test_the_documented_example_preset_loads_and_renders(tmp_path):
    """The YAML example in docs/extending.md's Presets section is a working preset."""
    doc = (Path(__file__).parents[1] / "docs" / "extending.md").read_text(encoding="utf-8")
    section = doc[doc.index("## Presets") :]
    example = section[section.index("```yaml\n") + len("```yaml\n") : section.index("```\n", section.index("```yaml"))]
    preset = get_preset(str(_write(tmp_path / "my-wording.yaml", example)))
    base = get_preset("fewmmbench")
    assert preset.name == "my-wording" and preset.labels[:2] == ("1", "2")
    assert preset.formats["mcqa"].instructions["cot"] == base.formats["mcqa"].instructions["cot"]
    query, demos = _samples("mcqa")
    (tmp_path / "img.bin").write_bytes(IMAGE_BYTES)
    text = build_prompt(query, demos, preset, "letter", seed=0, root=tmp_path).messages[-1].text
    assert text.startswith("Question: What is left of the star?\nChoices:\n1. ")
    assert text.endswith("\nReply with the number of the right choice only.")
