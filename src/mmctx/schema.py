"""The records every package shares: `Sample`, `Rationale`, `Benchmark`, and their validation.

One `Sample` describes every task kind. The answer is stored as the text of the correct
choice (not an index), so shuffling options never changes what is correct. A `Benchmark`
mirrors the released FewMMBench layout: a query table, a demonstration table, and per-query
demo keys (``similar``, ``random``) that join the two, in stored order.

Images are paths relative to the benchmark's root folder, and `resolve_image` is the one place
such a path becomes a file: it refuses absolute paths, ``..``, and (for a benchmark or suite read
from disk) symbolic links whose target lies outside the root, so no reader (a run, the viewer,
validation) can be led to a file the folder does not hold.
"""

from __future__ import annotations

import hashlib
import warnings
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from mmctx import answers

Format = Literal["mcqa", "caption_foil", "binary", "open"]
FORMATS: tuple[str, ...] = ("mcqa", "caption_foil", "binary", "open")

# The nine FewMMBench task types, in the paper's table order.
TASKS: tuple[str, ...] = (
    "attribute_recognition",
    "object_recognition",
    "plurality",
    "counting",
    "spatial_relations",
    "action_recognition",
    "commonsense",
    "temporal",
    "coreference",
)

# Answers a binary verification item may carry.
BINARY_CHOICES: tuple[str, str] = ("Yes", "No")

# Open-answer (context-learning) items: the registered answer types (a live view: an evaluator
# may register its own, see `mmctx.answers`), and the capability level.
ANSWER_TYPES = answers.ANSWER_TYPES
AnswerType = answers.AnswerType
# CLBench-V's three levels, and the boundary cases its Table 1 allows.
LEVELS: tuple[str, ...] = ("L0", "L1", "L2", "L0–L1", "L1–L2")


class Rationale(BaseModel):
    """A chain-of-thought explanation for a demonstration, ending in its final answer.

    Provenance says where it came from: the generator (a model spec, ``scene-graph`` for
    shapes-world's programmatic rationales, or empty when imported), how many attempts it took,
    and whether the gold answer was injected into the prompt that produced it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    reasoning: str
    answer: str
    generator: str = ""
    attempts: int = 0
    injected: bool = False


class ContextBlock(BaseModel):
    """One piece of an open item's context, in the order the model reads it.

    ``text``: a Markdown document, a converted report, a web snippet. ``image``: a page render,
    figure, map or photo, by path relative to the benchmark root. ``title`` is an optional
    heading shown before the block ("Reference Source [2]", "Page 14").
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["text", "image"]
    text: str = ""
    image: str = ""
    title: str = ""


class Sample(BaseModel):
    """One item: a query to answer or a demonstration to show.

    Text fields by format:
      - ``mcqa``: ``question`` + ``choices``.
      - ``caption_foil``: ``choices`` are the captions (the correct one and its foil(s)).
      - ``binary``: ``statement`` is verified; ``choices`` are ``["Yes", "No"]``.
      - ``open``: a context-learning item (CLBench-V): ``blocks`` (ordered text and images) +
        ``question``; ``answer_type``, ``gold`` (the structured gold, shape by answer type),
        ``evaluator`` (a name in `mmctx.scoring.evaluators`), ``level`` (L0/L1/L2 or a boundary
        case). ``answer`` holds the gold as display text; ``task`` and ``source`` name the subset.

    Gold shapes for open items (``gold``):
      - ``option``: the letter, ``"B"`` (options are embedded in ``question`` or in ``choices``).
      - ``number``: ``{"value": float, "rel_tol": float = 0, "abs_tol": float = 0, "unit": str = ""}``.
      - ``string``: the answer text, or a list of accepted aliases.
      - ``list``: a list of strings (order ignored).
      - ``route``: ``{"station_1", "station_2", "metro": {line: [stations]}, "routes": {plan: [
        {"route_name", "departure_stop", "arrival_stop", "via_stops": [..], "num_via_stops"}]},
        "variant": "short" | "long_num_via" | "long_via"}`` (ReasonMap's own fields).
      - ``rubrics``: a non-empty list of rubric strings (CL-bench).
      - ``conclusions``: a non-empty list of reference conclusion strings.
      - ``point``: ``{"xyz": [x, y, z], "radius": r}`` (CourtSI localisation: a hit is a distance
        strictly below ``r``), or ``{"xy": [x, y], "radius": r}`` for a point on a plane.
    """

    model_config = ConfigDict(extra="forbid")

    id: str
    task: str
    source: str
    format: Format
    images: list[str] = Field(default_factory=list)
    question: str = ""
    statement: str = ""
    context: str = ""
    choices: list[str] = Field(default_factory=list)
    answer: str
    rationale: Rationale | None = None
    demo_keys: dict[str, list[str]] = Field(default_factory=dict)
    meta: dict[str, Any] = Field(default_factory=dict)
    blocks: list[ContextBlock] = Field(default_factory=list)
    answer_type: str | None = None  # a name in `mmctx.answers` (checked when the record is built)
    gold: Any = None
    evaluator: str = ""
    level: str = ""

    @field_validator("answer_type")
    @classmethod
    def _registered_answer_type(cls, value: str | None) -> str | None:
        if value is not None and value not in ANSWER_TYPES:
            raise ValueError(f"unknown answer type {value!r}; known: {list(ANSWER_TYPES)}")
        return value

    @property
    def context_images(self) -> list[str]:
        """Every image the model sees for an open item, in reading order (blocks, then ``images``)."""
        return [b.image for b in self.blocks if b.kind == "image"] + list(self.images)

    @property
    def answer_index(self) -> int:
        return self.choices.index(self.answer)


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a benchmark, pointing at the record and field."""

    table: str
    record: str
    field: str
    message: str

    def __str__(self) -> str:
        if not self.record:  # a problem of the whole table ("the table has no records")
            return f"{self.table}: {self.message}"
        return f"{self.table}[{self.record}].{self.field}: {self.message}"


def listed(headline: str, problems: list, shown: int = 20) -> str:
    """``headline`` then one problem a line (the first ``shown``), for errors that report them all."""
    lines = "\n".join(f"  - {p}" for p in problems[:shown])
    more = f"\n  ... and {len(problems) - shown} more" if len(problems) > shown else ""
    return f"{headline}\n{lines}{more}"


class ImagePathError(ValueError):
    """An image path a record may not use: absolute, climbing out with ``..``, or led out by a link."""


def resolve_image(root: Path, rel: str, confine_links: bool = True) -> Path:
    """The file image path ``rel`` names under ``root``: every dataset image is found through here.

    ``rel`` must be relative and may not climb out with ``..``. With ``confine_links`` (the rule
    for a benchmark or suite read from disk) symbolic links are followed only while their target
    stays inside ``root``: a folder one is handed must not make a run send, or the viewer
    publish, a file from elsewhere on the machine. A benchmark that needs a shared image copy
    holds the files themselves (`save_benchmark` copies them), hard links, or a bind mount.
    Without ``confine_links`` (a benchmark assembled in memory from the user's own source
    folders, where image sets are often links to a shared COCO copy) the check is lexical only.
    """
    path = Path(rel)
    if path.is_absolute() or rel.startswith(("/", "\\")):
        raise ImagePathError(f"{rel!r} is absolute; image paths are relative to the benchmark root")
    if ".." in path.parts:
        raise ImagePathError(f"{rel!r} escapes the benchmark root")
    full = Path(root) / path
    if not confine_links:
        return full
    try:
        target = full.resolve()
    except (OSError, RuntimeError) as exc:  # a link loop (RuntimeError before Python 3.13)
        raise ImagePathError(f"{rel!r} cannot be resolved: {exc}") from None
    if not target.is_relative_to(Path(root).resolve()):
        # The target is not named: it is a path outside the folder, and messages reach reports.
        raise ImagePathError(f"{rel!r} is a symbolic link (or lies under one) leading outside the benchmark root")
    return target


# Decoding is checked on a draft this size where the format can decode small (JPEG's DCT scaling).
_DRAFT_SIZE = (256, 256)


def image_file_problem(path: Path, name: str | None = None) -> str | None:
    """Why ``path`` cannot be shown to a model (no such file, undecodable pixels, too many pixels), or None.

    The pixels are decoded, not just the header checked: ``verify`` passes a PNG whose chunks are
    well formed but whose data is not. PIL's decompression-bomb limit (``Image.MAX_IMAGE_PIXELS``)
    applies, and its warning (over the limit, under twice it) counts as an error here too.
    Messages quote ``name`` (the record's path) rather than where the file was found.
    """
    shown = repr(str(path) if name is None else name)
    if not path.is_file():
        return f"missing image file {shown}"
    from PIL import Image

    stat = path.stat()
    problem = _decode_problem(str(path), stat.st_mtime_ns, stat.st_size, Image.MAX_IMAGE_PIXELS)
    if problem is None:
        return None
    bomb, detail = problem
    if bomb:
        return f"image file {shown} has too many pixels, refused as a possible decompression bomb ({detail})"
    return f"corrupt image file {shown}: {detail}"


@lru_cache(maxsize=65536)
def _decode_problem(path: str, mtime_ns: int, size: int, max_pixels: int | None) -> tuple[bool, str] | None:
    # Keyed by modification time, size and the limit: demos shared by many queries are decoded once.
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as im:
                im.draft(im.mode, _DRAFT_SIZE)  # a no-op for formats without reduced decoding
                im.load()
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        return True, str(exc)
    except Exception as exc:  # PIL raises many types for corrupt files
        return False, str(exc)
    return None


class BenchmarkError(ValueError):
    """Raised when a benchmark fails validation; carries every problem found."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__(listed(f"{len(problems)} problem(s) in benchmark:", problems))


@dataclass
class Benchmark:
    """Queries, the demonstration table they draw on, and the folder images resolve against."""

    name: str
    queries: list[Sample]
    demos: list[Sample]
    root: Path
    description: str = ""
    # Links out of the root are refused (see `resolve_image`); False only for a benchmark assembled
    # from the user's own source folders, whose images are copied into the folder it is saved to.
    confine_links: bool = True

    def __post_init__(self) -> None:
        self.root = Path(self.root)

    @property
    def _demo_index(self) -> dict[str, Sample]:
        # Rebuilt when the table is replaced or grows or shrinks; cheap enough to ask per demo.
        cached = self.__dict__.get("_index_cache")
        if cached is None or cached[0] is not self.demos or cached[1] != len(self.demos):
            cached = (self.demos, len(self.demos), {d.id: d for d in self.demos})
            self.__dict__["_index_cache"] = cached
        return cached[2]

    def demo(self, key: str) -> Sample:
        return self._demo_index[key]

    def demos_for(self, query: Sample, strategy: str, k: int, need_rationale: bool = False) -> list[Sample]:
        """The first ``k`` demos of ``query`` under ``strategy``, in stored order.

        With ``need_rationale`` (CoT settings), demos without a rationale are skipped and the
        next ones in stored order take their place; the chosen ids are recorded in each request.
        """
        usable = self.ranked_demos(query, strategy, need_rationale)
        if len(usable) < k:
            what = "demos with a rationale" if need_rationale else "demos"
            raise BenchmarkError(
                [Problem("queries", query.id, f"demo_keys.{strategy}", f"needs {k} {what}, has {len(usable)}")]
            )
        return usable[:k]

    def ranked_demos(self, query: Sample, strategy: str, need_rationale: bool = False) -> list[Sample]:
        """Every demo ``query`` stores under ``strategy``, in stored order (see `demos_for`)."""
        field = f"demo_keys.{strategy}"
        if strategy not in query.demo_keys:
            stored = sorted(query.demo_keys) or "none"
            raise BenchmarkError([Problem("queries", query.id, field, f"no such list (stored: {stored})")])
        keys = query.demo_keys[strategy]
        index = self._demo_index
        unknown = [key for key in keys if key not in index]
        if unknown:
            raise BenchmarkError([Problem("queries", query.id, field, f"unknown demo key(s) {unknown!r}")])
        return [index[key] for key in keys if not need_rationale or index[key].rationale is not None]

    def image_path(self, rel: str) -> Path:
        """The file of image path ``rel``; raises `ImagePathError` for one the root does not hold."""
        return resolve_image(self.root, rel, self.confine_links)

    @property
    def tasks(self) -> list[str]:
        seen = dict.fromkeys(q.task for q in self.queries)
        return [t for t in TASKS if t in seen] + [t for t in seen if t not in TASKS]

    def fingerprint(self) -> str:
        """Hash of every record of both tables (image files are hashed into each prompt instead)."""
        h = hashlib.sha256()
        for table in (self.queries, self.demos):
            for s in table:
                h.update(s.model_dump_json().encode())
            h.update(b"\x00")
        return h.hexdigest()

    def validate(self, check_images: bool = True) -> list[Problem]:
        return validate_benchmark(self, check_images=check_images)

    def check(self, check_images: bool = True) -> None:
        """Raise `BenchmarkError` listing every problem, or return quietly."""
        problems = self.validate(check_images=check_images)
        if problems:
            raise BenchmarkError(problems)


def validate_sample(
    sample: Sample, table: str, root: Path | None, check_images: bool = True, confine_links: bool = True
) -> list[Problem]:
    """Every problem of one record: answer/choices consistency, image paths and files.

    Image files are decoded (see `image_file_problem`) unless ``check_images`` is off; paths are
    resolved (see `resolve_image`) whenever a ``root`` is given.
    """
    problems: list[Problem] = []

    def bad(field: str, message: str) -> None:
        problems.append(Problem(table, sample.id, field, message))

    if not sample.id.strip():
        bad("id", "empty id")
    if sample.format != "open":
        if len(sample.choices) < 2:
            bad("choices", f"needs at least 2 choices, has {len(sample.choices)}")
        # "Left", "left " and "left" read as one option to a model and to answer extraction.
        dupes = [c for c, n in Counter(c.strip().casefold() for c in sample.choices).items() if n > 1]
        if dupes:
            bad("choices", f"duplicate choice(s) {dupes!r} (compared ignoring case and surrounding spaces)")
        if sample.answer not in sample.choices:
            bad("answer", f"{sample.answer!r} is not among choices {sample.choices!r}")
    for i, choice in enumerate(sample.choices):
        if not choice.strip():
            bad(f"choices[{i}]", "empty option")
    if sample.format == "mcqa" and not sample.question.strip():
        bad("question", "MCQA sample has no question")
    if sample.format == "binary":
        if not sample.statement.strip():
            bad("statement", "binary sample has no statement")
        if list(sample.choices) != list(BINARY_CHOICES):
            bad("choices", f"binary choices must be {list(BINARY_CHOICES)!r}")
    if sample.rationale is not None and sample.rationale.answer != sample.answer:
        # A demonstration must show the gold answer; a rationale reaching another is not one.
        bad("rationale.answer", f"{sample.rationale.answer!r} differs from the gold answer {sample.answer!r}")
    if not sample.images:
        if sample.format != "open":
            bad("images", "no image")
    if sample.format == "open":
        problems.extend(validate_open(sample, table, root, check_images, confine_links))
    for i, rel in enumerate(sample.images):
        problem = _image_problem(rel, root, check_images, confine_links)
        if problem:
            bad(f"images[{i}]", problem)
    return problems


def validate_open(
    sample: Sample, table: str, root: Path | None, check_images: bool = True, confine_links: bool = True
) -> list[Problem]:
    """Problems of an open (context-learning) item: its context, level, evaluator and gold shape."""
    problems: list[Problem] = []

    def bad(field: str, message: str) -> None:
        problems.append(Problem(table, sample.id, field, message))

    if not sample.question.strip() and not any(b.kind == "text" and b.text.strip() for b in sample.blocks):
        bad("question", "open item has neither a question nor any context text")
    if sample.level not in LEVELS:
        bad("level", f"{sample.level!r} is not one of {list(LEVELS)}")
    if not sample.evaluator:
        bad("evaluator", "open item names no evaluator")
    if sample.answer_type is None:
        bad("answer_type", f"open item has no answer type (one of {list(ANSWER_TYPES)})")
    for i, block in enumerate(sample.blocks):
        if block.kind == "image":
            problem = (
                _image_problem(block.image, root, check_images, confine_links)
                if block.image
                else "image block without a path"
            )
            if problem:
                bad(f"blocks[{i}].image", problem)
        elif block.image:
            bad(f"blocks[{i}].image", "a text block carries an image path")
    problem = gold_problem(sample.answer_type, sample.gold)
    if problem:
        bad("gold", problem)
    return problems


def gold_problem(answer_type: str | None, gold: Any) -> str | None:
    """What is wrong with ``gold`` for ``answer_type`` (see `Sample` and `mmctx.answers`), or None."""
    return answers.gold_problem(answer_type, gold)


def _image_problem(rel: str, root: Path | None, check_files: bool, confine_links: bool = True) -> str | None:
    try:
        full = resolve_image(Path(root) if root is not None else Path("."), rel, confine_links and root is not None)
    except ImagePathError as exc:
        return str(exc)
    if root is None or not check_files:
        return None
    return image_file_problem(full, rel)


def validate_benchmark(bench: Benchmark, check_images: bool = True) -> list[Problem]:
    """Every problem in a benchmark, so a run can refuse it before any model is loaded."""
    problems: list[Problem] = []
    if not bench.queries:
        # Refused here, so a run stops before loading a model for zero requests (demos may be none: 0-shot).
        problems.append(Problem("queries", "", "", "the table has no records"))
    for table, records in (("queries", bench.queries), ("demos", bench.demos)):
        counts = Counter(s.id for s in records)
        for sid, n in counts.items():
            if n > 1:
                problems.append(Problem(table, sid, "id", f"duplicate id ({n} records)"))
        for s in records:
            problems.extend(validate_sample(s, table, bench.root, check_images, bench.confine_links))
    demo_ids = {d.id for d in bench.demos}
    for q in bench.queries:
        for strategy, keys in q.demo_keys.items():
            field = f"demo_keys.{strategy}"
            for key in keys:
                if key == q.id:
                    problems.append(Problem("queries", q.id, field, "query listed among its own demos"))
                elif key not in demo_ids:
                    problems.append(Problem("queries", q.id, field, f"unknown demo key {key!r}"))
            dupes = [k for k, n in Counter(keys).items() if n > 1]
            if dupes:
                problems.append(Problem("queries", q.id, field, f"repeated demo key(s) {dupes!r}"))
            for key in keys:
                if key in demo_ids and bench.demo(key).format != q.format:
                    demo_format = bench.demo(key).format
                    problems.append(
                        Problem("queries", q.id, field, f"demo {key!r} is {demo_format}, query is {q.format}")
                    )
    return problems
