"""Model-side bad input through `mmctx run`: refused before any request, naming the model and the cause."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from mmctx.cli import app


def _run(bench, model, out, *extra):
    args = ["run", str(bench), "--model", str(model), "--out", str(out), "--settings", "0-shot,4-similar",
            "--scorers", "generate", "--device", "cpu", "--limit", "1", "--no-progress", *extra]  # fmt: skip
    return CliRunner().invoke(app, args)


def _nothing_sent(out) -> bool:
    return not (out / "responses.sqlite").exists() and not (out / "requests.jsonl").exists()


def test_a_checkpoint_without_a_chat_template(shapes_bench, tmp_path):
    from mmctx.models.tiny import build_tiny_vlm

    path = build_tiny_vlm(tmp_path / "nochat", family="llava")
    for template in path.glob("chat_template*"):
        template.unlink()
    for config_file in path.glob("*.json"):  # processor and tokenizer configs may each carry one
        config = json.loads(config_file.read_text())
        if isinstance(config, dict) and config.pop("chat_template", None) is not None:
            config_file.write_text(json.dumps(config))
    r = _run(shapes_bench, path, tmp_path / "run")
    assert r.exit_code == 2 and "has no chat template" in r.output and str(path) in r.output.replace("\n", "")
    assert _nothing_sent(tmp_path / "run")


def test_more_images_than_the_family_takes(shapes_bench, tiny_models, tmp_path):
    from mmctx.models.adapters import ADAPTERS, Adapter, register

    two = register(Adapter(family="two-images-at-most", max_images=2))  # an adapter is data: a family's cap
    try:
        r = _run(shapes_bench, tiny_models["llava"], tmp_path / "run", "--adapter", "two-images-at-most")
    finally:
        ADAPTERS.remove(two)
    assert r.exit_code == 2, r.output
    assert "takes at most 2 images per prompt; this plan needs 5" in r.output
    assert _nothing_sent(tmp_path / "run")


def test_an_unknown_adapter_name(shapes_bench, tiny_models, tmp_path):
    r = _run(shapes_bench, tiny_models["llava"], tmp_path / "run", "--adapter", "gpt-17")
    assert r.exit_code == 2 and "unknown adapter 'gpt-17'" in r.output and "llava" in r.output
    assert _nothing_sent(tmp_path / "run")


@pytest.mark.parametrize("kind", ["text-only", "encoder"])
def test_a_config_type_no_adapter_or_auto_class_loads(shapes_bench, tmp_path, kind):
    from transformers import BertConfig, BertModel, LlamaConfig, LlamaForCausalLM

    path = tmp_path / kind
    if kind == "encoder":
        config = BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
        BertModel(config).save_pretrained(path)
    else:
        LlamaForCausalLM(LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                     num_attention_heads=2, vocab_size=64)).save_pretrained(path)  # fmt: skip
    r = _run(shapes_bench, path, tmp_path / "run")
    model_type = "bert" if kind == "encoder" else "llama"
    assert r.exit_code == 2, r.output
    assert f"config type '{model_type}' is not an image-text-to-text model" in r.output.replace("\n", "")
    assert _nothing_sent(tmp_path / "run")
