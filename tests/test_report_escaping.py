"""What the viewer and the reports write is never active content, whatever a run or a benchmark holds.

- Images: the viewer serves every image as a PNG or JPEG it re-encoded itself; an SVG (which can
  carry script and runs it when opened in a tab), an HTML file posing as an image, or a file
  whose resolved path leaves the benchmark (a symlink out of it) is refused and noted, never
  copied. Checked in headless Chromium by opening every link the page offers.
- Reports: task, subset and model names are escaped for the format they land in (Markdown with
  HTML entities and backslash escapes, LaTeX with its escapes), so ``report.md`` renders them as
  text and every table keeps its columns.
- Run files holding U+2028, U+2029 and U+0085 (legal inside JSON strings, line breaks to
  ``str.splitlines``) are shown and reported with every row.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
import shutil
import sqlite3
from html.parser import HTMLParser
from pathlib import Path

import pytest

from mmctx.reporting.viewer import ImageCopier, build_site
from tests.fixtures.browser import _console_errors, _open, browser  # noqa: F401  (the fixture)

SVG_WITH_SCRIPT = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="40" height="40">'
    '<script>document.documentElement.setAttribute("data-xss", "svg")</script>'
    '<rect width="40" height="40" fill="red"/></svg>'
)
HTML_AS_IMAGE = '<html><body><script>document.documentElement.setAttribute("data-xss", "html")</script></body></html>'
HOSTILE_TASK = "<img src=x onerror=window.__xss=9>|t_*x*"
HOSTILE_MODEL = "<b onmouseover=window.__xss=6>m</b> | *x* & \\co_1"
BREAKS = "one\u2028two\u2029three\x85four"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def _site_data(out: Path) -> dict:
    text = (out / "samples.html").read_text(encoding="utf-8")
    block = re.search(r'<script type="application/json" id="mmctx-data">(.*?)</script>', text, re.DOTALL).group(1)
    return json.loads(block)


@pytest.fixture(scope="module")
def base_run(shapes_bench, tmp_path_factory) -> Path:
    """A real run of the tiny model: two tasks, zero-shot and 4-similar, generation."""
    from mmctx.run.plan import GenerationLimits
    from mmctx.tasks.fewshot import evaluate

    run = tmp_path_factory.mktemp("escaping") / "run"
    evaluate(shapes_bench, "builtin:tiny-idefics3", run, settings="0-shot,4-similar", scorers="generate", limit=1,
             tasks=["attribute_recognition", "counting"], limits=GenerationLimits(4, 4),
             show_progress=False)  # fmt: skip
    return run


def _copy_run(base: Path, to: Path) -> Path:
    shutil.copytree(base, to)
    return to


def _point_images(run: Path, files: list[Path]) -> str:
    """The first 4-similar request's images, one by one, replaced by ``files``; returns its id."""
    requests = _read_jsonl(run / "requests.jsonl")
    target = next(r for r in requests if r["setting"] == "4-similar")
    parts = [p for m in target["prompt"] for p in m["content"] if p["type"] == "image"]
    assert len(parts) >= len(files)
    for part, path in zip(parts, files):
        part.update(path=str(path), sha256=_sha(path.read_bytes()))
    _write_jsonl(run / "requests.jsonl", requests)
    return target["id"]


# ----------------------------------------------------------------------------- images


def test_svg_and_html_images_are_refused_and_rasters_reencoded(base_run, tmp_path, browser):
    from PIL import Image

    run = _copy_run(base_run, tmp_path / "run")
    extra = run / "extra"  # inside the run folder, one of the places a prompt's images may live
    extra.mkdir()
    (extra / "evil.svg").write_text(SVG_WITH_SCRIPT, encoding="utf-8")
    (extra / "evil.html").write_text(HTML_AS_IMAGE, encoding="utf-8")
    (extra / "evil.png").write_text(SVG_WITH_SCRIPT, encoding="utf-8")  # an SVG under a raster's name
    Image.new("RGB", (32, 24), (200, 40, 10)).save(extra / "photo.jpg", quality=90)
    files = [extra / "evil.svg", extra / "evil.html", extra / "evil.png", extra / "photo.jpg"]
    target = _point_images(run, files)
    # a hostile task name, shown by the summary's tables
    requests = _read_jsonl(run / "requests.jsonl")
    for r in requests:
        if r["task"] == "counting":
            r["task"] = HOSTILE_TASK
    _write_jsonl(run / "requests.jsonl", requests)

    out = tmp_path / "site"
    build_site([run], out)
    data = _site_data(out)
    i = next(k for k, s in enumerate(data["samples"]) if s["id"] == target)
    _open(browser, (out / "samples.html").as_uri() + f"#sample={i}")
    links = browser.execute_script("return [...document.querySelectorAll('figure.img a')].map(a => a.href)")
    # opened in a tab of its own, nothing the site holds (or links to) runs script
    for url in sorted(set(links) | {p.as_uri() for p in (out / "images").iterdir()}):
        _open(browser, url)
        assert browser.execute_script("return document.documentElement.getAttribute('data-xss')") is None, url
    shas = {f.name: _sha(f.read_bytes()) for f in files}
    for name in ("evil.svg", "evil.html", "evil.png"):
        assert data["images"][shas[name]] is None, name
    assert data["images"][shas["photo.jpg"]] == f"images/{shas['photo.jpg']}.jpg"
    # every file the site holds is one of its own pages, its assets, or a raster Pillow wrote
    for path in out.rglob("*"):
        if path.is_file() and path.parent.name != "assets" and path.name not in ("index.html", "samples.html"):
            assert path.suffix in (".png", ".jpg"), path
            with Image.open(path) as image:
                assert image.format == {".png": "PNG", ".jpg": "JPEG"}[path.suffix], path
    index = (out / "index.html").read_text(encoding="utf-8")
    assert "evil.svg" in index and "SVG" in index  # refused with a notice saying why

    _open(browser, (out / "samples.html").as_uri() + f"#sample={i}")
    missing = browser.find_elements("css selector", "figure.img.missing")
    assert len(missing) >= 3 and all("not available" in m.text for m in missing)
    assert links and all(re.search(r"/images/[0-9a-f]{64}\.(png|jpg)$", link) for link in links), links
    _open(browser, out.joinpath("index.html").as_uri())
    heads = browser.execute_script("return [...document.querySelectorAll('table.metrics th')].map(t => t.textContent)")
    assert any(HOSTILE_TASK in h for h in heads), heads
    assert browser.execute_script("return typeof window.__xss") == "undefined"
    assert browser.execute_script("return document.querySelectorAll('img[src=x]').length") == 0
    # and the SVG itself, opened the same way, does run its script: the check above can see it
    _open(browser, (extra / "evil.svg").as_uri())
    assert browser.execute_script("return document.documentElement.getAttribute('data-xss')") == "svg"


def test_images_outside_the_benchmark_are_never_copied(base_run, tmp_path):
    from PIL import Image

    run = _copy_run(base_run, tmp_path / "run")
    outside = tmp_path / "outside"
    outside.mkdir()
    Image.new("RGB", (8, 8), (1, 2, 3)).save(outside / "secret.png")
    Image.new("RGB", (8, 8), (4, 5, 6)).save(outside / "other.png")
    (run / "extra").mkdir()
    (run / "extra" / "link.png").symlink_to(outside / "secret.png")
    target = _point_images(run, [run / "extra" / "link.png", outside / "other.png"])
    out = tmp_path / "site"
    build_site([run], out)
    data = _site_data(out)
    for name in ("secret.png", "other.png"):
        assert data["images"][_sha((outside / name).read_bytes())] is None, name
    index = (out / "index.html").read_text(encoding="utf-8")
    assert index.count("outside the benchmark") >= 2
    sample = next(s for s in data["samples"] if s["id"] == target)
    assert sample["outcome"]  # the sample is still shown, without those images
    for path in (out / "images").iterdir():
        with Image.open(path) as image:
            assert image.convert("RGB").getpixel((0, 0)) not in ((1, 2, 3), (4, 5, 6))


def test_suite_images_linked_out_of_the_suite_are_refused(tmp_path):
    from PIL import Image

    suite, outside = tmp_path / "suite", tmp_path / "outside"
    (suite / "images").mkdir(parents=True)
    outside.mkdir()
    Image.new("RGB", (8, 8), (9, 9, 9)).save(outside / "secret.png")
    Image.new("RGB", (8, 8), (7, 7, 7)).save(suite / "images" / "own.png")
    (suite / "images" / "link.png").symlink_to(outside / "secret.png")
    (suite / "images" / "up").symlink_to(outside, target_is_directory=True)
    copier = ImageCopier(tmp_path / "site" / "images")
    assert copier.add_file("images/link.png", suite) == ""
    assert copier.add_file("images/up/secret.png", suite) == ""
    assert len(copier.problems) == 2 and all("outside" in p for p in copier.problems)
    own = copier.add_file("images/own.png", suite)
    assert own and copier.copied[own] == f"images/{own}.png"
    assert [p.name for p in (tmp_path / "site" / "images").iterdir()] == [f"{own}.png"]


# ----------------------------------------------------------------------------- reports


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _render_markdown(text: str) -> _Elements:
    """Markdown as GitHub-like renderers read it: CommonMark with pipe tables, raw HTML allowed."""
    from markdown_it import MarkdownIt

    parser = _Elements()
    parser.feed(MarkdownIt("commonmark").enable("table").render(text))
    return parser


def _hand_results(task: str) -> list:
    from mmctx.scoring.results import SampleResult

    out = []
    for setting in ("0-shot", "4-random", "4-similar"):
        for k in range(4):
            correct = (k + len(setting)) % 3 != 0
            out.append(SampleResult(
                request_id=f"{setting}/generate/q{k}", query_id=f"q{k}", task=task, source="hand", setting=setting,
                scorer="generate", gold=0, pred=0 if correct else 1, outcome="correct" if correct else "wrong",
            ))  # fmt: skip
    return out


def test_report_md_and_latex_escape_names(tmp_path):
    from mmctx.reporting.folder import write_report_results

    write_report_results([(HOSTILE_MODEL, _hand_results(HOSTILE_TASK)), ("plain", _hand_results(HOSTILE_TASK))],
                         tmp_path, latex=True, figures=False)  # fmt: skip
    report = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "<img" not in report and "<b " not in report
    rendered = _render_markdown(report)
    assert not {"img", "b", "script", "em", "strong"} & set(rendered.tags), set(rendered.tags)
    cells = [c for row in rendered.rows for c in row]
    assert HOSTILE_MODEL in cells and any(HOSTILE_TASK in c for c in cells)
    assert f"Models: {HOSTILE_MODEL}, plain" in rendered_text(report)
    for table in re.findall(r"(?:^\|.*\|\n)+", report, re.MULTILINE):
        widths = {len(row) for row in _render_markdown(table).rows}
        assert len(widths) == 1, table  # no name split a row into extra cells
    for name in ("table1.tex", "table4.tex"):
        tex = (tmp_path / name).read_text(encoding="utf-8")
        assert "<" not in tex and ">" not in tex and "|" not in tex.replace("{l|", "")
        _assert_tex_columns(tex)


def rendered_text(markdown: str) -> str:
    """The text a reader sees in rendered Markdown."""
    from markdown_it import MarkdownIt

    parts: list[str] = []
    parser = HTMLParser()
    parser.handle_data = parts.append
    parser.feed(MarkdownIt("commonmark").enable("table").render(markdown))
    return "".join(parts)


def _assert_tex_columns(tex: str) -> None:
    """Every body row of every tabular has as many cells as its ``Model & ...`` header."""
    lines = tex.splitlines()
    for start, line in enumerate(lines):
        if line.startswith("Model &"):
            end = lines.index(r"\bottomrule", start)
            body = [row for row in lines[start + 2 : end] if row.endswith(r"\\")]
            assert body and all(_tex_cells(row) == _tex_cells(line) for row in body), (line, body)


def _tex_cells(row: str) -> int:
    return len(re.findall(r"(?<!\\)&", row)) + 1


def test_clbench_tables_escape_model_and_subset_names():
    from mmctx.reporting.clbench_tables import table2_latex, table2_markdown, table3_latex, table3_markdown
    from mmctx.scoring.levels import aggregate

    subset = "<img src=x onerror=alert(1)>|Sub_set*"
    rows = [{"id": f"s{k}", "subset": subset, "level": "L1", "table_level": "L1", "outcome": "scored",
             "score": k / 4, "evaluator": "exact"} for k in range(4)]  # fmt: skip
    rows.append({"id": "u", "subset": subset, "level": "L1", "table_level": "L1", "outcome": "unparsed", "score": 0.0})
    runs = {HOSTILE_MODEL: aggregate(rows), "plain": aggregate(rows[1:])}
    for text in (table2_markdown(runs), table3_markdown(runs)):
        assert "<img" not in text and "<b " not in text
        rendered = _render_markdown(text)
        assert not {"img", "b", "em"} & set(rendered.tags)  # bold marks the best score
        assert {len(r) for r in rendered.rows} == {len(rendered.rows[0])}
        assert HOSTILE_MODEL in [row[0] for row in rendered.rows]
    assert subset in rendered_text(table3_markdown(runs))
    for tex in (table2_latex(runs), table3_latex(runs)):
        assert "<" not in tex and ">" not in tex and "|" not in tex
        _assert_tex_columns(tex)
    assert r"\textless{}img src=x onerror=alert(1)\textgreater{}\textbar{}Sub\_set*" in table3_latex(runs)


def test_viewer_tables_show_escaped_markdown_as_the_text_it_stands_for():
    from mmctx.reporting.clbench_tables import table2_markdown
    from mmctx.reporting.viewer import markdown_to_html
    from mmctx.scoring.levels import aggregate

    rows = [{"id": "a", "subset": "S", "level": "L1", "table_level": "L1", "outcome": "scored", "score": 0.5}]
    html = markdown_to_html(table2_markdown({HOSTILE_MODEL: aggregate(rows), "b": aggregate(rows)}))
    parser = _Elements()
    parser.feed(html)
    assert [r[0] for r in parser.rows[1:]] == [HOSTILE_MODEL, "b"]
    assert {len(r) for r in parser.rows} == {len(parser.rows[0])}
    assert set(parser.tags) <= {"div", "table", "thead", "tbody", "tr", "th", "td", "p"}


# ----------------------------------------------------------------------------- line separators in run files


def test_line_separators_in_run_files_lose_no_rows(base_run, tmp_path):
    from mmctx.reporting.folder import write_report
    from mmctx.scoring.results import AVERAGE, score_run

    run = _copy_run(base_run, tmp_path / "run")
    requests = _read_jsonl(run / "requests.jsonl")
    for r in requests:
        for m in r["prompt"]:
            for p in m["content"]:
                if p["type"] == "text":
                    p["text"] = BREAKS + p["text"]
    _write_jsonl(run / "requests.jsonl", requests)
    db = sqlite3.connect(run / "responses.sqlite")
    with db:
        for key, payload in db.execute("SELECT key, payload FROM responses").fetchall():
            payload = {**json.loads(payload), "text": f"{BREAKS} Answer: A"}
            db.execute("UPDATE responses SET payload = ? WHERE key = ?", (json.dumps(payload, ensure_ascii=False), key))
    db.close()
    results = _read_jsonl(run / "results.jsonl")
    for r in results:
        r["response"] = f"{BREAKS} Answer: B"
    _write_jsonl(run / "results.jsonl", results)
    assert "\u2028" in (run / "results.jsonl").read_text(encoding="utf-8")  # written raw, as runs write them

    stored_only = tmp_path / "no-store"
    shutil.copytree(run, stored_only, ignore=shutil.ignore_patterns("responses.sqlite*"))
    manifest = json.loads((stored_only / "manifest.json").read_text())
    manifest["model"]["name"] = "second"
    (stored_only / "manifest.json").write_text(json.dumps(manifest))
    out = tmp_path / "site"
    build_site([run, stored_only], out)
    data = _site_data(out)
    assert [s["run"] for s in data["samples"]].count(0) == len(requests)
    assert [s["run"] for s in data["samples"]].count(1) == len(requests)
    assert {s["response"] for s in data["samples"] if s["run"] == 0} == {f"{BREAKS} Answer: A"}
    assert {s["response"] for s in data["samples"] if s["run"] == 1} == {f"{BREAKS} Answer: B"}
    assert all(p["messages"][-1]["content"][-1]["text"].startswith(BREAKS) or BREAKS in json.dumps(p)
               for p in data["prompts"])  # fmt: skip

    write_report([("m", run)], tmp_path / "report", latex=False, figures=False)
    assert len(score_run(run)) == len(requests)
    with open(tmp_path / "report" / "metrics.csv", encoding="utf-8", newline="") as f:
        cells = [row for row in csv.DictReader(f) if row["task"] != AVERAGE]
    assert sum(int(c["n"]) + int(c["errors"]) + int(c["missing"]) for c in cells) == len(requests)


def test_figures_are_reencoded_and_only_plain_pdfs_linked(tmp_path):
    from PIL import Image

    from mmctx.reporting.paper_figures import capability_heatmap
    from mmctx.reporting.viewer import copy_figures, plain_pdf

    figures, outside = tmp_path / "figures", tmp_path / "outside"
    capability_heatmap({"m": {"A": 0.4, "B": 0.2}}, figures / "heatmap")  # a PNG and a PDF, as reports write
    assert plain_pdf((figures / "heatmap.pdf").read_bytes())
    (figures / "drawing.svg").write_text(SVG_WITH_SCRIPT, encoding="utf-8")
    Image.new("RGB", (20, 20), (0, 0, 0)).save(figures / "acting.png")
    pdf = (figures / "heatmap.pdf").read_bytes()
    (figures / "acting.pdf").write_bytes(pdf.replace(b"/Type /Catalog", b"/Type /Catalog /OpenAction 1 0 R", 1))
    outside.mkdir()
    Image.new("RGB", (20, 20), (1, 2, 3)).save(outside / "private.png")
    (figures / "linked.png").symlink_to(outside / "private.png")
    problems: list[str] = []
    shown = copy_figures(figures, tmp_path / "site", problems)
    by_caption = {caption: (src, href) for src, caption, href in shown}
    assert set(by_caption) == {"acting.png", "heatmap.png"}
    assert by_caption["heatmap.png"][1] and (tmp_path / "site" / by_caption["heatmap.png"][1]).read_bytes() == pdf
    assert by_caption["acting.png"][1] is None
    assert len(problems) == 3 and {"drawing.svg", "linked.png", "acting.png"} == {
        name for p in problems for name in ("drawing.svg", "linked.png", "acting.png") if name in p
    }
    assert sorted(p.suffix for p in (tmp_path / "site" / "figures").iterdir()) == [".pdf", ".png", ".png"]
