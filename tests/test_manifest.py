"""Every reader of a run's manifest goes through `read_manifest`: one typed record, one error per fault."""

from __future__ import annotations

import json
import re

import pytest

import mmctx
from mmctx.run.manifest import ManifestError, read_manifest


def test_a_run_reads_back_as_its_typed_manifest(shapes_bench, tmp_path):
    result = mmctx.evaluate(shapes_bench, out=tmp_path / "run", grid=["0-shot"], scorers=["ppl"], limit=1)
    manifest = read_manifest(tmp_path / "run")
    assert manifest == result.manifest
    assert manifest.kind == "fewshot" and manifest.model_name == "builtin:shapes-vlm"
    assert manifest.source == shapes_bench.resolve() and manifest.config["settings"] == ["0-shot"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "is not a run folder (no manifest.json)"),
        ('{"model": {"name": "m"}, "config": {', "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"config": {}}', "model.name is missing"),
        ('{"model": {"name": "m"}}', "config is missing"),
    ],
)
def test_a_folder_without_a_readable_manifest_is_named(tmp_path, content, message):
    if content is not None:
        (tmp_path / "manifest.json").write_text(content)
    with pytest.raises(ManifestError, match=re.escape(message)) as err:
        read_manifest(tmp_path)
    assert str(tmp_path) in str(err.value)
    with pytest.raises(ManifestError):
        mmctx.score(tmp_path)


def test_a_context_manifest_names_its_suite(tmp_path):
    (tmp_path / "manifest.json").write_text(
        json.dumps({"kind": "context", "model": {"name": "m"}, "config": {"suite": "s.jsonl", "suite_name": "s"}})
    )
    manifest = read_manifest(tmp_path)
    assert manifest.kind == "context" and str(manifest.source) == "s.jsonl" and manifest.source_name == "s"
