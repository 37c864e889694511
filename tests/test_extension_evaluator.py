"""A new evaluator with a new answer type is one file (`tests/plugins/colour_evaluator.py`), and it
runs through the real CLBench-V path: suite loading and validation, the prompt's format
instruction, a model over local HTTP, extraction, format repair, scoring and the tables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("openai")

from PIL import Image
from typer.testing import CliRunner

import tests.plugins.colour_evaluator as plugin
from mmctx.answers import answer_type_names
from mmctx.cli import app
from mmctx.data.clbench.loader import SuiteFormatError, load_clbench
from mmctx.prompts.context import TaskFormat, required_format
from mmctx.scoring.evaluators import evaluator_names
from mmctx.scoring.levels import aggregate
from tests.fixtures.chat_server import ChatServer, prompt_text

INSTRUCTION = "End with exactly one final line: Colour: <name>"
runner = CliRunner()


def _record(rid: str, gold: object, swatch: str = "swatch.png") -> dict:
    return {
        "id": rid,
        "subset": "Colour Swatches",
        "context": [{"type": "text", "text": f"Swatch {rid} of the palette."}, {"type": "image", "path": swatch}],
        "question": f"What colour is swatch {rid}?",
        "gold": gold,
        "answer_type": "colour",
        "evaluator": "colour",
        "level": "L0",
    }


def _suite(folder: Path, records: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), "red").save(folder / "swatch.png")
    (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


def _model(body: dict) -> str:
    """Right on c1 and c2, wrong on c3, no final line on c4 until asked to repair it."""
    text = prompt_text(body)
    if text.startswith("Reply with OK"):
        return "OK"
    if "could not be parsed for evaluation" in text:
        return "Colour: Blue"
    replies = {
        "c1": "It looks warm.\nColour: Red",
        "c2": "Colour: green.",
        "c3": "Colour: black",
        "c4": "Blue, I think.",
    }
    return next(reply for rid, reply in replies.items() if f"swatch {rid}?" in text)


def test_the_plugin_is_one_short_file_and_registers_its_type_and_evaluator():
    lines = Path(plugin.__file__).read_text().splitlines()
    assert len(lines) <= 40, len(lines)
    assert "colour" in answer_type_names() and "colour" in evaluator_names()
    assert required_format(TaskFormat("plain", "", "colours"), "colour") == INSTRUCTION


def test_a_colour_suite_runs_end_to_end_and_its_metric_reaches_the_tables(tmp_path):
    suite = _suite(tmp_path / "suite", [_record("c1", "red"), _record("c2", "Green"), _record("c3", "white"),
                                        _record("c4", "blue")])  # fmt: skip
    assert load_clbench(suite).validate() == []
    run = tmp_path / "run"
    with ChatServer(answer=_model) as server:
        result = runner.invoke(app, ["clbench", "run", str(suite), "--model", f"openai:mock-vlm@{server.base_url}",
                                     "--out", str(run), "--repair", "--no-progress"])  # fmt: skip
        assert result.exit_code == 0, result.output
        asked = [prompt_text(r.body) for r in server.records if r.path.endswith("/chat/completions")]
    firsts = [t for t in asked if "What colour is swatch" in t and "could not be parsed" not in t]
    assert len(firsts) == 4 and all(t.rstrip().endswith(INSTRUCTION) for t in firsts)
    repairs = [t for t in asked if "could not be parsed for evaluation" in t]
    assert len(repairs) == 1 and f"Required format: {INSTRUCTION}" in repairs[0]
    rows = {r["id"]: r for r in map(json.loads, (run / "results.jsonl").read_text().splitlines())}
    assert {rid: (r["outcome"], r["score"], r["prediction"]) for rid, r in rows.items()} == {
        "c1": ("scored", 1.0, "red"), "c2": ("scored", 1.0, "green"),
        "c3": ("scored", 0.0, "black"), "c4": ("scored", 1.0, "blue"),
    }  # fmt: skip
    assert rows["c1"]["extracted_by"] == "colour_line" and rows["c4"]["repaired"] is True
    scores = aggregate(rows.values())
    assert scores.sub_scores == {"Colour Swatches": {"accuracy": (0.75, 4)}}
    assert "Colour Swatches accuracy 0.7500 (n=4)" in result.output


def test_a_bad_colour_gold_is_refused_naming_the_record_and_field(tmp_path):
    suite = _suite(tmp_path / "bad", [_record("c1", "red"), _record("c9", "mauve")])
    result = runner.invoke(app, ["clbench", "validate", str(suite)])
    assert result.exit_code == 1
    assert "queries[c9].gold: colour gold must be one of" in result.output and "'mauve'" in result.output
    assert "queries[c1]" not in result.output


def test_an_unregistered_answer_type_is_still_refused_by_the_loader(tmp_path):
    suite = _suite(tmp_path / "typo", [{**_record("c1", "red"), "answer_type": "color"}])
    with pytest.raises(SuiteFormatError, match=r"\[c1\]: field 'answer_type' must be one of \[.*'colour'"):
        load_clbench(suite)
