"""A static, self-contained HTML viewer of scored runs: ``mmctx view RUN... --out DIR``.

    DIR/
      index.html        summary: the runs, the papers' tables, the figures found
      samples.html      per-sample browser: filters, prompt with its images, response,
                        extracted answer and rule, option log-likelihoods, side-by-side view
      assets/           viewer.css, viewer.js (no inline script or style: see the CSP below)
      images/           every image a prompt shows, as <sha256>.<ext>, each once
      figures/          copies of the figures given

The site opens from disk (``file://``) and loads nothing from anywhere else. Everything in
it that came from a run — model text above all, but also questions, options, rule names,
error strings and model names — is treated as untrusted: the HTML written here escapes it
with `html.escape`, and the per-sample data travels as JSON inside a
``<script type="application/json">`` block (``<``, ``>``, ``&`` written as ``\\u003c`` …, so
no string can close the block), which the page reads with ``JSON.parse`` and renders with
``textContent`` only. A Content-Security-Policy meta tag forbids inline scripts and event
handlers, and every remote load.

Results come from the run's response store, scored afresh with `score_run` (as
``mmctx report`` does, so the page never shows an older extractor's reading); a run folder
without its store falls back to its ``results.jsonl``.
"""

from __future__ import annotations

import hashlib
import html
import json
import math
import re
import shutil
import sqlite3
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from importlib import resources
from pathlib import Path
from typing import Any

from mmctx.report.tables import markdown_tables
from mmctx.run.files import MANIFEST, REQUESTS, RESULTS, STORE
from mmctx.score.results import SampleResult, load_requests, score_run, summarize

CSP = (
    "default-src 'self'; img-src 'self' data:; script-src 'self'; style-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'none'"
)
ASSET_FILES = ("viewer.css", "viewer.js")
IMAGE_EXTENSIONS = {".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".svg"}
FIGURE_EXTENSIONS = {".png", ".jpg", ".jpeg", ".gif", ".webp", ".svg"}
_SHA256 = re.compile(r"[0-9a-f]{64}")


class ViewerError(ValueError):
    """A run folder the viewer cannot read."""


# ----------------------------------------------------------------------------- loading runs


@dataclass
class LoadedRun:
    path: Path
    manifest: dict[str, Any]
    requests: list[dict[str, Any]]
    results: list[SampleResult]
    source: str  # where the results came from: "store" or "results.jsonl"
    name: str = ""  # display name, unique among the runs shown

    @property
    def model(self) -> str:
        return str(self.manifest.get("model", {}).get("name", self.path.name))


def load_run(run_dir: Path) -> LoadedRun:
    run_dir = Path(run_dir)
    if not (run_dir / REQUESTS).is_file():
        raise ViewerError(f"{run_dir}: no {REQUESTS} (not a run folder?)")
    manifest_path = run_dir / MANIFEST
    manifest = json.loads(manifest_path.read_text(encoding="utf-8")) if manifest_path.is_file() else {}
    requests = load_requests(run_dir)
    results, source = _load_results(run_dir, requests)
    return LoadedRun(run_dir, manifest, requests, results, source)


def _load_results(run_dir: Path, requests: list[dict]) -> tuple[list[SampleResult], str]:
    if (run_dir / STORE).is_file():
        try:
            return score_run(run_dir), "store"
        except sqlite3.Error:
            pass  # unreadable store (read-only copy, …): the stored scores are the next best thing
    if not (run_dir / RESULTS).is_file():
        raise ViewerError(f"{run_dir}: neither {STORE} nor {RESULTS} to read results from")
    known = {f.name for f in fields(SampleResult)}
    by_id: dict[str, SampleResult] = {}
    with open(run_dir / RESULTS, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                row = {k: v for k, v in json.loads(line).items() if k in known}
                for k in ("loglikelihoods", "token_counts", "probs"):
                    row[k] = tuple(row.get(k) or ())
                by_id[row["request_id"]] = SampleResult(**row)
    return [by_id.get(r["id"]) or _missing(r) for r in requests], RESULTS


def _missing(request: dict) -> SampleResult:
    return SampleResult(
        request_id=request["id"], query_id=request["query_id"], task=request["task"],
        source=request.get("source", ""), setting=request["setting"], scorer=request["scorer"],
        gold=request["gold"], pred=None, outcome="missing",
    )  # fmt: skip


def name_runs(runs: list[LoadedRun]) -> None:
    """Model names as display names; a model shown twice gets its folder name added."""
    counts: dict[str, int] = {}
    for run in runs:
        counts[run.model] = counts.get(run.model, 0) + 1
    used: set[str] = set()
    for run in runs:
        base = run.model if counts[run.model] == 1 else f"{run.model} ({run.path.name})"
        name, k = base, 2
        while name in used:
            name, k = f"{base} #{k}", k + 1
        used.add(name)
        run.name = name


# ----------------------------------------------------------------------------- images


@dataclass
class ImageCopier:
    """Copies each image once, as ``images/<sha256>.<ext>``, after checking its hash."""

    out: Path
    copied: dict[str, str | None] = field(default_factory=dict)  # sha256 → site-relative src, or None
    problems: list[str] = field(default_factory=list)

    def add(self, sha256: str, path: str | None, roots: Iterable[Path] = ()) -> str | None:
        if sha256 in self.copied:
            return self.copied[sha256]
        self.copied[sha256] = src = self._copy(sha256, path, list(roots))
        return src

    def _copy(self, sha256: str, path: str | None, roots: list[Path]) -> str | None:
        if not _SHA256.fullmatch(sha256):
            self.problems.append(f"image with a malformed hash {sha256[:80]!r}")
            return None
        source = _find_file(path, roots)
        if source is None:
            self.problems.append(f"image {sha256[:12]}: not found at {path!r}")
            return None
        data = source.read_bytes()
        if hashlib.sha256(data).hexdigest() != sha256:
            self.problems.append(f"image {sha256[:12]}: {source} has changed since the run")
            return None
        ext = source.suffix.lower() if source.suffix.lower() in IMAGE_EXTENSIONS else ".img"
        name = f"{sha256}{ext}"
        self.out.mkdir(parents=True, exist_ok=True)
        target = self.out / name
        if not target.exists():
            target.write_bytes(data)
        return f"images/{name}"


def _find_file(path: str | None, roots: list[Path]) -> Path | None:
    if not path:
        return None
    candidate = Path(path)
    if candidate.is_absolute():
        return candidate if candidate.is_file() else None
    for root in roots:
        if (root / candidate).is_file():
            return root / candidate
    return None


# ----------------------------------------------------------------------------- the data block


def split_prompt(messages: list[dict], n_demos: int) -> dict[str, Any]:
    """The prompt as demos and query: ``{"demos": [{"images", "text", "answer"}], "query": {...}}``.

    Multi-turn prompts pair each demo's user turn with its assistant answer; single-turn
    prompts (one user message) are cut where a run of images follows text. A prompt of any
    other shape yields no demos (the full prompt is still shown as it is).
    """
    turns = [m for m in messages if m.get("role") != "system"]
    if not turns:
        return {"demos": [], "query": {"images": [], "text": ""}}
    if len(turns) == 2 * n_demos + 1 and all(
        t.get("role") == ("user" if i % 2 == 0 else "assistant") for i, t in enumerate(turns)
    ):
        demos = [
            {**_segment(turns[2 * i]["content"]), "answer": _segment(turns[2 * i + 1]["content"])["text"]}
            for i in range(n_demos)
        ]
        return {"demos": demos, "query": _segment(turns[-1]["content"])}
    segments = _image_runs(turns[-1]["content"]) if len(turns) == 1 else []
    if n_demos and len(segments) == n_demos + 1:
        return {"demos": [{**_segment(s), "answer": ""} for s in segments[:-1]], "query": _segment(segments[-1])}
    return {"demos": [], "query": _segment(turns[-1]["content"])}


def _segment(parts: list[dict]) -> dict[str, Any]:
    return {
        "images": [p.get("sha256", "") for p in parts if p.get("type") == "image"],
        "text": "".join(p.get("text", "") for p in parts if p.get("type") == "text"),
    }


def _image_runs(parts: list[dict]) -> list[list[dict]]:
    """Parts cut before each image that follows a text part."""
    out: list[list[dict]] = []
    previous = None
    for p in parts:
        if not out or (p.get("type") == "image" and previous == "text"):
            out.append([])
        out[-1].append(p)
        previous = p.get("type")
    return out


def _clean_prompt(messages: list[dict]) -> list[dict]:
    """Roles and parts only: images keep their hash, never their local path."""
    out = []
    for m in messages:
        parts = []
        for p in m.get("content", []):
            if p.get("type") == "image":
                parts.append({"type": "image", "sha256": str(p.get("sha256", ""))})
            else:
                parts.append({"type": "text", "text": str(p.get("text", ""))})
        out.append({"role": str(m.get("role", "")), "content": parts})
    return out


def _finite(values: Iterable[Any]) -> list[float | None]:
    return [float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None for v in values]


def site_data(runs: list[LoadedRun], images: ImageCopier) -> dict[str, Any]:
    """Everything the sample browser shows, as plain JSON."""
    prompts: list[dict] = []
    prompt_index: dict[str, int] = {}
    samples: list[dict] = []
    for run_id, run in enumerate(runs):
        roots = [run.path, Path(str(run.manifest.get("config", {}).get("benchmark", "")) or run.path)]
        for request, result in zip(run.requests, run.results):
            for m in request.get("prompt", []):
                for p in m.get("content", []):
                    if p.get("type") == "image":
                        images.add(str(p.get("sha256", "")), p.get("path"), roots)
            messages = _clean_prompt(request.get("prompt", []))
            key = json.dumps(messages, sort_keys=True, ensure_ascii=False)
            if key not in prompt_index:
                prompt_index[key] = len(prompts)
                prompts.append({"messages": messages, **split_prompt(messages, len(request.get("demo_ids", [])))})
            samples.append(_sample(run_id, request, result, prompt_index[key]))
    return {
        "runs": [_run_info(r) for r in runs],
        "images": images.copied,
        "prompts": prompts,
        "samples": samples,
    }


def _sample(run_id: int, request: dict, result: SampleResult, prompt: int) -> dict[str, Any]:
    r = asdict(result)
    return {
        "run": run_id,
        "id": request["id"],
        "query_id": request["query_id"],
        "task": request["task"],
        "source": request.get("source", ""),
        "format": request.get("format", ""),
        "setting": request["setting"],
        "scorer": request["scorer"],
        "options": [str(o) for o in request.get("options", [])],
        "labels": [str(label) for label in request.get("labels", [])],
        "gold": request["gold"],
        "demo_ids": [str(d) for d in request.get("demo_ids", [])],
        "prompt": prompt,
        "outcome": r["outcome"],
        "pred": r["pred"],
        "rule": r["rule"] or "",
        "response": r["response"] or "",
        "truncated": bool(r["truncated"]),
        "loglikelihoods": _finite(r["loglikelihoods"]),
        "token_counts": list(r["token_counts"]),
        "probs": _finite(r["probs"]),
        "error": r["error"],
    }


def _run_info(run: LoadedRun) -> dict[str, Any]:
    model = run.manifest.get("model", {})
    config = run.manifest.get("config", {})
    return {
        "name": run.name,
        "model": run.model,
        "dir": run.path.name,
        "revision": str(model.get("revision", "")),
        "backend": str(model.get("backend", "")),
        "benchmark": str(config.get("benchmark_name", "")),
        "created": str(run.manifest.get("created", "")),
        "source": run.source,
    }


def json_for_html(data: Any) -> str:
    """JSON that cannot end the ``<script>`` block it sits in, nor open a comment or CDATA."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    for char, escape in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escape)
    return text


# ----------------------------------------------------------------------------- HTML


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _page(title: str, active: str, body: str, scripts: str = "") -> str:
    links = (("index", "index.html", "Summary"), ("samples", "samples.html", "Samples"))
    nav = "".join(
        f'<a href="{href}" class="active">{label}</a>' if key == active else f'<a href="{href}">{label}</a>'
        for key, href, label in links
    )
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{_e(CSP)}">\n'
        '<meta name="referrer" content="no-referrer">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{_e(title)}</title>\n"
        '<link rel="stylesheet" href="assets/viewer.css">\n</head>\n<body>\n'
        f'<header class="topbar"><span class="brand">mmctx</span><nav>{nav}</nav></header>\n'
        f"<main>\n{body}\n</main>\n{scripts}</body>\n</html>\n"
    )


def markdown_to_html(markdown: str) -> str:
    """The Markdown `markdown_tables` writes (headings, pipe tables, lists, paragraphs), escaped."""
    out: list[str] = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if not line:
            i += 1
        elif line.startswith("#"):
            level = min(len(line) - len(line.lstrip("#")), 6)
            out.append(f"<h{level}>{_e(line[level:].strip())}</h{level}>")
            i += 1
        elif line.startswith("|"):
            block = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                block.append(lines[i].strip())
                i += 1
            out.append(_table(block))
        elif line.startswith("- "):
            items = []
            while i < len(lines) and lines[i].strip().startswith("- "):
                items.append(f"<li>{_e(lines[i].strip()[2:])}</li>")
                i += 1
            out.append("<ul>" + "".join(items) + "</ul>")
        else:
            out.append(f"<p>{_e(line)}</p>")
            i += 1
    return "\n".join(out)


def _cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip().strip("|").split("|")]


def _table(rows: list[str]) -> str:
    if len(rows) >= 2 and re.fullmatch(r"\|?(\s*:?-+:?\s*\|)+\s*:?-*:?\s*\|?", rows[1]):
        head, body = _cells(rows[0]), rows[2:]
    else:
        head, body = [], rows
    parts = ['<div class="table-wrap"><table class="metrics">']
    if head:
        parts.append("<thead><tr>" + "".join(f"<th>{_e(c)}</th>" for c in head) + "</tr></thead>")
    parts.append("<tbody>")
    for row in body:
        cells = _cells(row)
        sub = ' class="sub"' if cells and cells[0].endswith("unparsed %") else ""
        tds = "".join(
            f'<td class="num">{_e(c)}</td>'
            if j and re.fullmatch(r"[-–+]?[\d.]*\d[\d.]*%?|–", c)
            else f"<td>{_e(c)}</td>"
            for j, c in enumerate(cells)
        )
        parts.append(f"<tr{sub}>{tds}</tr>")
    parts.append("</tbody></table></div>")
    return "".join(parts)


def _runs_table(runs: list[LoadedRun]) -> str:
    head = [
        "Model",
        "Revision",
        "Backend",
        "Benchmark",
        "Settings",
        "Scorers",
        "Requests",
        "Outcomes",
        "Run folder",
        "Created",
    ]
    rows = []
    for run in runs:
        model = run.manifest.get("model", {})
        config = run.manifest.get("config", {})
        outcomes: dict[str, int] = {}
        for r in run.results:
            outcomes[r.outcome] = outcomes.get(r.outcome, 0) + 1
        cells = [
            run.name,
            model.get("revision", ""),
            model.get("backend", ""),
            config.get("benchmark_name", ""),
            ", ".join(map(str, config.get("settings", []))),
            ", ".join(map(str, config.get("scorers", []))),
            len(run.requests),
            ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())),
            f"{run.path.name} ({run.source})",
            run.manifest.get("created", ""),
        ]
        rows.append("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in cells) + "</tr>")
    return (
        '<div class="table-wrap"><table class="metrics runs"><thead><tr>'
        + "".join(f"<th>{_e(h)}</th>" for h in head)
        + "</tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table></div>"
    )


def copy_figures(figures_dir: Path | None, out: Path) -> list[tuple[str, str, str | None]]:
    """Figures (``src``, caption, PDF ``href`` if one sits beside) copied into ``out/figures``."""
    if figures_dir is None or not Path(figures_dir).is_dir():
        return []
    figures_dir = Path(figures_dir)
    found = sorted(p for p in figures_dir.rglob("*") if p.is_file() and p.suffix.lower() in FIGURE_EXTENSIONS)
    target = out / "figures"
    shown = []
    for i, path in enumerate(found):
        rel = path.relative_to(figures_dir).as_posix()
        safe = f"{i:03d}-{re.sub(r'[^A-Za-z0-9._-]+', '_', path.name)}"
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target / safe)
        pdf_href = None
        pdf = path.with_suffix(".pdf")
        if pdf.is_file():
            pdf_name = Path(safe).with_suffix(".pdf").name
            shutil.copyfile(pdf, target / pdf_name)
            pdf_href = f"figures/{pdf_name}"
        shown.append((f"figures/{safe}", rel, pdf_href))
    return shown


def index_html(
    runs: list[LoadedRun], tables_md: str, figures: list[tuple[str, str, str | None]], problems: list[str]
) -> str:
    body = ["<h1>Summary</h1>", '<section class="card"><h2>Runs</h2>', _runs_table(runs), "</section>"]
    body += ['<section class="card tables">', markdown_to_html(tables_md) or "<p>No scored requests.</p>", "</section>"]
    if figures:
        body.append('<section class="card"><h2>Figures</h2><div class="figures">')
        for src, caption, pdf in figures:
            link = f' · <a href="{_e(pdf)}">PDF</a>' if pdf else ""
            body.append(
                f'<figure><a href="{_e(src)}"><img src="{_e(src)}" alt="{_e(caption)}"></a>'
                f"<figcaption>{_e(caption)}{link}</figcaption></figure>"
            )
        body.append("</div></section>")
    if problems:
        items = "".join(f"<li>{_e(p)}</li>" for p in problems[:50])
        more = f"<li>… and {len(problems) - 50} more</li>" if len(problems) > 50 else ""
        body.append(f'<section class="card warn"><h2>Images not shown</h2><ul>{items}{more}</ul></section>')
    body.append('<p class="muted">Per-sample results: <a href="samples.html">Samples</a>.</p>')
    return _page("mmctx · summary", "index", "\n".join(body))


def samples_html(data: dict[str, Any]) -> str:
    body = (
        '<section id="filters" class="filters card" aria-label="Filters"></section>\n'
        '<p class="count"><span id="count"></span></p>\n'
        '<section id="list-view"><div class="table-wrap"><table id="sample-list" class="samples">'
        "<thead><tr><th>#</th><th>Model</th><th>Task</th><th>Setting</th><th>Scorer</th><th>Query</th>"
        "<th>Outcome</th><th>Answer</th><th>Gold</th><th>Rule</th></tr></thead><tbody></tbody></table></div>"
        '<div id="pager" class="pager"></div></section>\n'
        '<section id="detail-view" hidden></section>\n'
        f'<script type="application/json" id="mmctx-data">{json_for_html(data)}</script>\n'
    )
    return _page("mmctx · samples", "samples", body, '<script src="assets/viewer.js"></script>\n')


# ----------------------------------------------------------------------------- entry point


def _copy_assets(out: Path) -> None:
    target = out / "assets"
    target.mkdir(parents=True, exist_ok=True)
    source = resources.files("mmctx.report").joinpath("viewer_assets")
    for name in ASSET_FILES:
        (target / name).write_bytes(source.joinpath(name).read_bytes())


def build_site(runs: list[Path], out: Path, figures_dir: Path | None = None) -> Path:
    """Write the viewer for ``runs`` into ``out``; returns the path of ``index.html``."""
    if not runs:
        raise ViewerError("no run folders given")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    loaded = [load_run(Path(r)) for r in runs]
    name_runs(loaded)
    images = ImageCopier(out / "images")
    data = site_data(loaded, images)
    tables = markdown_tables([(run.name, summarize(run.results)) for run in loaded])
    _copy_assets(out)
    figures = copy_figures(figures_dir, out)
    (out / "index.html").write_text(index_html(loaded, tables, figures, images.problems), encoding="utf-8")
    (out / "samples.html").write_text(samples_html(data), encoding="utf-8")
    return out / "index.html"
