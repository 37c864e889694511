"""ARO, What'sUp and CV-Bench converters on synthetic folders in their distributed layouts."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from fixtures.sources_synth_a import (
    aro_attribution,
    aro_relation,
    controlled_a,
    cv_2d,
    cv_3d,
    cv_image,
    cv_record,
    write_aro,
    write_cvbench,
    write_cvbench_parquet,
    write_whatsup,
)
from PIL import Image

from mmctx.data.sources import SourceContext, source
from mmctx.schema import validate_sample


def convert(name: str, root: Path):
    return source(name)[1](SourceContext(root))


def by_id(conversion):
    return {s.id: s for s in conversion.samples}


def errors_at(conversion):
    """(file, where, field) of every error, for exact comparison."""
    return sorted((e.file, e.where, e.field) for e in conversion.errors)


def assert_valid(conversion, root: Path) -> None:
    """Every sample passes the benchmark's own record checks, image files included."""
    assert len({s.id for s in conversion.samples}) == len(conversion.samples)
    for sample in conversion.samples:
        assert validate_sample(sample, "queries", root) == []


def test_registry_describes_each_subset_with_a_known_task_and_format():
    mapping = {name: source(name)[0].subsets for name in ("aro", "whatsup", "cvbench")}
    assert mapping["aro"] == {
        "vg_relation": ("spatial_relations", "caption_foil"),
        "vg_attribution": ("attribute_recognition", "caption_foil"),
    }
    assert set(mapping["whatsup"].values()) == {("spatial_relations", "caption_foil")}
    assert len(mapping["whatsup"]) == 6
    assert mapping["cvbench"] == {"relative_distance": ("commonsense", "mcqa")}


# --------------------------------------------------------------------------------------- ARO


def test_aro_converts_both_subsets_with_true_caption_as_answer(tmp_path):
    write_aro(tmp_path)
    out = convert("aro", tmp_path)
    assert out.errors == [] and not out.skipped
    assert Counter(s.meta["subset"] for s in out.samples) == {"vg_relation": 3, "vg_attribution": 2}
    rel = by_id(out)["aro/vg_relation/1"]
    assert (rel.task, rel.format, rel.source) == ("spatial_relations", "caption_foil", "ARO")
    assert rel.choices == ["the man is wearing the shirt", "the shirt is wearing the man"]
    assert rel.answer == rel.choices[0]
    assert rel.meta | {} == {
        "source_file": "visual_genome_relation.json",
        "key": 1,
        "subset": "vg_relation",
        "relation_name": "wearing",
        "image_path": "2315375.jpg",
        "bbox": [0, 5, 10, 10],
    }
    attr = by_id(out)["aro/vg_attribution/0"]
    assert attr.task == "attribute_recognition"
    assert attr.answer == "the paved road and the white house"
    assert attr.meta["attributes"] == ["paved", "white"]
    assert_valid(out, tmp_path)


def test_aro_images_are_the_box_crops_written_once_as_png(tmp_path):
    write_aro(tmp_path)
    first = by_id(convert("aro", tmp_path))
    # Relation 0 and attribution 1 share image and box: one derived file, the blue right half.
    crop = first["aro/vg_relation/0"].images[0]
    assert crop == first["aro/vg_attribution/1"].images[0]
    assert crop.startswith("_mmctx/aro/") and crop.endswith(".png")
    with Image.open(tmp_path / crop) as image:
        assert image.format == "PNG" and image.size == (20, 30)
        assert image.getpixel((10, 15))[2] > 200 and image.getpixel((10, 15))[0] < 50
    with Image.open(tmp_path / first["aro/vg_relation/1"].images[0]) as image:
        assert image.size == (10, 10) and image.getpixel((5, 5))[0] > 200  # left half: red
    files = sorted((tmp_path / "_mmctx").rglob("*.png"))
    assert len(files) == 4  # 5 samples, 4 distinct boxes
    # Converting again yields byte-identical crops at the same paths, and no new files.
    second = by_id(convert("aro", tmp_path))
    assert {k: s.images for k, s in second.items()} == {k: s.images for k, s in first.items()}
    assert sorted((tmp_path / "_mmctx").rglob("*.png")) == files


def test_aro_bad_records_are_reported_and_the_others_kept(tmp_path):
    good = aro_relation()
    relation = [
        good[0],
        {k: v for k, v in good[1].items() if k != "true_caption"},  # 1: missing caption
        good[2] | {"bbox_w": 0},  # 2: empty box
        good[2] | {"image_path": "missing.jpg"},  # 3
        good[2] | {"image_path": "../aro/images/2350917.jpg"},  # 4: escapes images/ via ..
        good[2] | {"false_caption": "The cup is on the table "},  # 5: foil equals caption
        {k: v for k, v in good[2].items() if k != "relation_name"},  # 6
        good[2] | {"bbox_x": 40},  # 7: box starts past the 40 px wide image
        "not a record",  # 8
        good[2] | {"bbox_y": "3"},  # 9
        good[2] | {"bbox_h": float("nan")},  # 10: json.dumps writes NaN, json.loads reads it back
    ]
    attribution = [aro_attribution()[0] | {"attributes": ["paved"]}, aro_attribution()[1]]
    write_aro(tmp_path, relation, attribution)
    out = convert("aro", tmp_path)
    r, a = "visual_genome_relation.json", "visual_genome_attribution.json"
    assert errors_at(out) == sorted(
        [
            (r, "index 1", "true_caption"),
            (r, "index 2", "bbox_w"),
            (r, "index 3", "image_path"),
            (r, "index 4", "image_path"),
            (r, "index 5", "false_caption"),
            (r, "index 6", "relation_name"),
            (r, "index 7", "bbox_x"),
            (r, "index 8", "(record)"),
            (r, "index 9", "bbox_y"),
            (r, "index 10", "bbox_h"),
            (a, "index 0", "attributes"),
        ]
    )
    assert sorted(by_id(out)) == ["aro/vg_attribution/1", "aro/vg_relation/0"]
    assert "not found" in next(e for e in out.errors if e.where == "index 3").message
    assert str(out.errors[0]).startswith("aro: visual_genome_relation.json index ")


def test_aro_keeps_unknown_keys_and_survives_a_broken_file(tmp_path):
    folder = write_aro(tmp_path, relation=[aro_relation()[0] | {"image_id": 2315375}])
    assert by_id(convert("aro", tmp_path))["aro/vg_relation/0"].meta["image_id"] == 2315375
    (folder / "visual_genome_relation.json").write_text('[\n  {"image_path": "2315375.jpg",\n  oops\n]')
    out = convert("aro", tmp_path)
    assert errors_at(out) == [("visual_genome_relation.json", "line 3", "(json)")]
    assert Counter(s.meta["subset"] for s in out.samples) == {"vg_attribution": 2}


def test_aro_missing_files(tmp_path):
    folder = write_aro(tmp_path)
    (folder / "visual_genome_attribution.json").unlink()
    out = convert("aro", tmp_path)
    assert out.errors == [] and {s.meta["subset"] for s in out.samples} == {"vg_relation"}
    (folder / "visual_genome_relation.json").unlink()
    out = convert("aro", tmp_path)
    assert out.samples == [] and errors_at(out) == [(".", "folder", "(files)")]
    assert "visual_genome_relation.json" in out.errors[0].message


# ---------------------------------------------------------------------------------- What'sUp


def test_whatsup_converts_six_subsets_first_caption_true(tmp_path):
    write_whatsup(tmp_path)
    out = convert("whatsup", tmp_path)
    assert out.errors == [] and not out.skipped
    assert Counter(s.meta["subset"] for s in out.samples) == {
        "controlled_a": 4,
        "controlled_b": 2,
        "coco_qa_one_obj": 2,
        "coco_qa_two_obj": 1,
        "vg_qa_one_obj": 1,
        "vg_qa_two_obj": 2,
    }
    assert {(s.task, s.format, s.source) for s in out.samples} == {("spatial_relations", "caption_foil", "What'sUp")}
    under = by_id(out)["whatsup/controlled_a/1"]
    assert under.choices == [
        "A beer bottle under a armchair",
        "A beer bottle on a armchair",
        "A beer bottle to the left of a armchair",
        "A beer bottle to the right of a armchair",
    ]
    assert under.answer == "A beer bottle under a armchair"
    assert under.images == ["whatsup/controlled_images/beer-bottle_under_armchair.jpeg"]
    assert under.meta == {
        "source_file": "controlled_images_dataset.json",
        "key": 1,
        "subset": "controlled_a",
        "image_path": "data/controlled_images/beer-bottle_under_armchair.jpeg",
        "objects": ["beer-bottle", "armchair"],
        "preposition": "under",
    }
    assert by_id(out)["whatsup/controlled_b/0"].meta["preposition"] == "in-front_of"
    assert by_id(out)["whatsup/controlled_a/2"].meta["preposition"] == "left_of"
    coco = by_id(out)["whatsup/coco_qa_one_obj/1"]
    assert coco.images == ["whatsup/val2017/000000037777.jpg"]
    assert coco.choices == ["A dog on the right", "A dog on the left"] and coco.answer == "A dog on the right"
    assert coco.meta["image_id"] == 37777
    vg = by_id(out)["whatsup/vg_qa_two_obj/1"]
    assert vg.images == ["whatsup/vg_images/2368310.jpg"] and vg.answer == "A cat in front of a sofa"
    assert_valid(out, tmp_path)


def test_whatsup_bad_records_are_reported_and_the_others_kept(tmp_path):
    good = controlled_a()
    controlled = [
        good[0],
        good[1] | {"caption_options": good[1]["caption_options"] + ["A beer bottle near a armchair"]},  # 1: 5 options
        good[2] | {"caption_options": ["A beer bottle on a armchair"]},  # 2: 1 option
        good[3] | {"caption_options": ["A beer bottle on a armchair", "a beer bottle on a armchair "]},  # 3: dupes
        good[0] | {"image_path": "data/controlled_images/nothing_on_nothing.jpeg"},  # 4: missing
        good[0] | {"image_path": "/etc/passwd"},  # 5: absolute
        {"caption_options": good[0]["caption_options"]},  # 6: no image_path
    ]
    coco = [
        [397133, "A person on the left", "A person on the right"],
        [397133, "A person on the left"],  # 1: not a triple
        ["abc", "A cat on the left", "A cat on the right"],  # 2: bad id
        [999, "A cup on the left", "A cup on the right"],  # 3: no such image
        [37777, "A dog on the right", 7],  # 4: caption not a string
    ]
    write_whatsup(tmp_path, files={"controlled_images_dataset.json": controlled, "coco_qa_one_obj.json": coco})
    out = convert("whatsup", tmp_path)
    c, q = "controlled_images_dataset.json", "coco_qa_one_obj.json"
    assert errors_at(out) == sorted(
        [
            (c, "index 1", "caption_options"),
            (c, "index 2", "caption_options"),
            (c, "index 3", "caption_options"),
            (c, "index 4", "image_path"),
            (c, "index 5", "image_path"),
            (c, "index 6", "image_path"),
            (q, "index 1", "(record)"),
            (q, "index 2", "image_id"),
            (q, "index 3", "image_id"),
            (q, "index 4", "captions"),
        ]
    )
    assert sorted(by_id(out)) == ["whatsup/coco_qa_one_obj/0", "whatsup/controlled_a/0"]
    assert "2–4" in next(e for e in out.errors if e.file == c and e.where == "index 1").message


def test_whatsup_missing_files(tmp_path):
    write_whatsup(tmp_path, files={"vg_qa_one_obj.json": [[2412345, "A car on the top", "A car on the bottom"]]})
    out = convert("whatsup", tmp_path)
    assert out.errors == [] and [s.id for s in out.samples] == ["whatsup/vg_qa_one_obj/0"]
    (tmp_path / "empty" / "whatsup").mkdir(parents=True)
    out = convert("whatsup", tmp_path / "empty")
    assert out.samples == [] and errors_at(out) == [(".", "folder", "(files)")]


def test_whatsup_bad_json_names_the_line(tmp_path):
    folder = write_whatsup(tmp_path)
    (folder / "vg_qa_two_obj.json").write_text('[[2354786, "A lamp behind a bed",\n "A lamp in front of a bed"]\n[1]]')
    out = convert("whatsup", tmp_path)
    assert errors_at(out) == [("vg_qa_two_obj.json", "line 3", "(json)")]
    assert len(out.samples) == 10  # the five other files are untouched


# ---------------------------------------------------------------------------------- CV-Bench


def test_cvbench_keeps_relative_distance_as_commonsense_mcqa(tmp_path):
    write_cvbench(tmp_path)
    out = convert("cvbench", tmp_path)
    assert out.errors == []
    assert out.skipped == {"task Depth (not Distance)": 2}
    assert sorted(by_id(out)) == [
        "cvbench/relative_distance/2038",
        "cvbench/relative_distance/2039",
        "cvbench/relative_distance/2040",
    ]
    s = by_id(out)["cvbench/relative_distance/2038"]
    assert (s.task, s.format, s.source) == ("commonsense", "mcqa", "CV-Bench")
    assert s.choices == ["bus", "car"] and s.answer == "car"
    assert s.question.startswith("Estimate the real-world distances") and "(A)" not in s.question
    assert s.images == ["cvbench/img/3D/distance/omni3d_hypersim_162.png"]
    assert s.meta["answer_letter"] == "B" and s.meta["key"] == 2038
    assert s.meta["source_file"] == "test_3d.jsonl" and s.meta["source"] == "Omni3D"
    assert by_id(out)["cvbench/relative_distance/2039"].answer == "sofa"
    assert_valid(out, tmp_path)


def test_cvbench_filename_with_or_without_img_prefix(tmp_path):
    # Whether `filename` starts with "img/" is unverified; both spellings find the file in img/.
    records = [
        cv_record(1, "Distance", ["bus", "car"], "(B)", "img/3D/distance/a.png"),
        cv_record(2, "Distance", ["bus", "car"], "(A)", "3D/distance/b.png"),
    ]
    folder = write_cvbench(tmp_path, records)
    (folder / "3D/distance/b.png").rename(folder / "img/3D/distance/b.png")
    out = convert("cvbench", tmp_path)
    assert out.errors == []
    assert {s.meta["key"]: s.images for s in out.samples} == {
        1: ["cvbench/img/3D/distance/a.png"],
        2: ["cvbench/img/3D/distance/b.png"],
    }


def test_cvbench_older_single_file_revision(tmp_path):
    write_cvbench(tmp_path, cv_2d() + cv_3d(), name="test.jsonl")
    out = convert("cvbench", tmp_path)
    assert out.errors == [] and len(out.samples) == 3
    assert out.skipped == {
        "task Count (not Distance)": 1,
        "task Relation (not Distance)": 1,
        "task Depth (not Distance)": 2,
    }
    assert {s.meta["source_file"] for s in out.samples} == {"test.jsonl"}
    # With both revisions present only the current file is read: no duplicated items.
    write_cvbench(tmp_path, cv_3d()[:2])
    out = convert("cvbench", tmp_path)
    assert [s.id for s in out.samples] == ["cvbench/relative_distance/2038"]


def test_cvbench_parquet_embedded_images_are_written_out(tmp_path):
    write_cvbench_parquet(tmp_path)
    out = convert("cvbench", tmp_path)
    assert out.errors == [] and out.skipped == {"task Depth (not Distance)": 2}
    s = by_id(out)["cvbench/relative_distance/2040"]
    assert s.answer == "window" and s.meta["source_file"] == "test_3d.parquet"
    assert s.images[0].startswith("_mmctx/cvbench/") and s.images[0].endswith(".png")
    assert (tmp_path / s.images[0]).read_bytes() == cv_image(2040)
    assert_valid(out, tmp_path)


def test_cvbench_broken_parquet_is_one_error(tmp_path):
    (tmp_path / "cvbench").mkdir()
    (tmp_path / "cvbench" / "test_3d.parquet").write_bytes(b"PAR1 not really a parquet file PAR1")
    out = convert("cvbench", tmp_path)
    assert out.samples == [] and errors_at(out) == [("test_3d.parquet", "row 0", "(parquet)")]


def test_cvbench_bad_records_are_reported_and_the_others_kept(tmp_path):
    def d(n: int, **fields):
        return cv_record(n, "Distance", ["bus", "car"], "(A)", f"img/3D/distance/{n}.png") | fields

    records = [
        d(1),
        d(2, answer="(C)"),  # line 2: letter past the choices
        d(3, answer="B"),  # line 3: not "(B)"
        d(4, choices=["bus"]),  # line 4
        d(5, choices=["bus", "Bus"]),  # line 5: duplicates
        d(6, filename="../outside.png"),  # line 6
        d(1),  # line 7: duplicate idx
        d(8, idx="8"),  # line 8
        {k: v for k, v in d(9).items() if k != "task"},  # line 9
        d(10, question=" "),  # line 10
        d(11),  # line 11, its image removed below
    ]
    folder = write_cvbench(tmp_path, records)
    (folder / "img/3D/distance/11.png").unlink()
    path = folder / "test_3d.jsonl"
    path.write_text(path.read_text() + "{not json\n" + '["a list"]\n')
    out = convert("cvbench", tmp_path)
    f = "test_3d.jsonl"
    assert errors_at(out) == sorted(
        [
            (f, "line 2", "answer"),
            (f, "line 3", "answer"),
            (f, "line 4", "choices"),
            (f, "line 5", "choices"),
            (f, "line 6", "filename"),
            (f, "line 7", "idx"),
            (f, "line 8", "idx"),
            (f, "line 9", "task"),
            (f, "line 10", "question"),
            (f, "line 11", "filename"),
            (f, "line 12", "(json)"),
            (f, "line 13", "(record)"),
        ]
    )
    assert [s.id for s in out.samples] == ["cvbench/relative_distance/1"]


def test_cvbench_empty_folder(tmp_path):
    (tmp_path / "cvbench").mkdir()
    out = convert("cvbench", tmp_path)
    assert out.samples == [] and errors_at(out) == [(".", "folder", "(files)")]
    assert "test_3d.jsonl" in out.errors[0].message


@pytest.mark.parametrize("name", ["aro", "whatsup", "cvbench"])
def test_absent_dataset_folder_is_one_error_not_a_crash(tmp_path, name):
    out = convert(name, tmp_path)
    assert out.samples == [] and len(out.errors) == 1 and out.errors[0].source == name
