"""`mmctx train-reference`: both reference models trained, scored and carded from one command,
and the built-in specs that load the shipped copies."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from mmctx.cli import app


@pytest.fixture(scope="module")
def quick_reference(tmp_path_factory):
    """One `mmctx train-reference --quick` run (a few steps: checks the pipeline, not the scores)."""
    out = tmp_path_factory.mktemp("reference")
    result = CliRunner().invoke(app, ["train-reference", "--out", str(out), "--quick"])
    assert result.exit_code == 0, result.output
    return out, result.output


def test_train_reference_writes_two_loadable_checkpoints_with_cards(quick_reference):
    from mmctx.curate.embed import load_encoder
    from mmctx.models import load_backend
    from mmctx.reference.train import folder_megabytes

    out, output = quick_reference
    assert "shapes-vlm/README.md" in output
    for name in ("shapes-clip", "shapes-vlm"):
        assert (out / name / "config.json").exists() and (out / name / "model.safetensors").exists()
        assert folder_megabytes(out / name) < 15
    backend = load_backend(str(out / "shapes-vlm"), device="cpu", dtype="float32")
    assert backend.info.name.endswith("shapes-vlm")
    assert (
        load_encoder(f"clip:{out / 'shapes-clip'}", device="cpu").encode_texts(["There is a red circle."]).shape[0] == 1
    )


def test_the_vlm_card_holds_trained_and_untrained_scores_with_intervals(quick_reference):
    out, _ = quick_reference
    card = (out / "shapes-vlm" / "README.md").read_text()
    metrics = json.loads((out / "shapes-vlm" / "metrics.json").read_text())
    assert "| task | chance | generate, trained | generate, untrained | ppl, trained | ppl, untrained |" in card
    assert "attribute_recognition" in card and "[" in card  # intervals
    assert metrics["train_seed"] == 3000 and metrics["seed"] == 0
    assert {"demo", "heldout"} <= set(metrics["scores"]) and metrics["parameters"] > 0
    cells = metrics["scores"]["demo"]["trained"]
    assert {c["scorer"] for c in cells} == {"generate", "ppl"} and all(
        0 <= c["ci_low"] <= c["ci_high"] <= 1 for c in cells
    )
    assert "Measured training time" in card and "constant of 4" in card and "strength 1.2" in card
    # the recipe's arrow-end steps ran and are on record (and on the card)
    assert metrics["arrow_roles"] and metrics["neighbour_layers"] == [0, 1] and metrics["exact_arrow_ends"]
    assert metrics["arrow_share"] == 1 / 3 and "tower's own tokens only" in card and "of its draws" in card
    assert "{" not in card  # every placeholder filled in
    assert metrics["quick"] is True and card.startswith("**Quick run")  # never mistaken for real scores
    assert "### Perplexity ranking at scale (shapes-world, seed 13, 1 queries per task" in card
    assert "| task | chance | ppl, trained | lower bound − chance | interval above chance |" in card
    ranked = metrics["scores"]["ranking"]["trained"]
    assert {c["scorer"] for c in ranked} == {"ppl"} and "untrained" not in metrics["scores"]["ranking"]


def test_a_task_is_above_chance_only_where_its_whole_interval_is():
    from mmctx.reference.train import tasks_not_above_chance

    def cell(task, low, high):
        return {"task": task, "setting": "0-shot", "scorer": "ppl", "n": 100, "accuracy": (low + high) / 2,
                "ci_low": low, "ci_high": high, "unparsed_rate": 0.0}  # fmt: skip

    chance = {"object": 0.25, "action": 0.5, "commonsense": 0.375, "temporal": 0.25, "Avg.": 0.3}
    cells = [cell("object", 0.96, 0.98), cell("action", 0.48, 0.55), cell("commonsense", 0.375, 0.44)]
    cells += [cell("object", 0.1, 0.2) | {"scorer": "generate"}]  # another scorer's cell is not the ranking
    # commonsense's lower bound equals chance: not above it; temporal was never scored: not above it either
    assert tasks_not_above_chance(cells, chance) == ["action", "commonsense", "temporal"]
    assert tasks_not_above_chance(cells, chance, scorer="generate") == ["object", "action", "commonsense", "temporal"]
    assert tasks_not_above_chance([cell("object", 0.26, 0.3)], {"object": 0.25}) == []


def test_a_trained_vlm_can_be_rescored_without_retraining(quick_reference, tmp_path):
    """`score_vlm_reference` from the checkpoint and its metrics gives the same scores (scoring is
    deterministic) and rewrites the card."""
    import shutil

    from mmctx.reference.train import score_vlm_reference

    out, _ = quick_reference
    folder = shutil.copytree(out / "shapes-vlm", tmp_path / "shapes-vlm")
    before = json.loads((folder / "metrics.json").read_text())
    (folder / "README.md").unlink()
    after = score_vlm_reference(folder, {k: v for k, v in before.items() if k not in ("scores", "grid")}, grid=False)
    assert after["scores"] == before["scores"] and after["chance"] == before["chance"]
    assert json.loads((folder / "metrics.json").read_text())["scores"] == before["scores"]
    assert (folder / "README.md").read_text().startswith("**Quick run")


def test_the_clip_card_compares_similar_and_random_demos(quick_reference):
    out, _ = quick_reference
    metrics = json.loads((out / "shapes-clip" / "metrics.json").read_text())
    r = metrics["retrieval"]
    for name in ("trained", "untrained"):
        assert set(r[name]) == {"similar_cosine", "random_cosine", "similar_scene", "random_scene"}
        assert r[name]["similar_cosine"] >= r[name]["random_cosine"]  # true by construction for any encoder
    assert (out / "shapes-clip" / "demo_similarity.png").stat().st_size > 1000
    assert "Figure 7" in (out / "shapes-clip" / "README.md").read_text()


def test_shipped_builtins_resolve_or_name_the_command_that_rebuilds_them(tmp_path, monkeypatch):
    import importlib

    from mmctx.models import resolve_builtin

    shipped_module = importlib.import_module("mmctx.reference.shipped")

    monkeypatch.setattr(shipped_module, "REFERENCE_MODELS", tmp_path)
    with pytest.raises(shipped_module.MissingReferenceModel, match="mmctx train-reference"):
        resolve_builtin("builtin:shapes-vlm")
    (tmp_path / "shapes-clip").mkdir()
    (tmp_path / "shapes-clip" / "config.json").write_text("{}")
    assert resolve_builtin("builtin:shapes-clip", kind="encoder") == tmp_path / "shapes-clip"
    with pytest.raises(ValueError, match="builtin:shapes-vlm"):
        resolve_builtin("builtin:nope")


def test_train_reference_refuses_quick_models_over_the_shipped_ones_and_unknown_parts(tmp_path):
    from mmctx.reference import REFERENCE_MODELS

    before = sorted(p.name for p in REFERENCE_MODELS.rglob("*"))
    result = CliRunner().invoke(app, ["train-reference", "--out", str(REFERENCE_MODELS), "--quick"])
    assert result.exit_code == 2 and "will not replace the shipped ones" in result.output
    assert sorted(p.name for p in REFERENCE_MODELS.rglob("*")) == before
    result = CliRunner().invoke(app, ["train-reference", "--out", str(tmp_path), "--only", "both"])
    assert result.exit_code == 2 and "--only takes clip or vlm" in result.output
    result = CliRunner().invoke(app, ["train-reference", "--out", str(tmp_path), "--seed", "-3000"])
    assert result.exit_code != 0 and not any(tmp_path.iterdir())


def test_a_missing_shipped_vlm_names_the_command_that_trains_one(tmp_path, monkeypatch):
    import importlib

    from mmctx.data.shapes import build_benchmark

    monkeypatch.setattr(importlib.import_module("mmctx.reference.shipped"), "REFERENCE_MODELS", tmp_path / "none")
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


def test_the_card_says_how_stage_one_was_taught_arrow_ends():
    from mmctx.reference.train import _arrow_text

    assert _arrow_text({}) == ""  # metrics from before these were measured (the shipped model's)
    assert _arrow_text({"arrow_roles": False, "neighbour_layers": [], "arrow_sources_read": None}) == ""
    text = _arrow_text(
        {"arrow_roles": True, "neighbour_layers": [0, 1], "neighbour_attention": [0.81, 0.4],
         "arrow_sources_read": 0.7, "arrow_targets_read": 0.753}
    )  # fmt: skip
    assert "if an arrow starts at it" in text and "first and second layers" in text and "0.81, 0.40" in text
    assert "source is the joined shape with more `arrow tail` in 70.0%" in text and "`arrow head` in 75.3%" in text
    assert "draws" not in text  # uniform draws go unsaid
    from mmctx.reference.train import _exact_ends_text

    assert _exact_ends_text({}) == "" and _exact_ends_text({"exact_arrow_ends": False}) == ""
    assert "tower's own tokens only" in _exact_ends_text({"exact_arrow_ends": True})
    shared = _arrow_text({"arrow_share": 1 / 3, "arrow_scenes": 1300, "vision_scenes": 16900})
    assert (
        shared == " The 1300 scenes with an arrow (7.7% of stage 1's) get 33.3% of its draws (`arrow_scene_weights`)."
    )
