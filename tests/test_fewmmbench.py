"""`mmctx.data.fewmmbench` against a hand-written release in the hub layout (and against its own writer)."""

from __future__ import annotations

import os

# Set before `datasets` / `huggingface_hub` are imported by this module, so nothing can reach the hub.
os.environ["HF_HUB_OFFLINE"] = "1"

import hashlib
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import datasets
import huggingface_hub
import pytest
from fixtures.fewmmbench_release import (
    caption_foil_demos,
    caption_foil_tests,
    image_value,
    img,
    mcqa_demos,
    mcqa_tests,
    write_release,
)

from mmctx.data.fewmmbench import load_fewmmbench, normalize_task, save_fewmmbench_layout
from mmctx.schema import TASKS, Benchmark, Sample


@pytest.fixture(scope="module", autouse=True)
def offline_hf(tmp_path_factory: pytest.TempPathFactory):
    """Offline hub and a private `datasets` cache for every test here, even if `datasets` was imported earlier."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setattr(datasets.config, "HF_HUB_OFFLINE", True)
        mp.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
        mp.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path_factory.mktemp("hf-cache"))
        datasets.disable_progress_bars()
        yield


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_release(tmp_path_factory.mktemp("release"))


@pytest.fixture(scope="module")
def loaded(release: Path, tmp_path_factory: pytest.TempPathFactory) -> Benchmark:
    return load_fewmmbench(release, tmp_path_factory.mktemp("cache"))


def by_id(bench: Benchmark) -> dict[str, Sample]:
    return {s.id: s for s in bench.queries + bench.demos}


def image_files(cache: Path) -> dict[str, int]:
    """Every cached image file with its modification time."""
    return {str(p.relative_to(cache)): p.stat().st_mtime_ns for p in (cache / "images").rglob("*") if p.is_file()}


# --------------------------------------------------------------------------------------------
# The released layout


def test_loads_every_config_into_a_valid_benchmark(loaded: Benchmark, release: Path) -> None:
    assert loaded.name == "fewmmbench"
    assert [q.id for q in loaded.queries] == ["q-cnt-1", "q-attr-1", "q-spa-1", "m-q-1", "m-q-2"]
    # Demos come from two shards per config and keep file order.
    assert [d.id for d in loaded.demos] == [
        "d-cnt-1",
        "d-cnt-2",
        "d-attr-1",
        "d-attr-2",
        "d-spa-1",
        "d-spa-2",
        "m-d-1",
        "m-d-2",
        "m-d-3",
        "m-d-4",
    ]
    assert loaded.validate() == []
    for config in ("caption_foil_test", "caption_foil_demonstrations", "multiple_choice_qa_test"):
        assert config in loaded.description
    assert str(release) in loaded.description


def test_caption_foil_rows_become_two_way_choices(loaded: Benchmark) -> None:
    q = by_id(loaded)["q-cnt-1"]
    assert q.format == "caption_foil"
    assert q.choices == ["There are four apples.", "There are five apples."]
    assert q.answer == "There are four apples."
    assert q.task == "counting"
    assert q.source == "VALSE"
    assert q.rationale is None
    assert q.meta == {
        "fewmmbench": {"config": "caption_foil_test", "example_id": "q-cnt-1", "task_name": "Object Counting"}
    }


def test_demo_keys_join_test_rows_to_demonstrations_in_stored_order(loaded: Benchmark) -> None:
    expected = {r["example_id"]: r for r in caption_foil_tests() + mcqa_tests()}
    for q in loaded.queries:
        row = expected[q.id]
        assert q.demo_keys == {"similar": row["most_similar_example_keys"], "random": row["random_example_keys"]}
        similar = loaded.demos_for(q, "similar", 2)
        assert [d.id for d in similar] == row["most_similar_example_keys"]
        assert all(d.format == q.format for d in similar)
    # Stored order, not sorted order.
    assert [d.id for d in loaded.demos_for(by_id(loaded)["q-spa-1"], "similar", 2)] == ["d-spa-2", "d-spa-1"]
    assert all(not d.demo_keys for d in loaded.demos)


@pytest.mark.parametrize(
    ("demo_id", "written", "expected"),
    [
        ("d-cnt-1", "There are two dogs.", "There are two dogs."),  # the choice's own text
        ("d-cnt-2", "caption 0", "Two birds sit on a wire."),  # 0-based caption index
        ("d-attr-1", "Yes", "The car is red."),  # a verdict about the caption
        ("d-spa-1", "Final Answer: The cat is left of the dog.", "The cat is left of the dog."),
        ("d-spa-2", "A", "The cup is on the table."),  # a letter over [caption, foil]
        ("m-d-1", "(B)", "Open the umbrella"),
        ("m-d-2", "It rained", "It rained"),
        ("m-d-3", "A. The glass fell", "The glass fell"),
    ],
)
def test_rationale_answers_map_to_choices(loaded: Benchmark, demo_id: str, written: str, expected: str) -> None:
    demo = by_id(loaded)[demo_id]
    assert demo.rationale is not None
    assert demo.rationale.answer == expected
    raw = {r["example_id"]: r for r in caption_foil_demos() + mcqa_demos()}[demo_id]
    assert raw["cot_info"]["answer"] == written
    assert demo.rationale.reasoning == raw["cot_info"]["reasonings"]


@pytest.mark.parametrize("demo_id", ["d-attr-2", "m-d-4"])  # empty cot_info strings / a null cot_info
def test_empty_or_null_cot_info_means_no_rationale(loaded: Benchmark, demo_id: str) -> None:
    assert by_id(loaded)[demo_id].rationale is None


def test_mcqa_options_letters_and_unmapped_fields(loaded: Benchmark) -> None:
    samples = by_id(loaded)
    demo = samples["m-d-1"]
    assert demo.format == "mcqa"
    assert demo.question == "What is the person most likely to do next?"
    assert demo.choices == ["Sit down", "Open the umbrella", "Run away", "Sleep"]  # "A. " prefixes stripped
    assert demo.answer == "Open the umbrella"  # letter "B"
    assert samples["m-q-1"].answer == "3-2-1"  # "(B)"
    assert samples["m-q-2"].answer == "Laugh"  # option text
    assert samples["m-q-1"].task == "temporal"
    assert samples["m-q-2"].task == "commonsense"
    assert samples["m-q-1"].meta["fewmmbench"]["extra"] == {"question_type": "order"}


def test_multi_image_rows_keep_image_order(loaded: Benchmark) -> None:
    q = by_id(loaded)["m-q-1"]
    stored = [loaded.image_path(rel).read_bytes() for rel in q.images]
    assert stored == [img("green"), img("red"), img("blue")]
    assert [Path(rel).suffix for rel in q.images] == [".png", ".png", ".jpg"]


def test_images_are_content_addressed_in_their_original_encoding(loaded: Benchmark) -> None:
    assert loaded.root.is_dir()
    for sample in loaded.queries + loaded.demos:
        for rel in sample.images:
            data = loaded.image_path(rel).read_bytes()
            digest = hashlib.sha256(data).hexdigest()
            assert rel.startswith(f"images/{digest[:2]}/{digest}.")
    # JPEG bytes are written as-is (a re-encode would change them).
    assert loaded.image_path(by_id(loaded)["d-attr-1"].images[0]).read_bytes() == img("blue")


def test_each_image_is_written_once_and_reloading_is_idempotent(release: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = load_fewmmbench(release, cache, hf_cache_dir=tmp_path / "hf")
    files = image_files(cache)
    rows = caption_foil_tests() + caption_foil_demos() + mcqa_tests() + mcqa_demos()
    distinct = {v["bytes"] for r in rows for v in ([r["image"]] if "image" in r else r["images"])}
    assert len(files) == len(distinct) < sum(len(s.images) for s in first.queries + first.demos)
    samples = by_id(first)
    assert samples["d-cnt-1"].images == samples["d-spa-2"].images  # identical bytes, one file
    assert any((tmp_path / "hf").iterdir())  # the Arrow cache went where it was told

    second = load_fewmmbench(release, cache, hf_cache_dir=tmp_path / "hf")
    assert image_files(cache) == files  # same files, none rewritten
    assert [s.model_dump() for s in second.queries + second.demos] == [
        s.model_dump() for s in first.queries + first.demos
    ]


# --------------------------------------------------------------------------------------------
# Task names


@pytest.mark.parametrize(
    ("raw", "task"),
    [
        ("Attribute Recognition", "attribute_recognition"),
        ("attribute_recognition", "attribute_recognition"),
        ("counting", "counting"),
        ("Object Counting", "counting"),
        ("spatial relations", "spatial_relations"),
        ("commonsense reasoning", "commonsense"),
        ("temporal reasoning", "temporal"),
        ("coreference resolution", "coreference"),
        ("visual object recognition", "object_recognition"),
        ("plurality recognition", "plurality"),
        ("action recognition", "action_recognition"),
        ("  Spatial-Relations ", "spatial_relations"),
    ],
)
def test_task_name_variants_normalise_to_schema_tasks(raw: str, task: str) -> None:
    assert normalize_task(raw) == task
    assert task in TASKS


def test_unknown_task_names_are_kept_in_snake_case_and_warned(tmp_path: Path) -> None:
    tests = caption_foil_tests()
    tests[0]["task_name"] = "Visual Grounding"
    release = write_release(tmp_path / "release", (tests, caption_foil_demos()), with_mcqa=False)
    with pytest.warns(UserWarning, match="Visual Grounding"):
        bench = load_fewmmbench(release, tmp_path / "cache", configs="caption_foil")
    assert by_id(bench)["q-cnt-1"].task == "visual_grounding"
    assert bench.tasks[-1] == "visual_grounding"


# --------------------------------------------------------------------------------------------
# Which configs a source has


def test_source_with_only_caption_foil_loads_those_and_reports_it(tmp_path: Path) -> None:
    release = write_release(tmp_path / "release", with_mcqa=False)
    with pytest.warns(UserWarning, match="multiple_choice_qa"):
        bench = load_fewmmbench(release, tmp_path / "cache")
    assert {s.format for s in bench.queries + bench.demos} == {"caption_foil"}
    assert "caption_foil_test" in bench.description and "multiple_choice_qa" not in bench.description
    assert bench.validate() == []


def test_half_a_config_pair_is_an_error_naming_the_missing_config(tmp_path: Path) -> None:
    release = write_release(tmp_path / "release", skip_configs=("multiple_choice_qa_demonstrations",))
    with pytest.raises(ValueError, match="'multiple_choice_qa_demonstrations' is missing"):
        load_fewmmbench(release, tmp_path / "cache")


def test_folder_without_fewmmbench_configs_names_what_it_wanted(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    datasets.Dataset.from_dict({"x": [1, 2]}).to_parquet(str(folder / "data.parquet"))
    with pytest.raises(ValueError, match="caption_foil_test"):
        load_fewmmbench(folder, tmp_path / "cache")


def test_missing_folder_and_unknown_kind_are_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such FewMMBench folder"):
        load_fewmmbench(tmp_path / "nowhere", tmp_path / "cache")
    with pytest.raises(ValueError, match="unknown FewMMBench config kind"):
        load_fewmmbench(tmp_path, tmp_path / "cache", configs=("open_qa",))


def test_hub_id_is_refused_while_offline(tmp_path: Path) -> None:
    with pytest.raises(OSError, match="(?i)offline"):
        load_fewmmbench("mustafaa/FewMMBench", tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


# --------------------------------------------------------------------------------------------
# Rows that cannot be mapped


Mutation = Callable[[list[dict[str, Any]], list[dict[str, Any]]], None]


def _set(table: int, index: int, **fields: Any) -> Mutation:
    def mutate(tests: list[dict[str, Any]], demos: list[dict[str, Any]]) -> None:
        (tests, demos)[table][index].update(fields)

    return mutate


TEST, DEMO = 0, 1


@pytest.mark.parametrize(
    ("kind", "mutate", "where"),
    [
        (
            "caption_foil",
            _set(DEMO, 0, cot_info={"reasonings": "Hmm.", "answer": "maybe"}),
            "caption_foil_demonstrations[d-cnt-1].cot_info.answer",
        ),
        # Names both captions: ambiguous, so no rationale is invented.
        (
            "caption_foil",
            _set(DEMO, 0, cot_info={"reasonings": "Hmm.", "answer": "There are two dogs, not There are three dogs"}),
            "caption_foil_demonstrations[d-cnt-1].cot_info.answer",
        ),
        (
            "caption_foil",
            _set(DEMO, 1, cot_info={"reasonings": "Two birds.", "answer": ""}),
            "caption_foil_demonstrations[d-cnt-2].cot_info.answer",
        ),
        (
            "caption_foil",
            _set(DEMO, 1, cot_info={"reasonings": "", "answer": "caption 0"}),
            "caption_foil_demonstrations[d-cnt-2].cot_info.reasonings",
        ),
        ("caption_foil", _set(TEST, 1, caption=None, foil=" "), "caption_foil_test[q-attr-1].caption"),
        ("caption_foil", _set(TEST, 2, image=None), "caption_foil_test[q-spa-1].image"),
        (
            "caption_foil",
            _set(TEST, 2, image={"bytes": b"not an image", "path": "x.png"}),
            "caption_foil_test[q-spa-1].image",
        ),
        ("caption_foil", _set(TEST, 0, task_name=None), "caption_foil_test[q-cnt-1].task_name"),
        ("caption_foil", _set(TEST, 0, example_id=None), "caption_foil_test[None].example_id"),
        ("multiple_choice_qa", _set(TEST, 0, answer="(E)"), "multiple_choice_qa_test[m-q-1].answer"),
        ("multiple_choice_qa", _set(TEST, 1, answer="Sing"), "multiple_choice_qa_test[m-q-2].answer"),
        (
            "multiple_choice_qa",
            _set(DEMO, 1, options=["A. It rained"]),
            "multiple_choice_qa_demonstrations[m-d-2].options",
        ),
        ("multiple_choice_qa", _set(TEST, 1, question=""), "multiple_choice_qa_test[m-q-2].question"),
        (
            "multiple_choice_qa",
            _set(TEST, 0, images=[image_value("red"), None]),
            "multiple_choice_qa_test[m-q-1].images[1]",
        ),
        (
            "multiple_choice_qa",
            _set(DEMO, 0, cot_info={"reasonings": "Rain.", "answer": "(F)"}),
            "multiple_choice_qa_demonstrations[m-d-1].cot_info.answer",
        ),
    ],
)
def test_bad_rows_raise_naming_config_example_and_field(
    tmp_path: Path, kind: str, mutate: Mutation, where: str
) -> None:
    tables = (caption_foil_tests(), caption_foil_demos()) if kind == "caption_foil" else (mcqa_tests(), mcqa_demos())
    mutate(*tables)
    release = write_release(
        tmp_path / "release",
        **(
            {"caption_foil": tables, "with_mcqa": False}
            if kind == "caption_foil"
            else {"mcqa": tables, "with_caption_foil": False}
        ),
    )
    with pytest.raises(ValueError) as info:
        load_fewmmbench(release, tmp_path / "cache", configs=(kind,))
    assert where in str(info.value)


@pytest.mark.parametrize("written", ["No", "B", "caption 1", "the second sentence", "False"])
def test_rationale_that_picks_the_foil_is_set_aside_and_reported(tmp_path: Path, written: str) -> None:
    demos = caption_foil_demos()
    demos[0]["cot_info"] = {"reasonings": "I think there are three.", "answer": written}
    release = write_release(tmp_path / "release", (caption_foil_tests(), demos), with_mcqa=False)
    with pytest.warns(UserWarning, match=r"caption_foil_demonstrations\[d-cnt-1\]"):
        bench = load_fewmmbench(release, tmp_path / "cache", configs=("caption_foil",))
    demo = bench.demo("d-cnt-1")
    assert demo.rationale is None
    assert demo.meta["fewmmbench"]["off_gold_rationale"]["answer"] == "There are three dogs."
    assert demo.answer == "There are two dogs."
    assert bench.validate() == []


def test_liberal_mcqa_shapes(tmp_path: Path) -> None:
    """Index answers, letter-keyed option dicts, and numbered image columns."""
    tests = mcqa_tests()
    for row, index in zip(tests, (1, 0), strict=True):
        row["answer"] = index
    demos = []
    for row in mcqa_demos():
        options = dict(zip("ABCD", (o.split(". ", 1)[1] for o in row["options"]), strict=False))
        row["options"] = {letter: options.get(letter) for letter in "ABCD"}  # a struct: missing letters are null
        row["image_1"], row["image_2"] = row.pop("image"), image_value("navy")
        demos.append(row)
    release = write_release(tmp_path / "release", mcqa=(tests, demos), with_caption_foil=False, dataset_info=False)
    bench = load_fewmmbench(release, tmp_path / "cache", configs=("multiple_choice_qa",))
    samples = by_id(bench)
    assert samples["m-q-1"].answer == "3-2-1"
    assert samples["m-q-2"].answer == "Eat"
    assert samples["m-d-2"].choices == ["It rained", "Someone mopped"]
    assert samples["m-d-1"].answer == "Open the umbrella"
    assert [bench.image_path(p).read_bytes() for p in samples["m-d-1"].images] == [img("cyan"), img("navy")]
    assert bench.validate() == []


# --------------------------------------------------------------------------------------------
# Writing the released layout


def _without_extra(sample: Sample) -> dict[str, Any]:
    dump = sample.model_dump()
    dump["meta"]["fewmmbench"].pop("extra", None)  # unmapped raw columns are not written back
    return dump


def test_written_layout_reads_with_datasets_and_round_trips(loaded: Benchmark, tmp_path: Path) -> None:
    out = save_fewmmbench_layout(loaded, tmp_path / "layout")
    ds = datasets.load_dataset(str(out), "caption_foil_test", split="train")
    assert isinstance(ds.features["image"], datasets.Image)
    assert ds.num_rows == 3
    mc = datasets.load_dataset(str(out), "multiple_choice_qa_demonstrations", split="train")
    assert mc.features["cot_info"]["answer"] == datasets.Value("string")
    assert sorted(datasets.get_dataset_config_names(str(out))) == [
        "caption_foil_demonstrations",
        "caption_foil_test",
        "multiple_choice_qa_demonstrations",
        "multiple_choice_qa_test",
    ]

    again = load_fewmmbench(out, tmp_path / "cache")
    assert [_without_extra(s) for s in again.queries + again.demos] == [
        _without_extra(s) for s in loaded.queries + loaded.demos
    ]
    for a, b in zip(again.queries + again.demos, loaded.queries + loaded.demos, strict=True):
        assert [again.image_path(p).read_bytes() for p in a.images] == [
            loaded.image_path(p).read_bytes() for p in b.images
        ]
    assert again.validate() == []


def test_writer_refuses_what_the_layout_cannot_hold(loaded: Benchmark, tmp_path: Path) -> None:
    item = Sample(id="o1", task="counting", source="x", format="open", question="How many?", answer="3")
    with pytest.raises(ValueError, match=r"queries\[o1\]\.format"):
        save_fewmmbench_layout(Benchmark("b", [item], [], loaded.root), tmp_path / "a")
    q = loaded.queries[0].model_copy(update={"demo_keys": {"similar": [], "clip": ["d-cnt-1"]}})
    with pytest.raises(ValueError, match=r"queries\[q-cnt-1\]\.demo_keys"):
        save_fewmmbench_layout(Benchmark("b", [q], loaded.demos, loaded.root), tmp_path / "b")
    lost = loaded.demos[0].model_copy(update={"images": ["images/00/gone.png"]})
    with pytest.raises(ValueError, match=r"demos\[d-cnt-1\]\.images\[0\]: cannot read"):
        save_fewmmbench_layout(Benchmark("b", [], [lost], loaded.root), tmp_path / "c")


def test_writer_with_only_caption_foil_writes_only_those_configs(loaded: Benchmark, tmp_path: Path) -> None:
    cf = Benchmark(
        "cf",
        [q for q in loaded.queries if q.format == "caption_foil"],
        [d for d in loaded.demos if d.format == "caption_foil"],
        loaded.root,
    )
    out = save_fewmmbench_layout(cf, tmp_path / "layout")
    assert sorted(datasets.get_dataset_config_names(str(out))) == ["caption_foil_demonstrations", "caption_foil_test"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = load_fewmmbench(out, tmp_path / "cache")
    assert any("multiple_choice_qa" in str(w.message) for w in caught)
    assert [s.id for s in again.queries] == [q.id for q in cf.queries]


def _vsr(loaded: Benchmark, sid: str, statement: str, answer: str, **fields: Any) -> Sample:
    """A VSR-style binary statement on one of the release's pictures."""
    image = next(s for s in loaded.demos if s.format == "caption_foil").images
    return Sample(
        id=sid, task="spatial_relations", source="VSR", format="binary", images=list(image),
        statement=statement, choices=["Yes", "No"], answer=answer, **fields,
    )  # fmt: skip


def test_binary_statements_are_written_as_caption_foil_rows_and_read_back(loaded: Benchmark, tmp_path: Path) -> None:
    # VSR items sit among the caption/foil rows of the layout (the release has 7 x 250 of them):
    # a true statement is a caption without foil, a false one a foil without caption.
    from mmctx.schema import Rationale

    true_demo = _vsr(loaded, "vsr-d-1", "The cat is on the bed.", "Yes")
    false_demo = _vsr(
        loaded, "vsr-d-2", "The cat is under the bed.", "No",
        rationale=Rationale(reasoning="The cat lies on top of the bed.", answer="No"),
    )  # fmt: skip
    query = _vsr(loaded, "vsr-q-1", "The dog is left of the car.", "No",
                 demo_keys={"similar": ["vsr-d-1", "vsr-d-2"], "random": ["vsr-d-2"]})  # fmt: skip
    bench = Benchmark("b", [*loaded.queries, query], [*loaded.demos, true_demo, false_demo], loaded.root)
    out = save_fewmmbench_layout(bench, tmp_path / "layout-with-vsr")

    test = datasets.load_dataset(str(out), "caption_foil_test", split="train")
    row = test[[r["example_id"] for r in test].index("vsr-q-1")]
    assert (row["caption"], row["foil"], row["dataset_name"]) == (None, "The dog is left of the car.", "VSR")
    assert row["most_similar_example_keys"] == ["vsr-d-1", "vsr-d-2"]
    shown = datasets.load_dataset(str(out), "caption_foil_demonstrations", split="train")
    rows = {r["example_id"]: r for r in shown}
    assert (rows["vsr-d-1"]["caption"], rows["vsr-d-1"]["foil"]) == ("The cat is on the bed.", None)
    assert rows["vsr-d-2"]["cot_info"] == {"reasonings": "The cat lies on top of the bed.", "answer": "No"}

    again = by_id(load_fewmmbench(out, tmp_path / "cache"))
    for sample in (query, true_demo, false_demo):
        back = again[sample.id]
        assert (back.format, back.statement, back.choices) == ("binary", sample.statement, ["Yes", "No"])
        assert back.answer == sample.answer
        assert back.rationale == sample.rationale and back.demo_keys == sample.demo_keys
    assert again["vsr-q-1"].task == "spatial_relations"


def test_a_caption_foil_row_without_any_text_is_refused(loaded: Benchmark, tmp_path: Path) -> None:
    rows = caption_foil_demos()
    rows[0]["caption"] = rows[0]["foil"] = None
    release = write_release(tmp_path / "release-without-text", caption_foil=(caption_foil_tests(), rows))
    with pytest.raises(ValueError, match=r"caption_foil_demonstrations\[.+\]\.caption: .*neither caption nor foil"):
        load_fewmmbench(release, tmp_path / "cache")


def test_what_the_layout_cannot_hold_is_left_out_named_and_unlinked(loaded: Benchmark, tmp_path: Path) -> None:
    from mmctx.data.fewmmbench import layout_left_out

    demo = next(s for s in loaded.demos if s.format == "caption_foil")
    four = demo.model_copy(update={"id": "four", "choices": ["on", "under", "left of", "right of"], "answer": "on"})
    query = next(q for q in loaded.queries if q.format == "caption_foil")
    query = query.model_copy(update={"demo_keys": {"similar": [demo.id, "four"], "random": ["four"]}})
    bench = Benchmark("b", [query], [demo, four], loaded.root)
    assert layout_left_out(bench) == {"four": "4 captions; a caption/foil row holds one caption and one foil"}
    with pytest.raises(ValueError, match=r"demos\[four\]\.choices"):
        save_fewmmbench_layout(bench, tmp_path / "strict")
    out = save_fewmmbench_layout(bench, tmp_path / "layout-left-out", skip_unsupported=True)
    test = datasets.load_dataset(str(out), "caption_foil_test", split="train")
    # A key to a demo that is not written would point at nothing.
    assert (test[0]["most_similar_example_keys"], test[0]["random_example_keys"]) == ([demo.id], [])
    shown = datasets.load_dataset(str(out), "caption_foil_demonstrations", split="train")
    assert [r["example_id"] for r in shown] == [demo.id]
