"""`mmctx train-reference`: both reference models trained, scored and carded from one command,
and its refusals (quick models over the shipped ones, unknown parts, negative seeds)."""

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
    from mmctx_reference.train import folder_megabytes

    from mmctx.curate.embed import load_encoder
    from mmctx.models import load_backend

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
    from mmctx_reference.train import tasks_not_above_chance

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

    from mmctx_reference.train import score_vlm_reference

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


def test_train_reference_refuses_quick_models_over_the_shipped_ones_and_unknown_parts(tmp_path):
    from mmctx_reference import REFERENCE_MODELS

    before = sorted(p.name for p in REFERENCE_MODELS.rglob("*"))
    result = CliRunner().invoke(app, ["train-reference", "--out", str(REFERENCE_MODELS), "--quick"])
    assert result.exit_code == 2 and "will not replace the shipped ones" in result.output
    assert sorted(p.name for p in REFERENCE_MODELS.rglob("*")) == before
    result = CliRunner().invoke(app, ["train-reference", "--out", str(tmp_path), "--only", "both"])
    assert result.exit_code == 2 and "--only takes clip or vlm" in result.output
    result = CliRunner().invoke(app, ["train-reference", "--out", str(tmp_path), "--seed", "-3000"])
    assert result.exit_code != 0 and not any(tmp_path.iterdir())


def test_the_card_says_how_stage_one_was_taught_arrow_ends():
    from mmctx_reference.train import _arrow_text

    assert _arrow_text({}) == ""  # metrics from before these were measured (the shipped model's)
    assert _arrow_text({"arrow_roles": False, "neighbour_layers": [], "arrow_sources_read": None}) == ""
    text = _arrow_text(
        {"arrow_roles": True, "neighbour_layers": [0, 1], "neighbour_attention": [0.81, 0.4],
         "arrow_sources_read": 0.7, "arrow_targets_read": 0.753}
    )  # fmt: skip
    assert "if an arrow starts at it" in text and "first and second layers" in text and "0.81, 0.40" in text
    assert "source is the joined shape with more `arrow tail` in 70.0%" in text and "`arrow head` in 75.3%" in text
    assert "draws" not in text  # uniform draws go unsaid
    from mmctx_reference.train import _exact_ends_text

    assert _exact_ends_text({}) == "" and _exact_ends_text({"exact_arrow_ends": False}) == ""
    assert "tower's own tokens only" in _exact_ends_text({"exact_arrow_ends": True})
    shared = _arrow_text({"arrow_share": 1 / 3, "arrow_scenes": 1300, "vision_scenes": 16900})
    assert (
        shared == " The 1300 scenes with an arrow (7.7% of stage 1's) get 33.3% of its draws (`arrow_scene_weights`)."
    )
