"""Which option-scoring path a model takes: decided once, exact on every prompt it then meets, recorded."""

from __future__ import annotations

import json

import pytest
from fixtures.conversations import few_shot, square_images

from mmctx.models.base import ScoreRequest
from mmctx.models.hf import HFBackend
from mmctx.models.tiny.gemma3 import SLIDING_WINDOW
from mmctx.prompts.messages import Message, TextPart


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    return square_images(tmp_path_factory.mktemp("imgs"))


def test_a_sliding_window_model_is_exact_on_prompts_longer_than_its_window(tiny_models, images):
    """Gemma 3: a short first query must not certify a path that the next, longer prompt breaks."""
    backend = HFBackend(str(tiny_models["gemma3"]), device="cpu", dtype="float32", batch_size=4)
    short = ScoreRequest((Message("user", (TextPart("?"),)),), ("A", "B"))  # probe and all within the window
    long = ScoreRequest(few_shot(images), ("green", "red", "dark blue", "There are 3 circles."))
    first = backend.score([short])[0]
    assert first.error is None and first.prompt_tokens < SLIDING_WINDOW
    # One 4-D mask cannot express a window: the packed path is not even tried.
    check = backend.option_check
    assert "packed" not in check.differences and "packed" not in check.failures and check.path == "copied"
    assert backend.usage()["option_scoring"]["sliding_window_layers"]
    fast, naive = backend.score([long])[0], backend.score_naive(long)
    assert fast.error is None and naive.prompt_tokens > 3 * SLIDING_WINDOW
    assert max(abs(a - b) for a, b in zip(fast.loglikelihoods, naive.loglikelihoods)) < 1e-4


def test_the_chosen_path_is_recorded_with_the_run(tiny_models, shapes_bench, tmp_path):
    from typer.testing import CliRunner

    from mmctx.cli import app

    out = tmp_path / "run"
    r = CliRunner().invoke(
        app,
        ["run", str(shapes_bench), "--model", str(tiny_models["gemma3"]), "--out", str(out), "--settings",
         "0-shot,4-similar", "--scorers", "ppl", "--device", "cpu", "--dtype", "float32", "--limit", "1",
         "--no-progress"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "option_scoring" in r.output and " 0 errors" in r.output.replace("(", " ")
    recorded = json.loads((out / "manifest.json").read_text())["backend_usage"]["option_scoring"]
    assert recorded["path"] == "copied" and "packed" not in recorded["differences"]


def test_processor_settings_changed_from_the_checkpoints_are_recorded_with_the_run(tiny_models, shapes_bench, tmp_path):
    """The adapter's paper settings, when asked for, win over the release's; the manifest says which,
    with both values. Without them the release's own resolution holds and nothing is overridden."""
    from typer.testing import CliRunner

    from mmctx.cli import app

    out = tmp_path / "run"
    r = CliRunner().invoke(
        app,
        ["run", str(shapes_bench), "--model", str(tiny_models["idefics2"]), "--out", str(out), "--settings",
         "0-shot", "--scorers", "generate", "--device", "cpu", "--dtype", "float32", "--limit", "1", "--no-progress",
         "--image-settings", "paper"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    manifest = json.loads((out / "manifest.json").read_text())
    overrides = manifest["backend_usage"]["processor_overrides"]
    assert "image_settings" not in manifest["model"]["settings"]
    checkpoint = json.loads((tiny_models["idefics2"] / "processor_config.json").read_text())["image_processor"]
    assert overrides["size"] == {"checkpoint": checkpoint["size"], "mmctx": {"longest_edge": 448, "shortest_edge": 378}}
    assert "do_image_splitting" not in overrides  # the release does not split either: nothing changed there
    own = tmp_path / "own"
    r = CliRunner().invoke(
        app,
        ["run", str(shapes_bench), "--model", str(tiny_models["idefics2"]), "--out", str(own), "--settings",
         "0-shot", "--scorers", "generate", "--device", "cpu", "--dtype", "float32", "--limit", "1", "--no-progress"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    manifest = json.loads((own / "manifest.json").read_text())
    assert "processor_overrides" not in manifest["backend_usage"]
    assert manifest["model"]["settings"]["image_settings"] == "checkpoint"


def test_which_configs_have_a_window_that_takes_effect():
    from transformers import Gemma3TextConfig, Phi3Config, Qwen2Config

    from mmctx.models.hf import has_sliding_window

    assert has_sliding_window(Gemma3TextConfig(sliding_window=1024))
    assert not has_sliding_window(Phi3Config(sliding_window=262144, max_position_embeddings=131072))  # Phi-4's
    assert has_sliding_window(Phi3Config(sliding_window=2047, max_position_embeddings=4096))
    assert not has_sliding_window(Qwen2Config(sliding_window=4096, use_sliding_window=False))
