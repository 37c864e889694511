"""The viewer's CoT tag filter, in headless Chromium, on hand-made run folders read from results.jsonl.

One run's CoT results carry tags (one of them markup that would run script if it reached the page
as HTML); a second run was scored before tags existed, so its results have no ``cot_tags`` field.
The filter offers each tag, "(no tag)", "(not tagged)" and "(not CoT)" with their counts, a
sample with several tags is found under each, and tags show as text in the sample's detail.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from mmctx.reporting.viewer import build_site
from tests.fixtures.browser import _console_errors, _open, browser  # noqa: F401  (the fixture)

HOSTILE_TAG = "<img src=x onerror=window.__xss=9>tag"


def _request(setting: str, qid: str, scorer: str = "generate") -> dict:
    return {
        "id": f"{setting}/{scorer}/{qid}", "query_id": qid, "task": "counting", "source": "hand", "setting": setting,
        "scorer": scorer, "gold": 1, "options": ["red", "blue"], "labels": ["A", "B"], "format": "mcqa",
        "demo_ids": [], "prompt": [{"role": "user", "content": [{"type": "text", "text": f"Colour of {qid}?"}]}],
        "key": f"k-{setting}-{scorer}-{qid}",
    }  # fmt: skip


def _result(request: dict, outcome: str = "correct", tags: list[str] | None = None, stored_tags: bool = True) -> dict:
    row = {
        "request_id": request["id"], "query_id": request["query_id"], "task": request["task"], "source": "hand",
        "setting": request["setting"], "scorer": request["scorer"], "gold": 1,
        "pred": 1 if outcome == "correct" else None, "outcome": outcome, "rule": "answer_marker",
        "response": "Answer: B", "truncated": False, "loglikelihoods": [], "token_counts": [], "probs": [],
        "error": "boom" if outcome == "error" else None,
    }  # fmt: skip
    return row | {"cot_tags": tags} if stored_tags else row


def _run(folder: Path, rows: list[tuple[dict, dict]]) -> Path:
    """A run folder without manifest or store: the viewer names it by its folder and reads results.jsonl."""
    folder.mkdir(parents=True)
    (folder / "requests.jsonl").write_text("".join(json.dumps(q) + "\n" for q, _ in rows), encoding="utf-8")
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for _, r in rows), encoding="utf-8")
    return folder


def _tagged_run(folder: Path) -> Path:
    cot = [_request("4-similar-cot", f"q{i}") for i in range(1, 6)]
    plain = [_request("4-similar", "q1"), _request("4-similar", "q1", scorer="ppl")]
    rows = [
        (cot[0], _result(cot[0], tags=["no_reasoning"])),
        (cot[1], _result(cot[1], "unparsed", tags=["no_final_answer", "repetition_loop", "truncated"])),
        (cot[2], _result(cot[2], tags=[])),
        (cot[3], _result(cot[3], "wrong", tags=[HOSTILE_TAG, "truncated"])),
        (cot[4], _result(cot[4], "error", tags=None)),
        (plain[0], _result(plain[0])),
        (plain[1], _result(plain[1])),
    ]
    return _run(folder, rows)


def _old_run(folder: Path) -> Path:
    requests = [_request("8-similar-cot", "q1"), _request("8-similar-cot", "q2"), _request("0-shot", "q1")]
    return _run(folder, [(q, _result(q, stored_tags=False)) for q in requests])


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("viewer-cot")
    build_site([_tagged_run(root / "tagged"), _old_run(root / "old")], root / "site")
    return root / "site"


def _shown(browser) -> int:
    return int(browser.find_element("id", "count").get_attribute("data-shown"))


def _assert_clean(browser) -> None:
    assert browser.execute_script("return typeof window.__xss") == "undefined"
    assert browser.execute_script("return document.querySelectorAll(\"img[src='x']\").length") == 0
    assert _console_errors(browser) == []


def test_tag_filter_counts_and_filters(site, browser):
    from selenium.webdriver.support.ui import Select

    _open(browser, (site / "samples.html").as_uri())
    _assert_clean(browser)
    assert _shown(browser) == 10
    select = Select(browser.find_element("id", "filter-cot_tag"))
    offered = {o.get_attribute("value"): o.text for o in select.options}
    expected = Counter(
        {
            "no_reasoning": 1,
            "no_final_answer": 1,
            "repetition_loop": 1,
            "truncated": 2,
            HOSTILE_TAG: 1,
            "(no tag)": 1,
            "(not tagged)": 3,
            "(not CoT)": 3,
        }
    )  # fmt: skip  (not tagged: the error and the old run's two CoT results)
    assert set(offered) == {""} | set(expected)
    assert offered[HOSTILE_TAG] == f"{HOSTILE_TAG} (1)"  # the option's text is the tag, as text
    for value, n in expected.items():
        select.select_by_value(value)
        assert _shown(browser) == n, value
    # with another filter: the tags of the wrong answers
    select.select_by_value("truncated")
    Select(browser.find_element("id", "filter-outcome")).select_by_value("wrong")
    assert _shown(browser) == 1
    browser.find_element("id", "filter-reset").click()
    assert _shown(browser) == 10
    _assert_clean(browser)


def test_detail_shows_tags_as_text(site, browser):
    data_text = (site / "samples.html").read_text(encoding="utf-8")
    assert HOSTILE_TAG not in data_text  # inside the JSON block its < and > are escaped
    _open(browser, (site / "samples.html").as_uri())
    samples = browser.execute_script("return JSON.parse(document.getElementById('mmctx-data').textContent).samples")
    hostile = next(i for i, s in enumerate(samples) if HOSTILE_TAG in (s["cot_tags"] or []))
    _open(browser, (site / "samples.html").as_uri() + f"#sample={hostile}")
    tags = [e.get_attribute("textContent") for e in browser.find_elements("css selector", ".sample-col .cot-tag")]
    assert tags == [HOSTILE_TAG, "truncated"]
    old = next(i for i, s in enumerate(samples) if s["setting"] == "8-similar-cot")
    _open(browser, (site / "samples.html").as_uri() + f"#sample={old}")
    tags = [e.get_attribute("textContent") for e in browser.find_elements("css selector", ".sample-col .cot-tag")]
    assert tags == ["(not tagged)"]
    _assert_clean(browser)


def test_summary_page_has_the_tag_table_escaped(site, browser):
    index = (site / "index.html").read_text(encoding="utf-8")
    assert "CoT failure tags" in index and "<img src=x" not in index
    _open(browser, (site / "index.html").as_uri())
    _assert_clean(browser)
    assert HOSTILE_TAG in browser.find_element("tag name", "body").text


def test_no_tag_filter_without_cot_samples(tmp_path, browser):
    requests = [_request("4-similar", "q1"), _request("0-shot", "q1")]
    run = _run(tmp_path / "run", [(q, _result(q, stored_tags=False)) for q in requests])
    build_site([run], tmp_path / "site")
    _open(browser, (tmp_path / "site" / "samples.html").as_uri())
    assert browser.find_elements("id", "filter-cot_tag") == []
    assert browser.find_elements("id", "filter-outcome") != []
    assert "CoT failure tags" not in (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
