"""The reference models shipped inside the package, loaded with mmctx alone (no training code).
The CLIP, loaded by the built-in spec, is what `mmctx curate` uses when no encoder is given;
the VLM, the default model, answers unseen shapes-world questions from the image. A missing
checkpoint, and `mmctx train-reference` without the mmctx-reference package, each name the
command that fixes them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from mmctx.cli import app
from mmctx.data.shapes.selection import scene_similarity
from mmctx.models.shipped import REFERENCE_MODELS, shipped

HELD_OUT_SEED = 2007  # the CLIP trains on seed 1000; 2000+ is held out and no benchmark uses it
HELDOUT_QUERIES_PER_TASK = 200  # the shipped VLM card's held-out benchmark, per task and format


def _megabytes(path: Path) -> float:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file()) / 1e6


def test_the_shipped_models_fit_the_budget_and_carry_their_cards():
    assert _megabytes(REFERENCE_MODELS) <= 20
    clip = shipped("shapes-clip")
    card = (clip / "README.md").read_text()
    metrics = json.loads((clip / "metrics.json").read_text())
    assert "recall@1" in card and "Figure 7" in card and "Measured training time" in card
    assert metrics["train_seed"] == 1000 and metrics["heldout_seed"] == 2000
    assert metrics["recall_at_1"] >= max(metrics["recall_at_1_untrained"], metrics["recall_chance"]) + 0.04
    assert metrics["quick"] is False and not card.startswith("**Quick run")
    # The card's Figure 7 claim: its similar demos' scenes beat random ones by more than an
    # untrained CLIP's do (untrained random features keep some pixel similarity too).
    r = metrics["retrieval"]
    gap = {name: r[name]["similar_scene"] - r[name]["random_scene"] for name in ("trained", "untrained")}
    assert gap["trained"] > gap["untrained"] > 0, gap


def test_curate_without_an_encoder_uses_the_shipped_clip_and_retrieves_alike_scenes(tmp_path):
    from mmctx.data.disk import load_pool

    runner = CliRunner()
    pool, bench = tmp_path / "pool", tmp_path / "bench"
    assert (
        runner.invoke(app, ["shapes", "--out", str(pool), "--per-task", "24", "--seed", str(HELD_OUT_SEED)]).exit_code
        == 0
    )
    result = runner.invoke(
        app, ["curate", str(pool), "--out", str(bench), "--k", "6", "--demos", "4", "--lambda", "auto", "--no-figures"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((bench / "curation" / "summary.json").read_text())
    assert summary["options"]["encoder"] == "clip:builtin:shapes-clip"
    from mmctx.curate.embed import folder_digest

    digest = folder_digest(shipped("shapes-clip"))[:16]
    assert any(digest in p.name or digest in p.read_text(errors="ignore") for p in (bench / "curation").rglob("*.json"))
    samples, _ = load_pool(pool)
    by_id = {s.id: s for s in samples}
    similar, random = [], []
    for path in (bench / "curation" / "retrieval").glob("*.json"):
        for qid, q in json.loads(path.read_text())["queries"].items():
            similar += [scene_similarity(by_id[qid], by_id[d]) for d in q["similar"]]
            random += [scene_similarity(by_id[qid], by_id[d]) for d in q["random"]]
    assert np.mean(similar) > np.mean(random) + 0.02, (np.mean(similar), np.mean(random))


def test_the_shipped_vlm_card_claims_scores_above_its_untrained_twin():
    vlm = shipped("shapes-vlm")
    card = (vlm / "README.md").read_text()
    metrics = json.loads((vlm / "metrics.json").read_text())
    assert metrics["quick"] is False and not card.startswith("**Quick run")
    assert metrics["train_seed"] == 3000 and "Measured training time" in card and "Full settings grid" in card
    held = metrics["scores"]["heldout"]

    def average(which: str, scorer: str) -> dict:
        return next(c for c in held[which] if c["task"] == "Avg." and c["scorer"] == scorer)

    # 200 queries per task and format (that `train-reference` still scores so is checked beside it).
    from mmctx.data.shapes.tasks import task_formats

    assert metrics["heldout_queries_per_task"] == HELDOUT_QUERIES_PER_TASK
    for which in ("trained", "untrained"):
        assert average(which, "generate")["n"] == HELDOUT_QUERIES_PER_TASK * len(task_formats())
    chance = metrics["chance"]["heldout"]["Avg."]
    assert average("trained", "generate")["ci_low"] > chance > average("untrained", "generate")["ci_high"]
    # Perplexity ranking: measured 0.76 [0.74, 0.77] trained, 0.39 [0.37, 0.41] untrained (2,600 queries).
    assert average("trained", "ppl")["ci_low"] > max(chance, average("untrained", "ppl")["ci_high"])


def test_the_shipped_vlm_answers_unseen_shapes_world_questions_from_the_image(tmp_path):
    """`mmctx run` with the default model, zero-shot, on a benchmark no training used (seed 5):
    object and attribute recognition at the 0.80 bar, plurality too, counting and spatial
    relations above chance (the previous shipped model, here: object 1.00 of 24, attribute 1.00
    of 24, plurality 1.00 of 12, counting 0.79 of 24 against chance 0.38, spatial relations 0.79
    of 24 against 0.38; the model before `CURRICULUM` had spatial relations at chance). The
    arrow-end model gets spatial relations 0.50 of 24 here (0.59 [0.54, 0.63] on 400 held-out,
    0.57 [0.55, 0.59] on 2,000 of the card's ranking check): a regression guard, not a bar."""
    bench, run = tmp_path / "bench", tmp_path / "run"
    runner = CliRunner()
    made = ["shapes", "--out", str(bench), "--benchmark", "--queries-per-task", "12", "--seed", "5"]
    assert runner.invoke(app, made).exit_code == 0
    tasks = "object_recognition,attribute_recognition,plurality,counting,spatial_relations"
    args = ["run", str(bench), "--out", str(run), "--settings", "0-shot", "--scorers", "generate", "--tasks", tasks]
    args += ["--device", "cpu", "--dtype", "float32"]  # as measured: greedy answers may differ in bf16
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["model"]["name"] == "builtin:shapes-vlm"
    options = {r["id"]: len(r["options"]) for r in map(json.loads, (run / "requests.jsonl").read_text().splitlines())}
    rows = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 108 and all(r["error"] is None for r in rows)

    def mean(task: str, value) -> float:
        mine = [r for r in rows if r["task"] == task]
        return sum(map(value, mine)) / len(mine)

    def accuracy(task: str) -> float:
        return mean(task, lambda r: r["outcome"] == "correct")

    def chance(task: str) -> float:
        return mean(task, lambda r: 1 / options[r["request_id"]])

    assert accuracy("object_recognition") >= 0.8 and accuracy("plurality") >= 0.8
    assert accuracy("attribute_recognition") >= 0.8, accuracy("attribute_recognition")
    assert accuracy("counting") >= chance("counting") + 0.3, (accuracy("counting"), chance("counting"))
    spatial = accuracy("spatial_relations"), chance("spatial_relations")
    assert spatial[0] >= spatial[1] + 0.1, spatial


def test_the_shipped_vlm_answers_temporal_questions_above_chance(tmp_path):
    """Temporal (which shape moved, disappeared, where a moving one goes next), zero-shot on an
    unseen benchmark (seed 5, 40 queries), by generation and by perplexity ranking: above a
    uniform guess by more than its binomial noise by perplexity ranking, above it by generation
    (the previous shipped model 0.42 and 0.45 against 0.25; the model before `RESTART` was at
    chance, 0.26 held-out). The arrow-end model generates 0.35 here (0.38 [0.31, 0.44] on 200
    held-out; ranked 0.344 [0.315, 0.372] on 1,000 of the card's check)."""
    bench, run = tmp_path / "bench", tmp_path / "run"
    runner = CliRunner()
    made = ["shapes", "--out", str(bench), "--benchmark", "--queries-per-task", "40", "--per-task", "80", "--seed", "5"]
    assert runner.invoke(app, made).exit_code == 0
    args = ["run", str(bench), "--out", str(run), "--settings", "0-shot", "--scorers", "generate,ppl"]
    args += ["--tasks", "temporal", "--device", "cpu", "--dtype", "float32"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    options = {r["id"]: len(r["options"]) for r in map(json.loads, (run / "requests.jsonl").read_text().splitlines())}
    rows = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 80 and all(r["error"] is None for r in rows)
    chance = sum(1 / options[r["request_id"]] for r in rows) / len(rows)
    for scorer in ("generate", "ppl"):
        mine = [r for r in rows if r["scorer"] == scorer]
        accuracy = sum(r["outcome"] == "correct" for r in mine) / len(mine)
        # A uniform guess gets ≥ chance + 0.12 (≥ 15 of 40 at chance 0.25) 5% of the time.
        assert accuracy >= chance + (0.12 if scorer == "ppl" else 0.05), (scorer, accuracy, chance)


def test_shipped_builtins_resolve_or_name_the_command_that_rebuilds_them(tmp_path, monkeypatch):
    import importlib

    from mmctx.models import resolve_builtin

    shipped_module = importlib.import_module("mmctx.models.shipped")

    monkeypatch.setattr(shipped_module, "REFERENCE_MODELS", tmp_path)
    with pytest.raises(shipped_module.MissingReferenceModel, match="mmctx train-reference"):
        resolve_builtin("builtin:shapes-vlm")
    (tmp_path / "shapes-clip").mkdir()
    (tmp_path / "shapes-clip" / "config.json").write_text("{}")
    assert resolve_builtin("builtin:shapes-clip", kind="encoder") == tmp_path / "shapes-clip"
    with pytest.raises(ValueError, match="builtin:shapes-vlm"):
        resolve_builtin("builtin:nope")


def test_a_missing_shipped_vlm_names_the_command_that_trains_one(tmp_path, monkeypatch):
    import importlib

    from mmctx.data.shapes import build_benchmark

    monkeypatch.setattr(importlib.import_module("mmctx.models.shipped"), "REFERENCE_MODELS", tmp_path / "none")
    build_benchmark(tmp_path / "bench", queries_per_task=1, seed=0)
    args = ["run", str(tmp_path / "bench"), "--out", str(tmp_path / "run")]  # the default model is shapes-vlm
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "is missing" in result.output and "mmctx train-reference --only vlm" in result.output


def test_curate_needs_an_encoder_for_pools_that_are_not_shapes_world(tmp_path):
    from mmctx.data.disk import read_samples, write_samples

    runner = CliRunner()
    assert runner.invoke(app, ["shapes", "--out", str(tmp_path / "pool"), "--per-task", "12"]).exit_code == 0
    table = tmp_path / "pool" / "pool.jsonl"
    write_samples([s.model_copy(update={"source": "vqav2"}) for s in read_samples(table)], table)
    for command in (["curate", str(tmp_path / "pool"), "--out", str(tmp_path / "bench")],
                    ["embed", str(tmp_path / "pool"), "--out", str(tmp_path / "work")]):  # fmt: skip
        result = runner.invoke(app, command)
        assert result.exit_code == 2 and "--encoder is required" in result.output, result.output


def test_builtin_specs_are_refused_where_they_are_the_wrong_kind_of_model():
    from mmctx.curate.embed import EncoderError, load_encoder
    from mmctx.models import load_backend

    with pytest.raises(ValueError, match="is an encoder, not a chat model"):
        load_backend("builtin:shapes-clip")
    with pytest.raises(
        EncoderError, match=r"is a chat model, not an encoder; built-in encoder models: \['builtin:shapes-clip'\]"
    ):
        load_encoder("clip:builtin:tiny-idefics3")


def test_train_reference_without_the_reference_package_names_how_to_install_it(tmp_path):
    """mmctx alone ships the checkpoints; training is the mmctx-reference distribution's. Where it
    cannot be imported, the command says in one line how to install it, and writes nothing."""
    script = (
        "import sys; sys.modules['mmctx_reference'] = None\n"  # as if it were not installed
        "from mmctx.cli import app\n"
        f"app(['train-reference', '--out', {str(tmp_path / 'out')!r}, '--quick'])\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and "pip install -e ./reference" in lines[0], lines
    assert not (tmp_path / "out").exists()
