"""CLBench-V's construction pipelines on real PDFs drawn here with PyMuPDF, converted by pymupdf4llm.

The findings generator talks to a real local chat server (`tests/fixtures/chat_server.py`) through
the OpenAI backend, so the request it sends is checked as the server received it.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from mmctx.data.clbench.construct import (
    PAPER_CONCLUSION_TEMPLATE,
    ROE_TEMPLATE,
    RoeGold,
    build_paper_sample,
    build_roe_sample,
    evaluation_version,
    find_results_heading,
    generate_reference_findings,
    markdown_to_blocks,
    parse_findings,
    pdf_to_markdown,
    reference_version,
)
from mmctx.schema import validate_sample

pymupdf = pytest.importorskip("pymupdf")
pytest.importorskip("pymupdf4llm")

METHODS = "Methods text: we measured widget length in 40 mice using calipers."
RESULTS = "Results text: widget length increased by 25% in treated mice."
DISCUSSION = "Discussion text: widgets matter for mouse welfare."


# ---- PDFs drawn at test time ---------------------------------------------------------------------


def figure_png(color: str) -> bytes:
    """A small chart-like PNG; distinct colours make distinct figures."""
    im = Image.new("RGB", (240, 140), "white")
    draw = ImageDraw.Draw(im)
    draw.rectangle([20, 40, 80, 130], fill=color)
    draw.rectangle([120, 10, 180, 130], fill="gray")
    draw.line([0, 139, 239, 139], fill="black", width=2)
    buffer = io.BytesIO()
    im.save(buffer, format="PNG")
    return buffer.getvalue()


class Writer:
    """Lays out headings, paragraphs and figures top to bottom, a page at a time."""

    def __init__(self) -> None:
        self.doc = pymupdf.open()
        self.page = self.doc.new_page()
        self.y = 72.0

    def new_page(self) -> None:
        self.page = self.doc.new_page()
        self.y = 72.0

    def heading(self, text: str) -> None:
        self.page.insert_text((72, self.y), text, fontsize=18, fontname="hebo")
        self.y += 30

    def para(self, text: str) -> None:
        self.page.insert_textbox(pymupdf.Rect(72, self.y, 540, self.y + 50), text, fontsize=10)
        self.y += 50

    def figure(self, color: str, caption: str) -> None:
        self.page.insert_image(pymupdf.Rect(72, self.y, 312, self.y + 140), stream=figure_png(color))
        self.y += 150
        self.para(caption)

    def save(self, path: Path) -> Path:
        self.doc.save(path)
        self.doc.close()
        return path


def write_paper(path: Path, results_heading: str = "Results") -> Path:
    w = Writer()
    w.heading("A Study of Widgets")
    w.heading("Abstract")
    w.para("We study widgets in mice.")
    w.heading("Methods")
    w.para(METHODS)
    w.figure("blue", "Figure 1: Study design.")
    w.new_page()
    w.heading(results_heading)
    w.para(RESULTS)
    w.figure("red", "Figure 2: Widget length by group.")
    w.new_page()
    w.heading("Discussion")
    w.para(DISCUSSION)
    return w.save(path)


def write_report(path: Path) -> Path:
    """A one-page annual report with its key figures in a ruled table (USD million)."""
    w = Writer()
    w.heading("Acme Corp Annual Report 2025")
    w.para("Consolidated key figures for fiscal year 2025, in USD million.")
    rows = [
        ("Item", "2025"),
        ("Revenue", "12,000"),
        ("Net profit", "1,523"),
        ("Total assets", "25,000"),
        ("Shareholders' equity", "10,000"),
    ]
    top, height, cols = w.y, 22, (72, 272, 400)
    for i, (label, value) in enumerate(rows):
        y = top + i * height
        w.page.insert_text((cols[0] + 4, y + 15), label, fontsize=10)
        w.page.insert_text((cols[1] + 4, y + 15), value, fontsize=10)
    for i in range(len(rows) + 1):
        w.page.draw_line((cols[0], top + i * height), (cols[2], top + i * height))
    for x in cols:
        w.page.draw_line((x, top), (x, top + len(rows) * height))
    return w.save(path)


@pytest.fixture(scope="module")
def paper(tmp_path_factory) -> Path:
    return write_paper(tmp_path_factory.mktemp("pdfs") / "widgets paper.pdf")


@pytest.fixture(scope="module")
def converted(paper, tmp_path_factory):
    root = tmp_path_factory.mktemp("bench")
    return root, pdf_to_markdown(paper, root, "widgets")


# ---- conversion and blocks -----------------------------------------------------------------------


def test_conversion_writes_figures_under_the_root_referenced_relatively(converted):
    root, doc = converted
    assert doc.pages == 3
    assert len(doc.images) == 2
    for rel in doc.images:
        assert rel.startswith("images/widgets/") and not Path(rel).is_absolute()
        assert f"]({rel})" in doc.markdown
        with Image.open(root / rel) as im:
            im.verify()
    assert doc.converter["name"] == "pymupdf4llm" and doc.converter["version"]
    assert METHODS in doc.markdown and RESULTS in doc.markdown


def test_evaluation_version_stops_before_results(converted):
    _, doc = converted
    md = evaluation_version(doc.markdown, "widgets")
    assert METHODS in md
    assert doc.images[0] in md
    assert RESULTS not in md and doc.images[1] not in md and DISCUSSION not in md


def test_reference_version_runs_to_the_end_of_results(converted):
    _, doc = converted
    md = reference_version(doc.markdown, "widgets")
    assert METHODS in md and RESULTS in md and doc.images[1] in md
    assert DISCUSSION not in md


def test_blocks_alternate_text_and_real_images_in_reading_order(converted):
    root, doc = converted
    blocks = markdown_to_blocks(reference_version(doc.markdown), root)
    kinds = [b.kind for b in blocks]
    assert kinds == ["text", "image", "text", "image", "text"]
    assert [b.image for b in blocks if b.kind == "image"] == doc.images
    assert METHODS in blocks[0].text and "Figure 1" in blocks[2].text and RESULTS in blocks[2].text
    for b in blocks:
        if b.kind == "image":
            assert (root / b.image).is_file()


def test_blocks_refuse_references_that_leave_the_root(tmp_path):
    root = tmp_path / "bench"
    (root / "images").mkdir(parents=True)
    Image.new("RGB", (4, 4)).save(root / "images" / "a.png")
    Image.new("RGB", (4, 4)).save(tmp_path / "outside.png")
    inside = markdown_to_blocks(f"x ![fig]({root / 'images' / 'a.png'}) y", root)
    assert [b.image for b in inside if b.kind == "image"] == ["images/a.png"]
    with pytest.raises(ValueError, match=r"\.\./outside\.png"):
        markdown_to_blocks("text ![](../outside.png)", root)
    with pytest.raises(ValueError, match="outside.png"):
        markdown_to_blocks(f"text ![]({tmp_path / 'outside.png'})", root)
    with pytest.raises(ValueError, match="images/missing.png"):
        markdown_to_blocks("text ![](images/missing.png)", root)


def test_unreadable_pdf_names_the_file(tmp_path):
    bad = tmp_path / "broken.pdf"
    bad.write_bytes(b"%PDF-1.7 this is not a pdf")
    with pytest.raises(ValueError, match="broken.pdf"):
        pdf_to_markdown(bad, tmp_path / "bench", "broken")
    assert not (tmp_path / "bench").exists()


# ---- the Results section -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "heading",
    [
        "# Results",
        "## 4. Results",
        "3 Results",
        "# **3 Results and Discussion**",
        "### RESULT:",
        "## IV. Experiments",
        "**Results**",
    ],
)
def test_results_heading_variants(heading):
    if not heading.startswith(("#", "**")):
        heading = "## " + heading
    md = f"Intro text.\n\n## 2 Methods\n\nWe did things.\n\n{heading}\n\nWe found things.\n"
    start = find_results_heading(md, "doc")
    assert md[start:].startswith(heading)
    assert "We did things." in evaluation_version(md) and "We found things." not in evaluation_version(md)


def test_results_section_ends_at_the_next_heading_of_its_level_or_higher():
    md = (
        "# Title\n\n## Abstract\n\n**Results:** inline abstract label.\n\n## 2 Methods\n\nmethod\n\n"
        "## 3 Results\n\nmain result\n\n### 3.1 Subgroup\n\nsubgroup result\n\n## 4 Discussion\n\ndiscussion\n"
    )
    ref = reference_version(md)
    assert "inline abstract label" in evaluation_version(md)
    assert "main result" in ref and "subgroup result" in ref and "discussion" not in ref
    assert reference_version("# Results\n\nonly results\n") == "# Results\n\nonly results"


def test_no_results_heading_names_the_document():
    with pytest.raises(ValueError, match="my-paper.md"):
        find_results_heading("# Intro\n\n## Results of others\n\ntext\n", "my-paper.md")


def test_pdf_without_results_heading_names_the_file(tmp_path):
    pdf = write_paper(tmp_path / "no-results.pdf", results_heading="Observations")
    with pytest.raises(ValueError, match="no-results.pdf"):
        build_paper_sample(pdf, tmp_path / "bench", findings=["x"])
    assert not list((tmp_path / "bench").rglob("*.png"))  # its figures are not left behind


# ---- findings ------------------------------------------------------------------------------------


def test_parse_findings_reads_numbered_and_bulleted_lines():
    text = "<think>1. not this</think>Here you go:\n1. **First** finding.\n2) Second finding\n- Third\n\nThanks"
    assert parse_findings(text) == ["First finding.", "Second finding", "Third"]
    assert parse_findings("no list here") == []


def test_paper_sample_with_given_findings(paper, tmp_path):
    root = tmp_path / "bench"
    sample = build_paper_sample(paper, root, findings=[" Widgets grow. ", "Treated mice differ."], sample_id="p-1")
    assert sample.id == "p-1" and sample.task == "Paper Conclusion"
    assert sample.level == "L2" and sample.evaluator == "conclusions" and sample.answer_type == "conclusions"
    assert sample.question == PAPER_CONCLUSION_TEMPLATE
    assert sample.gold == ["Widgets grow.", "Treated mice differ."]
    assert [b.kind for b in sample.blocks] == ["text", "image", "text"]
    text = "\n".join(b.text for b in sample.blocks)
    assert METHODS in text and RESULTS not in text
    assert sample.meta["findings_source"] == "given" and "generator" not in sample.meta
    assert sample.meta["reference_chars"] > sample.meta["evaluation_chars"] > 0
    assert sample.meta["converter"]["name"] == "pymupdf4llm"
    # The Results figure is not shipped; the one the context uses is.
    assert sample.meta["pruned_images"] == 1
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*.png")) == sample.context_images
    assert validate_sample(sample, "queries", root) == []
    json.dumps(sample.model_dump())


def test_paper_sample_needs_exactly_one_source_of_findings(paper, tmp_path):
    with pytest.raises(ValueError, match="exactly one"):
        build_paper_sample(paper, tmp_path)
    with pytest.raises(ValueError, match="non-empty"):
        build_paper_sample(paper, tmp_path, findings=["ok", "  "])


@pytest.fixture
def chat():
    pytest.importorskip("openai")
    from tests.fixtures.chat_server import ChatServer

    with ChatServer(answer=lambda body: "1. Finding one\n2. Finding two") as server:
        yield server


def _backend(server):
    from mmctx.models.openai import OpenAIBackend
    from mmctx.models.retry import RetryPolicy
    from tests.fixtures.chat_server import MODEL

    return OpenAIBackend(
        MODEL, base_url=server.base_url, retry=RetryPolicy(max_attempts=2, timeout=5.0, base_delay=0.01, max_delay=0.05)
    )


def test_paper_sample_with_generated_findings(paper, tmp_path, chat):
    from tests.fixtures.chat_server import MODEL, ROOT, prompt_text

    root = tmp_path / "bench"
    with _backend(chat) as backend:
        sample = build_paper_sample(paper, root, backend=backend, sample_id="p-gen")
    assert sample.gold == ["Finding one", "Finding two"]
    (record,) = chat.chat_records()
    sent = prompt_text(record.body)
    assert RESULTS in sent and METHODS in sent and DISCUSSION not in sent
    # Both figures up to the end of Results travel as images, in reading order.
    user = record.body["messages"][-1]["content"]
    assert [p["type"] for p in user].count("image_url") == 2
    generator = sample.meta["generator"]
    assert (
        generator["name"] == MODEL and generator["revision"] == ROOT and sample.meta["findings_source"] == "generated"
    )
    assert validate_sample(sample, "queries", root) == []


def test_building_a_paper_again_replays_the_stored_findings_and_a_failure_is_asked_again(paper, tmp_path, chat):
    from tests.fixtures.chat_server import Fault

    root = tmp_path / "bench"
    chat.enqueue(Fault("400"))  # the first ask fails: the build stops, and nothing is stored
    with _backend(chat) as backend:
        with pytest.raises(RuntimeError, match="findings generation failed"):
            build_paper_sample(paper, root, backend=backend, sample_id="p-gen")
        first = build_paper_sample(paper, root, backend=backend, sample_id="p-gen")
        assert len(chat.chat_records()) == 2  # the failure was asked again
        chat.answer = lambda body: "1. A different finding"  # a model that would answer otherwise now
        again = build_paper_sample(paper, root, backend=backend, sample_id="p-gen")
    assert len(chat.chat_records()) == 2 and again.gold == first.gold == ["Finding one", "Finding two"]
    assert (root / "curation" / "responses.sqlite").is_file()


def test_generated_findings_errors_name_the_paper(chat):
    with _backend(chat) as backend:
        chat.answer = lambda body: "I cannot tell."
        with pytest.raises(ValueError, match="paper-x.*no numbered"):
            generate_reference_findings("# Results\n\nx", backend, name="paper-x")
        chat.answer = lambda body: "1. " + "word " * 50
        with pytest.raises(ValueError, match="paper-x.*cut"):
            generate_reference_findings("# Results\n\nx", backend, max_new_tokens=5, name="paper-x")


# ---- Financial Report ROE ------------------------------------------------------------------------


def test_dupont_by_hand():
    gold = RoeGold(net_profit=1523, revenue=12000, total_assets=25000, equity=10000, currency="USD", unit="million")
    assert gold.profit_margin == pytest.approx(0.126916666)
    assert gold.asset_turnover == pytest.approx(0.48)
    assert gold.equity_multiplier == pytest.approx(2.5)
    assert gold.roe == pytest.approx(gold.profit_margin * gold.asset_turnover * gold.equity_multiplier)
    assert gold.roe_percent == pytest.approx(15.23)
    assert gold.gold() == {"value": 15.23, "rel_tol": 0.0, "abs_tol": 0.01, "unit": "%"}
    assert gold.display() == "15.23%"
    loss = RoeGold(net_profit=-50, revenue=1000, total_assets=800, equity=400)
    assert loss.gold()["value"] == -12.5 and loss.display() == "-12.50%"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("equity", 0),
        ("equity", -5.0),
        ("revenue", 0),
        ("total_assets", -1),
        ("net_profit", math.nan),
        ("revenue", True),
        ("net_profit", "12"),
    ],
)
def test_bad_roe_gold_names_the_field(field, value):
    figures = {"net_profit": 1.0, "revenue": 10.0, "total_assets": 20.0, "equity": 5.0, field: value}
    with pytest.raises(ValueError, match=f"RoeGold.{field}"):
        RoeGold(**figures)


def test_roe_sample_from_a_report(tmp_path):
    pdf = write_report(tmp_path / "acme-2025.pdf")
    root = tmp_path / "bench"
    gold = RoeGold(net_profit=1523, revenue=12000, total_assets=25000, equity=10000, currency="USD", unit="million")
    sample = build_roe_sample(pdf, root, gold)
    assert sample.id == "roe-acme-2025" and sample.task == "Financial Report ROE"
    assert sample.level == "L1" and sample.evaluator == "roe" and sample.answer_type == "number"
    assert sample.question == ROE_TEMPLATE
    assert sample.gold == {"value": 15.23, "rel_tol": 0.0, "abs_tol": 0.01, "unit": "%"}
    assert sample.answer == "15.23%"
    text = "\n".join(b.text for b in sample.blocks if b.kind == "text")
    for figure in ("12,000", "1,523", "25,000", "10,000", "Net profit"):
        assert figure in text
    dupont = sample.meta["dupont"]
    assert dupont["equity_multiplier"] == pytest.approx(2.5) and dupont["currency"] == "USD"
    assert sample.meta["pages"] == 1 and sample.meta["converter"]["name"] == "pymupdf4llm"
    assert validate_sample(sample, "queries", root) == []


def test_roe_sample_with_bad_tolerance_writes_nothing(tmp_path):
    pdf = write_report(tmp_path / "acme.pdf")
    with pytest.raises(ValueError, match="abs_tol"):
        build_roe_sample(pdf, tmp_path / "bench", RoeGold(1, 2, 3, 4), abs_tol=-1)
    assert not (tmp_path / "bench").exists()
