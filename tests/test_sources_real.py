"""VALSE, VSR, MME and GVTBench converters, run on copies of the real dataset excerpts."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from fixtures.sources_real import (
    MME_RELEASE,
    SAMPLES,
    edit_gvt,
    edit_jsonl,
    edit_valse,
    eval_tool_lines,
    place_gvtbench,
    place_mme,
    place_valse,
    place_vsr,
)

from mmctx.data.sources import source
from mmctx.data.sources.base import Conversion, SourceContext
from mmctx.schema import TASKS, validate_sample

pytestmark = pytest.mark.skipif(not SAMPLES.is_dir(), reason=f"real source excerpts not found at {SAMPLES}")


def convert(name: str, root: Path) -> Conversion:
    return source(name)[1](SourceContext(root))


def by_id(conv: Conversion) -> dict:
    return {s.id: s for s in conv.samples}


def errors_at(conv: Conversion) -> list[tuple[str, str, str]]:
    return [(e.file, e.where, e.field) for e in conv.errors]


@pytest.mark.parametrize("name", ["valse", "vsr", "mme", "gvtbench"])
def test_every_sample_is_valid_and_matches_the_declared_subsets(name, tmp_path):
    place = {"valse": place_valse, "vsr": place_vsr, "mme": place_mme, "gvtbench": place_gvtbench}[name]
    place(tmp_path)
    info, converter = source(name)
    conv = converter(SourceContext(tmp_path))
    assert conv.errors == []
    assert len({s.id for s in conv.samples}) == len(conv.samples) > 0
    assert all(task in TASKS for task, _ in info.subsets.values())
    for s in conv.samples:
        assert validate_sample(s, "pool", tmp_path, check_images=True) == []
        assert (s.task, s.format) == info.subsets[s.meta["subset"]]
        assert s.id == f"{name}/{s.meta['subset']}/{s.meta['key']}"
        assert s.source == info.title
        assert (tmp_path / name / s.meta["source_file"]).is_file()
    absent = {"random_dev"} if name == "vsr" else set()  # no excerpt of VSR's dev split
    assert {s.meta["subset"] for s in conv.samples} == set(info.subsets) - absent


# --- VALSE ------------------------------------------------------------------------------------

VALSE_VALID = {
    "existence": 5,
    "plurals": 7,
    "counting-hard": 5,
    "counting-small-quant": 5,
    "counting-adversarial": 5,
    "relations": 6,
    "action-replacement": 5,
    "actant-swap": 5,
    "coreference-standard": 4,
    "coreference-hard": 5,
}


def test_valse_keeps_only_records_two_annotators_validated(tmp_path):
    place_valse(tmp_path)
    conv = convert("valse", tmp_path)
    assert Counter(s.meta["subset"] for s in conv.samples) == VALSE_VALID
    assert conv.skipped == Counter({"mturk.caption < 2": 30})
    ids = by_id(conv)
    assert "valse/existence/existence_visual7w_150304" not in ids  # mturk.caption 0
    assert "valse/plurals/plurals:coco2017:215792" in ids  # mturk.caption exactly 2
    assert "valse/action-replacement/actions_test_2" not in ids  # 1/1/1 votes


def test_valse_tasks_and_caption_foil_fields(tmp_path):
    place_valse(tmp_path)
    samples = by_id(convert("valse", tmp_path))
    tasks = {s.meta["subset"]: s.task for s in samples.values()}
    assert tasks == {
        "existence": "object_recognition",
        "plurals": "plurality",
        "counting-hard": "counting",
        "counting-small-quant": "counting",
        "counting-adversarial": "counting",
        "relations": "spatial_relations",
        "action-replacement": "action_recognition",
        "actant-swap": "action_recognition",
        "coreference-standard": "coreference",
        "coreference-hard": "coreference",
    }
    swap = samples["valse/actant-swap/actions_test_0"]
    assert swap.format == "caption_foil"
    assert swap.choices == ["A man exercises his torso.", "A torso exercises for a man."]
    assert swap.answer == "A man exercises his torso."
    assert swap.images == ["valse/data/actions/images_512/exercising_255.jpg"]
    assert swap.meta["source_file"] == "data/actant-swap.json"
    assert swap.meta["mturk"] == {"foil": 0, "caption": 3, "other": 0}
    # Same key and image in both action files, two different items.
    replacement = samples["valse/action-replacement/actions_test_0"]
    assert replacement.choices == ["A man exercises his torso.", "A man lifts his torso."]
    existence = samples["valse/existence/existence_visual7w_2393805"]
    assert existence.choices == ["There are no animals.", "There are animals."]
    assert (existence.meta["classes"], existence.meta["classes_foil"]) == (0, [1, 2, 3])
    assert existence.images == ["valse/data/visual7w/images/v7w_2393805.jpg"]
    plural = samples["valse/plurals/plurals:coco2017:215792"]
    assert plural.meta["classes_foil"] is False and plural.meta["orig_caption"]
    # VisDial train spans COCO train and val 2014; both sit in the one coreference image folder.
    coref = samples["valse/coreference-standard/coref_train_9439"]
    assert coref.images == ["valse/data/coref/release_too_many_is_this_in_color/images/COCO_val2014_000000410632.jpg"]
    assert coref.choices[1].endswith("is this color? no.")
    hard = samples["valse/coreference-hard/coref_test_0"]
    assert hard.images[0].startswith("valse/data/coref/release_v18/test_images/VisualDialog_val2018_")


def test_valse_caption_and_foil_start_with_a_capital_whatever_the_file_wrote(tmp_path):
    # The real relations record writes its caption lower-case and its foil capitalised: as written,
    # "pick the lower-case option" would answer it without the image.
    place_valse(tmp_path)
    samples = by_id(convert("valse", tmp_path))
    girl = samples["valse/relations/relations:coco_2017:646131"]
    assert girl.choices == ["A girl is sitting on a bicycle outside", "A girl is sitting behind a bicycle outside"]
    assert girl.answer == girl.choices[0]
    coref = samples["valse/coreference-hard/coref_test_0"]
    assert coref.choices[0].startswith("A woman sits on a bench") and coref.choices[1].startswith("A woman sits")
    assert coref.meta["only_caption"].startswith("a woman")  # the original fields are kept as written
    assert all(c[0] == c[0].upper() for s in samples.values() for c in s.choices)


def test_valse_bad_records_are_errors_and_the_rest_converts(tmp_path):
    folder = place_valse(tmp_path)
    data = folder / "data"
    edit_valse(data / "existence.json", "existence_visual7w_2393805", caption=None)
    edit_valse(data / "existence.json", "existence_visual7w_713025", image_file="../../v7w_713025.jpg")
    same = "breakfast items including juice are on the table."  # the caption, but for case
    edit_valse(data / "relations.json", "relations:coco_2017:212732", foil=same)
    edit_valse(data / "plurals.json", "plurals:coco2017:308510", mturk={"foil": 0, "other": 0})
    (data / "actions" / "images_512" / "exercising_255.jpg").unlink()  # both action files use it (valid in both)
    (data / "visual7w" / "images" / "v7w_150304.jpg").unlink()  # only records VALSE excludes use it
    cut = (data / "counting-hard.json").read_text()[:400]
    (data / "counting-hard.json").write_text(cut)
    conv = convert("valse", tmp_path)
    assert sorted(errors_at(conv)) == sorted(
        [
            ("data/existence.json", "key existence_visual7w_2393805", "caption"),
            ("data/existence.json", "key existence_visual7w_713025", "image_file"),
            ("data/relations.json", "key relations:coco_2017:212732", "foil"),
            ("data/plurals.json", "key plurals:coco2017:308510", "mturk.caption"),
            ("data/action-replacement.json", "key actions_test_0", "image_file"),
            ("data/actant-swap.json", "key actions_test_0", "image_file"),
            ("data/counting-hard.json", f"line {cut.count(chr(10)) + 1}", "(json)"),  # where the text stops
        ]
    )
    messages = {e.where: e.message for e in conv.errors}
    assert "inside the dataset folder" in messages["key existence_visual7w_713025"]
    assert "identical to the caption" in messages["key relations:coco_2017:212732"]
    counts = Counter(s.meta["subset"] for s in conv.samples)
    expected = VALSE_VALID | {"existence": 3, "relations": 5, "plurals": 6, "action-replacement": 4, "actant-swap": 4}
    del expected["counting-hard"]
    assert counts == expected
    assert conv.skipped["mturk.caption < 2"] == 30 - 3  # the truncated file's three are never read


def test_valse_structure_problems(tmp_path):
    folder = place_valse(tmp_path)
    data = folder / "data"
    (data / "relations.json").write_text(json.dumps([1, 2]))
    records = json.loads((data / "plurals.json").read_text())
    records["plurals:coco2017:295305"] = "not a record"
    (data / "plurals.json").write_text(json.dumps(records, indent=4))
    (data / "coreference-hard.json").unlink()  # a missing file is a missing subset, not an error
    conv = convert("valse", tmp_path)
    assert sorted(errors_at(conv)) == [
        ("data/plurals.json", "key plurals:coco2017:295305", "(record)"),
        ("data/relations.json", "top level", "(json)"),
    ]
    counts = Counter(s.meta["subset"] for s in conv.samples)
    assert "coreference-hard" not in counts and "relations" not in counts and counts["plurals"] == 6


def test_valse_folder_without_its_files_is_one_error(tmp_path):
    (tmp_path / "valse" / "existence").mkdir(parents=True)
    (tmp_path / "valse" / "existence.json").write_text("{}")  # not where the layout says (data/)
    conv = convert("valse", tmp_path)
    assert conv.samples == [] and len(conv.errors) == 1
    assert (conv.errors[0].file, conv.errors[0].field) == (".", "(files)")
    assert "data/existence.json" in conv.errors[0].message


def test_valse_image_folder_may_be_a_symlink_to_a_shared_copy(tmp_path):
    folder = place_valse(tmp_path / "root")
    shared = tmp_path / "elsewhere" / "visual7w"
    shutil.move(folder / "data" / "visual7w" / "images", shared)
    (folder / "data" / "visual7w" / "images").symlink_to(shared, target_is_directory=True)
    samples = by_id(convert("valse", tmp_path / "root"))
    linked = samples["valse/existence/existence_visual7w_2393805"]
    assert linked.images == ["valse/data/visual7w/images/v7w_2393805.jpg"]  # not the resolved target
    assert Counter(s.meta["subset"] for s in samples.values()) == VALSE_VALID


# --- VSR --------------------------------------------------------------------------------------


def test_vsr_statements_become_binary_items(tmp_path):
    place_vsr(tmp_path)
    conv = convert("vsr", tmp_path)
    assert Counter(s.meta["subset"] for s in conv.samples) == {"random_test": 13, "random_train": 8}  # zeroshot unread
    samples = by_id(conv)
    first = samples["vsr/random_test/1"]
    assert (first.format, first.task) == ("binary", "spatial_relations")
    assert first.statement == "The person is inside the refrigerator."
    assert (first.choices, first.answer) == (["Yes", "No"], "Yes")
    assert first.images == ["vsr/data/images/000000451431.jpg"]
    assert first.meta["vote_true_validator_id"] == [2, 9] and first.meta["vote_false_validator_id"] == [3]
    assert first.meta["relation"] == "inside" and first.meta["reference_frame"] is None
    third = samples["vsr/random_test/3"]
    assert (third.statement, third.answer) == ("The bird is above the cat.", "No")
    val = samples["vsr/random_test/12"]  # a COCO val2017 image, in the same flat images/ folder
    assert val.images == ["vsr/data/images/000000407825.jpg"] and val.answer == "No"
    assert samples["vsr/random_test/11"].meta["reference_frame"] is not None
    assert Counter(s.answer for s in conv.samples) == Counter(
        "Yes" if json.loads(line)["label"] == 1 else "No"
        for split in ("test", "train")
        for line in (SAMPLES / "vsr" / "splits" / "random" / f"{split}.jsonl").read_text().splitlines()
    )


def test_vsr_bad_lines_are_errors_and_the_rest_converts(tmp_path):
    folder = place_vsr(tmp_path)
    test = folder / "data" / "splits" / "random" / "test.jsonl"
    lines = test.read_text().splitlines()
    record = json.loads(lines[1])
    edit_jsonl(test, 2, json.dumps(record | {"label": 2}))
    edit_jsonl(test, 4, json.dumps(json.loads(lines[3]) | {"label": True}))
    edit_jsonl(test, 5, lines[4][:50])
    edit_jsonl(test, 6, json.dumps(json.loads(lines[5]) | {"image": "missing.jpg"}))
    edit_jsonl(test, 7, json.dumps(json.loads(lines[6]) | {"caption": " "}))
    test.write_text(test.read_text() + "\n\n")  # trailing blank lines are not records
    conv = convert("vsr", tmp_path)
    assert errors_at(conv) == [
        ("data/splits/random/test.jsonl", "line 2", "label"),
        ("data/splits/random/test.jsonl", "line 4", "label"),
        ("data/splits/random/test.jsonl", "line 5", "(json)"),
        ("data/splits/random/test.jsonl", "line 6", "image"),
        ("data/splits/random/test.jsonl", "line 7", "caption"),
    ]
    assert Counter(s.meta["subset"] for s in conv.samples) == {"random_test": 8, "random_train": 8}
    assert "vsr/random_test/13" in by_id(conv)


def test_vsr_without_the_random_split_is_one_error(tmp_path):
    folder = place_vsr(tmp_path)
    shutil.rmtree(folder / "data" / "splits" / "random")
    conv = convert("vsr", tmp_path)
    assert conv.samples == [] and errors_at(conv) == [(".", "folder", "(files)")]
    assert "data/splits/random/test.jsonl" in conv.errors[0].message


# --- MME --------------------------------------------------------------------------------------


def test_mme_questions_match_the_official_eval_tool(tmp_path):
    place_mme(tmp_path)
    conv = convert("mme", tmp_path)
    assert len(conv.samples) == 20 and conv.errors == []  # artwork is not a FewMMBench input
    got = sorted((s.meta["image"], s.meta["question"], s.answer) for s in conv.samples)
    assert got == sorted(eval_tool_lines())
    first = by_id(conv)["mme/commonsense_reasoning/0001:1"]
    assert (first.task, first.format, first.choices) == ("commonsense", "mcqa", ["Yes", "No"])
    assert first.question == "Here are the order details for my taxi ride. Should I actually pay $29.42?"
    assert first.answer == "Yes"
    assert first.images == [f"mme/{MME_RELEASE}/commonsense_reasoning/0001.png"]
    assert first.meta["source_file"] == f"{MME_RELEASE}/commonsense_reasoning/0001.txt"
    assert by_id(conv)["mme/commonsense_reasoning/0001:2"].answer == "No"
    assert not any("Please answer" in s.question for s in conv.samples)


def test_mme_release_without_inner_folder_crlf_and_blank_lines(tmp_path):
    folder = place_mme(tmp_path, release="MME_Benchmark_release_version")
    txt = folder / "MME_Benchmark_release_version" / "commonsense_reasoning" / "0002.txt"
    txt.write_bytes(txt.read_bytes().replace(b"\n", b"\r\n") + b"\r\n")
    conv = convert("mme", tmp_path)
    assert len(conv.samples) == 20 and conv.errors == []
    second = by_id(conv)["mme/commonsense_reasoning/0002:2"]
    assert second.question == "When I see the sign in the picture, can I cross the street?" and second.answer == "No"
    assert second.images == ["mme/MME_Benchmark_release_version/commonsense_reasoning/0002.png"]


def test_mme_bad_lines_and_missing_images_are_errors(tmp_path):
    folder = place_mme(tmp_path)
    subtask = folder / MME_RELEASE / "commonsense_reasoning"
    (subtask / "0003.png").unlink()
    lines = (subtask / "0004.txt").read_text().splitlines()
    (subtask / "0004.txt").write_text(f"{lines[0]}\n{lines[1].replace(chr(9) + 'No', chr(9) + 'Maybe')}\n")
    (subtask / "0005.txt").write_text(lines[0].replace("\t", " ") + "\n" + lines[1] + "\n")
    (subtask / "0006.txt").write_text("Please answer yes or no.\tYes\n")
    conv = convert("mme", tmp_path)
    txt = f"{MME_RELEASE}/commonsense_reasoning"
    assert errors_at(conv) == [
        (f"{txt}/0003.txt", "key 0003", "image"),
        (f"{txt}/0004.txt", "line 2", "answer"),
        (f"{txt}/0005.txt", "line 1", "(columns)"),
        (f"{txt}/0006.txt", "line 1", "question"),
    ]
    assert len(conv.samples) == 20 - 2 - 1 - 1 - 2
    assert "mme/commonsense_reasoning/0004:1" in by_id(conv) and "mme/commonsense_reasoning/0005:2" in by_id(conv)


def test_mme_eval_tool_alone_is_not_a_source(tmp_path):
    folder = place_mme(tmp_path)
    shutil.rmtree(folder / "MME_Benchmark_release_version")
    conv = convert("mme", tmp_path)
    assert conv.samples == [] and errors_at(conv) == [(".", "folder", "(files)")]
    assert "commonsense_reasoning/<stem>.txt" in conv.errors[0].message


# --- GVTBench ---------------------------------------------------------------------------------


def test_gvtbench_mci_questions_become_yes_no_mcqa(tmp_path):
    place_gvtbench(tmp_path)
    conv = convert("gvtbench", tmp_path)
    assert Counter(s.meta["subset"] for s in conv.samples) == {"coco_mci": 16, "vcr_mci": 16}
    assert Counter((s.meta["subset"], s.answer) for s in conv.samples) == {
        ("coco_mci", "Yes"): 6,
        ("coco_mci", "No"): 10,
        ("vcr_mci", "Yes"): 9,
        ("vcr_mci", "No"): 7,
    }
    samples = by_id(conv)
    coco = samples["gvtbench/coco_mci/1"]
    assert (coco.task, coco.format) == ("object_recognition", "mcqa")
    assert (coco.question, coco.choices, coco.answer) == ("Does cup exist in the image?", ["Yes", "No"], "Yes")
    assert coco.images == ["gvtbench/val2017/000000279278.jpg"]
    assert (coco.meta["image_id"], coco.meta["n_obj_exist"]) == (279278, 23)
    vcr = samples["gvtbench/vcr_mci/1"]
    assert vcr.question == "Does stopsigns exis in the image?" and vcr.answer == "No"  # upstream typo kept
    assert vcr.images == [
        "gvtbench/vcr1images/lsmdc_0050_Indiana_Jones_and_the_last_crusade/"
        "0050_Indiana_Jones_and_the_last_crusade_00.31.45.866-00.31.58.545@2.jpg"
    ]
    assert samples["gvtbench/coco_mci/7"].images == [
        "gvtbench/val2017/000000025560.jpg"  # ids shorter than 6 digits are zero-padded to 12
    ]


def test_gvtbench_bad_records_are_errors_and_the_rest_converts(tmp_path):
    folder = place_gvtbench(tmp_path)
    coco, vcr = folder / "GVTBench" / "coco_mci.json", folder / "GVTBench" / "vcr_mci.json"
    edit_gvt(coco, 0, text_out="Maybe.")
    edit_gvt(coco, 2, image_id="468501")
    edit_gvt(coco, 3, image_id=True)
    edit_gvt(coco, 4, text_in="")
    edit_gvt(vcr, 0, image_id="../../etc/x.jpg")
    edit_gvt(vcr, 5, image_id="movieclips_nowhere/x@0.jpg")
    conv = convert("gvtbench", tmp_path)
    assert errors_at(conv) == [
        ("GVTBench/coco_mci.json", "index 0", "text_out"),
        ("GVTBench/coco_mci.json", "index 2", "image_id"),
        ("GVTBench/coco_mci.json", "index 3", "image_id"),
        ("GVTBench/coco_mci.json", "index 4", "text_in"),
        ("GVTBench/vcr_mci.json", "index 0", "image_id"),
        ("GVTBench/vcr_mci.json", "index 5", "image_id"),
    ]
    assert Counter(s.meta["subset"] for s in conv.samples) == {"coco_mci": 12, "vcr_mci": 14}
    assert "gvtbench/coco_mci/15" in by_id(conv)


def test_gvtbench_file_level_problems(tmp_path):
    folder = place_gvtbench(tmp_path)
    (folder / "GVTBench" / "coco_mci.json").write_text('{"image_id": 1}')
    (folder / "GVTBench" / "vcr_mci.json").write_text('[{"image_id": "a.jpg", "text_in": "Does')
    conv = convert("gvtbench", tmp_path)
    assert errors_at(conv) == [
        ("GVTBench/coco_mci.json", "top level", "(json)"),
        ("GVTBench/vcr_mci.json", "line 1", "(json)"),
    ]
    assert conv.samples == []
    shutil.rmtree(folder / "GVTBench")
    conv = convert("gvtbench", tmp_path)
    assert errors_at(conv) == [(".", "folder", "(files)")]
