"""The conformance table's rows: every registered tiny family must pass every column.

A family that fails any column is a failing test, not a footnote (`mmctx.tasks.conformance`).
"""

from __future__ import annotations

import pytest

from mmctx.models.tiny import FAMILIES
from mmctx.tasks.conformance import FamilyRow, check_family, conformance_markdown


@pytest.mark.parametrize("family", FAMILIES)
def test_family_passes_every_column(family, tmp_path):
    row = check_family(family, tmp_path)
    assert row.problems == [] and row.passed, row
    assert row.max_images == 9  # the 8-shot prompts: eight demos and the query, one image each
    assert row.path in ("packed", "copied", "per_option")


def test_a_failing_family_is_a_failing_row():
    row = FamilyRow("broken", loads=True, generate=True, ppl_exact=False, ppl_max_diff=0.3, images=True, context=True)
    assert not row.passed
    assert "**no** (3.0e-01)" in conformance_markdown([row])


def test_models_check_writes_the_table_and_refuses_an_unknown_family(tmp_path):
    from typer.testing import CliRunner

    from mmctx.cli import app

    r = CliRunner().invoke(app, ["models", "--check", "--family", "llava", "--out", str(tmp_path / "t.md")])
    assert r.exit_code == 0, r.output
    table = (tmp_path / "t.md").read_text()
    assert "| llava | llava-hf/llava-interleave-qwen-0.5b-hf | llava | yes | yes | yes (" in table
    assert "not checked: runs its own code" in table
    r = CliRunner().invoke(app, ["models", "--check", "--family", "gpt-17"])
    assert r.exit_code == 2 and "unknown tiny family 'gpt-17'" in r.output


def test_models_check_fills_the_table_between_a_documents_markers(tmp_path):
    from mmctx.tasks.conformance import TABLE_BEGIN, TABLE_END, with_table

    doc = tmp_path / "families.md"
    doc.write_text(f"# Families\n\nintro\n\n{TABLE_BEGIN}\nold table\n{TABLE_END}\n\nafter\n")
    text = with_table(doc, "| new |\n")
    assert text == f"# Families\n\nintro\n\n{TABLE_BEGIN}\n| new |\n{TABLE_END}\n\nafter\n"
    assert with_table(tmp_path / "none.md", "| new |\n") == "| new |\n"


def test_a_generation_that_echoes_the_question_or_a_special_token_fails_generate(tiny_models):
    from mmctx.models.hf import HFBackend
    from mmctx.tasks.conformance import _echoes

    backend = HFBackend(str(tiny_models["qwen2_vl"]), device="cpu", dtype="float32")
    question = "What colour is the square?"
    assert not _echoes("red dark blue", question, backend)
    assert _echoes(f"user\n{question}\nassistant\nred", question, backend)  # the prompt decoded with the reply
    assert _echoes("red<|im_end|>", question, backend)
