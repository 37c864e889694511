"""Backends register themselves: one-file plugins (decorator or entry point), each backend taking its own options."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from plugins.echo_backend import EchoBackend, EchoOptions

from mmctx.models import BackendOptionError, GenerateRequest, load_backend, options_for, sized_by_plan
from mmctx.models.hf import HFOptions
from mmctx.models.openai import OpenAIOptions
from mmctx.models.registry import backend, backend_entry, is_remote, registered
from mmctx.models.retry import RetryPolicy
from mmctx.models.vllm import VLLMOptions
from mmctx.prompts.messages import Message, TextPart
from mmctx.tasks.fewshot import evaluate

PLUGINS = Path(__file__).parent / "plugins"
UNSET = dict(device="auto", dtype="auto", batch_size=32, revision=None, trust_remote_code=False, quantization=None)


def _prompt(text: str) -> tuple[Message, ...]:
    return (Message("user", (TextPart(text),)),)


# ---- a third-party backend, end to end ----------------------------------------------------------


def test_a_backend_in_one_file_runs_a_real_evaluation(shapes_bench, tmp_path):
    run = tmp_path / "run"
    out = evaluate(
        shapes_bench, "echo:x", run, settings="0-shot,4-random", scorers="generate,ppl", limit=2,
        backend_options={"letter": "B"}, show_progress=False,
    )  # fmt: skip
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["model"] == {"name": "echo:x", "revision": "1", "backend": "echo", "settings": {"letter": "B"}}
    generated = [r for r in out.results if r.scorer == "generate"]
    scored = [r for r in out.results if r.scorer == "ppl"]
    assert generated and scored and out.stats.errors == 0
    # Every answer is "B": the second shown option, right exactly where the gold is there.
    assert all(r.response == "B" and r.pred == 1 for r in generated)
    assert {r.outcome for r in generated} == {"correct", "wrong"}
    assert all((r.outcome == "correct") == (r.gold == 1) for r in generated)
    # An option scores minus its length: the shortest shown option is the prediction.
    for r in scored:
        assert all(ll < 0 and ll == int(ll) for ll in r.loglikelihoods)
        assert r.pred == r.loglikelihoods.index(max(r.loglikelihoods))
        assert (r.outcome == "correct") == (r.pred == r.gold)
    assert out.cells and {c.scorer for c in out.cells} == {"generate", "ppl"}


def test_a_package_adds_a_backend_through_an_entry_point(tmp_path):
    """A real installed distribution (a .dist-info with entry_points.txt on sys.path), in a fresh interpreter."""
    dist = tmp_path / "site" / "mmctx_echo-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mmctx-echo\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[mmctx.backends]\necho = echo_backend:EchoBackend\nplain = json:dumps\n")
    script = """
import json, sys
from mmctx.models import GenerateRequest, load_backend
from mmctx.models.registry import registered
before = "echo_backend" in sys.modules
b = load_backend("echo:x", letter="C")
try:
    load_backend("plain:x")
    plain = "loaded"
except TypeError as exc:
    plain = str(exc)
print(json.dumps({"before": before, "registered": registered(), "module": type(b).__module__,
                  "text": b.generate([GenerateRequest((), 1)])[0].text, "name": b.info.name, "plain": plain}))
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(PLUGINS)])}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["before"] is False  # nothing imports the plugin until its name is asked for
    assert {"echo", "plain", "hf", "openai", "vllm"} <= set(seen["registered"])
    assert (seen["module"], seen["text"], seen["name"]) == ("echo_backend", "C", "echo:x")
    assert "plain = 'json:dumps'" in seen["plain"] and "@mmctx.models.backend" in seen["plain"]


# ---- which backend a spec names -----------------------------------------------------------------


def test_the_spec_prefix_picks_the_backend_and_anything_else_is_hf():
    names = {
        spec: backend_entry(spec).name
        for spec in ("openai:gpt-4o", "vllm:builtin:tiny-llava", "echo:x", "builtin:shapes-vlm", "Qwen/Qwen2-VL-2B",
                     "runs/model", "nobody:thing")
    }  # fmt: skip
    assert names == {
        "openai:gpt-4o": "openai", "vllm:builtin:tiny-llava": "vllm", "echo:x": "echo", "builtin:shapes-vlm": "hf",
        "Qwen/Qwen2-VL-2B": "hf", "runs/model": "hf", "nobody:thing": "hf",
    }  # fmt: skip
    assert backend_entry("echo:x").target is EchoBackend
    assert [sized_by_plan(s) for s in ("vllm:m", "openai:m", "m", "echo:x")] == [True, False, False, False]
    assert [is_remote(s) for s in ("vllm:m", "openai:m", "m", "echo:x")] == [False, True, False, False]
    assert {"hf", "openai", "vllm", "echo"} <= set(registered())


def test_the_registry_refuses_what_would_make_a_spec_ambiguous():
    @dataclass(frozen=True)
    class Nothing:
        pass

    with pytest.raises(ValueError, match="'openai' is mmctx's own"):
        backend("openai", options=Nothing)(type("Impostor", (), {}))
    with pytest.raises(ValueError, match="'echo' is already registered by .*EchoBackend"):
        backend("echo", options=Nothing)(type("Other", (), {}))

    @dataclass
    class Mutable:
        pass

    with pytest.raises(TypeError, match="frozen dataclass"):
        backend("mutable", options=Mutable)
    with pytest.raises(TypeError, match="the echo backend takes EchoOptions, not HFOptions"):
        load_backend("echo:x", HFOptions())
    with pytest.raises(TypeError, match="either an options record or keyword values"):
        load_backend("echo:x", EchoOptions(), letter="B")


# ---- options ----------------------------------------------------------------------------------


def test_each_backend_gets_only_its_own_options_from_flat_values():
    url = "http://127.0.0.1:1/v1"
    assert options_for("openai:m", {**UNSET, "base_url": url, "score_mode": None}) == OpenAIOptions(base_url=url)
    assert options_for("m", {**UNSET, "device": "cpu", "quantization": "4bit"}) == HFOptions(
        device="cpu", batch_size=32, quantization="4bit"
    )
    assert options_for("vllm:m", {**UNSET, "device": "cuda", "dtype": "float16", "max_images": 5}) == VLLMOptions(
        dtype="float16", max_images=5
    )
    assert options_for("echo:x", {**UNSET, "letter": "D"}) == EchoOptions("D")
    assert options_for("echo:x", {}) == EchoOptions()


@pytest.mark.parametrize(
    ("spec", "values", "message"),
    [
        ("openai:m", {"quantization": "4bit"}, r"openai:m: the openai backend does not take quantization='4bit'"),
        ("openai:m", {"trust_remote_code": True}, r"does not take trust_remote_code=True; the server runs"),
        ("vllm:m", {"quantization": "8bit"}, r"vllm backend does not take quantization='8bit'; .*engine_kwargs"),
        ("openai:m", {"threads": 2}, r"does not take threads=2; the server runs the model.*--max-concurrency"),
        ("vllm:m", {"threads": 2}, r"vllm backend does not take threads=2; --threads is the HF backend's"),
        ("openai:m", {"compile": True}, r"openai backend does not take compile=True; the server runs the model"),
        ("vllm:m", {"compile": True}, r"does not take compile=True; --compile is the HF backend's; vLLM compiles"),
        ("m", {"base_url": "http://h:1/v1"}, r"the hf backend does not take base_url='http://h:1/v1'"),
        ("echo:x", {"dtype": "float16", "adapter": "llava"}, r"echo .*dtype='float16', adapter='llava'.*: letter$"),
    ],
)
def test_a_value_that_was_set_and_is_not_the_backends_is_refused_by_name(spec, values, message):
    with pytest.raises(BackendOptionError, match=message):
        options_for(spec, values)


def test_a_refused_option_fails_a_run_before_any_model_loads(shapes_bench, tmp_path):
    loaded = []
    with pytest.raises(BackendOptionError, match="quantization='4bit'"):
        evaluate(shapes_bench, "openai:m", tmp_path / "run", quantization="4bit", show_progress=False,
                 backend_factory=lambda *a, **k: loaded.append(a))  # fmt: skip
    assert not loaded and not (tmp_path / "run").exists()


def test_the_cli_names_the_option_and_the_backend(shapes_bench, tmp_path):
    from typer.testing import CliRunner

    from mmctx.cli import app

    result = CliRunner().invoke(
        app, ["run", str(shapes_bench), "--model", "openai:m", "--out", str(tmp_path / "run"), "--quantization", "4bit"]
    )
    assert result.exit_code == 2
    assert "openai backend does not take quantization='4bit'" in " ".join(result.output.split())


def test_options_records_pickle_for_distributed_workers():
    records = [
        options_for("openai:m", {"retry": RetryPolicy(max_attempts=2), "extra_body": {"top_k": 5}}),
        options_for("m", {"device": "cpu", "adapter": "llava"}),
        options_for("vllm:m", {"engine_kwargs": {"gpu_memory_utilization": 0.5}}),
        EchoOptions("E"),
    ]
    assert [pickle.loads(pickle.dumps(r)) for r in records] == records


def test_a_backend_built_from_flat_values_and_from_options_is_the_same():
    by_values = load_backend("echo:x", letter="F", device="auto", batch_size=16)
    by_options = load_backend("echo:x", EchoOptions("F"))
    assert by_values.info == by_options.info
    assert [g.text for g in by_values.generate([GenerateRequest(_prompt("?"), 1)] * 2)] == ["F", "F"]
