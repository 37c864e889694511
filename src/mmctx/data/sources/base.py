"""What every source converter shares: its description, its result, and record-level errors.

A converter turns one dataset *as distributed* (a folder the user downloaded) into `Sample`s.
It never aborts on a bad record: the record becomes a `SourceError` naming file, line or key,
and field, and the other records go on. Records a dataset's own rules exclude (VALSE's
validity filter, …) are counted in `Conversion.skipped`, apart from errors.

Paths: the *sources root* holds one folder per dataset (``ROOT/valse``, ``ROOT/mme``, …).
Sample images are paths relative to the sources root, so nothing is copied; images a converter
derives (crops, decoded base64, composites) are written under ``ROOT/_mmctx/<source>/``.
"""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mmctx.schema import Sample

DERIVED = "_mmctx"


@dataclass(frozen=True)
class SourceInfo:
    """What a user needs to know to get a dataset and where mmctx expects it."""

    name: str  # folder name under the sources root, e.g. "valse"
    title: str
    license: str
    published: str  # where to download it
    layout: str  # the folder layout mmctx expects under ROOT/<name>/
    subsets: dict[str, tuple[str, str]]  # subset -> (task, format) it feeds by default


@dataclass(frozen=True)
class SourceError:
    """One record that could not be converted."""

    source: str
    file: str  # relative to the source folder
    where: str  # "line 12", "key existence_3", "row 4"
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.source}: {self.file} {self.where}: {self.field}: {self.message}"


@dataclass
class Conversion:
    samples: list[Sample] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)  # rule -> count
    errors: list[SourceError] = field(default_factory=list)

    def extend(self, other: Conversion) -> None:
        self.samples.extend(other.samples)
        self.skipped.update(other.skipped)
        self.errors.extend(other.errors)


@dataclass(frozen=True)
class SourceContext:
    """Where a converter reads and writes."""

    root: Path  # the sources root; sample image paths are relative to it

    def folder(self, source: str) -> Path:
        return self.root / source

    def derived(self, source: str) -> Path:
        """Where ``source`` may write images it derives (crops, decoded base64, composites)."""
        return self.root / DERIVED / source

    def rel(self, path: Path) -> str:
        """``path`` relative to the sources root, as sample images are stored.

        Lexical, not resolved: dataset image folders are often symlinks to shared copies
        (COCO, Visual Genome), and that is the user's layout to choose.
        """
        rel = Path(os.path.relpath(Path(path), self.root))
        if ".." in rel.parts:
            raise ValueError(f"{path} is not under the sources root {self.root}")
        return rel.as_posix()


Converter = Callable[[SourceContext], Conversion]


def write_derived(ctx: SourceContext, source: str, data: bytes, suffix: str) -> str:
    """Write derived image bytes once, content-addressed; return the sample image path."""
    digest = hashlib.sha256(data).hexdigest()
    path = ctx.derived(source) / digest[:2] / f"{digest}{suffix}"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    return ctx.rel(path)
