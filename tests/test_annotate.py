"""Human validation of demonstrations (`mmctx annotate`), on real shapes-world benchmarks and real files.

Forms are exported, filled (as a spreadsheet user would, and in headless Chromium through the
HTML form's own save button), imported back and checked against agreement worked out by hand;
bad forms must be refused naming file, row and field; dropping must change the demo pool CoT
settings draw from, be logged, and make an earlier run folder refuse to resume.
"""

from __future__ import annotations

import csv
import json
import shutil
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mmctx.cli import app
from mmctx.curate.annotation.drop import REJECTED, DropError, DropRule
from mmctx.curate.annotation.export import EXPORT_FILE, ExportError, load_export, plan_export
from mmctx.curate.annotation.forms import FormError
from mmctx.curate.log import read_log
from mmctx.data.disk import load_benchmark, save_benchmark
from mmctx.data.shapes import build_benchmark
from mmctx.reporting.annotation_forms import CSV_COLUMNS, export_forms
from mmctx.reporting.annotation_report import VALIDATION_FILE, import_ratings
from mmctx.schema import Benchmark, BenchmarkError, Sample
from tests.fixtures.browser import _console_errors, _open, browser  # noqa: F401  (the fixture)

pytest.importorskip("krippendorff")

# Markup that would run script in the form, and cells a spreadsheet would evaluate as formulas.
HOSTILE_QUESTION = '=HYPERLINK("http://example.invalid")"><script>window.__xss=1</script>'
HOSTILE_REASONING = '@SUM(1)</div><img src=x onerror="window.__xss=2"> & so </script><script>window.__xss=3</script>'
HOSTILE_OPTION = "<b onmouseover=window.__xss=4>x</b>"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("annotate-bench") / "bench"
    build_benchmark(out, queries_per_task=2, seed=0)
    return out


@pytest.fixture
def bench_dir(built, tmp_path) -> Path:
    """A fresh copy per test: dropping rewrites the benchmark."""
    return Path(shutil.copytree(built, tmp_path / "bench"))


def _four_rated_demos(bench_dir: Path) -> list[str]:
    """Leave a rationale on four similar demos of four tasks only (one each), so a sample of 5 per task takes
    exactly them and a query's similar demos hold at most one of them."""
    bench = load_benchmark(bench_dir)
    similar = {k for q in bench.queries for k in q.demo_keys["similar"]}
    keep: dict[str, str] = {}
    for d in bench.demos:
        if d.rationale is not None and d.id in similar and d.task not in keep and len(keep) < 4:
            keep[d.task] = d.id
    kept = set(keep.values())
    bench.demos = [d if d.id in kept else d.model_copy(update={"rationale": None}) for d in bench.demos]
    save_benchmark(bench, bench_dir)
    return list(keep.values())


def _read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8-sig", newline="") as f:
        return list(csv.DictReader(f))


def _fill_csv(path: Path, ratings: dict[str, tuple[str, str]], edit=None) -> None:
    """Write ratings (demo id -> (answer correctness, reasoning quality)) into a CSV form, as a spreadsheet would."""
    rows = _read_csv(path)
    for row in rows:
        row["answer_correctness"], row["reasoning_quality"] = ratings[row["demo_id"]]
    if edit is not None:
        rows = edit(rows)
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(CSV_COLUMNS))
        writer.writeheader()
        writer.writerows(rows)


# The hand-worked example of tests/test_rater_agreement.py: four demos, three annotators.
CORRECTNESS = [("true", "true", "true"), ("true", "true", "true"), ("true", "true", "false"), ("false",) * 3]
REASONING = [("5", "5", "4"), ("3", "3", "3"), ("1", "2", "1"), ("4", "4", "4")]


def _fill_hand_example(out: Path, demos: list[str]) -> None:
    for k in range(3):
        ratings = {d: (CORRECTNESS[i][k], REASONING[i][k]) for i, d in enumerate(demos)}
        _fill_csv(out / f"annotator-{k + 1}.csv", ratings)


# ---- export ---------------------------------------------------------------------------------


def test_export_writes_a_form_per_annotator_with_the_seeded_sample(bench_dir, tmp_path):
    bench = load_benchmark(bench_dir)
    outcome = export_forms(bench, tmp_path / "forms", per_task=2, annotators=3, seed=5)
    export = load_export(tmp_path / "forms" / EXPORT_FILE)
    assert export == outcome.export
    ids = [d.id for d in export.demos]
    assert len(ids) == 2 * len(bench.tasks) == len(set(ids))
    assert all(bench.demo(i).rationale is not None for i in ids)
    assert {d.task for d in export.demos} == set(bench.tasks)
    # Every annotator rates every demo, in an order of their own; the assignment is recorded.
    orders = [form.order for form in export.annotators]
    assert [sorted(o) for o in orders] == [sorted(ids)] * 3 and len(set(orders)) == 3
    for form in export.annotators:
        page = (tmp_path / "forms" / form.html).read_text(encoding="utf-8")
        positions = [page.index(f"demo {demo_id} ·") for demo_id in form.order]
        assert positions == sorted(positions)
        n_images = sum(len(bench.demo(i).images) for i in ids)
        assert page.count('src="data:image/png;base64,') == n_images and "http" not in page.split("<main>")[1]
        rows = _read_csv(tmp_path / "forms" / form.csv)
        assert [r["demo_id"] for r in rows] == list(form.order)
        assert all(r["export_id"] == export.export_id and r["annotator"] == form.annotator for r in rows)
        assert all(r["answer_correctness"] == r["reasoning_quality"] == "" for r in rows)
        assert all((tmp_path / "forms" / img).is_file() for r in rows for img in r["images"].split())
    # The same seed draws the same sample (and export id); another seed another.
    assert plan_export(bench, 2, 3, seed=5) == export
    assert [d.id for d in plan_export(bench, 2, 3, seed=6).demos] != ids


def test_export_refuses_a_folder_holding_an_export_one_annotator_and_a_benchmark_without_rationales(
    bench_dir, tmp_path
):
    bench = load_benchmark(bench_dir)
    export_forms(bench, tmp_path / "forms", per_task=1, annotators=2)
    with pytest.raises(ExportError, match="already holds an export"):
        export_forms(bench, tmp_path / "forms", per_task=1, annotators=2)
    with pytest.raises(ExportError, match="at least 2"):
        plan_export(bench, 1, annotators=1, seed=0)
    bench.demos = [d.model_copy(update={"rationale": None}) for d in bench.demos]
    with pytest.raises(ExportError, match="no demo has a rationale"):
        plan_export(bench, 1, 2, seed=0)


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts.append(data)


def _hostile_bench(bench_dir: Path) -> None:
    bench = load_benchmark(bench_dir)
    demos = []
    for d in bench.demos:
        if d.rationale is not None and d.format == "mcqa":
            wrong = next(i for i, c in enumerate(d.choices) if c != d.answer)
            choices = [HOSTILE_OPTION if i == wrong else c for i, c in enumerate(d.choices)]
            rationale = d.rationale.model_copy(update={"reasoning": HOSTILE_REASONING})
            d = d.model_copy(update={"question": HOSTILE_QUESTION, "choices": choices, "rationale": rationale})
        elif d.rationale is not None:
            d = d.model_copy(update={"rationale": None})
        demos.append(d)
    bench.demos = demos
    save_benchmark(bench, bench_dir)


def test_bench_text_is_escaped_in_the_form_and_neutralised_in_the_spreadsheet(bench_dir, tmp_path):
    _hostile_bench(bench_dir)
    outcome = export_forms(load_benchmark(bench_dir), tmp_path / "forms", per_task=1, annotators=2)
    form = outcome.export.annotators[0]
    page = (tmp_path / "forms" / form.html).read_text(encoding="utf-8")
    parser = _Tags()
    parser.feed(page)
    # Only the page's own elements: two scripts (its data, its code), no handler attribute anywhere.
    assert [t for t, _ in parser.tags].count("script") == 2
    assert not [(t, a) for t, a in parser.tags for name in a if name.startswith("on")]
    assert {t for t, _ in parser.tags} <= {
        *("html", "head", "meta", "title", "style", "body", "header", "main", "footer", "section", "h1", "h2"),
        *("p", "strong", "em", "code", "dl", "dt", "dd", "div", "img", "ol", "li", "fieldset", "legend", "label"),
        *("input", "textarea", "button", "span", "script"),
    }
    assert all(a.get("src", "").startswith("data:image/") for t, a in parser.tags if t == "img")
    assert "window.__xss" not in "".join(parser.scripts)
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in page
    rows = _read_csv(tmp_path / "forms" / form.csv)
    assert rows and all(
        r["question"] == "'" + HOSTILE_QUESTION and r["rationale"] == "'" + HOSTILE_REASONING for r in rows
    )
    assert all(HOSTILE_OPTION in r["options"] for r in rows)


# ---- the HTML form in a browser -------------------------------------------------------------


def _rate_in_browser(browser, ratings: list[tuple[str, str]]) -> None:
    from selenium.webdriver.common.by import By

    items = browser.find_elements(By.CSS_SELECTOR, "section.item")
    assert len(items) == len(ratings)
    for item, (correct, quality) in zip(items, ratings):
        for name, value in (("answer_correctness", correct), ("reasoning_quality", quality)):
            radio = item.find_element(By.CSS_SELECTOR, f"input[data-criterion='{name}'][value='{value}']")
            browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", radio)
            radio.click()


def _wait_for(path: Path, seconds: float = 10) -> Path:
    deadline = time.monotonic() + seconds
    while not path.is_file() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert path.is_file(), f"{path} was not downloaded"
    return path


def test_html_form_saves_ratings_that_import_reads(browser, bench_dir, tmp_path):  # noqa: F811
    from selenium.webdriver.common.by import By

    _hostile_bench(bench_dir)
    forms = tmp_path / "forms"
    export = export_forms(load_benchmark(bench_dir), forms, per_task=1, annotators=2).export
    demos = [d.id for d in export.demos]
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    browser.execute_cdp_cmd("Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    form = export.annotators[0]
    _open(browser, (forms / form.html).as_uri())
    status = browser.find_element(By.ID, "status")
    assert status.text.startswith(f"0 of {len(demos)} items rated")
    wanted = [("true", str(1 + i % 5)) for i in range(len(demos))]
    _rate_in_browser(browser, wanted)
    assert status.text == f"{len(demos)} of {len(demos)} items rated"
    # Ratings survive a reload (kept in the browser's storage as they are given).
    _open(browser, (forms / form.html).as_uri())
    assert browser.find_element(By.ID, "status").text == f"{len(demos)} of {len(demos)} items rated"
    browser.find_element(By.ID, "save").click()
    saved = _wait_for(downloads / form.ratings)
    assert browser.execute_script("return window.__xss") is None
    assert not _console_errors(browser)
    data = json.loads(saved.read_text(encoding="utf-8"))
    assert [r["demo_id"] for r in data["ratings"]] == list(form.order)
    assert [(r["answer_correctness"], r["reasoning_quality"]) for r in data["ratings"]] == wanted
    # The hostile question is shown as text.
    assert HOSTILE_QUESTION in browser.find_element(By.TAG_NAME, "main").text

    shutil.copy(saved, forms / form.ratings)
    _fill_csv(forms / export.annotators[1].csv, {d: ("true", "4") for d in demos})
    result = import_ratings([forms], resamples=50)
    assert result.ratings.annotators == ("1", "2")
    assert result.ratings.blank == (forms / form.csv,)  # annotator 1's untouched CSV is passed over
    by_demo = dict(zip(form.order, wanted))
    assert result.ratings.values["reasoning_quality"] == {d: {"1": by_demo[d][1], "2": "4"} for d in demos}


# ---- import ---------------------------------------------------------------------------------


def test_import_gives_the_hand_computed_agreement(bench_dir, tmp_path):
    demos = _four_rated_demos(bench_dir)
    outcome = export_forms(load_benchmark(bench_dir), tmp_path / "forms", per_task=5, annotators=3)
    assert sorted(d.id for d in outcome.export.demos) == sorted(demos)
    assert sum(outcome.export.short_tasks.values()) == 4
    _fill_hand_example(tmp_path / "forms", demos)
    result = import_ratings([tmp_path / "forms"], resamples=200, seed=3)
    correctness, reasoning = (r.agreement for r in result.criteria)
    # See tests/test_rater_agreement.py for the arithmetic.
    assert correctness.kappa.value == pytest.approx(5 / 8) and correctness.alpha.value == pytest.approx(21 / 32)
    assert correctness.mean.value == pytest.approx(8 / 12) and correctness.majority["true"] == 3
    assert reasoning.kappa.value == pytest.approx(31 / 55) and reasoning.alpha.value == pytest.approx(133 / 144)
    assert reasoning.level == "ordinal" and reasoning.mean.value == pytest.approx(13 / 4)
    assert result.criteria[1].share_at_least("4") == pytest.approx(2 / 4)
    assert result.means[demos[2]] == {
        "answer_correctness": pytest.approx(2 / 3),
        "reasoning_quality": pytest.approx(4 / 3),
    }
    written = json.loads((tmp_path / "forms" / VALIDATION_FILE).read_text())
    assert written["criteria"]["reasoning_quality"]["alpha"]["value"] == pytest.approx(133 / 144)
    assert written["criteria"]["reasoning_quality"]["share_mean_at_least"]["4"] == pytest.approx(0.5)
    assert written["per_demo"][demos[3]]["answer_correctness"] == 0
    # Seeded: the same import gives the same intervals.
    assert import_ratings([tmp_path / "forms"], resamples=200, seed=3).criteria == result.criteria
    # The benchmark is untouched without drop rules.
    assert not read_log(bench_dir)


def test_bad_forms_are_refused_naming_file_row_and_field(bench_dir, tmp_path):
    demos = _four_rated_demos(bench_dir)
    forms = tmp_path / "forms"
    export = export_forms(load_benchmark(bench_dir), forms, per_task=5, annotators=3).export
    _fill_hand_example(forms, demos)
    first = export.annotators[0]
    order = list(first.order)

    def spoil(rows):
        rows[0]["reasoning_quality"] = ""  # missing, spreadsheet row 2
        rows[1]["reasoning_quality"] = "7"  # off the scale, row 3
        rows[2]["answer_correctness"] = "maybe"  # off the scale, row 4
        rows[3]["demo_id"] = "ghost"  # unknown, row 5 (and its own demo is then left out)
        return rows + [dict(rows[0], reasoning_quality="4")]  # a duplicate of row 2, row 6

    _fill_csv(forms / first.csv, {d: ("true", "4") for d in demos}, spoil)
    # Annotator 2 sent a ratings file of another export; annotator 3 a broken one.
    other = {"format": "mmctx-demo-validation", "export_id": "0000", "annotator": "2", "ratings": []}
    (forms / export.annotators[1].ratings).write_text(json.dumps(other))
    (forms / export.annotators[1].csv).unlink()
    (forms / export.annotators[2].ratings).write_text('{"format": "mmctx-demo-validation", "ratings": [')
    (forms / export.annotators[2].csv).unlink()
    with pytest.raises(FormError) as caught:
        import_ratings([forms])
    text = str(caught.value)
    name = str(forms / first.csv)
    assert f"{name}: row 2 (demo {order[0]!r}), reasoning_quality: missing rating" in text
    assert f"{name}: row 3 (demo {order[1]!r}), reasoning_quality: '7' is not on the scale (1, 2, 3, 4, 5)" in text
    assert f"{name}: row 4 (demo {order[2]!r}), answer_correctness: 'maybe' is not on the scale" in text
    assert f"{name}: row 5 (demo 'ghost'), demo_id: unknown demo id 'ghost': not in this export" in text
    assert f"{name}: row 6 (demo {order[0]!r}), demo_id: rated twice (also row 2)" in text
    assert f"{name}: demo_id: no rating of 1 demo(s) of this form: {order[3]!r}" in text
    assert f"{forms / export.annotators[1].ratings}: export_id: the file belongs to export '0000'" in text
    assert f"{forms / export.annotators[2].ratings}: not JSON" in text
    assert len(caught.value.problems) == 8

    # A spreadsheet that lost a column, and an annotator the export does not have.
    rows = _read_csv(forms / first.csv)
    with open(forms / first.csv, "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(
            f, fieldnames=[c for c in CSV_COLUMNS if c != "reasoning_quality"], extrasaction="ignore"
        )
        writer.writeheader()
        writer.writerows(rows)
    stray = forms / "extra.csv"
    stray.write_text("export_id,annotator,demo_id,answer_correctness,reasoning_quality\n"
                     f"{export.export_id},9,{demos[0]},true,4\n")  # fmt: skip
    with pytest.raises(FormError) as caught:
        import_ratings([forms / first.csv, stray, forms / export.annotators[1].ratings])
    text = str(caught.value)
    assert f"{name}: row 1, reasoning_quality: missing column(s) in the header" in text
    assert f"{stray}: annotator: annotator '9' is not one of this export's (1, 2, 3)" in text


def test_import_needs_the_export_and_two_annotators(bench_dir, tmp_path):
    demos = _four_rated_demos(bench_dir)
    forms = tmp_path / "forms"
    export = export_forms(load_benchmark(bench_dir), forms, per_task=5, annotators=2).export
    _fill_csv(forms / export.annotators[0].csv, {d: ("true", "4") for d in demos})
    loose = tmp_path / "loose.csv"
    shutil.copy(forms / export.annotators[0].csv, loose)
    with pytest.raises(ExportError, match="no export.json"):
        import_ratings([loose])
    with pytest.raises(FormError, match="at least two annotators"):
        import_ratings([forms])


# ---- dropping -------------------------------------------------------------------------------


def _cot_demo_ids(bench: Benchmark, query: Sample) -> tuple[str, ...]:
    """The demos a 1-shot CoT setting shows ``query``, as a run plans it."""
    from mmctx.prompts.presets import get_preset
    from mmctx.run.plan import GenerationLimits, plan_requests
    from mmctx.run.settings import Setting

    alone = Benchmark(bench.name, [query], bench.demos, bench.root)
    setting = Setting(1, "similar", cot=True)
    (planned,) = plan_requests(alone, [setting], ["generate"], get_preset("fewmmbench"), 0, GenerationLimits())
    return tuple(planned.prompt.demo_ids)


def test_drop_below_clears_rationales_logs_it_and_cot_settings_skip_the_demos(bench_dir, tmp_path):
    demos = _four_rated_demos(bench_dir)
    forms = tmp_path / "forms"
    export_forms(load_benchmark(bench_dir), forms, per_task=5, annotators=3)
    _fill_hand_example(forms, demos)
    before = load_benchmark(bench_dir)
    rules = [DropRule("reasoning_quality", 3.5), DropRule("answer_correctness", 0.5)]
    result = import_ratings([forms], rules=rules, resamples=50)
    drop = result.drop
    # Item means: reasoning 14/3, 3, 4/3, 4; correctness 1, 1, 2/3, 0.
    assert [(d.demo_id, d.criterion) for d in drop.dropped] == [
        (demos[1], "reasoning_quality"), (demos[2], "reasoning_quality"), (demos[3], "answer_correctness")
    ]  # fmt: skip
    after = load_benchmark(bench_dir)
    assert after.fingerprint() == drop.benchmark_sha256_after != drop.benchmark_sha256_before == before.fingerprint()
    for demo_id in demos[1:]:
        demo = after.demo(demo_id)
        assert demo.rationale is None and demo.meta["rationale_status"] == REJECTED
        assert demo.meta["human_validation"]["export_id"] == result.ratings.export.export_id
    assert after.demo(demos[0]).rationale == before.demo(demos[0]).rationale
    # Everything else is as it was.
    assert [d.id for d in after.demos] == [d.id for d in before.demos]
    assert [q.model_dump() for q in after.queries] == [q.model_dump() for q in before.queries]
    (entry,) = read_log(bench_dir)
    assert entry["action"] == "drop_rationales" and entry["export_id"] == result.ratings.export.export_id
    assert [d["demo_id"] for d in entry["dropped"]] == demos[1:]
    assert entry["dropped"][0]["rationale"] == before.demo(demos[1]).rationale.model_dump()
    assert entry["benchmark_sha256_after"] == after.fingerprint()
    assert entry["agreement"]["criteria"]["reasoning_quality"]["alpha"]["value"] == pytest.approx(133 / 144)
    assert entry["rules"] == [{"criterion": "reasoning_quality", "threshold": 3.5},
                              {"criterion": "answer_correctness", "threshold": 0.5}]  # fmt: skip

    # A CoT setting no longer shows a dropped demo. Each kept rationale is its task's only one (see
    # `_four_rated_demos`), so a query whose similar demos held demos[1] now has none to show and is refused.
    query = next(q for q in after.queries if demos[1] in q.demo_keys["similar"])
    assert _cot_demo_ids(before, query) == (demos[1],)
    with pytest.raises(BenchmarkError, match="needs 1 demos with a rationale, has 0"):
        _cot_demo_ids(after, query)
    kept = next(q for q in after.queries if demos[0] in q.demo_keys["similar"])
    assert _cot_demo_ids(after, kept) == (demos[0],)
    lost = {q.id for q in after.queries if set(demos[1:]) & {k for keys in q.demo_keys.values() for k in keys}}
    assert set(drop.left_with_rationale) == lost and query.id in lost

    # The same import again changes nothing.
    again = import_ratings([forms], rules=rules, resamples=50).drop
    assert again.log_entry is None and sorted(again.already) == sorted(demos[1:])
    assert load_benchmark(bench_dir).fingerprint() == after.fingerprint() and len(read_log(bench_dir)) == 1


def test_drop_refuses_a_demo_changed_since_the_export(bench_dir, tmp_path):
    demos = _four_rated_demos(bench_dir)
    forms = tmp_path / "forms"
    export_forms(load_benchmark(bench_dir), forms, per_task=5, annotators=3)
    _fill_hand_example(forms, demos)
    bench = load_benchmark(bench_dir)
    changed = bench.demo(demos[2])
    rewritten = changed.rationale.model_copy(update={"reasoning": "A rationale written after the export."})
    bench.demos = [d.model_copy(update={"rationale": rewritten}) if d.id == demos[2] else d for d in bench.demos]
    save_benchmark(bench, bench_dir)
    with pytest.raises(DropError, match=f"demo '{demos[2]}' changed since export"):
        import_ratings([forms], rules=[DropRule("reasoning_quality", 3.5)], resamples=10)
    assert not read_log(bench_dir) and load_benchmark(bench_dir).fingerprint() == bench.fingerprint()


def test_a_run_made_before_the_drop_does_not_resume_on_the_changed_benchmark(bench_dir, tmp_path):
    from mmctx.run.plan import GenerationLimits
    from mmctx.run.runner import RunError
    from mmctx.tasks.fewshot import evaluate

    run = dict(settings="0-shot", scorers="ppl", limit=1, tasks=["counting"], show_progress=False,
               limits=GenerationLimits(max_new_tokens=4, cot_max_new_tokens=4))  # fmt: skip
    demos = _four_rated_demos(bench_dir)
    evaluate(bench_dir, "builtin:tiny-idefics3", tmp_path / "run-before-drop", **run)
    export_forms(load_benchmark(bench_dir), tmp_path / "forms", per_task=5, annotators=3)
    _fill_hand_example(tmp_path / "forms", demos)
    import_ratings([tmp_path / "forms"], rules=[DropRule("reasoning_quality", 3.5)], resamples=10)
    with pytest.raises(RunError, match="different run"):
        evaluate(bench_dir, "builtin:tiny-idefics3", tmp_path / "run-before-drop", **run)
    evaluate(bench_dir, "builtin:tiny-idefics3", tmp_path / "run-after-drop", **run)  # a new folder runs


# ---- the command line -----------------------------------------------------------------------


def test_cli_export_then_import_with_drop(bench_dir, tmp_path):
    runner = CliRunner()
    demos = _four_rated_demos(bench_dir)
    forms = tmp_path / "forms"
    args = ["annotate", "export", str(bench_dir), "--sample", "5", "--annotators", "3", "--seed", "1"]
    result = runner.invoke(app, [*args, "--out", str(forms)])
    assert result.exit_code == 0, result.output
    assert "4 demos, 3 annotators" in result.output and (forms / "annotator-3.html").is_file()
    again = runner.invoke(app, [*args, "--out", str(forms)])
    assert again.exit_code == 2 and "already holds an export" in again.output

    _fill_hand_example(forms, demos)
    spoiled = forms / "annotator-2.csv"
    good = spoiled.read_text(encoding="utf-8")
    spoiled.write_text(good.replace(",true,3,", ",true,9,", 1), encoding="utf-8")
    bad = runner.invoke(app, ["annotate", "import", str(forms)])
    assert bad.exit_code == 2
    assert "annotator-2.csv: row" in bad.output and "reasoning_quality: '9' is not on the scale" in bad.output
    spoiled.write_text(good, encoding="utf-8")

    unknown = runner.invoke(app, ["annotate", "import", str(forms), "--drop-below", "fluency=3"])
    assert unknown.exit_code == 2 and "unknown criterion 'fluency'" in unknown.output

    ok = runner.invoke(
        app,
        ["annotate", "import", str(forms), "--bench", str(bench_dir), "--drop-below", "3.5", "--bootstrap", "100"],
    )
    assert ok.exit_code == 0, ok.output
    assert "| reasoning_quality | 4 | 3 | 3.25 [" in ok.output and "(ordinal)" in ok.output
    assert "| answer_correctness | 4 | 3 | 0.67 [" in ok.output and "true 3, false 1" in ok.output
    assert "50.0% of demos have a mean of at least 4" in ok.output
    assert f"dropped {demos[1]}: mean reasoning_quality 3.00 < 3.5" in ok.output
    assert "2 rationale(s) dropped" in ok.output
    assert [d["demo_id"] for d in read_log(bench_dir)[0]["dropped"]] == demos[1:3]
