"""benchmarks/vs_lmms_eval.py's parts that need no lmms-eval: the per-item slope and startup
intercept, the exported items (the small among the big, the very requests `mmctx run --limit`
plans), and the launcher both tools run under (torch's threads set and reported; the breakdown's
timers add up only calls inside a loop)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "vs_lmms_eval.py"


@pytest.fixture(scope="module")
def vs():
    spec = importlib.util.spec_from_file_location("vs_lmms_eval", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while being defined
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def test_slope_and_intercept_recover_per_item_and_startup(vs):
    side = vs.Side("x", "mmctx", 1)
    items = {"small": 90, "big": 390}
    for startup, per_item in ((4.0, 0.025), (5.0, 0.030), (4.5, 0.020)):
        for clock in vs.CLOCKS:
            for size, n in items.items():
                side.seconds[clock][size].append(startup + n * per_item)
    assert side.per_item("wall", items) == pytest.approx([0.025, 0.030, 0.020])
    assert side.startup("cpu", items) == pytest.approx([4.0, 5.0, 4.5])
    assert vs.spread([0.025, 0.030, 0.020], 1000) == "25.0 (20.0–30.0)"


def test_exported_items_are_the_planned_requests(vs, tmp_path):
    from mmctx.data.shapes import build_benchmark
    from mmctx.prompts.presets import get_preset
    from mmctx.run.plan import GenerationLimits, plan_requests
    from mmctx.run.settings import Setting

    bench = build_benchmark(tmp_path / "bench", queries_per_task=2, seed=0)
    task_dir, ids = vs.export_items(bench, tmp_path, 16, {"small": 1, "big": None})
    assert set(ids["small"]) < set(ids["big"])
    for size, limit in (("small", 1), ("big", None)):
        plan = plan_requests(
            bench, [Setting.parse("0-shot")], ["generate"], get_preset("fewmmbench"), 0, GenerationLimits(), limit
        )
        assert ids[size] == [r.id for r in plan]
        rows = [json.loads(line) for line in (task_dir / f"items_{size}.jsonl").read_text().splitlines()]
        assert [r["id"] for r in rows] == ids[size]
        for row, req in zip(rows, plan):
            images = [str(p.path) for m in req.prompt.messages for p in m.content if hasattr(p, "path")]
            assert row["images"] == images and all(Path(p).is_file() for p in images)
        yaml = (task_dir / f"{vs.TASK_PREFIX}_{size}.yaml").read_text()
        assert f"task: {vs.TASK_PREFIX}_{size}" in yaml and "max_new_tokens: 16" in yaml


def test_launcher_sets_threads_and_times_calls_inside_the_loop(vs, tmp_path):
    (tmp_path / "toy.py").write_text(
        "def step():\n    return 1\n\n\ndef loop():\n    return sum(step() for _ in range(3))\n"
    )
    (tmp_path / "toy_main.py").write_text(
        "import toy\n\ntoy.step()\nprint('loop', toy.loop(), toy.loop())\n"  # the first step() is outside a loop
    )
    out = tmp_path / "spent.json"
    env = dict(
        os.environ,
        PYTHONPATH=str(tmp_path),
        BENCH_BREAKDOWN=str(out),
        BENCH_WRAP=json.dumps([["toy:step", "step", False], ["toy:loop", "loop", True]]),
    )
    r = subprocess.run(
        [sys.executable, "-c", vs.LAUNCHER, "toy_main", "1"], env=env, capture_output=True, text=True, check=True
    )
    assert "loop 3 3" in r.stdout
    assert r.stderr.strip().splitlines()[-1] == "BENCH torch_threads=1"
    spent = json.loads(out.read_text())
    assert spent["loop"][1] == 2 and spent["step"][1] == 6
