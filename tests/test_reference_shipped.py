"""The reference models shipped inside the package. The CLIP, loaded by the built-in spec,
retrieves real captions of held-out images and is what `mmctx curate` uses when no encoder is
given; the VLM, the default model, answers unseen shapes-world questions from the image."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image
from typer.testing import CliRunner

from mmctx.cli import app
from mmctx.data.shapes.selection import scene_similarity
from mmctx.reference import REFERENCE_MODELS, shipped
from mmctx.reference.train import folder_megabytes

HELD_OUT_SEED = 2007  # the CLIP trains on seed 1000; 2000+ is held out and no benchmark uses it


def test_the_shipped_models_fit_the_budget_and_carry_their_cards():
    assert folder_megabytes(REFERENCE_MODELS) <= 20
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


def _recall_at_1(encoder, images: list[Path], texts: list[str], group: int = 32) -> float:
    image_vectors = encoder.encode_images([Image.open(p).convert("RGB") for p in images])
    text_vectors = encoder.encode_texts(texts)
    hits = total = 0
    for start in range(0, len(texts) - group + 1, group):
        sims = image_vectors[start : start + group] @ text_vectors[start : start + group].T
        hits += int((sims.argmax(axis=1) == np.arange(group)).sum())
        total += group
    return hits / total


def test_the_builtin_clip_finds_the_captions_of_unseen_images(tmp_path):
    from mmctx.curate.embed import load_encoder
    from mmctx.models.tiny import build_tiny_clip
    from mmctx.reference.clip import shapes_pairs

    images, texts = shapes_pairs(tmp_path / "pool", per_task=20, seed=HELD_OUT_SEED)
    trained = _recall_at_1(load_encoder("clip:builtin:shapes-clip", device="cpu"), images, texts)
    untrained_dir = build_tiny_clip(tmp_path / "untrained", seed=0, image_size=96)
    untrained = _recall_at_1(load_encoder(f"clip:{untrained_dir}", device="cpu"), images, texts)
    # Measured: 0.112 trained, 0.036 untrained; chance among 32 candidates is 0.031.
    assert trained >= 0.07 and trained >= untrained + 0.04, (trained, untrained)


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

    # The card is scored as `train-reference` scores it now: 200 queries per task and format.
    from mmctx.data.shapes.tasks import task_formats
    from mmctx.reference.train import HELDOUT_QUERIES_PER_TASK

    assert metrics["heldout_queries_per_task"] == HELDOUT_QUERIES_PER_TASK == 200
    for which in ("trained", "untrained"):
        assert average(which, "generate")["n"] == HELDOUT_QUERIES_PER_TASK * len(task_formats())
    chance = metrics["chance"]["heldout"]["Avg."]
    assert average("trained", "generate")["ci_low"] > chance > average("untrained", "generate")["ci_high"]
    # Perplexity ranking: measured 0.76 [0.74, 0.77] trained, 0.39 [0.37, 0.41] untrained (2,600 queries).
    assert average("trained", "ppl")["ci_low"] > max(chance, average("untrained", "ppl")["ci_high"])


def test_the_shipped_vlm_ranks_every_task_above_chance_at_scale():
    """The card's ranking check (seed 13, 1,000 queries per task and format) names every task whose
    interval does not clear chance. Measured: every task clears it; action 0.800 [0.776, 0.823]
    against chance 0.50 (0.515 for the model before), commonsense 0.408 [0.378, 0.439] against
    0.375, clear by 0.003."""
    from mmctx.data.shapes.tasks import task_formats
    from mmctx.reference.train import RANKING_QUERIES_PER_TASK, tasks_not_above_chance

    vlm = shipped("shapes-vlm")
    card = (vlm / "README.md").read_text()
    metrics = json.loads((vlm / "metrics.json").read_text())
    cells, chance = metrics["scores"]["ranking"]["trained"], metrics["chance"]["ranking"]
    assert metrics["ranking_queries_per_task"] == RANKING_QUERIES_PER_TASK == 1000
    assert next(c for c in cells if c["task"] == "Avg.")["n"] == RANKING_QUERIES_PER_TASK * len(task_formats())
    short = tasks_not_above_chance(cells, chance)
    assert short == [] and "Every task's interval lies above chance." in card and "Not clear of chance" not in card


def test_the_shipped_vlm_answers_unseen_shapes_world_questions_from_the_image(tmp_path):
    """`mmctx run` with the default model, zero-shot, on a benchmark no training used (seed 5):
    object and attribute recognition at the issue's 0.80 bar, plurality too, counting and spatial
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


def test_the_shipped_vlms_image_token_says_where_each_shape_is(tmp_path):
    """What the README claims of `_position_slots`: read back from the shipped model's image
    tokens on unseen single-frame scenes, each shape's position follows the truth (measured
    here 0.99 for x and y over 130 shapes; the tower's own read-out, before, gave 0.38)."""
    import torch

    from mmctx.data.shapes import SHAPES
    from mmctx.data.shapes.pool import generate_pool
    from mmctx.reference.vlm import (
        Renderer,
        feature_basis,
        feature_names,
        load_for_training,
        patch_features,
        read_features,
    )

    model, processor, adapter = load_for_training(shipped("shapes-vlm"))
    model.eval()
    metrics = json.loads((shipped("shapes-vlm") / "metrics.json").read_text())
    scenes = [s for s in generate_pool(tmp_path, 6, seed=5) if len(s.meta["frames"]) == 1]
    renderer = Renderer(processor, adapter, tmp_path)
    pixels = torch.stack([renderer.pixel_values(str(tmp_path / s.images[0])) for s in scenes])
    read = read_features(model, pixels, feature_basis(model.config.text_config.hidden_size, metrics["seed"]))
    names = feature_names()
    pairs = {"x": [], "y": []}
    for scene, got in zip(scenes, read):
        truth = patch_features(scene.meta, 96, 8).sum(0)
        for shape in SHAPES:
            if float(truth[names.index(f"{shape} count")]) == 1:
                for axis, seen in pairs.items():
                    column = names.index(f"{shape} {axis}")
                    seen.append((float(got[column]), float(truth[column])))
    assert len(pairs["x"]) > 50
    for axis, seen in pairs.items():
        correlation = np.corrcoef(np.array(seen).T)[0, 1]
        assert correlation > 0.9, (axis, correlation)
