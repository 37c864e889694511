"""SEED-Bench, MMBench and MileBench converters on fixtures synthesised from their documented formats."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from fixtures.sources_synth_b import (
    CHOICES,
    HINT,
    b64_image,
    frame_names,
    milebench_record,
    mmbench_row,
    write_milebench,
    write_milebench_task,
    write_mmbench,
    write_seedbench,
)
from PIL import Image

from mmctx.data.sources import source
from mmctx.data.sources.base import Conversion, SourceContext
from mmctx.data.sources.milebench import convert as convert_milebench
from mmctx.schema import validate_sample


def run(name: str, root: Path) -> Conversion:
    info, convert = source(name)
    result = convert(SourceContext(root))
    for sample in result.samples:  # every sample a converter returns must pass the schema's own checks
        assert validate_sample(sample, "queries", root) == [], sample.id
        assert sample.task == info.subsets[sample.meta["subset"]][0]
        assert sample.format == info.subsets[sample.meta["subset"]][1]
    return result


def per_subset(result: Conversion) -> Counter:
    return Counter(s.meta["subset"] for s in result.samples)


def errors(result: Conversion) -> set[tuple[str, str, str]]:
    return {(e.file, e.where, e.field) for e in result.errors}


def by_id(result: Conversion) -> dict:
    return {s.id: s for s in result.samples}


# ------------------------------------------------------------------------------------ SEED-Bench


def test_seedbench_maps_six_dimensions_and_skips_v2_copies(tmp_path: Path) -> None:
    write_seedbench(tmp_path)
    result = run("seedbench", tmp_path)

    assert per_subset(result) == {
        "instance_counting": 1,
        "instance_identity": 2,
        "instance_attributes": 1,
        "spatial_relation": 1,
        "visual_reasoning": 1,
        "visual_referring_expression": 2,
    }
    assert result.skipped == {
        "question_type_id not a FewMMBench dimension": 3,
        "v2 copy of a v1 question (SEED-Bench.json read)": 1,
    }
    samples = by_id(result)
    towels = samples["seedbench/instance_counting/101669"]
    assert (towels.task, towels.format, towels.source) == ("counting", "mcqa", "SEED-Bench")
    assert towels.question == "How many towels are in the image?"
    assert towels.choices == ["One", "Two", "Three", "Four"] and towels.answer == "One"
    assert towels.images == ["seedbench/SEED-Bench-image/1454426_2591111986"]  # extension-less, as zipped
    assert towels.meta["source_file"] == "SEED-Bench.json" and towels.meta["key"] == "101669"
    assert samples["seedbench/instance_identity/90001"].answer == "gamma 90001"
    assert samples["seedbench/instance_attributes/90002"].answer == "delta 90002"
    assert samples["seedbench/spatial_relation/90003"].task == "spatial_relations"
    assert samples["seedbench/visual_reasoning/90004"].task == "commonsense"
    assert samples["seedbench/instance_identity/90007"].images == ["seedbench/SEED-Bench-image/img_with_suffix.jpg"]
    vre = samples["seedbench/visual_referring_expression/13_1"]  # question_type_id given as "13"
    assert (vre.task, vre.answer) == ("commonsense", "delta 13_1")
    assert vre.images == ["seedbench/SEED-Bench-2-image/task13/VCR_IMG_0002.jpg"]
    assert vre.meta["source_file"] == "SEED-Bench_v2_level1_2_3.json" and vre.meta["version"] == "v2"

    assert errors(result) == {
        ("SEED-Bench.json", "question_id 90008", "answer"),
        ("SEED-Bench.json", "question_id 90009", "data_id"),
        ("SEED-Bench.json", "question_id 90010", "choice_c"),
        ("SEED-Bench.json", "question_id 90011", "data_id"),
        ("SEED-Bench.json", "question_id 90001", "question_id"),  # the duplicate, after the first was kept
    }
    assert "../outside" in next(e.message for e in result.errors if e.where == "question_id 90011")


def test_seedbench_v2_alone_keeps_its_v1_questions_from_the_cc3m_folder(tmp_path: Path) -> None:
    write_seedbench(tmp_path, v1=False)
    result = run("seedbench", tmp_path)
    assert per_subset(result) == {"instance_counting": 1, "visual_referring_expression": 2}
    towels = by_id(result)["seedbench/instance_counting/5_0"]
    assert towels.images == ["seedbench/cc3m-image/1454426_2591111986"]
    assert towels.meta["data_source"] == "cc3m" and towels.answer == "One"
    assert result.skipped == {"question_type_id not a FewMMBench dimension": 1}
    assert result.errors == []


def test_seedbench_bad_json_names_the_line_and_the_other_release_still_converts(tmp_path: Path) -> None:
    folder = write_seedbench(tmp_path)
    text = (folder / "SEED-Bench.json").read_text()
    (folder / "SEED-Bench.json").write_text(text.replace('"question_id": "90003",', '"question_id": "90003"', 1))
    result = run("seedbench", tmp_path)
    [error] = result.errors
    line = text[: text.index('"question_id": "90003"')].count("\n") + 2  # the parser stops on the next line
    assert (error.file, error.where, error.field) == ("SEED-Bench.json", f"line {line}", "(json)")
    # v1 was not read, so v2's copy of the towels question is kept rather than lost
    assert per_subset(result) == {"instance_counting": 1, "visual_referring_expression": 2}


def test_seedbench_empty_folder_is_one_error(tmp_path: Path) -> None:
    (tmp_path / "seedbench").mkdir()
    result = run("seedbench", tmp_path)
    assert result.samples == []
    [error] = result.errors
    assert "SEED-Bench.json" in error.message and "SEED-Bench_v2_level1_2_3.json" in error.message


# ------------------------------------------------------------------------------------ MMBench


def test_mmbench_collapses_circular_copies_and_resolves_image_references(tmp_path: Path) -> None:
    write_mmbench(tmp_path)
    result = run("mmbench", tmp_path)

    assert per_subset(result) == {
        "attribute_recognition": 1,
        "spatial_relationship": 1,
        "social_relation": 1,
        "physical_relation": 1,
        "nature_relation": 1,
    }
    assert result.skipped == {
        "circular copy (same index mod 1e6)": 3,
        "category not used by FewMMBench": 1,
        "no answer (test split)": 1,
    }
    samples = by_id(result)
    colour = samples["mmbench/attribute_recognition/0"]
    assert (colour.task, colour.source, colour.context) == ("attribute_recognition", "MMBench", "")
    assert colour.choices == ["red", "green", "blue", "white"] and colour.answer == "red"
    assert colour.meta == {
        "source_file": "MMBench_DEV_EN.tsv",
        "key": 0,
        "subset": "attribute_recognition",
        "l2_category": "l2",
        "origin": "synthetic",
        "split": "dev",
    }
    spatial = samples["mmbench/spatial_relationship/1"]
    assert spatial.task == "spatial_relations"
    assert spatial.choices == ["left", "right"] and spatial.answer == "right"  # C/D NaN dropped
    assert spatial.context == HINT  # tabs, quotes and a newline survive the TSV quoting
    assert spatial.images[0].startswith("_mmctx/mmbench/") and spatial.images[0].endswith(".jpg")
    social = samples["mmbench/social_relation/2"]
    assert social.task == "commonsense" and social.answer == "colleagues"
    assert social.images == colour.images  # "0" reuses row 0's image: one decoded file
    with Image.open(tmp_path / colour.images[0]) as im:
        assert im.format == "PNG" and im.convert("RGB").getpixel((0, 0)) == (255, 0, 0)
    nature = samples["mmbench/nature_relation/4"]  # its copy 1000004 came first in the file
    assert nature.choices == ["fish", "cats", "birds", "geese"] and nature.answer == "geese"
    assert samples["mmbench/physical_relation/3"].answer == "ball"

    assert errors(result) == {
        ("MMBench_DEV_EN.tsv", "index 7", "answer"),  # names the NaN option D
        ("MMBench_DEV_EN.tsv", "index 8", "image"),  # not base64
        ("MMBench_DEV_EN.tsv", "index 9", "image"),  # references a row that does not exist
        ("MMBench_DEV_EN.tsv", "index 10", "A..D"),  # "Above" / "above "
    }


def test_mmbench_reads_an_older_dev_file_and_reports_a_missing_column(tmp_path: Path) -> None:
    red = b64_image("red")
    write_mmbench(
        tmp_path,
        "mmbench_dev_20230712.tsv",
        [mmbench_row(7, "spatial_relationship", ["left", "right", "above"], "C", red)],
    )
    result = run("mmbench", tmp_path)
    assert [s.id for s in result.samples] == ["mmbench/spatial_relationship/7"]
    assert result.samples[0].answer == "above"

    no_image = "index\tquestion\tA\tB\tanswer\tcategory\n0\tq\ta\tb\tA\tocr\n"
    (tmp_path / "mmbench" / "MMBench_DEV_EN.tsv").write_text(no_image)
    result = run("mmbench", tmp_path)  # the preferred file wins, and it lacks the image column
    assert result.samples == []
    assert errors(result) == {("MMBench_DEV_EN.tsv", "line 1", "image")}


def test_mmbench_empty_folder_is_one_error(tmp_path: Path) -> None:
    (tmp_path / "mmbench").mkdir()
    result = run("mmbench", tmp_path)
    [error] = result.errors
    assert error.where == "folder" and "MMBench_DEV_EN.tsv" in error.message


# ------------------------------------------------------------------------------------ MileBench


def test_milebench_composite_is_the_default_form(tmp_path: Path) -> None:
    write_milebench(tmp_path)
    result = run("milebench", tmp_path)

    assert per_subset(result) == {"composite": 4}
    assert sorted(by_id(result)) == [
        "milebench/composite/ActionSequence/0",
        "milebench/composite/ActionSequence/1",
        "milebench/composite/StateChange/10",
        "milebench/composite/StateChange/11",
    ]
    first = by_id(result)["milebench/composite/ActionSequence/0"]
    assert (first.task, first.format, first.source) == ("temporal", "mcqa", "MileBench")
    assert first.choices == CHOICES and first.answer == "Took the box."
    assert first.question == "image 1, image 2, image 3\nQuestion: What happened next?"
    assert first.context.splitlines() == [
        "Watch the frames in order, then answer.",
        "The image shows 3 frames side by side, in order from left to right (image 1 to image 3).",
    ]
    assert first.meta["frames"] == [f"milebench/ActionSequence/images/{n}" for n in frame_names("ActionSequence", 0)]
    assert first.meta["task_name"] == "ActionSequence" and first.meta["key"] == 0
    [image] = first.images
    assert image.startswith("_mmctx/milebench/") and image.endswith(".jpg")
    with Image.open(tmp_path / image) as im:
        # frames 32x24, 64x48, 40x24 scaled to height 24 (never up): 32 + 32 + 40 wide, in order
        assert im.size == (104, 24)
        for x, colour in ((16, (255, 0, 0)), (48, (0, 128, 0)), (84, (0, 0, 255))):
            assert all(abs(a - b) < 40 for a, b in zip(im.getpixel((x, 12)), colour)), (x, im.getpixel((x, 12)))
    second = by_id(result)["milebench/composite/ActionSequence/1"]
    assert second.question == "Compare image 1 and image 2, then image 3. Which came first?"
    assert second.context.startswith("Second instruction.\n")

    file = "ActionSequence/ActionSequence.json"
    assert errors(result) == {
        (file, "sample_id 2", "response"),
        (file, "sample_id 3", "task_instance.images_path[2]"),
        (file, "sample_id 4", "task_instance.context"),  # {image#4} with 3 images
        (file, "sample_id 5", "task_instance.choice_list"),  # 5 options
        (file, "sample_id 6", "task_instruction_id"),
        (file, "sample_id 0", "sample_id"),  # duplicate
    }
    assert not any("ALFRED" in s.id for s in result.samples)  # not a temporal task


def test_milebench_frames_form_and_composite_are_deterministic(tmp_path: Path) -> None:
    write_milebench(tmp_path)
    ctx = SourceContext(tmp_path)
    both = convert_milebench(ctx, forms=("frames", "composite"))
    assert Counter(s.meta["subset"] for s in both.samples) == {"frames": 4, "composite": 4}
    frames = by_id(both)["milebench/frames/StateChange/11"]
    assert frames.images == [f"milebench/StateChange/images/{n}" for n in frame_names("StateChange", 1)]
    assert frames.context == "Watch the frames in order, then answer."
    assert frames.answer == "on" and frames.choices == ["on", "off"]
    for sample in both.samples:
        assert validate_sample(sample, "queries", tmp_path) == []

    composite = by_id(both)["milebench/composite/StateChange/11"].images[0]
    data = (tmp_path / composite).read_bytes()
    (tmp_path / composite).unlink()
    again = by_id(convert_milebench(ctx))["milebench/composite/StateChange/11"].images[0]
    assert again == composite and (tmp_path / again).read_bytes() == data

    small = by_id(convert_milebench(ctx, frame_height=12))["milebench/composite/StateChange/11"].images[0]
    with Image.open(tmp_path / small) as im:
        assert im.size == (16 + 16 + 20, 12)
    with pytest.raises(ValueError, match="unknown MileBench form"):
        convert_milebench(ctx, forms=("video",))


def test_milebench_bad_files_and_frames_do_not_stop_other_tasks(tmp_path: Path) -> None:
    write_milebench_task(
        tmp_path,
        "ObjectShuffle",
        [
            milebench_record(1, frame_names("ObjectShuffle", 0), ["left", "middle", "right"], "middle"),
            milebench_record(2, frame_names("ObjectShuffle", 1), ["left", "middle", "right"], "left"),
        ],
    )
    (tmp_path / "milebench/ObjectShuffle/images/ObjectShuffle_1_1.jpg").write_bytes(b"not a jpeg")
    open_ended = milebench_record(0, frame_names("MovingDirection", 0), ["up", "down"], "up")
    write_milebench_task(tmp_path, "MovingDirection", [open_ended], question_type="open-ended")
    bad = write_milebench_task(tmp_path, "SceneTransition", [])
    bad.write_text('{"meta_data": {},\n "data": [\n  {"sample_id": 1,,}\n]}')

    result = run("milebench", tmp_path)
    assert [s.id for s in result.samples] == ["milebench/composite/ObjectShuffle/1"]
    assert result.skipped == {"question_type not multi-choice": 1}
    assert errors(result) == {
        ("ObjectShuffle/ObjectShuffle.json", "sample_id 2", "task_instance.images_path"),  # unreadable frame
        ("SceneTransition/SceneTransition.json", "line 3", "(json)"),
    }


def test_milebench_empty_folder_is_one_error(tmp_path: Path) -> None:
    (tmp_path / "milebench" / "ALFRED").mkdir(parents=True)
    result = run("milebench", tmp_path)
    [error] = result.errors
    assert error.where == "folder" and "ActionSequence/ActionSequence.json" in error.message
