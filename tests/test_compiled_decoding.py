"""`--compile`: single prompts decoded greedily through a compiled step over a static cache give
`generate()`'s tokens, are checked against it, and hand back to it for good on any difference or
failure; calls it cannot serve go to `generate()` untouched."""

from __future__ import annotations

import json
import sqlite3

import pytest
import torch
from fixtures.conversations import few_shot, interleaved, square_images
from transformers import GenerationConfig
from typer.testing import CliRunner

from mmctx.cli import app
from mmctx.models.base import GenerateRequest
from mmctx.models.decode import CHECK_FIRST, CompiledGreedy, cache_length, plain_greedy
from mmctx.models.hf import HFBackend
from mmctx.models.tiny import build_tiny_vlm
from mmctx.prompts.messages import Message, TextPart

TOKENS = 12


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    return square_images(tmp_path_factory.mktemp("imgs"))


def requests(images, n: int = 5) -> list[GenerateRequest]:
    """Prompts of different lengths and image counts (a tiny random model answers some of them alike)."""
    prompts = [few_shot(images), interleaved(images)]
    for i in range(n - 2):
        question = Message("user", (images[i % 3], TextPart("Describe it. " * (i + 1))))
        prompts.append((*few_shot(images)[:-1], question))
    return [GenerateRequest(p, TOKENS) for p in prompts[:n]]


@pytest.fixture(scope="module", params=["llava", "idefics3"])
def family(request):
    return request.param


def test_compiled_generations_equal_generate_and_the_first_are_checked(tiny_models, images, family):
    path = str(tiny_models[family])
    eager = HFBackend(path, device="cpu", dtype="float32", batch_size=1)
    compiled = HFBackend(path, device="cpu", dtype="float32", batch_size=1, compile=True)
    reqs = requests(images)
    expected = eager.generate(reqs)
    assert compiled.generate(reqs) == expected
    assert len({g.text for g in expected}) >= 2  # not one answer for every prompt
    usage = compiled.usage()["compiled_decoding"]
    assert usage == {"on": True, "off_reason": None, "decoded": 5, "checked": CHECK_FIRST, "cache_lengths": [256]}
    assert "compiled_decoding" not in eager.usage()
    # Like --threads, not part of the model's identity: stored answers stay valid either way.
    assert compiled.info == eager.info


def test_end_of_sequence_stops_the_compiled_decoder_where_it_stops_generate(tiny_models, images):
    backend = HFBackend(str(tiny_models["llava"]), device="cpu", dtype="float32", batch_size=1)
    inputs = backend._process(*[[x] for x in backend._rendered(few_shot(images))])
    model, n = backend.model, inputs["input_ids"].shape[1]
    with torch.inference_mode():
        free = model.generate(**inputs, max_new_tokens=TOKENS, do_sample=False)[0, n:].tolist()
        eos = free[3]  # a token the model really produces, made its end of sequence
        stopped = model.generate(**inputs, max_new_tokens=TOKENS, do_sample=False, eos_token_id=eos)[0, n:].tolist()
        decoded = CompiledGreedy(model, {eos}).decode(inputs, TOKENS)
    assert decoded == stopped == free[: free.index(eos) + 1] and len(decoded) < TOKENS


def test_two_models_of_one_architecture_each_get_their_own_compiled_graphs(tmp_path, images):
    """The module guards are skipped for speed, so a graph compiled for one model would run a
    second model of the same shapes with the first one's constants: here the same weights with
    another norm epsilon, a module attribute the graph bakes in."""
    backends, expected = [], []
    for i, eps in enumerate((1e-6, 0.5)):
        path = build_tiny_vlm(tmp_path / f"m{i}", family="llava", seed=0)
        config = json.loads((path / "config.json").read_text())
        config["text_config"]["rms_norm_eps"] = eps
        (path / "config.json").write_text(json.dumps(config))
        expected.append(HFBackend(str(path), device="cpu", dtype="float32", batch_size=1).generate(requests(images, 4)))
        backends.append(HFBackend(str(path), device="cpu", dtype="float32", batch_size=1, compile=True))
    assert expected[0] != expected[1]
    for _ in range(2):  # in turns, past the checked first prompts
        for backend, want in zip(backends, expected):
            assert backend.generate(requests(images, 4)) == want
    assert [(b.compiled.decoded, b.compiled.off) for b in backends] == [(8, None), (8, None)]


@pytest.fixture
def llava_pair(tiny_models):
    path = str(tiny_models["llava"])
    return (
        HFBackend(path, device="cpu", dtype="float32", batch_size=1),
        HFBackend(path, device="cpu", dtype="float32", batch_size=1, compile=True),
    )


def test_a_difference_from_generate_turns_it_off_and_generate_answers(llava_pair, images):
    eager, compiled = llava_pair
    compiled.compiled._step = lambda token, cache: torch.zeros_like(token)  # a decoder gone wrong
    reqs = requests(images, 3)
    assert compiled.generate(reqs) == eager.generate(reqs)
    usage = compiled.usage()["compiled_decoding"]
    assert usage["on"] is False and "where generate() gave" in usage["off_reason"]
    assert usage["decoded"] == 1 and usage["checked"] == 1  # off after the first check: never asked again


def test_a_failure_while_compiling_turns_it_off_and_generate_answers(llava_pair, images):
    eager, compiled = llava_pair

    def broken(token, cache):
        raise RuntimeError("inductor: no C++ compiler")

    compiled.compiled._step = broken
    reqs = requests(images, 2)
    assert compiled.generate(reqs) == eager.generate(reqs)
    usage = compiled.usage()["compiled_decoding"]
    assert usage["on"] is False and usage["decoded"] == 0
    assert usage["off_reason"] == "compiled decoding failed: RuntimeError: inductor: no C++ compiler"


def test_batches_and_stop_strings_go_to_generate(tiny_models, images):
    path = str(tiny_models["llava"])
    eager = HFBackend(path, device="cpu", dtype="float32", batch_size=2)
    compiled = HFBackend(path, device="cpu", dtype="float32", batch_size=2, compile=True)
    reqs = requests(images, 2)
    assert compiled.generate(reqs) == eager.generate(reqs)
    text = eager.generate(reqs[:1])[0].text
    stop = next(text[: i + 1] for i in range(len(text)) if text[: i + 1].strip())
    stopped = [GenerateRequest(reqs[0].messages, TOKENS, stop=(stop,))]
    compiled.batch_size = 1
    assert compiled.generate(stopped) == eager.generate(stopped)
    assert compiled.compiled.decoded == 0 and compiled.compiled.off is None


@pytest.mark.parametrize(
    ("settings", "reason"),
    [
        ({}, None),
        ({"repetition_penalty": 1.0, "min_length": 0, "num_beams": 1, "suppress_tokens": []}, None),
        ({"repetition_penalty": 1.3}, "sets repetition_penalty=1.3"),
        ({"forced_bos_token_id": 0}, "sets forced_bos_token_id=0"),
        ({"no_repeat_ngram_size": 3}, "sets no_repeat_ngram_size=3"),
        ({"suppress_tokens": [5]}, "sets suppress_tokens=[5]"),
    ],
)
def test_only_a_plain_greedy_generation_config_is_decoded_compiled(settings, reason):
    found = plain_greedy(GenerationConfig(**settings))
    assert found == (None if reason is None else f"the checkpoint's generation config {reason}")


def test_a_checkpoint_whose_config_changes_greedy_decoding_is_never_compiled(tiny_models, images):
    path = str(tiny_models["llava"])
    eager = HFBackend(path, device="cpu", dtype="float32", batch_size=1)
    eager.model.generation_config.repetition_penalty = 1.5
    compiled = CompiledGreedy(eager.model, eager._eos_ids)
    assert compiled.off == "the checkpoint's generation config sets repetition_penalty=1.5"


def test_cache_lengths_are_powers_of_two_that_hold_prompt_and_answer():
    assert cache_length(10, 16) == 256
    assert cache_length(240, 16) == 256 and cache_length(241, 16) == 512
    assert cache_length(3000, 512) == 4096


def test_mmctx_run_compile_records_it_and_stores_the_same_answers(shapes_bench, tmp_path):
    runner = CliRunner()
    stored = {}
    for flags in ((), ("--compile",)):
        out = tmp_path / ("compiled" if flags else "eager")
        args = ["run", str(shapes_bench), "--model", "builtin:tiny-llava", "--out", str(out), "--settings", "0-shot",
                "--scorers", "generate", "--batch-size", "1", "--limit", "1", "--no-progress", *flags]  # fmt: skip
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        with sqlite3.connect(out / "responses.sqlite") as db:
            stored[flags] = dict(db.execute("SELECT request_id, payload FROM responses"))
        usage = json.loads((out / "manifest.json").read_text())["backend_usage"]
        if flags:
            n = len(stored[flags])
            assert usage["compiled_decoding"] == {
                "on": True, "off_reason": None, "decoded": n, "checked": min(n, CHECK_FIRST), "cache_lengths": [256],
            }  # fmt: skip
        else:
            assert "compiled_decoding" not in usage
    assert stored[()] == stored[("--compile",)] and len(stored[()]) >= 5
