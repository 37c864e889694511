"""`mmctx curate` end to end on a shapes-world pool with a tiny offline CLIP, then `mmctx run` on the result."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from mmctx.cli import app
from mmctx.curate.pipeline import CurateOptions, CurationError, load_embeddings, select_step
from mmctx.data.disk import load_benchmark, write_samples
from mmctx.data.shapes import generate_pool
from mmctx.reporting.curation import curate

K, DEMOS = 3, 4
RANDOM_CLIP_DUP = 0.99999


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    from mmctx.models.tiny import build_tiny_clip

    return build_tiny_clip(tmp_path_factory.mktemp("clip") / "clip")


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    root = tmp_path_factory.mktemp("pool")
    samples = generate_pool(root, per_task=K + DEMOS + 5, seed=7)
    write_samples(samples, root / "pool.jsonl")
    return root


@pytest.fixture(scope="module")
def curated(pool, clip, tmp_path_factory):
    out = tmp_path_factory.mktemp("curated") / "bench"
    # A random-weight CLIP puts every pair of shapes images above 0.98 cosine: only exact
    # duplicates are excluded here (the threshold itself is tested in test_retrieve.py).
    opts = CurateOptions(
        encoder=f"clip:{clip}", k=K, demos=DEMOS, rationales="scene-graph", duplicate_cosine=RANDOM_CLIP_DUP
    )
    return out, curate(pool, out, opts, progress=False)


def test_curated_benchmark_is_valid_and_keys_follow_the_rules(curated):
    out, outcome = curated
    bench = load_benchmark(out)
    assert bench.validate() == []
    groups = {(q.task, q.format) for q in bench.queries}
    assert len(groups) == 13 and len(bench.queries) == 13 * K
    query_ids = {q.id for q in bench.queries}
    for q in bench.queries:
        for strategy in ("similar", "random"):
            keys = q.demo_keys[strategy]
            assert len(keys) == DEMOS and len(set(keys)) == DEMOS
            assert not set(keys) & query_ids  # no query is ever another query's demo
            assert all(bench.demo(k).task == q.task and bench.demo(k).format == q.format for k in keys)
    referenced = {k for q in bench.queries for keys in q.demo_keys.values() for k in keys}
    assert {d.id for d in bench.demos} == referenced
    # Every demo a CoT setting can show has a scene-graph rationale.
    assert all(
        bench.demo(k).rationale.generator == "scene-graph" for q in bench.queries for k in q.demo_keys["similar"]
    )
    assert outcome.rationales["kept"] == len({k for q in bench.queries for k in q.demo_keys["similar"]})


def test_similar_demos_are_ordered_and_more_similar_than_random(curated):
    out, outcome = curated
    for f in (out / "curation" / "retrieval").glob("*.json"):
        record = json.loads(f.read_text())
        for keys in record["queries"].values():
            assert keys["similar_cosines"] == sorted(keys["similar_cosines"], reverse=True)
            # Similar demos are the nearest candidates: a random draw that is not among them is no closer.
            others = [c for d, c in zip(keys["random"], keys["random_cosines"]) if d not in keys["similar"]]
            assert all(c <= min(keys["similar_cosines"]) + 1e-6 for c in others)
    sim = sum(g.similar_cosine for g in outcome.groups) / len(outcome.groups)
    rnd = sum(g.random_cosine for g in outcome.groups) / len(outcome.groups)
    assert sim > rnd  # even a random-weight CLIP ranks its own nearest neighbours first


def test_intermediates_figures_summary_and_layout_are_written(curated):
    out, outcome = curated
    work = out / "curation"
    for step in ("embeddings", "selection", "retrieval"):
        assert len(list((work / step).iterdir())) == 13
    selection = json.loads((work / "selection" / "counting__caption_foil.json").read_text())
    assert selection["lambda"] == 50 and selection["lambda_source"] == "paper" and selection["convention"] == "paper"
    assert selection["rho"] == pytest.approx(selection["pool"] / (2 * 51 * K))
    binary = json.loads((work / "selection" / "spatial_relations__caption_foil.json").read_text())
    assert binary["lambda"] == 200  # VSR-style binary items sit in the paper's large caption/foil pool
    summary = json.loads((work / "summary.json").read_text())
    assert len(summary["groups"]) == 13 and summary["options"]["k"] == K
    for group in summary["groups"]:  # the paper's Table 2 counts similar demos only: both are reported
        assert group["similar_demos"] + group["random_only_demos"] == group["demos"]
        assert group["similar_demos"] >= DEMOS
    names = {p.name for p in outcome.figures}
    assert {"demo_similarity.png", "demo_similarity.pdf", "projection_counting__mcqa.png"} <= names
    assert all(p.stat().st_size > 1000 for p in outcome.figures)
    import datasets

    # Seven caption/foil groups, the binary spatial statements (VSR-style) among them, as in the release.
    ds = datasets.load_dataset(
        str(out / "fewmmbench-layout"), "caption_foil_test", split="train", cache_dir=str(out / "hf-cache")
    )
    assert len(ds) == 7 * K and len(ds[0]["most_similar_example_keys"]) == DEMOS
    assert outcome.layout_left_out == {} and summary["layout_left_out"] == {} and summary["duplicates"] == {}


def test_select_step_alone_reproduces_the_selection(curated, tmp_path):
    out, _ = curated
    work = out / "curation"
    before = {f.name: json.loads(f.read_text()) for f in (work / "selection").glob("*.json")}
    again = select_step(load_embeddings(work), tmp_path, K, None, "paper")
    for name, record in again.items():
        assert record["ids"] == before[f"{name}.json"]["ids"]


def test_the_curated_benchmark_runs(curated, tmp_path):
    out, _ = curated
    r = CliRunner().invoke(
        app,
        ["run", str(out), "--model", "builtin:tiny-idefics3", "--out", str(tmp_path / "run"), "--limit", "1",
         "--settings", "0-shot,4-similar,4-similar-cot", "--max-new-tokens", "4", "--cot-max-new-tokens", "8",
         "--no-progress"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    results = [json.loads(line) for line in open(tmp_path / "run" / "results.jsonl")]
    assert {r["setting"] for r in results} == {"0-shot", "4-similar", "4-similar-cot"}


def test_bad_pools_are_refused_before_any_embedding(pool, clip, tmp_path):
    from mmctx.data.disk import read_samples

    samples = read_samples(pool / "pool.jsonl")
    small = tmp_path / "small"
    small.mkdir()
    (small / "images").symlink_to(pool / "images")
    write_samples(samples[:40] + samples[:1], small / "pool.jsonl")
    with pytest.raises(CurationError) as err:
        curate(small, tmp_path / "out", CurateOptions(encoder=f"clip:{clip}", k=K, demos=DEMOS), progress=False)
    message = str(err.value)
    assert f"{samples[0].id}: duplicate id" in message and f"needs at least k + {DEMOS} demos = 7" in message
    assert not (tmp_path / "out" / "curation" / "embeddings").exists()


def test_cli_curate_prints_the_group_table(pool, clip, tmp_path):
    r = CliRunner().invoke(
        app,
        ["curate", str(pool), "--out", str(tmp_path / "b"), "--encoder", f"clip:{clip}", "--k", str(K),
         "--demos", str(DEMOS), "--lambda", "auto", "--no-figures", "--duplicate-cosine", str(RANDOM_CLIP_DUP)],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "attribute_recognition__mcqa" in r.output and "ρ" in r.output
    assert "similar demos" in r.output and "random-only demos" in r.output
    sel = json.loads((tmp_path / "b" / "curation" / "selection" / "plurality__caption_foil.json").read_text())
    assert sel["lambda_source"] == "auto" and sel["rho"] == pytest.approx(1.0)


def test_a_mixed_caption_foil_group_gives_each_query_demos_of_its_own_format(pool, clip, tmp_path):
    """Binary statements share the caption/foil pool (Table 2) but never serve as caption/foil demos."""
    from mmctx.data.disk import read_samples

    samples = read_samples(pool / "pool.jsonl")
    mixed = [s.model_copy(update={"task": "spatial_relations"}) if s.task == "coreference" else s for s in samples]
    import shutil

    root = tmp_path / "mixed"
    shutil.copytree(pool / "images", root / "images")
    write_samples(mixed, root / "pool.jsonl")
    out = tmp_path / "out"
    opts = CurateOptions(encoder=f"clip:{clip}", k=6, demos=DEMOS, duplicate_cosine=RANDOM_CLIP_DUP, figures=False,
                         fewmmbench_layout=False)  # fmt: skip
    curate(root, out, opts, progress=False)
    bench = load_benchmark(out)
    spatial = [q for q in bench.queries if q.task == "spatial_relations" and q.format != "mcqa"]
    assert len(spatial) == 6
    for q in spatial:
        assert all(bench.demo(k).format == q.format for keys in q.demo_keys.values() for k in keys)


def test_a_group_smaller_than_the_demos_asked_stores_what_its_queries_can_take(pool, clip, tmp_path):
    out = tmp_path / "out"
    opts = CurateOptions(encoder=f"clip:{clip}", k=K, demos=64, duplicate_cosine=RANDOM_CLIP_DUP, figures=False,
                         fewmmbench_layout=False)  # fmt: skip
    curate(pool, out, opts, progress=False)
    bench = load_benchmark(out)
    for record in (json.loads(f.read_text()) for f in (out / "curation" / "retrieval").glob("*.json")):
        assert record["demos_asked"] == 64 and 8 <= record["demos"] < 64, record["group"]
        for qid, keys in record["queries"].items():
            assert {len(keys[k]) for k in ("similar", "random", "mmr")} == {record["demos"]}, qid
    assert bench.validate() == []
    # Fewer than the paper's largest k (8) a query may store is still refused, naming the group.
    with pytest.raises(CurationError, match=r"needs at least k \+ 8 demos = 15"):
        curate(pool, tmp_path / "again", CurateOptions(encoder=f"clip:{clip}", k=K + 4, demos=64), progress=False)


def test_no_demos_or_no_rationale_depth_is_refused_before_any_work(pool, clip, tmp_path):
    from mmctx.curate.pipeline import rationale_targets
    from mmctx.schema import Benchmark

    with pytest.raises(CurationError, match="demos: 0 ranked demos per query asked"):
        curate(pool, tmp_path / "out", CurateOptions(encoder=f"clip:{clip}", k=K, demos=0), progress=False)
    assert not (tmp_path / "out" / "curation" / "embeddings").exists()
    with pytest.raises(CurationError, match="rationale depth 0"):
        rationale_targets(Benchmark("empty", [], [], pool), 0)
    r = CliRunner().invoke(app, ["curate", str(pool), "--out", str(tmp_path / "cli"), "--rationale-depth", "0"])
    assert r.exit_code != 0 and "--rationale-depth" in r.output
