"""`mmctx run --ray`: two CPU workers of a local Ray instance write one run folder equal to a single-process run."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from mmctx.data.disk import load_benchmark
from mmctx.prompts.messages import ImagePart, Message, file_sha256
from mmctx.prompts.presets import get_preset
from mmctx.run.distributed import ImagesUnavailable, _placement, execute_distributed, localize
from mmctx.run.files import MANIFEST, REQUESTS, RESULTS, STORE
from mmctx.run.plan import GenerationLimits, plan_requests
from mmctx.run.runner import RunConfig, RunError, _comparable
from mmctx.run.settings import parse_scorers, parse_settings
from mmctx.scoring.results import rescore
from mmctx.tasks.fewshot import evaluate

MODEL = "builtin:tiny-idefics3"
LIMITS = GenerationLimits(max_new_tokens=6, cot_max_new_tokens=12)
RUN = dict(settings="0-shot,4-random", scorers="generate,ppl", limit=1, batch_size=2)
BACKEND = dict(device="auto", dtype="auto", batch_size=RUN["batch_size"], revision=None, trust_remote_code=False)


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray instance with two CPUs for the module; `execute_distributed` joins it and leaves it up."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    from mmctx.data.shapes import build_benchmark

    out = tmp_path_factory.mktemp("shapes-ray")
    build_benchmark(out, queries_per_task=1, seed=0)
    return out


def _plan_and_config(bench: Path):
    """What `evaluate` plans and records for ``RUN`` (its steps before the model is loaded)."""
    b = load_benchmark(bench)
    settings, scorers = parse_settings(RUN["settings"]), parse_scorers(RUN["scorers"])
    config = RunConfig(
        benchmark=str(Path(bench).resolve()),
        benchmark_name=b.name,
        benchmark_sha256=b.fingerprint(),
        settings=[s.name for s in settings],
        scorers=scorers,
        preset="fewmmbench",
        preset_sha256=get_preset("fewmmbench").fingerprint(),
        seed=0,
        limits=LIMITS,
        limit=RUN["limit"],
        batch_size=RUN["batch_size"],
    )
    plan = plan_requests(b, settings, scorers, get_preset("fewmmbench"), 0, LIMITS, limit=RUN["limit"])
    return plan, config


def _on_ray(bench: Path, run_dir: Path):
    plan, config = _plan_and_config(bench)
    return execute_distributed(
        plan, MODEL, BACKEND, run_dir, config=config, workers=2, batch_size=RUN["batch_size"], show_progress=False
    )


def _rows(run_dir: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(run_dir / STORE) as db:
        return db.execute("SELECT key, request_id FROM responses").fetchall()


FLOATS = ("loglikelihoods", "probs")


def _assert_same_results(a: Path, b: Path) -> None:
    """Equal ``results.jsonl``, with log-likelihoods and probabilities equal to 1e-5.

    The HF backend scores its first ppl request by a second, equivalent path, so each
    replica's first one may differ from a single process's in the last float bits.
    """
    rows_a, rows_b = ([json.loads(line) for line in (d / RESULTS).read_text().splitlines()] for d in (a, b))
    assert [{k: v for k, v in r.items() if k not in FLOATS} for r in rows_a] == [
        {k: v for k, v in r.items() if k not in FLOATS} for r in rows_b
    ]
    for ra, rb in zip(rows_a, rows_b):
        for k in FLOATS:
            assert ra[k] == pytest.approx(rb[k], rel=1e-5, abs=1e-6), ra["request_id"]


def _manifest(run_dir: Path) -> dict:
    return _comparable(json.loads((run_dir / MANIFEST).read_text()))


def test_ray_run_equals_a_single_process_run_and_resumes(local_ray, bench, tmp_path):
    single = evaluate(bench, MODEL, tmp_path / "single", limits=LIMITS, show_progress=False, **RUN)
    run = tmp_path / "ray"
    stats = _on_ray(bench, run)
    rescore(run)
    planned = single.stats.planned
    assert stats.planned == planned and stats.done == planned and stats.cached == 0
    # Same manifest, same plan (byte for byte), same results.
    assert _manifest(run) == _manifest(tmp_path / "single")
    assert (run / REQUESTS).read_text() == (tmp_path / "single" / REQUESTS).read_text()
    _assert_same_results(run, tmp_path / "single")
    # Nothing lost, nothing duplicated.
    rows = _rows(run)
    requests = [json.loads(line) for line in (run / REQUESTS).read_text().splitlines()]
    assert len(rows) == planned and sorted(rows) == sorted((r["key"], r["id"]) for r in requests)

    # Run again: everything is cached.
    again = _on_ray(bench, run)
    assert again.cached == planned and again.done == 0 and len(_rows(run)) == planned

    # A killed run lost its batches in flight: resumed on Ray, it asks for exactly those. Resuming
    # a single-process run's folder also shows both kinds of run store the same keys.
    single_dir = tmp_path / "single"
    with sqlite3.connect(single_dir / STORE) as db:
        lost = db.execute("DELETE FROM responses WHERE rowid % 3 = 0").rowcount
    resumed = _on_ray(bench, single_dir)
    assert lost and resumed.done == lost and resumed.cached == planned - lost
    rescore(single_dir)
    assert len(_rows(single_dir)) == planned and sorted(_rows(single_dir)) == sorted(rows)
    _assert_same_results(single_dir, run)


def test_images_a_worker_cannot_read_come_from_shipped_bytes(bench, tmp_path):
    plan, _ = _plan_and_config(bench)
    chunk = [r for r in plan if r.setting == "4-random"][:2]
    parts = {p.sha256: p for r in chunk for m in r.prompt.messages for p in m.images}
    assert len(parts) > 1
    elsewhere = [_moved(r, lambda p: str(tmp_path / "not-here" / Path(p.path).name)) for r in chunk]
    cache = tmp_path / "cache"

    with pytest.raises(ImagesUnavailable) as missing:
        localize(elsewhere, {}, cache)
    assert missing.value.sha256s == set(parts)

    shipped = {sha: Path(p.path).read_bytes() for sha, p in parts.items()}
    local = localize(elsewhere, shipped, cache)
    assert [r.fingerprint for r in local] == [r.fingerprint for r in chunk]  # keys never see paths
    for r in local:
        for p in (p for m in r.prompt.messages for p in m.images):
            assert Path(p.path).parent == cache and file_sha256(p.path) == p.sha256
    assert [r.prompt for r in localize(elsewhere, {}, cache)] == [r.prompt for r in local]  # served from the cache

    # A readable path keeps its request untouched; a path holding other bytes does not count.
    assert localize(chunk, {}, tmp_path / "unused") == chunk
    wrong = tmp_path / "wrong.png"
    wrong.write_bytes(b"not the image")
    first = next(iter(parts.values()))
    bad = [_moved(chunk[0], lambda p: str(wrong) if p.sha256 == first.sha256 else p.path)]
    with pytest.raises(ImagesUnavailable):
        localize(bad, {}, tmp_path / "empty")


def _moved(request, path_of: Callable[[ImagePart], str]):
    """The request with each image's path replaced by ``path_of(image)``."""
    messages = tuple(
        Message(m.role, tuple(replace(p, path=path_of(p)) if isinstance(p, ImagePart) else p for p in m.content))
        for m in request.prompt.messages
    )
    return replace(request, prompt=replace(request.prompt, messages=messages))


def test_one_replica_per_gpu_or_two_on_cpu():
    assert _placement("org/model", {}, None, {"GPU": 8, "CPU": 64}) == ({"num_gpus": 1}, 8)
    assert _placement("org/model", {}, 3, {"GPU": 8, "CPU": 64}) == ({"num_gpus": 1}, 3)
    assert _placement("org/model", {}, None, {"CPU": 16}) == ({"num_cpus": 1}, 2)
    assert _placement("org/model", {"device": "cpu"}, 4, {"GPU": 8, "CPU": 16}) == ({"num_cpus": 1}, 4)
    assert _placement("openai:gpt-4o", {}, None, {"GPU": 8, "CPU": 16}) == ({"num_cpus": 1}, 2)
    with pytest.raises(RunError, match="need 9 GPUs"):
        _placement("org/model", {}, 9, {"GPU": 8, "CPU": 64})
    with pytest.raises(RunError, match="need 3 CPUs"):
        _placement("org/model", {}, 3, {"CPU": 2})
