"""A static, self-contained HTML viewer of scored runs: ``mmctx view RUN... --out DIR``.

    DIR/
      index.html        summary: the runs, the papers' tables, the figures found
      samples.html      per-sample browser: filters (CoT failure tags among them), prompt with
                        its images, response, extracted answer and rule, CoT tags, option
                        log-likelihoods, side-by-side view
      assets/           viewer.css, viewer.js (no inline script or style: see the CSP below)
      images/           every image a prompt shows, as <sha256>.png or .jpg, each once
      figures/          the figures given, re-encoded (and their PDFs where those are plain)

The site opens from disk (``file://``) and loads nothing from anywhere else. Everything in
it that came from a run — model text above all, but also questions, options, rule names,
error strings and model names — is treated as untrusted: the HTML written here escapes it
with `html.escape`, and the per-sample data travels as JSON inside a
``<script type="application/json">`` block (``<``, ``>``, ``&`` written as ``\\u003c`` …, so
no string can close the block), which the page reads with ``JSON.parse`` and renders with
``textContent`` only. A Content-Security-Policy meta tag forbids inline scripts and event
handlers, and every remote load.

Images are pixels only: every image and figure is decoded by Pillow and written afresh as a PNG
(a JPEG as a JPEG), so no file the site holds can be opened as a document that runs script. An
SVG is refused (Pillow cannot draw it, and opened in a tab of its own its script would run), as
is an HTML or XML file named like an image; each refusal is listed on the summary page and the
prompt shows a placeholder. A file whose resolved path lies outside the benchmark and run
folders (or the suite folder) is never copied, whatever link leads to it.

Results come from the run's response store, scored afresh with `score_run` (as
``mmctx report`` does, so the page never shows an older extractor's reading); a run folder
without its store falls back to its ``results.jsonl``.

Context-learning runs (CLBench-V, ``mmctx clbench run``; manifest ``"kind": "context"``) get the
same site in another mode: the summary shows CLBench-V's Tables 2 and 3, and the item browser
shows each item's context (read from the suite the manifest names, its images copied as above),
the rendered prompt, the raw response with its ``<think>`` trace marked, the prediction and how
it was extracted, the gold, the score and outcome, the evaluator's detail and the judge. Their
results are read from ``results.jsonl`` as scored (re-scoring would need the judges). One site
shows runs of one kind: few-shot and context runs given together are refused.
"""

from __future__ import annotations

import hashlib
import html
import io
import json
import math
import re
import sqlite3
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from importlib import resources
from pathlib import Path
from typing import Any

from mmctx.analysis.cot_failures import cot_tag_counts
from mmctx.jsonl import JsonlError, iter_jsonl
from mmctx.reasoning import trace_spans
from mmctx.reporting.cot_tables import cot_tags_markdown
from mmctx.reporting.escaping import markdown_plain
from mmctx.reporting.tables import markdown_tables
from mmctx.run.files import MANIFEST, REQUESTS, RESULTS, STORE
from mmctx.scoring.cot_tags import is_cot_setting
from mmctx.scoring.results import SampleResult, load_requests, score_run, scored_requests, summarize

CSP = (
    "default-src 'self'; img-src 'self' data:; script-src 'self'; style-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'none'"
)
ASSET_FILES = ("viewer.css", "viewer.js")
# Figures looked for in ``--figures``; an SVG among them is refused and named (`reencode_image`).
FIGURE_EXTENSIONS = {".png", ".jpg", ".jpeg", ".gif", ".webp", ".svg"}
_SHA256 = re.compile(r"[0-9a-f]{64}")


class ViewerError(ValueError):
    """A run folder the viewer cannot read, or runs it cannot show together."""


FEWSHOT, CONTEXT = "fewshot", "context"


def read_manifest(run_dir: Path) -> dict[str, Any]:
    """A run folder's manifest fields (``{}`` without one); a folder that is not a run is an error."""
    from mmctx.run.manifest import ManifestError
    from mmctx.run.manifest import read_manifest as read_run_manifest

    run_dir = Path(run_dir)
    if not (run_dir / REQUESTS).is_file():
        raise ViewerError(f"{run_dir}: no {REQUESTS} (not a run folder?)")
    if not (run_dir / MANIFEST).is_file():
        return {}
    try:
        return read_run_manifest(run_dir).fields
    except ManifestError as exc:
        raise ViewerError(str(exc)) from None


def run_kind(manifest: dict[str, Any]) -> str:
    """``"context"`` for a CLBench-V run, ``"fewshot"`` otherwise (older manifests carry no kind)."""
    return CONTEXT if manifest.get("kind") == CONTEXT else FEWSHOT


def check_one_kind(runs: list[Path]) -> str:
    """The kind every run shares; runs of both kinds are refused, naming which is which."""
    kinds = {Path(r): run_kind(read_manifest(Path(r))) for r in runs}
    if len(set(kinds.values())) > 1:
        few = ", ".join(str(r) for r, k in kinds.items() if k == FEWSHOT)
        ctx = ", ".join(str(r) for r, k in kinds.items() if k == CONTEXT)
        raise ViewerError(
            "these runs mix few-shot runs and context-learning (CLBench-V) runs, which one site cannot show "
            f"together; view them separately. Few-shot: {few}. Context: {ctx}."
        )
    return next(iter(kinds.values()))


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
    manifest = read_manifest(run_dir)
    if run_kind(manifest) == CONTEXT:
        raise ViewerError(f"{run_dir}: a context-learning run; load it with load_context_run")
    requests = scored_requests(load_requests(run_dir))  # one per result, in the same order
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
    path = run_dir / RESULTS
    try:
        for number, record in iter_jsonl(path):
            row = {k: v for k, v in record.items() if k in known}
            for k in ("loglikelihoods", "token_counts", "probs"):
                row[k] = tuple(row.get(k) or ())
            if row.get("cot_tags") is not None:  # absent from results stored before tags existed
                row["cot_tags"] = tuple(str(t) for t in row["cot_tags"])
            try:
                by_id[row["request_id"]] = SampleResult(**row)
            except (KeyError, TypeError) as exc:
                raise ViewerError(f"{path}:{number}: not a scored result ({exc})") from None
    except JsonlError as exc:
        raise ViewerError(str(exc)) from None
    return [by_id.get(r["id"]) or _missing(r) for r in requests], RESULTS


def _missing(request: dict) -> SampleResult:
    return SampleResult(
        request_id=request["id"], query_id=request["query_id"], task=request["task"],
        source=request.get("source", ""), setting=request["setting"], scorer=request["scorer"],
        gold=request["gold"], pred=None, outcome="missing",
    )  # fmt: skip


def name_runs(runs: list[Any]) -> None:
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


class ImageRefused(ValueError):
    """A file the site will not serve as an image (the message says why)."""


# What Pillow may decode here: raster formats only. SVG is not among them (Pillow cannot read
# it, and it may carry script), nor formats whose decoders run other programs (EPS: Ghostscript).
DECODABLE = ("PNG", "JPEG", "GIF", "WEBP", "BMP", "TIFF")
_PNG_MODES = {"1", "L", "LA", "P", "RGB", "RGBA", "I", "I;16"}


def reencode_image(data: bytes) -> tuple[bytes, str]:
    """``(bytes, ".png" | ".jpg")``: the image decoded by Pillow and written afresh, the only way
    an image reaches the site, so nothing but pixels survives (no script, no markup, no metadata).

    A JPEG is written again as a JPEG with its own quantisation tables (about its size and look; a
    CMYK one as RGB at quality 95); everything else as a lossless PNG. An animation keeps its first
    frame, as a model given the file through Pillow sees it. Raises `ImageRefused` for anything Pillow cannot decode as one of `DECODABLE` (SVG,
    HTML, a truncated file, a decompression bomb).
    """
    from PIL import Image

    if data.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"<":
        raise ImageRefused("markup (SVG, HTML or XML), not a raster image; SVG is not shown, as it can carry script")
    try:
        with Image.open(io.BytesIO(data), formats=DECODABLE) as image:
            image.load()
            fmt = image.format
            if fmt in ("JPEG", "MPO") and image.mode in ("L", "RGB"):
                # the source's own quantisation tables and subsampling: about its size and quality
                out, ext = image, ".jpg"
                save: dict[str, Any] = {"format": "JPEG", "quality": "keep", "subsampling": "keep"}
            elif fmt in ("JPEG", "MPO") and image.mode == "CMYK":
                out, ext = image.convert("RGB"), ".jpg"
                save = {"format": "JPEG", "quality": 95}
            else:
                out, ext = image, ".png"
                if out.mode not in _PNG_MODES:
                    out = out.convert("RGBA" if "A" in out.getbands() else "RGB")
                save = {"format": "PNG"}
            buffer = io.BytesIO()
            out.save(buffer, **save)
    except ImageRefused:
        raise
    except Exception as exc:  # Pillow raises OSError, ValueError, SyntaxError, DecompressionBombError …
        raise ImageRefused(f"not a raster image Pillow can decode ({type(exc).__name__}: {str(exc)[:200]})") from None
    return buffer.getvalue(), ext


def resolved_inside(path: Path, roots: Iterable[Path]) -> Path | None:
    """``path`` with every link resolved, if that lies inside one of ``roots`` (resolved too); else None.

    The site copies a file only through this: a symlink in a benchmark pointing elsewhere on the
    machine (``/etc/…``, a home folder) must not carry that file into a site meant to be shared.
    """
    resolved = Path(path).resolve()
    for root in roots:
        if resolved.is_relative_to(Path(root).resolve()):
            return resolved
    return None


@dataclass
class ImageCopier:
    """Copies each image once, as ``images/<sha256>.png`` or ``.jpg`` (the hash is that of the
    run's image file), after checking its hash, re-encoded by `reencode_image`.

    A file is copied only if its resolved path lies inside the roots it is looked up in (the
    benchmark and the run folder, or the suite); anything else, and anything that is not a raster
    image, becomes a problem listed on the summary page and a placeholder in the prompt.
    """

    out: Path
    copied: dict[str, str | None] = field(default_factory=dict)  # sha256 → site-relative src, or None
    problems: list[str] = field(default_factory=list)
    hashed: dict[Path, str] = field(default_factory=dict)  # file → its sha256 (`add_file`)

    def add_file(self, rel: str, root: Path) -> str:
        """An image known only by its path under ``root`` (a suite's): hashed, copied; returns its
        sha256, or ``""`` (and a problem noted) when it is missing or its path leaves ``root``."""
        rel = str(rel)
        parts = Path(rel).parts
        if not rel or Path(rel).is_absolute() or ".." in parts:
            self.problems.append(f"image path {rel[:200]!r}: not a path inside the suite folder")
            return ""
        source = Path(root).absolute() / rel
        if source not in self.hashed:
            if not source.is_file():
                self.problems.append(f"image {rel[:200]!r}: not found in {root}")
                return ""
            inside = resolved_inside(source, [root])
            if inside is None:
                outside = f"a link to {source.resolve()}, outside the suite folder {root}"
                self.problems.append(f"image {rel[:200]!r}: {outside}")
                return ""
            self.hashed[source] = hashlib.sha256(inside.read_bytes()).hexdigest()
        sha = self.hashed[source]
        return sha if self.add(sha, str(source), [root], where="the suite folder") else ""

    def add(
        self, sha256: str, path: str | None, roots: Iterable[Path] = (), where: str = "the benchmark and run folders"
    ) -> str | None:
        if sha256 in self.copied:
            return self.copied[sha256]
        self.copied[sha256] = src = self._copy(sha256, path, list(roots), where)
        return src

    def _copy(self, sha256: str, path: str | None, roots: list[Path], where: str) -> str | None:
        if not _SHA256.fullmatch(sha256):
            self.problems.append(f"image with a malformed hash {sha256[:80]!r}")
            return None
        source = _find_file(path, roots)
        if source is None:
            self.problems.append(f"image {sha256[:12]}: not found at {path!r}")
            return None
        inside = resolved_inside(source, roots)
        if inside is None:
            self.problems.append(f"image {sha256[:12]}: {source} resolves to {source.resolve()}, outside {where}")
            return None
        data = inside.read_bytes()
        if hashlib.sha256(data).hexdigest() != sha256:
            self.problems.append(f"image {sha256[:12]}: {source} has changed since the run")
            return None
        try:
            encoded, ext = reencode_image(data)
        except ImageRefused as exc:
            self.problems.append(f"image {sha256[:12]}: {source} is {exc}")
            return None
        name = f"{sha256}{ext}"
        self.out.mkdir(parents=True, exist_ok=True)
        target = self.out / name
        if not target.exists():
            target.write_bytes(encoded)
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
        "kind": FEWSHOT,
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
        "response_parts": reasoning_parts(r["response"] or ""),
        "truncated": bool(r["truncated"]),
        "cot": result.scorer == "generate" and is_cot_setting(result.setting),
        "cot_tags": None if result.cot_tags is None else list(result.cot_tags),
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


def reasoning_parts(text: str) -> list[list[Any]] | None:
    """``text`` cut into ``[is_reasoning, piece]`` runs that join back to it, or None without a trace.

    Reasoning is what extraction drops (`mmctx.reasoning.trace_spans`): whole trace blocks, everything
    before a stray closing tag (templates often open the trace in the prompt), and everything from an
    unclosed opening tag on.
    """
    spans = trace_spans(text)
    if not spans:
        return None
    parts: list[list[Any]] = []
    pos = 0
    for a, b in spans:
        if a > pos:
            parts.append([0, text[pos:a]])
        parts.append([1, text[a:b]])
        pos = b
    if pos < len(text):
        parts.append([0, text[pos:]])
    return parts


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


# ----------------------------------------------------------------------------- context runs


@dataclass
class ContextRun:
    """A CLBench-V run: its plan (``requests.jsonl``, by id) and its scored rows (``results.jsonl``)."""

    path: Path
    manifest: dict[str, Any]
    requests: dict[str, dict[str, Any]]
    rows: list[dict[str, Any]]
    source: str = RESULTS
    name: str = ""

    @property
    def model(self) -> str:
        return str(self.manifest.get("model", {}).get("name", self.path.name))

    @property
    def config(self) -> dict[str, Any]:
        return self.manifest.get("config") or {}


def _jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    try:
        for number, row in iter_jsonl(path):
            if not isinstance(row.get("id"), str):
                raise ViewerError(f"{path}:{number}: no string 'id'")
            rows.append(row)
    except JsonlError as exc:
        raise ViewerError(str(exc)) from None
    return rows


def load_context_run(run_dir: Path) -> ContextRun:
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    if run_kind(manifest) != CONTEXT:
        raise ViewerError(f"{run_dir}: not a context-learning run")
    if not (run_dir / RESULTS).is_file():
        raise ViewerError(f"{run_dir}: no {RESULTS}; score the run first (`mmctx clbench score`)")
    requests = {r["id"]: r for r in _jsonl(run_dir / REQUESTS)}
    return ContextRun(run_dir, manifest, requests, _jsonl(run_dir / RESULTS))


@dataclass
class _Suites:
    """The suites the runs name, each loaded once; what cannot be read becomes a problem, not an error."""

    problems: list[str]
    loaded: dict[str, Any] = field(default_factory=dict)  # resolved path → Benchmark or None

    def of(self, run: ContextRun):
        from mmctx.data.clbench.loader import load_clbench

        given = str(run.config.get("suite") or "")
        if not given:
            self.problems.append(f"{run.name}: the manifest names no suite; contexts not shown")
            return None
        path = Path(given)
        if not path.is_absolute() and not path.exists() and (run.path / path).exists():
            path = run.path / path
        key = str(path.resolve())
        if key not in self.loaded:
            try:
                self.loaded[key] = load_clbench(path)
            except (OSError, ValueError) as exc:
                self.problems.append(f"suite {given!r} of {run.name}: cannot be read ({exc}); contexts not shown")
                self.loaded[key] = None
        bench = self.loaded[key]
        expected = run.config.get("suite_sha256")
        if bench is not None and expected and bench.fingerprint() != expected:
            self.problems.append(
                f"suite {given!r} has changed since {run.name} ran: the context shown may differ from what "
                "the model saw (its prompt text is as sent)"
            )
        return bench


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, indent=2, default=str)


def _item(sample: Any, root: Path, images: ImageCopier) -> dict[str, Any]:
    """An item's context in reading order, its question and structured gold; images by hash."""
    blocks = []
    for b in sample.blocks:
        if b.kind == "image":
            blocks.append({"kind": "image", "title": b.title, "path": b.image, "image": images.add_file(b.image, root)})
        else:
            blocks.append({"kind": "text", "title": b.title, "text": b.text})
    after = [{"kind": "image", "title": "", "path": rel, "image": images.add_file(rel, root)} for rel in sample.images]
    return {
        "id": sample.id,
        "question": sample.question,
        "blocks": blocks,
        "after": after,
        "choices": [str(c) for c in sample.choices],
        "answer": sample.answer,
        "gold": _text(sample.gold),
    }


def context_site_data(runs: list[ContextRun], images: ImageCopier) -> dict[str, Any]:
    """Everything the item browser shows for context runs, as plain JSON."""
    suites = _Suites(images.problems)
    items: list[dict] = []
    item_index: dict[tuple[str, str], int] = {}
    prompts: list[str] = []
    prompt_index: dict[str, int] = {}
    samples: list[dict] = []
    for run_id, run in enumerate(runs):
        bench = suites.of(run)
        by_id = {q.id: q for q in bench.queries} if bench is not None else {}
        for row in run.rows:
            request = run.requests.get(row["id"], {})
            item = -1
            if row["id"] in by_id:
                key = (str(Path(bench.root).resolve()), row["id"])
                if key not in item_index:
                    item_index[key] = len(items)
                    items.append(_item(by_id[row["id"]], Path(bench.root), images))
                item = item_index[key]
            text = str(request.get("prompt_text") or "")
            if text not in prompt_index:
                prompt_index[text] = len(prompts)
                prompts.append(text)
            samples.append(_context_sample(run_id, row, request, item, prompt_index[text]))
    return {
        "kind": CONTEXT,
        "runs": [_context_run_info(r) for r in runs],
        "images": images.copied,
        "items": items,
        "prompts": prompts,
        "samples": samples,
    }


def _context_sample(run_id: int, row: dict, request: dict, item: int, prompt: int) -> dict[str, Any]:
    score = row.get("score")
    response = str(row.get("response") or "")
    return {
        "run": run_id,
        "id": row["id"],
        "subset": str(row.get("subset", "")),
        "level": str(row.get("level") or ""),
        "table_level": str(row.get("table_level") or ""),
        "evaluator": str(row.get("evaluator", "")),
        "answer_type": str(row.get("answer_type") or ""),
        "template": str(request.get("template", "")),
        "suffix": str(request.get("suffix", "")),
        "problems": [str(p) for p in request.get("problems") or []],
        "item": item,
        "prompt": prompt,
        "outcome": str(row.get("outcome", "")),
        "score": _finite([score])[0] if score is not None else None,
        "prediction": _text(row.get("prediction")),
        "extracted_by": str(row.get("extracted_by") or ""),
        "repaired": bool(row.get("repaired")),
        "detail": json.dumps(row.get("detail"), ensure_ascii=False, indent=2, default=str),
        "judge": str(row["judge"]) if row.get("judge") else "",
        "prompt_tokens": row.get("prompt_tokens") if isinstance(row.get("prompt_tokens"), int) else None,
        "images": row.get("images") if isinstance(row.get("images"), int) else None,
        "truncated_tokens": row.get("truncated_tokens") if isinstance(row.get("truncated_tokens"), int) else 0,
        "response": response,
        "response_parts": reasoning_parts(response),
        "gold": _text(row.get("gold")),
    }


def _role(manifest: dict, role: str) -> str:
    info = manifest.get(role) or {}
    return str(info.get("name", "")) if isinstance(info, dict) else ""


def _context_run_info(run: ContextRun) -> dict[str, Any]:
    model = run.manifest.get("model", {})
    return {
        "name": run.name,
        "model": run.model,
        "dir": run.path.name,
        "revision": str(model.get("revision", "")),
        "backend": str(model.get("backend", "")),
        "suite": str(run.config.get("suite_name", "")),
        "judge": _role(run.manifest, "judge"),
        "extractor": _role(run.manifest, "extractor"),
        "created": str(run.manifest.get("created", "")),
        "source": run.source,
    }


def context_tables(runs: list[ContextRun]) -> str:
    """CLBench-V's Tables 2 and 3 for the runs, as Markdown (rendered by `markdown_to_html`)."""
    from mmctx.reporting.clbench_tables import table2_markdown, table3_markdown
    from mmctx.scoring.levels import aggregate

    scores = {}
    for run in runs:
        try:
            scores[run.name] = aggregate(run.rows, model=run.name)
        except ValueError as exc:
            raise ViewerError(f"{run.path}: {exc}") from None
    return (
        "## Table 2: scores by context-learning level\n\n" + table2_markdown(scores)
        + "\n## Table 3: scores by dataset\n\n" + table3_markdown(scores)
    )  # fmt: skip


def _context_runs_table(runs: list[ContextRun]) -> str:
    head = ["Model", "Revision", "Backend", "Suite", "Judge", "Extractor", "Repair", "Truncation", "Items",
            "Outcomes", "Run folder", "Created"]  # fmt: skip
    rows = []
    for run in runs:
        model, config = run.manifest.get("model", {}), run.config
        outcomes: dict[str, int] = {}
        for r in run.rows:
            outcomes[str(r.get("outcome"))] = outcomes.get(str(r.get("outcome")), 0) + 1
        truncation = str(config.get("truncation", "none"))
        if truncation != "none":
            truncation += f" ({config.get('truncation_budget')} tokens, {config.get('tokenizer')})"
        cells = [
            run.name,
            model.get("revision", ""),
            model.get("backend", ""),
            config.get("suite_name", ""),
            _role(run.manifest, "judge") or "–",
            _role(run.manifest, "extractor") or "–",
            "yes" if config.get("repair") else "no",
            truncation,
            len(run.rows),
            ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())),
            f"{run.path.name} ({run.source})",
            run.manifest.get("created", ""),
        ]
        rows.append(cells)
    return _html_table(head, rows, "metrics runs")


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
    """The Markdown `markdown_tables` writes (headings, pipe tables, lists, paragraphs), escaped.

    Names in that Markdown are written with `markdown_text`; each piece of text is read back with
    `markdown_plain` and then HTML-escaped, so a name shows as exactly itself.
    """
    out: list[str] = []
    lines = re.split(r"\r\n|\r|\n", markdown)  # Markdown's line endings; not splitlines' U+2028 & co
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if not line:
            i += 1
        elif line.startswith("#"):
            level = min(len(line) - len(line.lstrip("#")), 6)
            out.append(f"<h{level}>{_md(line[level:].strip())}</h{level}>")
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
                items.append(f"<li>{_md(lines[i].strip()[2:])}</li>")
                i += 1
            out.append("<ul>" + "".join(items) + "</ul>")
        else:
            out.append(f"<p>{_md(line)}</p>")
            i += 1
    return "\n".join(out)


def _cells(row: str) -> list[str]:
    """A pipe-table row's cells, split at the pipes that are not backslash-escaped."""
    row = row.strip()
    cells, cell, last_pipe = [], "", False
    for token in re.findall(r"\\.|\||[^\\|]+|\\", row):
        last_pipe = token == "|"
        if last_pipe:
            cells.append(cell.strip())
            cell = ""
        else:
            cell += token
    cells.append(cell.strip())
    if row.startswith("|"):
        cells = cells[1:]
    return cells[:-1] if last_pipe else cells


def _table(rows: list[str]) -> str:
    if len(rows) >= 2 and re.fullmatch(r"\|?(\s*:?-+:?\s*\|)+\s*:?-*:?\s*\|?", rows[1]):
        head, body = _cells(rows[0]), rows[2:]
    else:
        head, body = [], rows
    parts = ['<div class="table-wrap"><table class="metrics">']
    if head:
        parts.append("<thead><tr>" + "".join(f"<th>{_md(c)}</th>" for c in head) + "</tr></thead>")
    parts.append("<tbody>")
    for row in body:
        cells = _cells(row)
        sub = ' class="sub"' if cells and cells[0].endswith(" · unparsed %") else ""
        tds = "".join(_td(c, numeric=j > 0) for j, c in enumerate(cells))
        parts.append(f"<tr{sub}>{tds}</tr>")
    parts.append("</tbody></table></div>")
    return "".join(parts)


_NUMBER = re.compile(r"[-–+]?[\d.]*\d[\d.]*%?|–")
_MARKS = (("best", re.compile(r"\*\*(.+)\*\*")), ("second", re.compile(r"<u>(.+)</u>")))


def _td(cell: str, numeric: bool) -> str:
    """A body cell; a number right-aligned, and CLBench-V's rank marks (``**best**``,
    ``<u>second</u>``, around a number only) as classes rather than markup."""
    if numeric:
        for mark, pattern in _MARKS:
            found = pattern.fullmatch(cell)
            if found and _NUMBER.fullmatch(found.group(1)):
                return f'<td class="num {mark}">{_e(found.group(1))}</td>'
        if _NUMBER.fullmatch(cell):
            return f'<td class="num">{_e(cell)}</td>'
    return f"<td>{_md(cell)}</td>"


def _md(markdown: str) -> str:
    """Markdown text (no markup but escapes) as escaped HTML."""
    return _e(markdown_plain(markdown))


def _html_table(head: list[str], rows: list[list[Any]], cls: str) -> str:
    return (
        f'<div class="table-wrap"><table class="{_e(cls)}"><thead><tr>'
        + "".join(f"<th>{_e(h)}</th>" for h in head)
        + "</tr></thead><tbody>"
        + "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in cells) + "</tr>" for cells in rows)
        + "</tbody></table></div>"
    )


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
        rows.append(cells)
    return _html_table(head, rows, "metrics runs")


def copy_figures(
    figures_dir: Path | None, out: Path, problems: list[str] | None = None
) -> list[tuple[str, str, str | None]]:
    """Figures (``src``, caption, PDF ``href`` if one sits beside) copied into ``out/figures``.

    Each figure is re-encoded (`reencode_image`); an SVG or anything else that is not a raster is
    left out and named in ``problems``, as is a file whose resolved path leaves ``figures_dir``.
    A PDF beside a figure is copied as it is only when `plain_pdf` finds nothing in it that acts
    (script, actions, attachments).
    """
    if figures_dir is None or not Path(figures_dir).is_dir():
        return []
    problems = [] if problems is None else problems
    figures_dir = Path(figures_dir)
    found = sorted(p for p in figures_dir.rglob("*") if p.is_file() and p.suffix.lower() in FIGURE_EXTENSIONS)
    target = out / "figures"
    shown = []
    for i, path in enumerate(found):
        rel = path.relative_to(figures_dir).as_posix()
        inside = resolved_inside(path, [figures_dir])
        if inside is None:
            problems.append(f"figure {rel!r}: a link to {path.resolve()}, outside {figures_dir}")
            continue
        try:
            encoded, ext = reencode_image(inside.read_bytes())
        except ImageRefused as exc:
            problems.append(f"figure {rel!r} is {exc}")
            continue
        stem = f"{i:03d}-{re.sub(r'[^A-Za-z0-9._-]+', '_', path.stem)}"
        target.mkdir(parents=True, exist_ok=True)
        (target / f"{stem}{ext}").write_bytes(encoded)
        pdf_href = None
        pdf = path.with_suffix(".pdf")
        if pdf.is_file():
            pdf_inside = resolved_inside(pdf, [figures_dir])
            data = pdf_inside.read_bytes() if pdf_inside is not None else b""
            if pdf_inside is not None and plain_pdf(data):
                (target / f"{stem}.pdf").write_bytes(data)
                pdf_href = f"figures/{stem}.pdf"
            else:
                problems.append(f"figure {rel!r}: its PDF is not linked (outside {figures_dir}, or not a plain PDF)")
        shown.append((f"figures/{stem}{ext}", rel, pdf_href))
    return shown


# PDF names that make a document act when opened or clicked (script, actions, attachments, forms),
# and object streams, inside which such names could hide compressed.
_PDF_ACTIVE = re.compile(
    rb"/(JavaScript|JS|OpenAction|AA|Launch|SubmitForm|ImportData|GoToE|GoToR|EmbeddedFiles?|RichMedia|XFA|ObjStm)"
    rb"(?![A-Za-z0-9])"
)
_PDF_STREAM = re.compile(rb"stream\r?\n.*?endstream", re.DOTALL)
_PDF_HEX_NAME = re.compile(rb"/[^\s/<>\[\]()%{}]*#[0-9A-Fa-f]{2}")  # /J#61vaScript spells /JavaScript


def plain_pdf(data: bytes) -> bool:
    """True for a PDF with no active parts: what matplotlib writes. Stream contents (drawing
    operators, font programs) are skipped; a name spelled with ``#xx`` escapes counts as active."""
    if not data.startswith(b"%PDF-"):
        return False
    objects = _PDF_STREAM.sub(b"stream endstream", data)
    return not _PDF_ACTIVE.search(objects) and not _PDF_HEX_NAME.search(objects)


def index_html(
    runs: list[LoadedRun], tables_md: str, figures: list[tuple[str, str, str | None]], problems: list[str]
) -> str:
    return summary_html(_runs_table(runs), tables_md, figures, problems, "Images not shown")


def summary_html(
    runs_table: str,
    tables_md: str,
    figures: list[tuple[str, str, str | None]],
    problems: list[str],
    problems_title: str = "Not shown",
) -> str:
    """The summary page: the runs (``runs_table``, HTML), the tables (Markdown), figures, problems."""
    body = ["<h1>Summary</h1>", '<section class="card"><h2>Runs</h2>', runs_table, "</section>"]
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
        body.append(f'<section class="card warn"><h2>{_e(problems_title)}</h2><ul>{items}{more}</ul></section>')
    body.append('<p class="muted">Per-sample results: <a href="samples.html">Samples</a>.</p>')
    return _page("mmctx · summary", "index", "\n".join(body))


FEWSHOT_COLUMNS = ("#", "Model", "Task", "Setting", "Scorer", "Query", "Outcome", "Answer", "Gold", "Rule")
CONTEXT_COLUMNS = ("#", "Model", "Subset", "Level", "Item", "Outcome", "Score", "Prediction", "Gold",
                   "Extracted by", "Repaired")  # fmt: skip


def samples_html(data: dict[str, Any], columns: Iterable[str] = FEWSHOT_COLUMNS) -> str:
    """The sample browser: an empty shell that viewer.js fills from the JSON block (either kind)."""
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    body = (
        '<section id="filters" class="filters card" aria-label="Filters"></section>\n'
        '<p class="count"><span id="count"></span></p>\n'
        '<section id="list-view"><div class="table-wrap"><table id="sample-list" class="samples">'
        f"<thead><tr>{head}</tr></thead><tbody></tbody></table></div>"
        '<div id="pager" class="pager"></div></section>\n'
        '<section id="detail-view" hidden></section>\n'
        f'<script type="application/json" id="mmctx-data">{json_for_html(data)}</script>\n'
    )
    return _page("mmctx · samples", "samples", body, '<script src="assets/viewer.js"></script>\n')


# ----------------------------------------------------------------------------- entry point


def _copy_assets(out: Path) -> None:
    target = out / "assets"
    target.mkdir(parents=True, exist_ok=True)
    source = resources.files("mmctx.reporting").joinpath("viewer_assets")
    for name in ASSET_FILES:
        (target / name).write_bytes(source.joinpath(name).read_bytes())


def build_site(runs: list[Path], out: Path, figures_dir: Path | None = None) -> Path:
    """Write the viewer for ``runs`` into ``out``; returns the path of ``index.html``.

    The runs must be of one kind: few-shot runs, or context-learning (CLBench-V) runs.
    """
    if not runs:
        raise ViewerError("no run folders given")
    kind = check_one_kind([Path(r) for r in runs])
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    images = ImageCopier(out / "images")
    if kind == CONTEXT:
        contexts = [load_context_run(Path(r)) for r in runs]
        name_runs(contexts)
        tables = context_tables(contexts)
        data = context_site_data(contexts, images)
        runs_table, columns, problems_title = _context_runs_table(contexts), CONTEXT_COLUMNS, "Not shown"
    else:
        loaded = [load_run(Path(r)) for r in runs]
        name_runs(loaded)
        data = site_data(loaded, images)
        tables = markdown_tables([(run.name, summarize(run.results)) for run in loaded])
        cot = cot_tags_markdown([(run.name, cot_tag_counts(run.results)) for run in loaded])
        tables += "\n## CoT failure tags\n\n" + cot if cot else ""
        runs_table, columns, problems_title = _runs_table(loaded), FEWSHOT_COLUMNS, "Images not shown"
    _copy_assets(out)
    figures = copy_figures(figures_dir, out, images.problems)
    index = summary_html(runs_table, tables, figures, images.problems, problems_title)
    (out / "index.html").write_text(index, encoding="utf-8")
    (out / "samples.html").write_text(samples_html(data, columns), encoding="utf-8")
    return out / "index.html"
