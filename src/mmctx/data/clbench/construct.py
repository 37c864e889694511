"""CLBench-V's two constructed subsets (paper §3.3.2): Financial Report ROE and Paper Conclusion.

Both start the same way: a PDF becomes Markdown with its figures written as image files
(`pdf_to_markdown`), and the Markdown becomes ordered text/image `ContextBlock`s
(`markdown_to_blocks`), the "Markdown-style multimodal document representation" the paper
describes. Then:

  - **Financial Report ROE** (L1, evaluator ``roe``): the whole converted report is the context;
    the gold ROE comes from figures the curator extracted (`RoeGold`), combined by the
    three-factor DuPont identity, so the gold never depends on a model reading the report.
  - **Paper Conclusion** (L2, evaluator ``conclusions``): two truncations of the converted paper.
    The *evaluation version* is everything before the Results section, which the model sees;
    the *reference version* runs to the end of the Results section and is what a generator
    model reads to write the reference findings (`generate_reference_findings`), unless the
    curator supplies them. The generator's reply is kept in the suite's
    ``curation/responses.sqlite`` (a `StoredBackend`): building the item again into the same
    suite (after a later step failed, or to rebuild it) replays the reply instead of asking,
    and paying, again, and gives the same findings.

The functions return `Sample`s; writing the suite (``samples.jsonl``) is the loader's job.

Converter: PyMuPDF's ``pymupdf4llm``, an optional extra (``pip install 'mmctx[construct]'``).
Since PyMuPDF 2.0 the converter ships inside the ``pymupdf`` wheel (the ``pymupdf4llm`` 2.0
distribution on PyPI is an empty shim that installs nothing), so the extra names ``pymupdf>=2``
(Python >= 3.11) and falls back to ``pymupdf4llm`` 1.x on Python 3.10. Licence: PyMuPDF and
pymupdf4llm are AGPL-3.0 (or an Artifex commercial licence). mmctx only imports them at call
time and never bundles them, so mmctx's own licence is unaffected, but whoever distributes a
build with them, or offers the conversion as a network service, takes on the AGPL's terms.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from mmctx.data.clbench.suite import get_subset
from mmctx.models.base import Backend, GenerateRequest
from mmctx.models.store import ResponseStore, backend_secrets
from mmctx.models.stored import BUILD_RESPONSES, StoredBackend
from mmctx.prompts.messages import ImagePart, Message, Part, TextPart
from mmctx.reasoning import strip_traces
from mmctx.schema import ContextBlock, Sample

ROE_SUBSET = "Financial Report ROE"
PAPER_SUBSET = "Paper Conclusion"
IMAGES_DIR = "images"
CONVERTER = "pymupdf4llm"
INSTALL_HINT = "pip install 'mmctx[construct]'  (PyMuPDF >= 2.0, which bundles pymupdf4llm)"

# Appendix B, "Financial Report ROE" (the paper shows an English equivalent of a Chinese
# prompt; the value placeholder lost in the paper's rendering is restored as ``<value>%``).
ROE_TEMPLATE = (
    "Perform DuPont analysis for the provided financial report and compute ROE. "
    "Extract net profit, revenue, total assets, and equity. "
    "Compute profit margin, asset turnover, equity multiplier, and ROE. "
    "Show the calculation process. End with: ROE: <value>%"
)
# Appendix B, "Paper Conclusion", verbatim.
PAPER_CONCLUSION_TEMPLATE = (
    "You are an expert research analyst. Infer the main experimental conclusions of a research paper "
    "from the provided method description, experimental setup, result tables, and figures. "
    "Identify main comparisons and trends, then return 4-8 concise conclusions supported by the experiments."
)
# Appendix B's default system prompt, used for the reference-findings generator too.
SYSTEM_PROMPT = "You are a careful multimodal assistant. Follow the user's output format exactly."
FINDINGS_INSTRUCTION = (
    "The document above is a research paper up to and including its Results section. "
    "Write 4-8 concise scientific findings that are directly supported by the reported results "
    "(text, tables and figures). Each finding is one sentence stating a comparison, trend or effect, "
    "with the key numbers where the paper gives them. Do not include background, methods or speculation. "
    "Output only the findings, one per line, numbered 1., 2., 3., ..."
)
DEFAULT_FINDINGS_TOKENS = 1024

# Section titles that open the Results section (compared after numbering and emphasis are stripped).
RESULTS_TITLES: tuple[str, ...] = (
    "results",
    "result",
    "results and discussion",
    "result and discussion",
    "results and discussions",
    "experiments",
)
# The ROE gold is rounded to 2 decimals; a tolerance of one unit in that place accepts a model that
# rounds the other way or reports more digits, and still rejects 15.2 for 15.23 ("exact" in the paper).
ROE_DECIMALS = 2
ROE_ABS_TOL = 0.01

_IMAGE_REF = re.compile(r"!\[(?P<alt>[^\]]*)\]\((?P<path><[^>]*>|[^)\s]+(?: [^)\s\"]+)*)(?:\s+\"[^\"]*\")?\s*\)")
_ATX_HEADING = re.compile(r"^ {0,3}(?P<hashes>#{1,6})[ \t]+(?P<title>.*?)[ \t#]*$", re.MULTILINE)
_BOLD_LINE = re.compile(r"^ {0,3}(?:\*\*|__)(?P<title>[^*_\n]+?)(?:\*\*|__)[ \t]*:?[ \t]*$", re.MULTILINE)
_NUMBERING = re.compile(r"^(?:(?:\d+|[IVXLC]+|[A-Z])(?:\.\d+)*\.?|\d+(?:\.\d+)*\))\s+")
_LIST_ITEM = re.compile(r"^\s*(?:\d+\s*[.):]|[-*•+])\s+(?P<text>.+?)\s*$")
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


# ---- PDF → Markdown ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConvertedDoc:
    """A converted PDF: Markdown whose image references are relative to the output root."""

    name: str
    markdown: str
    images: list[str]  # relative to the output root, posix, in reading order
    pages: int
    converter: dict[str, Any]  # name, version, pymupdf version, whether the layout engine ran


def _import_converter() -> Any:
    try:
        import pymupdf4llm
    except ImportError as exc:  # the 2.0 shim without pymupdf, or nothing at all
        raise ImportError(f"PDF conversion needs pymupdf4llm: {INSTALL_HINT} ({exc})") from None
    if not hasattr(pymupdf4llm, "to_markdown"):
        raise ImportError(f"the installed pymupdf4llm has no to_markdown (an empty shim?): {INSTALL_HINT}")
    return pymupdf4llm


def converter_info() -> dict[str, Any]:
    """What produced the Markdown; recorded in every sample, since another version splits pages differently."""
    p4 = _import_converter()
    import pymupdf

    return {
        "name": CONVERTER,
        "version": str(getattr(p4, "__version__", getattr(p4, "version", "unknown"))),
        "pymupdf": str(pymupdf.__version__),
        "layout": bool(getattr(p4, "_use_layout", False)),
    }


def safe_name(name: str) -> str:
    """``name`` reduced to a file-name-safe slug (image folders and default ids are built from it)."""
    slug = _SAFE_NAME.sub("-", name).strip("-.")
    if not slug:
        raise ValueError(f"name {name!r} has no usable characters for a file name")
    return slug


def pdf_to_markdown(
    pdf: str | Path,
    out_root: str | Path,
    name: str,
    *,
    dpi: int = 150,
    ocr: bool = False,
    page_furniture: bool = False,
) -> ConvertedDoc:
    """Convert ``pdf`` to Markdown; its figures land in ``OUT_ROOT/images/<name>/``.

    The converter writes into a private temporary folder first and the files are then moved,
    so its own path handling (which rewrites spaces and brackets in paths, and writes paths
    relative to the working directory) cannot scatter files, and a PDF the converter fails on
    leaves nothing under the root. ``ocr`` lets the converter OCR text-less pages when an OCR engine is installed;
    ``page_furniture`` keeps running headers and footers (page numbers, journal names).
    """
    pdf = Path(pdf)
    if not pdf.is_file():
        raise FileNotFoundError(f"no PDF at {pdf}")
    p4 = _import_converter()
    import pymupdf

    name = safe_name(name)
    root = Path(out_root)
    dest = root / IMAGES_DIR / name
    # The layout engine (the default since 1.27) takes these; the legacy one prints a warning for each.
    layout_only = {"use_ocr": ocr, "header": page_furniture, "footer": page_furniture}
    options = layout_only if getattr(p4, "_use_layout", False) else {}
    try:
        doc = pymupdf.open(stream=pdf.read_bytes(), filetype="pdf")
    except Exception as exc:  # pymupdf.FileDataError and friends
        raise ValueError(f"{pdf}: not a readable PDF: {exc}") from exc
    with doc, tempfile.TemporaryDirectory() as tmp:
        pages = doc.page_count
        try:
            md = p4.to_markdown(
                doc,
                filename=name,
                write_images=True,
                image_path=tmp,
                image_format="png",
                dpi=dpi,
                show_progress=False,
                **options,
            )
        except Exception as exc:  # the converter raises many types on damaged PDFs
            raise ValueError(f"{pdf}: conversion with {CONVERTER} failed: {exc}") from exc
        md, images = _relocate_images(md, Path(tmp), dest, root, pdf)
    return ConvertedDoc(name=name, markdown=md, images=images, pages=pages, converter=converter_info())


def _relocate_images(md: str, tmp: Path, dest: Path, root: Path, pdf: Path) -> tuple[str, list[str]]:
    """Move the converter's images from ``tmp`` to ``dest`` and point the Markdown at root-relative paths."""
    moved: dict[str, str] = {}

    def relink(match: re.Match[str]) -> str:
        ref = _unbracket(match.group("path"))
        written = Path(os.path.abspath(ref))
        if ref not in moved:
            if not written.is_file() or tmp.resolve() not in written.resolve().parents:
                raise ValueError(f"{pdf}: the converter referenced an image it did not write: {ref!r}")
            dest.mkdir(parents=True, exist_ok=True)
            target = dest / written.name
            shutil.move(str(written), target)
            moved[ref] = target.relative_to(root).as_posix()
        return f"![{match.group('alt')}]({moved[ref]})"

    return _IMAGE_REF.sub(relink, md), list(moved.values())


# ---- Markdown → context blocks -------------------------------------------------------------------


def _unbracket(path: str) -> str:
    return path[1:-1] if path.startswith("<") and path.endswith(">") else path


def image_ref_to_root(ref: str, root: str | Path) -> str:
    """An image reference as a posix path relative to ``root``; refuses one that leaves the root.

    A relative reference is read relative to the root (as `Benchmark.image_path` does), an absolute
    one must lie inside it. The check is lexical, like the schema's: symlinks inside the root are
    the curator's choice and are followed.
    """
    root_abs = os.path.abspath(root)
    ref = _unbracket(ref.strip())
    if "://" in ref or ref.startswith("data:"):
        raise ValueError(f"image reference {ref!r} is not a file under the benchmark root {root}")
    full = os.path.normpath(ref if os.path.isabs(ref) else os.path.join(root_abs, ref))
    rel = os.path.relpath(full, root_abs)
    if rel == "." or rel == ".." or rel.startswith(".." + os.sep):
        raise ValueError(f"image reference {ref!r} escapes the benchmark root {root}")
    return PurePosixPath(*Path(rel).parts).as_posix()


def _tidy(text: str) -> str:
    return re.sub(r"\n{3,}", "\n\n", re.sub(r"[ \t]+\n", "\n", text)).strip()


def markdown_to_blocks(md: str, root: str | Path, *, check_files: bool = True) -> list[ContextBlock]:
    """Split Markdown at its image references into text and image blocks, in reading order.

    Images become blocks of their own (paths relative to ``root``) so a backend places each one
    where the text referred to it; empty text between two images is dropped. With
    ``check_files`` a reference to a missing file is an error here rather than at run time.
    """
    blocks: list[ContextBlock] = []
    pos = 0
    for match in _IMAGE_REF.finditer(md):
        text = _tidy(md[pos : match.start()])
        if text:
            blocks.append(ContextBlock(kind="text", text=text))
        rel = image_ref_to_root(match.group("path"), root)
        if check_files and not (Path(root) / rel).is_file():
            raise ValueError(f"image reference {rel!r} names no file under the benchmark root {root}")
        blocks.append(ContextBlock(kind="image", image=rel))
        pos = match.end()
    tail = _tidy(md[pos:])
    if tail:
        blocks.append(ContextBlock(kind="text", text=tail))
    return blocks


# ---- Results section -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Heading:
    start: int  # character offset of the heading line
    level: int  # 1-6 for ATX headings; 7 for a bold-only line (below every ATX level)
    title: str  # as written, emphasis stripped


def _clean_title(title: str) -> str:
    title = re.sub(r"(\*\*|__|\*|_|`)", "", title).strip()
    return title.rstrip(":.").strip()


def _normalised(title: str) -> str:
    return re.sub(r"\s+", " ", _NUMBERING.sub("", _clean_title(title))).casefold()


def headings(md: str) -> list[Heading]:
    """The ATX headings (``#`` … ``######``) of ``md``, in order."""
    return [
        Heading(m.start(), len(m.group("hashes")), _clean_title(m.group("title"))) for m in _ATX_HEADING.finditer(md)
    ]


def _bold_headings(md: str) -> list[Heading]:
    return [Heading(m.start(), 7, _clean_title(m.group("title"))) for m in _BOLD_LINE.finditer(md)]


def _results_span(md: str, name: str, titles: tuple[str, ...]) -> tuple[int, int, Heading]:
    """Start and end offsets of the Results section, and its heading.

    ATX headings are searched first; lines that are entirely bold only when no ATX heading
    matches. Converters render a section title as a heading when its font is larger than the
    body's and as a bold line when it is not, but papers also bold run-in labels (a structured
    abstract's "**Results:**") and subsection titles, so bold lines are the fallback.
    """
    wanted = {t.casefold() for t in titles}
    for candidates in (headings(md), _bold_headings(md)):
        for i, heading in enumerate(candidates):
            if _normalised(heading.title) in wanted:
                after = (h for h in candidates[i + 1 :] if h.level <= heading.level)
                end = next((h.start for h in after), len(md))
                return heading.start, end, heading
    raise ValueError(
        f"{name}: no Results heading found (looked for {', '.join(repr(t) for t in titles)}, "
        "optionally numbered, as a Markdown heading or a bold line)"
    )


def find_results_heading(md: str, name: str = "document", titles: tuple[str, ...] = RESULTS_TITLES) -> int:
    """Character offset of the first heading titled Results (or a variant in ``titles``).

    Titles match case-insensitively after numbering ("3", "4.", "IV.") and emphasis are
    stripped, so "## 4. Results" and "# **3 Results and Discussion**" both count. A document
    without one is an error naming ``name``: the paper's truncation needs the section.
    """
    return _results_span(md, name, titles)[0]


def evaluation_version(md: str, name: str = "document", titles: tuple[str, ...] = RESULTS_TITLES) -> str:
    """The paper before its Results section: what a model sees when asked for the findings."""
    return md[: find_results_heading(md, name, titles)].rstrip()


def reference_version(md: str, name: str = "document", titles: tuple[str, ...] = RESULTS_TITLES) -> str:
    """The paper up to the end of its Results section (the next heading of the same or a higher
    level, e.g. Discussion), or to the end of the document: what the findings are written from."""
    return md[: _results_span(md, name, titles)[1]].rstrip()


# ---- reference findings --------------------------------------------------------------------------


def parse_findings(text: str) -> list[str]:
    """The numbered or bulleted items of a reply, in order (its reasoning trace dropped: `strip_traces`)."""
    text = strip_traces(text)
    found = []
    # Split on "\n" only: splitlines would also cut an item at U+2028, U+2029 or U+0085.
    for line in text.split("\n"):
        match = _LIST_ITEM.match(line)
        if match:
            item = re.sub(r"(\*\*|__)", "", match.group("text")).strip()
            if item:
                found.append(item)
    return found


def _findings_prompt(reference_md: str, root: str | Path | None) -> tuple[Message, ...]:
    """The reference version with its figures in place (when ``root`` resolves them), then the instruction."""
    parts: list[Part] = []
    if root is None:
        parts.append(TextPart(_IMAGE_REF.sub("[figure]", reference_md)))
    else:
        for block in markdown_to_blocks(reference_md, root):
            if block.kind == "text":
                parts.append(TextPart(block.text + "\n\n"))
            else:
                parts.append(ImagePart.from_path(Path(root) / block.image))
    parts.append(TextPart("\n\n" + FINDINGS_INSTRUCTION))
    return (Message("system", (TextPart(SYSTEM_PROMPT),)), Message("user", tuple(parts)))


def generate_reference_findings(
    reference_md: str,
    backend: Backend,
    max_new_tokens: int = DEFAULT_FINDINGS_TOKENS,
    *,
    root: str | Path | None = None,
    name: str = "paper",
) -> list[str]:
    """Ask ``backend`` for 4-8 findings supported by the Results of ``reference_md``.

    With ``root`` the figures travel as images in reading order (checked against the backend's
    image limit); without it they are replaced by ``[figure]``. A failed call, a reply cut by the
    token limit (its last finding may be half a sentence) or one with no list items is an error
    naming ``name``: a reference list is gold and is not guessed at.
    """
    prompt = _findings_prompt(reference_md, root)
    n_images = sum(len(m.images) for m in prompt)
    limit = backend.capabilities.max_images
    if limit is not None and n_images > limit:
        raise ValueError(f"{name}: reference version has {n_images} figures, the backend takes {limit}; pass root=None")
    (generation,) = backend.generate([GenerateRequest(messages=prompt, max_new_tokens=max_new_tokens)])
    if generation.error:
        raise RuntimeError(f"{name}: findings generation failed: {generation.error}")
    if generation.truncated:
        raise ValueError(f"{name}: findings reply was cut at {max_new_tokens} tokens; raise max_new_tokens")
    findings = parse_findings(generation.text)
    if not findings:
        raise ValueError(
            f"{name}: the generator's reply has no numbered or bulleted findings: {generation.text[:200]!r}"
        )
    return findings


FINDINGS_KIND = "findings"  # the store's ``kind`` column for generated reference findings


def _stored_findings(
    reference_md: str, backend: Backend, out_root: Path, max_new_tokens: int, root: str | Path | None, name: str
) -> list[str]:
    """`generate_reference_findings` through the suite's response store.

    A failed call is not stored (``store_errors=False``): it stops this item's build, and
    running the build again is how one asks again.
    """
    path = out_root / BUILD_RESPONSES
    path.parent.mkdir(parents=True, exist_ok=True)
    with ResponseStore(path, secrets=backend_secrets(backend)) as store:
        stored = StoredBackend(backend, store, FINDINGS_KIND, store_errors=False)
        return generate_reference_findings(reference_md, stored, max_new_tokens, root=root, name=name)


def _checked_findings(findings: list[str], name: str) -> list[str]:
    cleaned = [f.strip() for f in findings if isinstance(f, str)]
    if len(cleaned) != len(findings) or not all(cleaned):
        raise ValueError(f"{name}: findings must be non-empty strings, got {findings!r}")
    if not cleaned:
        raise ValueError(f"{name}: at least one reference finding is needed")
    return cleaned


# ---- Paper Conclusion samples --------------------------------------------------------------------


def build_paper_sample(
    pdf: str | Path,
    out_root: str | Path,
    backend: Backend | None = None,
    findings: list[str] | None = None,
    sample_id: str | None = None,
    *,
    max_new_tokens: int = DEFAULT_FINDINGS_TOKENS,
    send_images: bool = True,
    prune_images: bool = True,
) -> Sample:
    """A Paper Conclusion item from a PDF: context = the evaluation version, gold = the findings.

    Give exactly one of ``findings`` (curated) and ``backend`` (generated from the reference
    version, figures included when ``send_images``). With ``prune_images`` the figures of the
    Results section are deleted from the output root once the findings exist, so a released
    suite does not ship the evidence its items ask about.
    """
    pdf = Path(pdf)
    if (backend is None) == (findings is None):
        raise ValueError(f"{pdf}: give exactly one of findings= and backend=")
    sid = sample_id or f"paper-{safe_name(pdf.stem)}"
    where = str(pdf)
    given = _checked_findings(list(findings), where) if findings is not None else None
    doc = pdf_to_markdown(pdf, out_root, sid)
    try:
        start, end, heading = _results_span(doc.markdown, where, RESULTS_TITLES)
        eval_md, ref_md = doc.markdown[:start].rstrip(), doc.markdown[:end].rstrip()
        if not _IMAGE_REF.sub("", eval_md).strip():
            raise ValueError(
                f"{where}: nothing precedes the Results heading {heading.title!r}; no context to evaluate on"
            )
        meta: dict[str, Any] = {
            "pdf": pdf.name,
            "pages": doc.pages,
            "converter": doc.converter,
            "results_heading": heading.title,
            "evaluation_chars": len(eval_md),
            "reference_chars": len(ref_md),
            "findings_source": "given" if given is not None else "generated",
        }
        if given is None:
            assert backend is not None
            root = out_root if send_images else None
            given = _stored_findings(ref_md, backend, Path(out_root), max_new_tokens, root, where)
            info = backend.info
            meta["generator"] = {
                "name": info.name,
                "revision": info.revision,
                "backend": info.backend,
                "max_new_tokens": max_new_tokens,
                "images": send_images,
            }
        blocks = markdown_to_blocks(eval_md, out_root)
    except BaseException:
        _prune(doc.images, [], Path(out_root))  # a paper that yields no sample leaves no figures behind
        raise
    if prune_images:
        meta["pruned_images"] = _prune(doc.images, blocks, Path(out_root))
    subset = get_subset(PAPER_SUBSET)
    return Sample(
        id=sid,
        task=subset.name,
        source=subset.name,
        format="open",
        question=PAPER_CONCLUSION_TEMPLATE,
        answer="\n".join(f"{i}. {f}" for i, f in enumerate(given, 1)),
        blocks=blocks,
        answer_type="conclusions",
        gold=given,
        evaluator=subset.evaluator,
        level=subset.level,
        meta=meta,
    )


def _prune(images: list[str], blocks: list[ContextBlock], root: Path) -> int:
    """Delete the converted images the context does not use; how many were deleted."""
    kept = {b.image for b in blocks if b.kind == "image"}
    dropped = [rel for rel in images if rel not in kept]
    for rel in dropped:
        (root / rel).unlink(missing_ok=True)
    return len(dropped)


# ---- Financial Report ROE samples ----------------------------------------------------------------


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@dataclass(frozen=True)
class RoeGold:
    """The figures a curator read from a report, and the DuPont decomposition they imply.

    All four in the same currency and unit (``unit`` is "", "thousand", "million", …, recorded,
    not applied: every ratio is unit-free). ``equity`` is whatever base the curator chose
    (period-end or average shareholders' equity), consistently with ``total_assets``. Net profit
    may be negative (a loss gives a negative ROE); revenue, assets and equity must be positive,
    or the ratios mean nothing.
    """

    net_profit: float
    revenue: float
    total_assets: float
    equity: float
    currency: str = ""
    unit: str = ""

    def __post_init__(self) -> None:
        for field_name in ("net_profit", "revenue", "total_assets", "equity"):
            value = getattr(self, field_name)
            if not _finite(value):
                raise ValueError(f"RoeGold.{field_name} must be a finite number, not {value!r}")
            if field_name != "net_profit" and value <= 0:
                raise ValueError(f"RoeGold.{field_name} must be positive, not {value!r}")

    @property
    def profit_margin(self) -> float:
        return self.net_profit / self.revenue

    @property
    def asset_turnover(self) -> float:
        return self.revenue / self.total_assets

    @property
    def equity_multiplier(self) -> float:
        return self.total_assets / self.equity

    @property
    def roe(self) -> float:
        """Net profit / equity as a fraction: the DuPont product, computed without its rounding error."""
        return self.net_profit / self.equity

    @property
    def roe_percent(self) -> float:
        return 100.0 * self.roe

    def gold(self, abs_tol: float = ROE_ABS_TOL) -> dict[str, Any]:
        """The ``number`` gold of `Sample`: ROE in percent, rounded to `ROE_DECIMALS`."""
        if not (_finite(abs_tol) and abs_tol >= 0):
            raise ValueError(f"abs_tol must be a non-negative number, not {abs_tol!r}")
        return {"value": round(self.roe_percent, ROE_DECIMALS), "rel_tol": 0.0, "abs_tol": abs_tol, "unit": "%"}

    def components(self) -> dict[str, Any]:
        """Inputs and DuPont factors, for the sample's meta (an analysis can score the factors too)."""
        return {
            "net_profit": self.net_profit,
            "revenue": self.revenue,
            "total_assets": self.total_assets,
            "equity": self.equity,
            "currency": self.currency,
            "unit": self.unit,
            "profit_margin": self.profit_margin,
            "asset_turnover": self.asset_turnover,
            "equity_multiplier": self.equity_multiplier,
            "roe": self.roe,
        }

    def display(self) -> str:
        return f"{round(self.roe_percent, ROE_DECIMALS):.{ROE_DECIMALS}f}%"


def build_roe_sample(
    pdf: str | Path,
    out_root: str | Path,
    gold: RoeGold,
    sample_id: str | None = None,
    *,
    abs_tol: float = ROE_ABS_TOL,
) -> Sample:
    """A Financial Report ROE item: the converted report as context, the DuPont ROE as gold."""
    pdf = Path(pdf)
    if not isinstance(gold, RoeGold):
        raise TypeError(f"{pdf}: gold must be a RoeGold, not {type(gold).__name__}")
    sid = sample_id or f"roe-{safe_name(pdf.stem)}"
    number = gold.gold(abs_tol)
    doc = pdf_to_markdown(pdf, out_root, sid)
    subset = get_subset(ROE_SUBSET)
    return Sample(
        id=sid,
        task=subset.name,
        source=subset.name,
        format="open",
        question=ROE_TEMPLATE,
        answer=gold.display(),
        blocks=markdown_to_blocks(doc.markdown, out_root),
        answer_type="number",
        gold=number,
        evaluator=subset.evaluator,
        level=subset.level,
        meta={"pdf": pdf.name, "pages": doc.pages, "converter": doc.converter, "dupont": gold.components()},
    )


__all__ = [
    "PAPER_CONCLUSION_TEMPLATE",
    "RESULTS_TITLES",
    "ROE_ABS_TOL",
    "ROE_TEMPLATE",
    "ConvertedDoc",
    "RoeGold",
    "build_paper_sample",
    "build_roe_sample",
    "converter_info",
    "evaluation_version",
    "find_results_heading",
    "generate_reference_findings",
    "image_ref_to_root",
    "markdown_to_blocks",
    "parse_findings",
    "pdf_to_markdown",
    "reference_version",
]
