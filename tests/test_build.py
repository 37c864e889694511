"""`mmctx sources` and `mmctx build fewmmbench` over fixtures of all ten source datasets."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from mmctx.cli import app
from mmctx.data.sources.build import load_recipe


@pytest.fixture(scope="module")
def sources_root(tmp_path_factory):
    from fixtures import sources_real as real
    from fixtures import sources_synth_a as a
    from fixtures import sources_synth_b as b

    if not real.SAMPLES.is_dir():
        pytest.skip("the shared source-format samples are not beside the repository")
    root = tmp_path_factory.mktemp("sources")
    for place in (real.place_valse, real.place_vsr, real.place_mme, real.place_gvtbench):
        place(root)
    for write in (a.write_aro, a.write_whatsup, a.write_cvbench, b.write_seedbench, b.write_mmbench, b.write_milebench):
        write(root)
    _make_images_distinct(root)
    return root


def _make_images_distinct(root):
    """Fixture writers reuse one placeholder picture; real datasets do not, and identical image
    bytes are (rightly) treated as the same image, which no demo may share with its query."""
    import hashlib

    from PIL import Image

    for path in sorted(root.rglob("*")):
        if path.suffix.lower() in (".jpg", ".jpeg", ".png") and path.is_file() and not path.is_symlink():
            with Image.open(path) as im:
                im = im.convert("RGB")
            shade = hashlib.sha256(str(path.relative_to(root)).encode()).digest()
            im.putpixel((0, 0), tuple(shade[:3]))
            im.save(path, format="PNG" if path.suffix.lower() == ".png" else "JPEG", quality=100)


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    from mmctx.models.tiny import build_tiny_clip

    return build_tiny_clip(tmp_path_factory.mktemp("clip") / "clip")


def test_the_shipped_recipe_names_only_known_subsets_and_every_task():
    recipe = load_recipe()
    assert {g.task for g in recipe.groups} == {
        "attribute_recognition", "object_recognition", "plurality", "counting", "spatial_relations",
        "action_recognition", "commonsense", "temporal", "coreference",
    }  # fmt: skip
    assert len(recipe.sources) == 10


def test_a_recipe_with_an_unknown_subset_is_refused_naming_it(tmp_path):
    bad = tmp_path / "r.yaml"
    bad.write_text("groups:\n  - task: counting\n    kind: mcqa\n    inputs: [valse/counting-easy, nope/x]\n")
    with pytest.raises(ValueError) as err:
        load_recipe(bad)
    assert "valse/counting-easy" in str(err.value) and "unknown source 'nope'" in str(err.value)


def test_sources_lists_licenses_and_layouts():
    r = CliRunner().invoke(app, ["sources"])
    assert r.exit_code == 0, r.output
    for text in ("VALSE", "MIT", "Apache-2.0", "MileBench", "MME"):
        assert text in r.output


def test_build_converts_pools_by_recipe_and_curates(sources_root, clip, tmp_path):
    out = tmp_path / "bench"
    r = CliRunner().invoke(
        app,
        ["build", "fewmmbench", "--sources", str(sources_root), "--out", str(out), "--encoder", f"clip:{clip}",
         "--k", "1", "--demos", "1", "--no-figures", "--duplicate-cosine", "0.99999"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "skipped group counting__mcqa: 1 samples, fewer than k + 1 demos = 2" in r.output
    report = json.loads((out / "curation" / "build.json").read_text())
    present = {s["name"]: s for s in report["sources"]}
    assert set(present) == set(load_recipe().sources) and all(s["present"] for s in present.values())
    assert present["valse"]["skipped"].get("mturk.caption < 2", 0) > 0  # VALSE's own validity rule
    rows = report["composition"]
    tasks = {row["task"] for row in rows if row["queries"]}
    assert len(tasks) == 9  # counting still comes from its caption/foil pool
    # Per task and kind, exactly k queries were selected, drawn from the listed sources.
    by_group = {}
    for row in rows:
        by_group.setdefault((row["task"], row["kind"]), 0)
        by_group[(row["task"], row["kind"])] += row["queries"]
    assert set(by_group.values()) == {1}
    assert "VSR" in {
        row["source"] for row in rows if row["task"] == "spatial_relations" and row["kind"] == "caption_foil"
    }
    assert report["skipped_groups"] == {"counting__mcqa": {"samples": 1, "needed": 2}}
    assert report["duplicates"]["count"] == 0
    assert report["surface_cues"] == []  # VALSE's casing cue is gone: the converter capitalises both texts
    r = CliRunner().invoke(app, ["validate", str(out)])
    assert r.exit_code == 0, r.output
    _assert_the_layout_holds_what_it_can(out, report)


def _assert_the_layout_holds_what_it_can(out, report):
    """Every query and demo is in the FewMMBench layout (VSR statements among the caption/foil rows),
    except what build.json lists as left out."""
    import datasets

    from mmctx.data.disk import load_benchmark
    from mmctx.data.fewmmbench import layout_left_out

    bench = load_benchmark(out)
    left_out = layout_left_out(bench)
    assert report["left_out_of_layout"]["samples"] == left_out
    assert report["left_out_of_layout"]["count"] == len(left_out)
    layout = out / "fewmmbench-layout"
    written = {}
    for config in datasets.get_dataset_config_names(str(layout)):
        # Every build writes a folder of this name, and `datasets` caches a local folder's configs by
        # folder and config name: a cache of this build's own keeps another build's rows out.
        rows = datasets.load_dataset(str(layout), config, split="train", cache_dir=str(out / "hf-cache"))
        written[config] = [r["example_id"] for r in rows]
    kind = {"mcqa": "multiple_choice_qa", "caption_foil": "caption_foil", "binary": "caption_foil"}
    for table, samples in (("test", bench.queries), ("demonstrations", bench.demos)):
        for s in samples:
            assert (s.id in written[f"{kind[s.format]}_{table}"]) == (s.id not in left_out), s.id
    assert any(s.format == "binary" for s in bench.queries + bench.demos if s.id not in left_out)


def test_missing_sources_are_reported_and_skipped(sources_root, clip, tmp_path):
    import shutil

    partial = tmp_path / "partial"
    shutil.copytree(sources_root, partial, symlinks=True)
    shutil.rmtree(partial / "mmbench")
    shutil.rmtree(partial / "cvbench")
    r = CliRunner().invoke(
        app,
        ["build", "fewmmbench", "--sources", str(partial), "--out", str(tmp_path / "b"), "--encoder", f"clip:{clip}",
         "--k", "1", "--demos", "1", "--no-figures", "--duplicate-cosine", "0.99999"],
    )  # fmt: skip
    assert "missing mmbench" in r.output and "missing cvbench" in r.output
    assert r.exit_code == 0, r.output


def test_repeated_source_records_are_curated_once_and_counted(sources_root, clip, tmp_path):
    import shutil

    repeated = tmp_path / "repeated"
    shutil.copytree(sources_root, repeated, symlinks=True)
    path = repeated / "gvtbench" / "GVTBench" / "coco_mci.json"
    records = json.loads(path.read_text())
    path.write_text(json.dumps(records + [dict(records[3]), dict(records[3])]))  # as GVTBench repeats records
    out = tmp_path / "b"
    r = CliRunner().invoke(
        app,
        ["build", "fewmmbench", "--sources", str(repeated), "--out", str(out), "--encoder", f"clip:{clip}",
         "--k", "1", "--demos", "1", "--no-figures", "--duplicate-cosine", "0.99999"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "dropped 2 content duplicate(s) (GVTBench 2)" in r.output
    report = json.loads((out / "curation" / "build.json").read_text())
    n = len(records)
    assert report["duplicates"] == {
        "count": 2,
        "by_source": {"GVTBench": 2},
        "dropped_for": {"gvtbench/coco_mci/3": [f"gvtbench/coco_mci/{n}", f"gvtbench/coco_mci/{n + 1}"]},
    }
    gvt_pool = sum(row["pool"] for row in report["composition"] if row["source"] == "GVTBench")
    assert gvt_pool == len(records) + len(json.loads((repeated / "gvtbench" / "GVTBench" / "vcr_mci.json").read_text()))


def test_when_nothing_can_be_curated_every_error_is_reported(tmp_path):
    sources = tmp_path / "sources"
    folder = sources / "gvtbench" / "GVTBench"
    folder.mkdir(parents=True)
    bad = [{"image_id": i, "text_in": "Is there a dog?", "text_out": "Perhaps."} for i in range(7)]
    for name in ("coco_mci", "vcr_mci"):
        (folder / f"{name}.json").write_text(json.dumps(bad))
    out = tmp_path / "b"
    r = CliRunner().invoke(
        app, ["build", "fewmmbench", "--sources", str(sources), "--out", str(out), "--encoder", "clip:unused"]
    )
    assert r.exit_code == 2, r.output
    report_path = out / "curation" / "build.json"
    assert "no samples left to curate" in r.output and str(report_path) in r.output.replace("\n", "")
    # per record: the bad answer and the missing image; five shown, the count of the rest, all in build.json
    assert r.output.count("error gvtbench") == 5 and "and 23 more error(s)" in r.output, r.output
    (gvt,) = [s for s in json.loads(report_path.read_text())["sources"] if s["name"] == "gvtbench"]
    assert len(gvt["errors"]) == 28 and sum("Perhaps." in e for e in gvt["errors"]) == 14


def test_build_reports_a_surface_cue_of_its_pool(clip, tmp_path):
    import base64
    import io

    from fixtures.sources_synth_b import mmbench_row, write_mmbench
    from PIL import Image

    def picture(i: int) -> str:
        buf = io.BytesIO()
        Image.new("RGB", (16, 16), (20 * i, 255 - 20 * i, 7 * i)).save(buf, format="PNG")
        return base64.b64encode(buf.getvalue()).decode()

    # The correct option alone ends in a period, in every one of 12 questions: pickable unseen.
    rows = [
        mmbench_row(i, "attribute_recognition", ["red.", "green", "blue", "white"], "A", picture(i)) for i in range(12)
    ]
    write_mmbench(tmp_path / "sources", rows=rows)
    out = tmp_path / "b"
    r = CliRunner().invoke(
        app,
        ["build", "fewmmbench", "--sources", str(tmp_path / "sources"), "--out", str(out), "--encoder",
         f"clip:{clip}", "--k", "1", "--demos", "1", "--no-figures", "--duplicate-cosine", "0.99999"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "surface cue attribute_recognition: the correct option ends in punctuation in 12 of 12" in r.output
    (cue,) = json.loads((out / "curation" / "build.json").read_text())["surface_cues"]
    assert (cue["task"], cue["feature"], cue["hits"], cue["informative"]) == (
        "attribute_recognition", "trailing_punctuation", 12, 12,
    )  # fmt: skip


def test_a_source_whose_images_are_a_link_to_a_shared_copy_builds(sources_root, clip, tmp_path):
    import shutil

    linked = tmp_path / "linked"
    shutil.copytree(sources_root, linked, symlinks=True)
    shared = tmp_path / "shared-coco" / "val2017"  # outside the sources folder, as a shared COCO copy is
    shutil.move(linked / "gvtbench" / "val2017", shared)
    (linked / "gvtbench" / "val2017").symlink_to(shared, target_is_directory=True)
    out = tmp_path / "b"
    r = CliRunner().invoke(
        app,
        ["build", "fewmmbench", "--sources", str(linked), "--out", str(out), "--encoder", f"clip:{clip}",
         "--k", "1", "--demos", "1", "--no-figures", "--duplicate-cosine", "0.99999"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    bench_images = [p for p in out.rglob("*") if "val2017" in p.parts and p.is_file()]
    assert bench_images and not any(p.is_symlink() for p in bench_images)  # copied in, no link out
    assert CliRunner().invoke(app, ["validate", str(out)]).exit_code == 0
