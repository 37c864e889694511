"""Store keys keep the form existing run folders were written with, so their stores replay: a
few-shot request's key and a context run's key, each recomputed here from the stored form."""

from __future__ import annotations

import hashlib
import json

from mmctx.data.clbench.toy import write_toy_suite
from mmctx.data.disk import load_benchmark
from mmctx.models.base import ModelInfo
from mmctx.prompts.messages import prompt_fingerprint
from mmctx.prompts.presets import get_preset
from mmctx.run.context import ContextConfig, plan_context
from mmctx.run.plan import GenerationLimits, plan_requests
from mmctx.run.settings import parse_settings

MODEL = ModelInfo("m", "r1", "hf", {"dtype": "float32", "max_images": 4})


def _ident(model: ModelInfo) -> str:
    fields = {"model": model.name, "revision": model.revision, "backend": model.backend, "settings": model.settings}
    return json.dumps(fields, sort_keys=True)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_fewshot_keys_are_the_stored_form(shapes_bench):
    bench = load_benchmark(shapes_bench)
    settings = parse_settings("0-shot,4-random-cot")
    plan = plan_requests(bench, settings, ["generate", "ppl"], get_preset("fewmmbench"), 0, GenerationLimits(), limit=1)
    assert {r.scorer for r in plan} == {"generate", "ppl"}
    for r in plan:
        body = {
            "kind": r.scorer,
            "prompt": prompt_fingerprint(r.prompt.messages),
            "options": list(r.prompt.options.texts) if r.scorer == "ppl" else None,
            "max_new_tokens": r.max_new_tokens,
        }
        fingerprint = _sha(json.dumps(body, sort_keys=True))
        assert r.fingerprint == fingerprint
        assert r.key(MODEL) == _sha(f"{_ident(MODEL)}\n{fingerprint}")


def test_context_run_keys_are_the_stored_form(tmp_path):
    suite = write_toy_suite(tmp_path / "toy")
    config = ContextConfig(suite=str(suite.root), suite_name=suite.name, suite_sha256=suite.fingerprint())
    plan = [r for r in plan_context(suite, config) if r.prompt is not None]
    assert plan
    for r in plan:
        body = json.dumps({"prompt": prompt_fingerprint(r.prompt), "max_new_tokens": 1024}, sort_keys=True)
        assert r.key(MODEL, 1024) == _sha(f"{_ident(MODEL)}\n{body}")
