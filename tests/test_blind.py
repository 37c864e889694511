"""Shortcut checks: blind and blank settings, the blind-answerable analysis, and the curation drop."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from PIL import Image

import mmctx
from mmctx.analysis.blind import accuracy_without_blind, blind_answerable, blind_checks, blind_shares
from mmctx.curate.drop_queries import QueryDropError, drop_queries
from mmctx.curate.log import read_log
from mmctx.data.disk import load_benchmark
from mmctx.prompts.ablation import Ablation, AblationError, grey_image
from mmctx.prompts.build import build_prompt
from mmctx.prompts.presets import get_preset
from mmctx.run.settings import Setting, with_option_orders
from mmctx.scoring.results import SampleResult, score_run

# --- settings -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, vision, shots, option_order",
    [
        ("0-shot-blind", "blind", 0, 0),
        ("8-similar-blind", "blind", 8, 0),
        ("8-similar-blind-all", "blind-all", 8, 0),
        ("8-similar-blank#p2", "blank", 8, 2),
        ("4-similar-cot-blind#o1#p1", "blind", 4, 1),
    ],
)
def test_vision_modifiers_parse_and_round_trip(name, vision, shots, option_order):
    s = Setting.parse(name)
    assert (s.vision, s.shots, s.option_order) == (vision, shots, option_order)
    assert s.name == name


def test_plain_settings_keep_their_names():
    assert Setting.parse("8-similar-cot#o2").name == "8-similar-cot#o2"
    assert Setting.parse("0-shot").vision == "full"


@pytest.mark.parametrize("name", ["8-similar-blinded", "8-similar-grey", "0-shot-blank-all", "blind"])
def test_unknown_modifier_is_refused_with_the_name(name):
    # A misspelt modifier reads as part of the strategy's name: refused either way, naming both.
    with pytest.raises(ValueError, match="unknown (setting|demo strategy)") as err:
        Setting.parse(name)
    assert name in str(err.value) and "-blind, -blind-all or -blank" in str(err.value)


def test_option_order_without_a_vision_modifier_is_refused():
    with pytest.raises(ValueError, match="#p<n>"):
        Setting.parse("8-similar#p1")


def test_option_orders_expand_only_blind_settings():
    grid = with_option_orders([Setting.parse("0-shot"), Setting.parse("0-shot-blank")], 3)
    assert [s.name for s in grid] == ["0-shot", "0-shot-blank", "0-shot-blank#p1", "0-shot-blank#p2"]


@pytest.mark.parametrize("k", [0, -1])
def test_fewer_than_one_option_order_is_refused(k):
    with pytest.raises(ValueError, match="blind_orders"):
        with_option_orders([Setting.parse("0-shot-blind")], k)


# --- prompts --------------------------------------------------------------------------------------


def _images(prompt) -> list[list]:
    return [m.images for m in prompt.messages if m.role == "user"]


def test_ablations_remove_or_grey_the_right_images(shapes_bench, tmp_path):
    bench = load_benchmark(shapes_bench)
    query = next(q for q in bench.queries if q.images and q.demo_keys.get("similar"))
    demos = bench.demos_for(query, "similar", 2, False)
    preset = get_preset("fewmmbench")

    def build(vision: str, rotation: int = 0):
        return build_prompt(query, demos, preset, "letter", 0, bench.root, Ablation(vision, tmp_path), rotation)

    full, blind, blind_all, blank = (build(v) for v in ("full", "blind", "blind-all", "blank"))
    assert _images(blind)[:-1] == _images(full)[:-1] and _images(blind)[-1] == []
    assert all(images == [] for images in _images(blind_all))
    assert [m.text for m in blind.messages] == [m.text for m in full.messages]  # same text, no image
    greys = _images(blank)[-1]
    assert len(greys) == len(query.images)
    for grey, original in zip(greys, _images(full)[-1]):
        assert Path(grey.path).parent == tmp_path
        with Image.open(grey.path) as g, Image.open(original.path) as o:
            assert g.size == o.size and g.getextrema() == ((128, 128),) * 3
    # a rotated option order puts the gold answer elsewhere and keeps the same options
    rotated = build("blind", 1)
    assert set(rotated.options.texts) == set(blind.options.texts)
    if len(blind.options.texts) > 1:
        assert rotated.options.gold != blind.options.gold


def test_grey_images_are_the_same_bytes_when_written_again(tmp_path):
    first = grey_image(20, 10, tmp_path / "a").read_bytes()
    assert grey_image(20, 10, tmp_path / "b").read_bytes() == first


def test_blank_without_a_folder_is_refused():
    with pytest.raises(AblationError, match="blank_dir"):
        Ablation("blank")
    with pytest.raises(AblationError, match="unknown vision"):
        Ablation("dark")  # type: ignore[arg-type]


# --- analysis -------------------------------------------------------------------------------------


def _result(setting: str, query: str, outcome: str, scorer: str = "ppl", task: str = "counting") -> SampleResult:
    return SampleResult(f"{setting}/{scorer}/{query}", query, task, "test", setting, scorer, 0, 0, outcome)


def test_an_item_is_blind_answerable_only_when_right_in_every_option_order():
    results = [
        _result("0-shot", "q1", "correct"), _result("0-shot", "q2", "wrong"), _result("0-shot", "q3", "correct"),
        _result("0-shot-blind", "q1", "correct"), _result("0-shot-blind#p1", "q1", "correct"),
        _result("0-shot-blind", "q2", "correct"), _result("0-shot-blind#p1", "q2", "wrong"),
        _result("0-shot-blind", "q3", "correct"),  # asked in one order only: not counted
    ]  # fmt: skip
    (check,) = blind_checks(results)
    assert (check.setting, check.orders) == ("0-shot-blind", 2)
    assert blind_answerable(results) == {("counting", "q1")}
    shares = {(s.setting, s.scorer): s for s in blind_shares(results)}
    assert (shares[("any", "any")].items, shares[("any", "any")].answerable) == (2, 1)
    (acc,) = accuracy_without_blind(results)
    assert (acc.n, acc.accuracy, acc.n_without, acc.accuracy_without) == (3, 2 / 3, 2, 0.5)


# --- a real run, its report, and curation ---------------------------------------------------------

GRID = ["0-shot", "0-shot-blind", "2-similar-blind-all", "2-similar-blank"]


@pytest.fixture(scope="module")
def blind_run(shapes_bench, tmp_path_factory):
    root = tmp_path_factory.mktemp("blind")
    bench = root / "bench"
    shutil.copytree(shapes_bench, bench)
    run = root / "run"
    mmctx.evaluate(bench, out=run, grid=GRID, scorers=["generate", "ppl"], limit=1, blind_orders=2)
    return bench, run


def test_blind_settings_run_with_both_scorers_and_are_recorded(blind_run):
    bench, run = blind_run
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["config"]["settings"] == [
        "0-shot", "0-shot-blind", "0-shot-blind#p1", "2-similar-blind-all", "2-similar-blind-all#p1",
        "2-similar-blank", "2-similar-blank#p1",
    ]  # fmt: skip
    results = score_run(run)
    assert {(r.setting, r.scorer) for r in results} >= {("2-similar-blank#p1", "generate"), ("0-shot-blind", "ppl")}
    requests = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
    blank = [r for r in requests if r["setting"].startswith("2-similar-blank")]
    paths = {p["path"] for r in blank for m in r["prompt"] for p in m["content"] if p["type"] == "image"}
    greys = {p for p in paths if "/images/blank/" in p}
    assert greys and all(Path(p).is_file() and Path(p).is_relative_to(run.resolve()) for p in greys)


def test_a_resumed_blank_run_writes_a_missing_grey_image_again_and_asks_nothing(blind_run):
    bench, run = blind_run
    grey = next((run / "images" / "blank").iterdir())
    data = grey.read_bytes()
    grey.unlink()
    again = mmctx.evaluate(bench, out=run, grid=GRID, scorers=["generate", "ppl"], limit=1, blind_orders=2)
    assert again.stats.done == 0 and again.stats.cached == again.stats.planned
    assert grey.read_bytes() == data


def test_the_report_has_the_shortcut_tables(blind_run, tmp_path):
    _, run = blind_run
    text = mmctx.report([run], out=tmp_path / "report", latex=False, figures=False)
    assert "Shortcut checks" in text
    rows = (tmp_path / "report" / "blind_answerable.csv").read_text().splitlines()
    assert rows[0].startswith("model,task,setting,scorer,option_orders,items,answerable,share")
    assert (tmp_path / "report" / "accuracy_without_blind.csv").is_file()


def test_a_run_without_blind_settings_is_refused_by_name(shapes_bench, tmp_path):
    plain = tmp_path / "plain"
    mmctx.evaluate(shapes_bench, out=plain, grid=["0-shot"], scorers=["ppl"], limit=1)
    with pytest.raises(ValueError, match=f"{plain} is not a blind run"):
        mmctx.api.drop_blind_answerable(shapes_bench, [plain])
    with pytest.raises(ValueError, match="not a run folder"):
        mmctx.api.drop_blind_answerable(shapes_bench, [tmp_path])


def test_drop_queries_logs_what_went_and_refuses_unknown_ids(shapes_bench, tmp_path):
    bench = tmp_path / "bench"
    shutil.copytree(shapes_bench, bench)
    first = load_benchmark(bench).queries[0].id
    with pytest.raises(QueryDropError, match="never had"):
        drop_queries(bench, {"no/such/query": {}}, "drop_test", "test")
    outcome = drop_queries(bench, {first: {"because": "test"}}, "drop_test", "test")
    assert outcome.dropped == (first,) and outcome.benchmark_sha256_after != outcome.benchmark_sha256_before
    assert first not in {q.id for q in load_benchmark(bench).queries}
    (entry,) = read_log(bench)
    assert entry["dropped_queries"][0]["id"] == first and entry["dropped_queries"][0]["record"]["id"] == first
    again = drop_queries(bench, {first: {}}, "drop_test", "test")
    assert again.log_entry is None and again.already == (first,)


def test_drop_blind_answerable_removes_what_the_blind_run_answers(blind_run):
    bench, run = blind_run
    answerable = {query for _, query in blind_answerable(score_run(run))}
    outcome = mmctx.api.drop_blind_answerable(bench, [run])
    assert set(outcome.dropped) == answerable
    if answerable:  # the old run was made on the benchmark before the drop: it must not resume
        assert read_log(bench)[-1]["action"] == "drop_blind_answerable"
        with pytest.raises(Exception, match="benchmark"):
            mmctx.evaluate(bench, out=run, grid=GRID, scorers=["generate", "ppl"], limit=1, blind_orders=2)
