"""benchmarks/gpu_check.py's parts that need no GPU and no model: the requests it carries to a GPU
machine are the planner's, image for image; a missing image is named; without CUDA it exits 0
and says so in its summary."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py"


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while being defined
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def test_prepared_requests_are_the_planners(gpu_check, tmp_path):
    from mmctx.data.disk import load_benchmark
    from mmctx.prompts.presets import get_preset
    from mmctx.run.plan import GenerationLimits, plan_requests
    from mmctx.run.settings import Setting

    folder = gpu_check.prepare(tmp_path / "req", n_generate=20, n_score=6, max_new_tokens=8)
    moved = tmp_path / "moved"  # carried to another machine: paths are relative to the folder
    shutil.move(folder, moved)
    loaded = gpu_check.load_requests(moved)
    assert len(loaded.generate) == 20 and len(loaded.score) == 6

    plan = plan_requests(
        load_benchmark(moved / "bench"), [Setting.parse(gpu_check.SETTING)], ["generate", "ppl"],
        get_preset("fewmmbench"), 0, GenerationLimits(8, 8),
    )  # fmt: skip
    by_id = {r.id: r for r in plan}
    records = json.loads((moved / gpu_check.REQUESTS_FILE).read_text())
    for record, request in zip(records["score"], loaded.score):
        planned = by_id[record["id"]]
        assert request.options == planned.prompt.options.texts
        assert request.messages == planned.prompt.messages  # text, roles and images (path + sha256) in order
    for record, request in zip(records["generate"], loaded.generate):
        assert request.messages == by_id[record["id"]].prompt.messages
        assert request.max_new_tokens == 8
    assert len({r["id"].split("/")[3] for r in records["generate"]}) > 3  # spread over tasks, not the first one's


def test_a_missing_image_is_named(gpu_check, tmp_path):
    folder = gpu_check.prepare(tmp_path / "req", n_generate=2, n_score=2, max_new_tokens=8)
    record = json.loads((folder / gpu_check.REQUESTS_FILE).read_text())["score"][0]
    image = next(p["image"] for m in record["messages"] for p in m["content"] if "image" in p)
    (folder / image).unlink()
    # the first request that shows it is named (a generate request may share the query's image)
    with pytest.raises(SystemExit, match=rf"requests.json: request \S+: image \S+{Path(image).name} is missing"):
        gpu_check.load_requests(folder)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without CUDA")
def test_without_cuda_it_exits_0_and_says_why(gpu_check, tmp_path, capsys):
    assert gpu_check.main(["--out", str(tmp_path / "summary.json")]) == 0
    assert "no CUDA device" in capsys.readouterr().out
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "skipped" and "no CUDA device" in summary["reason"]
