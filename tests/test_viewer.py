"""The static viewer (`mmctx view`), built from a real run and driven in headless Chromium.

One real run of the tiny model on shapes-world is made, then poisoned: a stored response, an
error string, a question, an option, a model name, a rule name and a figure's file name are
replaced with markup that would run script if any of it reached the page as HTML. A second
"model" is the same run copied without its response store (so its ``results.jsonl`` is read)
under a hostile model name, with different answers. The site must show all of that as text,
run none of it, log no console error, and filter, paginate and compare correctly.

The browser is Debian's chromium with its chromedriver (``scripts/install-browser.sh``),
driven by Selenium with both paths given, so no tool ever downloads a browser or driver.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import sqlite3
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest
from PIL import Image

from mmctx.reporting.viewer import CSP, build_site, json_for_html, markdown_to_html, split_prompt
from tests.fixtures.browser import _console_errors, _images_loaded, _open, browser  # noqa: F401  (the fixture)

ROOT = Path(__file__).resolve().parents[1]

HOSTILE_RESPONSE = '<script>window.__xss=1</script><img src=x onerror="window.__xss=2">'
HOSTILE_QUESTION = 'What colour is the circle?"><svg onload=window.__xss=3>'
HOSTILE_OPTION = "<img src=x onerror=window.__xss=4>"
HOSTILE_ERROR = "</script><script>window.__xss=5</script> backend failed"
HOSTILE_MODEL = "<b onmouseover=window.__xss=6>evil</b>-model & co"
HOSTILE_RULE = "<script>window.__xss=7</script>rule"
HOSTILE_FIGURE = 'fig"><svg onload=window.__xss=8>.png'


SAFE_TAGS = {  # every element the two pages are written with
    *("html", "head", "meta", "title", "link", "body", "header", "nav", "main", "section", "div", "span", "a", "p"),
    *("h1", "h2", "h3", "ul", "li", "table", "thead", "tbody", "tr", "th", "td", "figure", "img", "figcaption"),
    "script",
}


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))


def _parse_tags(html: str) -> list[tuple[str, list[tuple[str, str | None]]]]:
    parser = _Tags()
    parser.feed(html)
    return parser.tags


# ----------------------------------------------------------------------------- the site


def _rewrite_jsonl(path: Path, edit) -> None:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    path.write_text("".join(json.dumps(edit(r), ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def _poison_run(run: Path) -> dict[str, str]:
    """Hostile text into the store and the plan of a real run; returns the request ids touched."""
    requests = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
    target = next(r for r in requests if r["setting"] == "4-similar" and r["scorer"] == "generate"
                  and "What colour is the circle?" in json.dumps(r["prompt"][-1]))  # fmt: skip
    failed = next(r for r in requests if r["scorer"] == "generate" and r["query_id"] != target["query_id"])

    def edit(r: dict) -> dict:
        if r["query_id"] == target["query_id"]:
            for m in r["prompt"][-1:]:
                for p in m["content"]:
                    if p["type"] == "text":
                        p["text"] = p["text"].replace("What colour is the circle?", HOSTILE_QUESTION)
            r["options"][1] = HOSTILE_OPTION
        return r

    _rewrite_jsonl(run / "requests.jsonl", edit)
    db = sqlite3.connect(run / "responses.sqlite")
    with db:
        (payload,) = db.execute("SELECT payload FROM responses WHERE key = ?", (target["key"],)).fetchone()
        payload = {**json.loads(payload), "text": HOSTILE_RESPONSE}
        db.execute("UPDATE responses SET payload = ? WHERE key = ?", (json.dumps(payload), target["key"]))
        db.execute("UPDATE responses SET error = ? WHERE key = ?", (HOSTILE_ERROR, failed["key"]))
    db.close()
    return {"target": target["id"], "failed": failed["id"], "query": target["query_id"]}


def _second_model(run: Path, out: Path) -> None:
    """The run copied without its store, under a hostile name, answering every generate request right."""
    shutil.copytree(run, out, ignore=shutil.ignore_patterns("responses.sqlite*"))
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["model"]["name"] = HOSTILE_MODEL
    (out / "manifest.json").write_text(json.dumps(manifest))

    def edit(r: dict) -> dict:
        if r["scorer"] == "generate":
            r.update(outcome="correct", pred=r["gold"], rule=HOSTILE_RULE, response=f"B says {HOSTILE_RESPONSE}")
        return r

    _rewrite_jsonl(out / "results.jsonl", edit)


def _build(tmp: Path) -> dict:
    from PIL import Image

    from mmctx.data.shapes import build_benchmark
    from mmctx.tasks.fewshot import evaluate

    bench = tmp / "bench"
    build_benchmark(bench, queries_per_task=1)
    run_a, run_b = tmp / "run-a", tmp / "run-b"
    evaluate(bench, "builtin:tiny-idefics3", run_a, settings="0-shot,4-similar", scorers="generate,ppl",
             limit=1, show_progress=False)  # fmt: skip
    ids = _poison_run(run_a)
    _second_model(run_a, run_b)
    figures = tmp / "figures"
    figures.mkdir()
    Image.new("RGB", (64, 48), (0, 114, 178)).save(figures / HOSTILE_FIGURE)
    index = build_site([run_a, run_b], tmp / "site", figures_dir=figures)
    return {"index": str(index), "ids": ids}


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> dict:
    """The poisoned runs and their site, built once per test run (shared by xdist workers)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = tmp_path_factory.getbasetemp().parent / "viewer-site"  # this run's, common to its workers
    else:
        root = tmp_path_factory.mktemp("viewer-site")
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
    requests = [json.loads(line) for line in (root / "run-a" / "requests.jsonl").read_text().split("\n") if line]
    parts = [p for r in requests for m in r["prompt"] for p in m["content"]]
    sources = {p["sha256"]: p["path"] for p in parts if p["type"] == "image"}  # the images the run was given
    return {"out": out, "index": Path(built["index"]), "data": json.loads(block), "ids": built["ids"],
            "sources": sources}  # fmt: skip


def test_site_files_are_self_contained_and_escaped(site):
    out, data = site["out"], site["data"]
    assert site["index"] == out / "index.html"
    assert len(data["runs"]) == 2 and data["runs"][1]["name"] == HOSTILE_MODEL
    assert data["runs"][0]["source"] == "store" and data["runs"][1]["source"] == "results.jsonl"
    # every image once, named by the hash of the run's image file, re-encoded, and every prompt image present
    srcs = set(data["images"].values())
    assert None not in srcs and srcs == {f"images/{p.name}" for p in (out / "images").iterdir()}
    for sha, src in data["images"].items():
        assert src == f"images/{sha}.png"  # shapes-world images are PNGs: decoded and written afresh, lossless
        with Image.open(out / src) as shown, Image.open(site["sources"][sha]) as original:
            assert shown.format == "PNG" and shown.convert("RGB").tobytes() == original.convert("RGB").tobytes()
    similar = [data["prompts"][s["prompt"]] for s in data["samples"] if s["setting"] == "4-similar"]
    assert similar and all(len(p["demos"]) == 4 and len(p["query"]["images"]) == 1 for p in similar)
    for page in ("index.html", "samples.html"):
        html = (out / page).read_text(encoding="utf-8")
        assert f'<meta http-equiv="Content-Security-Policy" content="{CSP.replace(chr(39), "&#x27;")}">' in html
        for needle in ("<svg", "<img src=x", "<b onmouseover", "window.__xss=5</script>", "<script>window"):
            assert needle not in html, (page, needle)
        scripts = re.findall(r"<script\b[^>]*>", html)
        assert all('type="application/json"' in s or 'src="assets/viewer.js"' in s for s in scripts), scripts
        tags = _parse_tags(html)
        assert {t for t, _ in tags} <= SAFE_TAGS, {t for t, _ in tags} - SAFE_TAGS
        assert not [(t, a) for t, attrs in tags for a, _ in attrs if a.startswith("on") or a == "style"]
    for path in out.rglob("*"):
        if path.suffix in {".html", ".js", ".css"}:
            assert not re.search(r"https?://|//cdn|@import", path.read_text(encoding="utf-8")), path
    js = (out / "assets" / "viewer.js").read_text()
    assert not re.search(r"\.innerHTML\s*=|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function", js)


def test_json_for_html_cannot_close_its_block():
    text = json_for_html({"a": "</script><!-- & \u2028", "b": [1.5, None]})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"a": "</script><!-- & \u2028", "b": [1.5, None]}


def test_markdown_to_html_escapes_cells():
    md = "## Title <x>\n\n| Model | Avg. |\n|---|---|\n| <b>m</b> | 50.0 |\n\n- note <i>\n"
    html = markdown_to_html(md)
    assert "<h2>Title &lt;x&gt;</h2>" in html and "<td>&lt;b&gt;m&lt;/b&gt;</td>" in html
    assert '<td class="num">50.0</td>' in html and "<li>note &lt;i&gt;</li>" in html


def test_split_prompt_single_turn():
    img = lambda h: {"type": "image", "sha256": h}
    txt = lambda t: {"type": "text", "text": t}
    single = [
        {
            "role": "user",
            "content": [img("a"), txt("q1"), txt("\nAnswer: A\n\n"), img("b"), img("c"), txt("q2"), img("d"), txt("Q")],
        }
    ]
    parts = split_prompt(single, 2)
    assert [d["images"] for d in parts["demos"]] == [["a"], ["b", "c"]]
    assert parts["query"] == {"images": ["d"], "text": "Q"}
    assert split_prompt(single, 5)["demos"] == []  # a shape it cannot read: no guessing


def _assert_clean(browser) -> None:
    assert browser.execute_script("return typeof window.__xss") == "undefined"
    injected = "svg, img[src='x'], b[onmouseover], script:not([src]):not([type='application/json'])"
    assert browser.execute_script(f"return document.querySelectorAll({json.dumps(injected)}).length") == 0
    assert _console_errors(browser) == []


def test_summary_page(site, browser):
    _open(browser, site["index"].as_uri())
    _assert_clean(browser)
    body = browser.find_element("tag name", "body").text
    assert HOSTILE_MODEL in body and "builtin:tiny-idefics3" in body
    assert HOSTILE_FIGURE in body  # the figure's caption, as text
    assert browser.execute_script("return document.querySelectorAll('table.metrics').length") >= 3
    widths = _images_loaded(browser)
    assert widths and all(w > 0 for w in widths)


def _shown(browser) -> int:
    return int(browser.find_element("id", "count").get_attribute("data-shown"))


def _rows(browser) -> int:
    return browser.execute_script("return document.querySelectorAll('#sample-list tbody tr').length")


def test_filters_change_the_visible_count(site, browser):
    from selenium.webdriver.support.ui import Select

    samples, runs = site["data"]["samples"], site["data"]["runs"]
    _open(browser, (site["out"] / "samples.html").as_uri())
    _assert_clean(browser)
    assert _shown(browser) == len(samples) == 72 and _rows(browser) == 72
    value = {
        "model": lambda s: runs[s["run"]]["name"],
        "task": lambda s: s["task"],
        "setting": lambda s: s["setting"],
        "scorer": lambda s: s["scorer"],
        "outcome": lambda s: s["outcome"],
        "rule": lambda s: s["rule"] or "(none)",
    }
    reset = browser.find_element("id", "filter-reset")
    for key, get in value.items():
        counts = Counter(get(s) for s in samples)
        assert len(counts) >= 2, key
        select = Select(browser.find_element("id", f"filter-{key}"))
        for v, n in counts.items():
            select.select_by_value(v)
            assert _shown(browser) == _rows(browser) == n, (key, v)
        reset.click()
        assert _shown(browser) == 72
    # outcomes the issue names, on the poisoned run: correct, wrong (incorrect), unparsed, error
    assert {"correct", "wrong", "unparsed", "error"} <= {s["outcome"] for s in samples}
    Select(browser.find_element("id", "filter-model")).select_by_value(HOSTILE_MODEL)
    Select(browser.find_element("id", "filter-scorer")).select_by_value("generate")
    assert _shown(browser) == sum(s["run"] == 1 and s["scorer"] == "generate" for s in samples) == 18
    Select(browser.find_element("id", "filter-outcome")).select_by_value("correct")
    assert _shown(browser) == 18
    Select(browser.find_element("id", "filter-model")).select_by_value(runs[0]["name"])
    Select(browser.find_element("id", "filter-outcome")).select_by_value("error")
    assert _shown(browser) == 1
    reset.click()
    search = browser.find_element("id", "filter-text")
    search.send_keys("B says")
    assert _shown(browser) == 18
    reset.click()
    assert _console_errors(browser) == []


def _index_of(data: dict, run: int, request_id: str) -> int:
    return next(i for i, s in enumerate(data["samples"]) if s["run"] == run and s["id"] == request_id)


def test_sample_page_shows_hostile_text_as_text(site, browser):
    data, ids = site["data"], site["ids"]
    i = _index_of(data, 0, ids["target"])
    _open(browser, (site["out"] / "samples.html").as_uri() + f"#sample={i}")
    _assert_clean(browser)
    col = browser.find_element("css selector", ".sample-col")
    assert col.find_element("css selector", "pre.response").get_attribute("textContent") == HOSTILE_RESPONSE
    text = col.get_attribute("textContent")
    assert HOSTILE_QUESTION in text and HOSTILE_OPTION in text
    assert "Exact prompt" in text and "assistant" in text  # the rendered conversation, with roles
    demos = col.find_elements("css selector", "li.demo")
    assert len(demos) == 4 and all(d.find_elements("css selector", "img") for d in demos)
    widths = _images_loaded(browser)
    assert len(widths) >= 10 and all(w > 0 for w in widths)  # 5 in query + demos, 5 in the prompt
    # the error string, and the other model's rule and name
    j = _index_of(data, 0, ids["failed"])
    _open(browser, (site["out"] / "samples.html").as_uri() + f"#sample={j}")
    assert browser.find_element("css selector", "pre.error").get_attribute("textContent") == HOSTILE_ERROR
    k = _index_of(data, 1, ids["target"])
    _open(browser, (site["out"] / "samples.html").as_uri() + f"#sample={k}")
    col = browser.find_element("css selector", ".sample-col")
    assert col.find_element("css selector", "h2.model").get_attribute("textContent") == HOSTILE_MODEL
    assert col.find_element("css selector", "code.rule").get_attribute("textContent") == HOSTILE_RULE
    _assert_clean(browser)


def test_side_by_side(site, browser, tmp_path):
    from selenium.webdriver.support.ui import Select, WebDriverWait

    data, ids = site["data"], site["ids"]
    i = _index_of(data, 0, ids["target"])
    j = _index_of(data, 1, ids["target"])
    _open(browser, (site["out"] / "samples.html").as_uri() + f"#sample={i}&compare={j}")
    heads = [e.get_attribute("textContent") for e in browser.find_elements("css selector", ".sample-col h2.model")]
    assert heads == ["builtin:tiny-idefics3", HOSTILE_MODEL]
    responses = [
        e.get_attribute("textContent") for e in browser.find_elements("css selector", ".sample-col pre.response")
    ]
    assert responses == [HOSTILE_RESPONSE, f"B says {HOSTILE_RESPONSE}"]
    # two settings of one model, chosen from the page's own selector
    other = _index_of(data, 0, ids["target"].replace("4-similar/", "0-shot/"))
    Select(browser.find_element("id", "compare-select")).select_by_value(str(other))
    assert browser.execute_script("return location.hash") == f"#sample={i}&compare={other}"
    WebDriverWait(browser, 5).until(
        lambda d: (
            d.execute_script("return [...document.querySelectorAll('.sample-col')].map(c => c.dataset.index)")
            == [str(i), str(other)]
        )
    )
    cols = browser.find_elements("css selector", ".sample-col")
    assert len(cols) == 2
    assert "4-similar · generate" in cols[0].text and "0-shot · generate" in cols[1].text
    assert len(cols[0].find_elements("css selector", "li.demo")) == 4 and not cols[1].find_elements(
        "css selector", "li.demo"
    )
    assert all(w > 0 for w in _images_loaded(browser))
    _assert_clean(browser)
    # the page for the README: one model, one sample
    _open(
        browser,
        (site["out"] / "samples.html").as_uri()
        + f"#sample={_index_of(data, 0, ids['target'].replace('generate', 'ppl'))}&compare={i}",
    )
    shot = Path(os.environ.get("MMCTX_VIEWER_SCREENSHOT") or tmp_path / "viewer.png")
    shot.parent.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(shot)) and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
