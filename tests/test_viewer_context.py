"""`mmctx view` on CLBench-V context-learning runs, built from real runs and driven in headless Chromium.

The toy suite (one item's image removed, so it is an ``invalid_sample``) is run twice against the
real local chat server, with a real judge server for the judged subsets and repair on:

  - model A answers with scripted replies that carry markup: a ``<think>`` trace holding a
    ``<script>``, a final answer ``{<img onerror>}`` (so the *prediction* is markup too) and an
    ``<svg onload>`` answer line; one item is unparsed even after repair, one is repaired, one
    fails at the server (``error``), and its judge returns no verdict for one item (``judge_error``);
  - model B, under a hostile model name, answers every item with its reference reply.

The site must show all of that as text, run none of it, log no console error, filter correctly,
render the context images and put the two models side by side. A few-shot run given together
with a context run is refused. The browser setup is `tests/test_viewer.py`'s.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("openai")

from mmctx.reporting.viewer import ViewerError, build_site, reasoning_parts
from tests.fixtures.browser import _console_errors, _images_loaded, _open, browser  # noqa: F401  (the fixture)
from tests.fixtures.chat_server import Fault, prompt_text

HOSTILE_THINK = "<think>Counting the digits. <script>window.__xss=1</script></think>"
HOSTILE_ANSWER = "<img src=x onerror=window.__xss=2>"
HOSTILE_LINE = "Answer: <svg onload=window.__xss=3>"
HOSTILE_MODEL = "<b onmouseover=window.__xss=6>evil</b>-vlm & co"
INJECTED = "svg, img[src='x'], b[onmouseover], script:not([src]):not([type='application/json'])"


# ----------------------------------------------------------------------------- the runs and the site


def _build(root: Path) -> dict:
    from mmctx.data.clbench.loader import load_clbench, write_clbench
    from mmctx.data.clbench.toy import write_toy_suite
    from mmctx.models.openai import OpenAIBackend
    from mmctx.models.retry import RetryPolicy
    from mmctx.schema import ContextBlock
    from mmctx.tasks.context import ContextConfig, run_context
    from tests.fixtures.chat_server import ChatServer
    from tests.fixtures.clbench import marker, scripted_judge, scripted_model

    toy = write_toy_suite(root / "suite")
    missing = [ContextBlock(kind="image", image="images/missing.png")]
    write_clbench([q.model_copy(update={"blocks": missing}) if q.id == "toy-o3-1" else q for q in toy.queries],
                  root / "suite")  # fmt: skip
    bench = load_clbench(root / "suite")
    by_id = {q.id: q for q in bench.queries}

    def mark(item: str) -> str:
        return marker(by_id[item], bench.queries)

    reference = scripted_model(bench.queries)

    def model_a(body: dict) -> str:
        text = prompt_text(body)
        if mark("toy-zb-1") in text:
            return f"{HOSTILE_THINK} The sum is {{{HOSTILE_ANSWER}}}"
        if mark("toy-rmplus-1") in text:
            return HOSTILE_LINE
        if mark("toy-o3-2") in text:
            return "Answer: D" if "could not be parsed for evaluation" in text else "I cannot tell."
        if mark("toy-zb-2") in text:
            return "I cannot tell."
        return reference(body)

    judge = scripted_judge(bench.queries)

    def judge_a(body: dict) -> str:
        return "no verdict" if "Snib adds three: 13" in prompt_text(body) else judge(body)

    fast = RetryPolicy(max_attempts=2, timeout=5.0, base_delay=0.01, max_delay=0.05)
    config = ContextConfig(suite=str(bench.root), suite_name=bench.name, suite_sha256=bench.fingerprint(),
                           max_new_tokens=256, repair=True)  # fmt: skip
    run_a, run_b = root / "run-a", root / "run-b"
    for run, name, answer, grade in ((run_a, "mock-vlm", model_a, judge_a), (run_b, HOSTILE_MODEL, reference, judge)):
        with ChatServer(answer=answer) as model, ChatServer(answer=grade) as jserver:
            if run == run_a:
                model.rule = lambda body, attempt: Fault("500") if mark("toy-court-1") in prompt_text(body) else None
            run_context(
                bench,
                OpenAIBackend(name, base_url=model.base_url, retry=fast),
                run,
                config,
                judge=OpenAIBackend("judge-1", base_url=jserver.base_url, retry=fast),
                show_progress=False,
            )
    index = build_site([run_a, run_b], root / "site")
    return {"index": str(index), "runs": [str(run_a), str(run_b)], "suite": str(bench.root)}


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> dict:
    """The two runs and their site, built once per test run (shared by xdist workers)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = tmp_path_factory.getbasetemp().parent / "viewer-context-site"
    else:
        root = tmp_path_factory.mktemp("viewer-context-site")
    root.mkdir(exist_ok=True)
    done = root / "built.json"
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            done.write_text(json.dumps(_build(root)))
    built = json.loads(done.read_text())
    out = root / "site"
    text = (out / "samples.html").read_text(encoding="utf-8")
    block = re.search(r'<script type="application/json" id="mmctx-data">(.*?)</script>', text, re.DOTALL).group(1)
    rows = [
        {r["id"]: r for r in map(json.loads, (Path(run) / "results.jsonl").read_text().splitlines())}
        for run in built["runs"]
    ]
    return {**built, "out": out, "index": Path(built["index"]), "data": json.loads(block), "rows": rows}


def _index_of(data: dict, run: int, item: str) -> int:
    return next(i for i, s in enumerate(data["samples"]) if s["run"] == run and s["id"] == item)


def test_the_runs_have_the_outcomes_the_site_must_show(site):
    a, b = site["rows"]
    assert {r["outcome"] for r in a.values()} == {"scored", "unparsed", "judge_error", "invalid_sample", "error"}
    assert a["toy-zb-1"]["response"].startswith(HOSTILE_THINK) and "onerror" in a["toy-zb-1"]["prediction"]
    assert a["toy-o3-2"]["repaired"] and not a["toy-zb-2"]["repaired"]
    assert Counter(r["outcome"] for r in b.values()) == {"scored": 27, "invalid_sample": 1}


def test_site_files_are_self_contained_and_escaped(site):
    out, data = site["out"], site["data"]
    assert site["index"] == out / "index.html"
    assert data["kind"] == "context" and [r["name"] for r in data["runs"]] == ["mock-vlm", HOSTILE_MODEL]
    assert len(data["samples"]) == 56 and len(data["items"]) == 28  # one item entry per suite item, shared
    # context images: each once, named by the hash of the suite's file, re-encoded; the removed one is
    # reported, not copied
    srcs = {v for v in data["images"].values() if v}
    assert srcs == {f"images/{p.name}" for p in (out / "images").iterdir()} and len(srcs) >= 10
    suite_files = {hashlib.sha256(p.read_bytes()).hexdigest() for p in Path(site["suite"]).rglob("*") if p.is_file()}
    for p in (out / "images").iterdir():
        assert p.stem in suite_files and p.suffix in (".png", ".jpg")
    o3 = data["items"][data["samples"][_index_of(data, 0, "toy-o3-1")]["item"]]
    assert o3["blocks"] == [{"kind": "image", "title": "", "path": "images/missing.png", "image": ""}]
    index = (out / "index.html").read_text(encoding="utf-8")
    assert "missing.png" in index
    for page in ("index.html", "samples.html"):
        html = (out / page).read_text(encoding="utf-8")
        for needle in ("<svg", "<img src=x", "<b onmouseover", "<script>window", "<think>"):
            assert needle not in html, (page, needle)
        scripts = re.findall(r"<script\b[^>]*>", html)
        assert all('type="application/json"' in s or 'src="assets/viewer.js"' in s for s in scripts), scripts
    # Tables 2 and 3, with the paper's rank marks as classes
    assert "Table 2" in index and "Table 3" in index and "PRISMM-Bench (L1–L2)" in index
    assert 'class="num best"' in index and 'class="num second"' in index and "**" not in index


def test_reasoning_parts_mark_what_extraction_skips():
    assert reasoning_parts("Answer: B") is None
    text = "pre <think>a</think> mid <THINKING>b</THINKING> Answer: C"
    parts = reasoning_parts(text)
    assert "".join(p for _, p in parts) == text
    assert [p for r, p in parts if r] == ["<think>a</think>", "<THINKING>b</THINKING>"]
    assert reasoning_parts("opened in the prompt</think> Answer: A") == [[1, "opened in the prompt</think>"],
                                                                          [0, " Answer: A"]]  # fmt: skip
    assert reasoning_parts("Answer: A <think>cut off") == [[0, "Answer: A "], [1, "<think>cut off"]]


def test_mixing_few_shot_and_context_runs_is_refused(site, tmp_path):
    from typer.testing import CliRunner

    from mmctx.cli import app

    few = tmp_path / "fewshot-run"
    few.mkdir()
    shutil.copy(Path(site["runs"][0]) / "requests.jsonl", few / "requests.jsonl")
    (few / "manifest.json").write_text(json.dumps({"model": {"name": "m"}, "config": {"benchmark": "b"}}))
    out = tmp_path / "site"
    with pytest.raises(ViewerError, match="mix few-shot runs and context-learning"):
        build_site([Path(site["runs"][0]), few], out)
    assert not out.exists()  # refused before anything is written
    result = CliRunner().invoke(app, ["view", site["runs"][0], str(few), "--out", str(out)])
    assert result.exit_code != 0 and "view them separately" in result.output.replace("\n", " ")
    assert not out.exists()


def test_line_separators_in_run_files_lose_no_rows(site, tmp_path):
    """U+2028, U+2029 and U+0085 are legal raw inside JSON strings (runs write them so); a reader
    splitting on them would cut those rows in two."""
    breaks = "one\u2028two\u2029three\x85four"
    run = tmp_path / "run"
    shutil.copytree(site["runs"][0], run)
    for name, key in (("results.jsonl", "response"), ("requests.jsonl", "prompt_text")):
        rows = [json.loads(line) for line in (run / name).read_text(encoding="utf-8").split("\n") if line]
        for row in rows:
            row[key] = breaks + str(row.get(key) or "")
        (run / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    assert "\u2028" in (run / "results.jsonl").read_text(encoding="utf-8")
    build_site([run], tmp_path / "site")
    text = (tmp_path / "site" / "samples.html").read_text(encoding="utf-8")
    data = json.loads(re.search(r'<script type="application/json" id="mmctx-data">(.*?)</script>', text, re.S).group(1))
    assert len(data["samples"]) == len(rows) == len(site["rows"][0])
    assert all(s["response"].startswith(breaks) for s in data["samples"])
    assert all(p.startswith(breaks) for p in data["prompts"])


# ----------------------------------------------------------------------------- the browser


def _assert_clean(browser) -> None:
    assert browser.execute_script("return typeof window.__xss") == "undefined"
    assert browser.execute_script(f"return document.querySelectorAll({json.dumps(INJECTED)}).length") == 0
    assert _console_errors(browser) == []


def _shown(browser) -> int:
    return int(browser.find_element("id", "count").get_attribute("data-shown"))


def _rows(browser) -> int:
    return browser.execute_script("return document.querySelectorAll('#sample-list tbody tr').length")


def _text(browser, css: str) -> list[str]:
    return [e.get_attribute("textContent") for e in browser.find_elements("css selector", css)]


def test_summary_page(site, browser):
    _open(browser, site["index"].as_uri())
    _assert_clean(browser)
    body = browser.find_element("tag name", "body").text
    assert HOSTILE_MODEL in body and "judge-1" in body and "Table 2" in body and "Table 3" in body
    assert browser.execute_script("return document.querySelectorAll('table.metrics').length") >= 3
    assert browser.execute_script("return getComputedStyle(document.querySelector('td.best')).fontWeight") == "700"


def test_filters_narrow_the_items(site, browser):
    from selenium.webdriver.support.ui import Select

    samples, runs = site["data"]["samples"], site["data"]["runs"]
    _open(browser, (site["out"] / "samples.html").as_uri())
    _assert_clean(browser)
    assert _shown(browser) == _rows(browser) == 56
    value = {
        "model": lambda s: runs[s["run"]]["name"],
        "subset": lambda s: s["subset"],
        "level": lambda s: s["level"],
        "outcome": lambda s: s["outcome"],
        "repaired": lambda s: "yes" if s["repaired"] else "no",
    }
    reset = browser.find_element("id", "filter-reset")
    for key, get in value.items():
        counts = Counter(get(s) for s in samples)
        assert len(counts) >= 2, key
        select = Select(browser.find_element("id", f"filter-{key}"))
        for v, n in counts.items():
            select.select_by_value(v)
            assert _shown(browser) == _rows(browser) == n < 56, (key, v)
        reset.click()
        assert _shown(browser) == 56
    assert {o: n for o, n in Counter(s["outcome"] for s in samples).items()} == {
        "scored": 51, "unparsed": 1, "judge_error": 1, "invalid_sample": 2, "error": 1,
    }  # fmt: skip
    Select(browser.find_element("id", "filter-model")).select_by_value(HOSTILE_MODEL)
    Select(browser.find_element("id", "filter-outcome")).select_by_value("scored")
    assert _shown(browser) == 27
    Select(browser.find_element("id", "filter-level")).select_by_value("L2")
    assert _shown(browser) == 4
    reset.click()
    Select(browser.find_element("id", "filter-repaired")).select_by_value("yes")
    assert _shown(browser) == 1
    assert _text(browser, "#sample-list tbody td.mono")[0] == "toy-o3-2"
    reset.click()
    browser.find_element("id", "filter-text").send_keys("onerror")
    assert _shown(browser) == 1
    assert _console_errors(browser) == []


def test_item_page_shows_hostile_text_as_text(site, browser):
    data, row = site["data"], site["rows"][0]["toy-zb-1"]
    i = _index_of(data, 0, "toy-zb-1")
    _open(browser, (site["out"] / "samples.html").as_uri() + f"#sample={i}")
    _assert_clean(browser)
    assert _text(browser, "pre.response") == [row["response"]]  # shown whole, as text
    assert _text(browser, "pre.response span.think") == [HOSTILE_THINK]  # the trace, marked
    assert _text(browser, "pre.prediction") == [row["prediction"]] and "<img" in row["prediction"]
    assert _text(browser, "code.extracted-by") == ["curly"]
    assert _text(browser, ".sample-col pre.gold") == ["15"]
    assert json.loads(_text(browser, "pre.detail")[0]) == row["detail"]
    col = browser.find_element("css selector", ".sample-col").get_attribute("textContent")
    assert "scored" in col and "0.0000" in col and "not judged" in col
    prompt = _text(browser, "pre.prompt-text")[0]
    assert prompt.startswith("[system] ") and "What is the sum of the digits" in prompt
    # the <svg onload> answer line, and a judged item's judge and evaluator detail
    j = _index_of(data, 0, "toy-rmplus-1")
    _open(browser, (site["out"] / "samples.html").as_uri() + f"#sample={j}")
    assert _text(browser, "pre.response") == [HOSTILE_LINE] and not _text(browser, "span.think")
    k = _index_of(data, 0, "toy-clb-2")
    _open(browser, (site["out"] / "samples.html").as_uri() + f"#sample={k}")
    assert _text(browser, "code.judge") == ["judge-1"] and _text(browser, ".sample-col .badge") == ["judge_error"]
    assert "no verdict" in _text(browser, "pre.detail")[0]
    _assert_clean(browser)


def test_context_images_render_in_order(site, browser):
    data = site["data"]
    i = _index_of(data, 1, "toy-mir-1")
    _open(browser, (site["out"] / "samples.html").as_uri() + f"#sample={i}")
    _assert_clean(browser)
    captions = _text(browser, ".context li.ctx-image figcaption")
    assert [c.split(" ", 1)[1] for c in captions] == ["images/mir-a.png", "images/mir-b.png"]
    widths = _images_loaded(browser)
    assert len(widths) == 2 and all(w > 0 for w in widths)
    # text blocks come in order with their titles; a missing image is named, not broken
    bc = _index_of(data, 0, "toy-bc-1")
    _open(browser, (site["out"] / "samples.html").as_uri() + f"#sample={bc}")
    titles = _text(browser, ".context .ctx-title")
    assert titles[:2] == ["Reference Source [1]", "Reference Source [2]"], titles
    o3 = _index_of(data, 0, "toy-o3-1")
    _open(browser, (site["out"] / "samples.html").as_uri() + f"#sample={o3}")
    assert _text(browser, ".context figure.missing span") == ["<image> images/missing.png not available"]
    assert _text(browser, ".sample-col .badge") == ["invalid_sample"]
    _assert_clean(browser)


def test_two_models_side_by_side(site, browser):
    from selenium.webdriver.support.ui import Select, WebDriverWait

    data = site["data"]
    i, j = _index_of(data, 0, "toy-zb-2"), _index_of(data, 1, "toy-zb-2")
    _open(browser, (site["out"] / "samples.html").as_uri() + f"#sample={i}")
    Select(browser.find_element("id", "compare-select")).select_by_value(str(j))
    WebDriverWait(browser, 5).until(lambda d: len(d.find_elements("css selector", ".sample-col")) == 2)
    assert _text(browser, ".sample-col h2.model") == ["mock-vlm", HOSTILE_MODEL]
    assert _text(browser, ".sample-col .badge") == ["unparsed", "scored"]
    assert len(browser.find_elements("css selector", ".context")) == 1  # the item's context once, below
    _assert_clean(browser)
