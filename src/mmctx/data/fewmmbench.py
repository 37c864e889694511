"""Load the released FewMMBench data (`mustafaa/FewMMBench`) into a `Benchmark`, and write it back.

The release is a Hugging Face dataset with one config per (kind, table):

    caption_foil_test                 caption_foil_demonstrations
    multiple_choice_qa_test           multiple_choice_qa_demonstrations

Each config has a single split named ``train`` (even the test tables). Test rows point at their
demonstrations through ``most_similar_example_keys`` and ``random_example_keys`` (lists of demo
``example_id``), which become ``Sample.demo_keys["similar"]`` and ``["random"]``. Images are
embedded HF ``Image`` features; they are read undecoded (``Image(decode=False)``) and written once,
in their original encoding, under ``cache_dir/images/<sha256[:2]>/<sha256>.<ext>``.

Field mapping
-------------
Caption/foil rows: ``choices = [caption, foil]``, ``answer = caption``. A row with only one of the
two (the other missing, None or blank) is a binary verification statement, as the paper asks VSR's
single true/false captions (§4.2: "Does this sentence accurately describe the image?"): a caption
alone is a true statement (answer ``Yes``), a foil alone a false one (``No``). The writer stores
binary samples that way, so they sit among the caption/foil rows of their task as in the release
(7 × 250 caption/foil test rows, VSR included).

MCQA rows (the dataset card is cut off, so several shapes are accepted):
  - options: ``options`` (or ``choices``) as a list of strings, a dict keyed by letter (sorted by key;
    ``None`` values dropped), or a JSON string of either. When *every* option carries the prefix of
    its own letter in sequence (``"A. x"``, ``"(B) y"``, ``"C) z"``, ``"D: w"``) the prefixes are stripped.
  - answer: ``answer`` (or ``label``/``correct_answer``), resolved in this order:
      1. the text of an option (exact, then ignoring case, surrounding whitespace and a trailing period);
      2. a letter ``"B"``, ``"(B)"``, ``"B."``, ``"B)"``, ``"Option B"``, or ``"B. <text of option B>"``;
      3. an ``int`` (not a digit string, which could be an option's text) as a 0-based index.
    So an option's own text always wins over a letter reading of the same string.
  - images: ``images`` (list, order kept), numbered columns ``image_1, image_2, ...`` (by number), or
    ``image``. Exactly one of these may be non-empty.
  - ``task_name`` (or ``task``/``category``) is required; ``dataset_name`` (or ``source``) defaults to ``"unknown"``.

Every field not mapped above is kept, JSON-safe, under ``meta["fewmmbench"]["extra"]``.

Rationales (``cot_info = {reasonings, answer}``; ``reasoning`` is accepted too): a missing,
``None`` or all-empty ``cot_info`` means no rationale; one of the two parts empty is an error. The
answer is mapped to one of the sample's choices (positions refer to stored order, i.e.
``[caption, foil]`` for caption/foil):
  1. the MCQA answer rules 1-2 above (option text, then letters), after also trying the text with a
     leading ``"Final Answer:"`` / ``"Answer:"`` removed;
  2. ``"caption 0"`` / ``"caption 1"`` (0-based, as in the authors' earlier prompts); ``"first"``,
     ``"second"``, ... followed by caption/sentence/option/choice/one;
  3. caption/foil only: ``Yes``/``True``/``Correct`` is a verdict about the caption, so it maps to the
     caption; ``No``/``False``/``Incorrect`` maps to the foil;
  4. the answer contains exactly one choice's text (ignoring choices contained in a longer matched one).
Anything else, or a string that fits two choices, raises a `ValueError` naming the record. A
rationale whose answer is not the gold answer is kept as written and reported in a warning.

Task names are lower_snake_cased and mapped onto `mmctx.schema.TASKS` through `TASK_ALIASES`
("Object Counting" -> "counting", "commonsense reasoning" -> "commonsense", ...). Unknown names are
kept in snake case and listed in one warning per load.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import re
import tempfile
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mmctx.schema import BINARY_CHOICES, TASKS, Benchmark, Format, Rationale, Sample

__all__ = [
    "KINDS",
    "TASK_ALIASES",
    "layout_left_out",
    "load_fewmmbench",
    "normalize_task",
    "save_fewmmbench_layout",
]

logger = logging.getLogger(__name__)

# Config kind -> the `Sample.format` its rows become.
KINDS: dict[str, Format] = {"caption_foil": "caption_foil", "multiple_choice_qa": "mcqa"}
TABLES: tuple[str, str] = ("test", "demonstrations")
SPLIT = "train"  # the release stores every config, test included, as split "train"

# Test-row column -> demo_keys strategy.
DEMO_KEY_COLUMNS: dict[str, str] = {"most_similar_example_keys": "similar", "random_example_keys": "random"}

TASK_ALIASES: dict[str, str] = {
    **{t: t for t in TASKS},
    "attribute": "attribute_recognition",
    "attributes": "attribute_recognition",
    "object": "object_recognition",
    "objects": "object_recognition",
    "visual_object_recognition": "object_recognition",
    "plural": "plurality",
    "plurals": "plurality",
    "plurality_recognition": "plurality",
    "count": "counting",
    "object_counting": "counting",
    "spatial": "spatial_relations",
    "spatial_relation": "spatial_relations",
    "spatial_reasoning": "spatial_relations",
    "action": "action_recognition",
    "actions": "action_recognition",
    "common_sense": "commonsense",
    "commonsense_reasoning": "commonsense",
    "common_sense_reasoning": "commonsense",
    "temporal_reasoning": "temporal",
    "temporal_understanding": "temporal",
    "coref": "coreference",
    "coreference_resolution": "coreference",
}

_IMAGE_EXTENSIONS = {
    "JPEG": "jpg",
    "MPO": "jpg",
    "PNG": "png",
    "GIF": "gif",
    "WEBP": "webp",
    "BMP": "bmp",
    "TIFF": "tiff",
}
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")
_YES = {"yes", "true", "correct"}
_NO = {"no", "false", "incorrect"}


class RowError(ValueError):
    """A released row that cannot be mapped; the message names config, example_id and field."""

    def __init__(self, config: str, example_id: object, field: str, message: str):
        self.config, self.example_id, self.field = config, example_id, field
        super().__init__(f"{config}[{example_id}].{field}: {message}")


# --------------------------------------------------------------------------------------------
# Loading


def load_fewmmbench(
    source: str | Path,
    cache_dir: Path,
    configs: Sequence[str] = ("caption_foil", "multiple_choice_qa"),
    *,
    revision: str | None = None,
    hf_cache_dir: Path | None = None,
) -> Benchmark:
    """Load FewMMBench from a hub id or a local folder in the hub layout into a `Benchmark` rooted at ``cache_dir``.

    ``configs`` are config kinds; each loads its ``<kind>_test`` and ``<kind>_demonstrations`` pair.
    A kind absent from the source is skipped with a warning as long as another kind loads.
    ``revision`` pins a hub commit; ``hf_cache_dir`` overrides where `datasets` keeps its Arrow cache.
    """
    if isinstance(configs, str):  # a lone kind, not a sequence of one-letter kinds
        configs = (configs,)
    unknown = [k for k in configs if k not in KINDS]
    if unknown:
        raise ValueError(f"unknown FewMMBench config kind(s) {unknown}; known: {list(KINDS)}")
    if not configs:
        raise ValueError("no FewMMBench config kinds requested")
    source_str = _source_string(source)
    cache_dir = Path(cache_dir)
    available = _available_configs(source_str)
    kinds = _present_kinds(source_str, configs, available)

    queries: list[Sample] = []
    demos: list[Sample] = []
    unknown_tasks: set[str] = set()
    off_gold: list[str] = []
    for kind in kinds:
        for table in TABLES:
            config = f"{kind}_{table}"
            rows = _rows(source_str, config, revision=revision, hf_cache_dir=hf_cache_dir)
            converter = _RowConverter(
                config=config, format=KINDS[kind], is_test=table == "test", cache_dir=cache_dir,
                image_roots=_image_roots(source_str, hf_cache_dir),
            )  # fmt: skip
            samples = [converter.sample(row) for row in rows]
            (queries if table == "test" else demos).extend(samples)
            unknown_tasks |= converter.unknown_tasks
            off_gold += converter.off_gold

    if unknown_tasks:
        warnings.warn(
            f"FewMMBench task name(s) not in mmctx.schema.TASKS, kept as-is: {sorted(unknown_tasks)}", stacklevel=2
        )
    if off_gold:
        warnings.warn(
            f"{len(off_gold)} rationale(s) end in an answer other than the gold one and were set aside "
            f"(meta.fewmmbench.off_gold_rationale; CoT settings skip these demos): {off_gold[:10]}",
            stacklevel=2,
        )
    loaded = [f"{k}_{t}" for k in kinds for t in TABLES]
    logger.info("FewMMBench from %s: loaded %s", source_str, loaded)
    return Benchmark(
        name="fewmmbench",
        queries=queries,
        demos=demos,
        root=cache_dir,
        description=f"FewMMBench from {source_str} (configs: {', '.join(loaded)})",
    )


def normalize_task(name: str) -> str:
    """Map a released task name onto `TASKS`; unknown names come back in lower_snake_case."""
    snake = re.sub(r"[^0-9a-z]+", "_", name.strip().lower()).strip("_")
    return TASK_ALIASES.get(snake, snake)


def _source_string(source: str | Path) -> str:
    # A Path, or a str that can only be a path, is a local folder; "owner/name" is a hub id.
    text = str(source)
    looks_local = isinstance(source, Path) or os.path.isabs(text) or text.startswith((".", "~")) or text.count("/") > 1
    if looks_local and not Path(text).expanduser().is_dir():
        raise FileNotFoundError(f"{text}: no such FewMMBench folder")
    return str(Path(text).expanduser()) if looks_local else text


def _available_configs(source: str) -> set[str] | None:
    """Config names the source declares, or None when they cannot be listed (hub id while offline)."""
    import datasets

    try:
        return set(datasets.get_dataset_config_names(source))
    except Exception:
        if Path(source).is_dir():
            raise
        return None  # let load_dataset raise its own (offline / not found) error


def _present_kinds(source: str, kinds: Sequence[str], available: set[str] | None) -> list[str]:
    if available is None:
        return list(kinds)
    present: list[str] = []
    for kind in kinds:
        names = [f"{kind}_{t}" for t in TABLES]
        found = [n for n in names if n in available]
        if len(found) == 1:
            missing = next(n for n in names if n not in available)
            raise ValueError(f"{source}: config {missing!r} is missing (its pair {found[0]!r} is present)")
        if found:
            present.append(kind)
    absent = [k for k in kinds if k not in present]
    if not present:
        wanted = [f"{k}_{t}" for k in kinds for t in TABLES]
        raise ValueError(f"{source}: none of the FewMMBench configs {wanted} found; it has {sorted(available)}")
    if absent:
        warnings.warn(f"{source}: FewMMBench config kind(s) {absent} not found; loading only {present}", stacklevel=3)
    return present


def _image_roots(source: str, hf_cache_dir: Path | None) -> tuple[Path, ...]:
    import datasets

    roots = [Path(datasets.config.HF_DATASETS_CACHE), Path(hf_cache_dir) if hf_cache_dir else None]
    if Path(source).is_dir():
        roots.append(Path(source))
    return tuple(r.resolve() for r in roots if r is not None)


def _rows(source: str, config: str, revision: str | None, hf_cache_dir: Path | None) -> Iterator[dict[str, Any]]:
    """Rows of one config, images left undecoded as {bytes, path} so they are never re-encoded."""
    import datasets

    ds = datasets.load_dataset(
        source,
        config,
        split=SPLIT,
        revision=revision,
        cache_dir=str(hf_cache_dir) if hf_cache_dir else None,
    )
    for column, feature in ds.features.items():
        undecoded = _undecoded(feature)
        if undecoded is not feature:
            ds = ds.cast_column(column, undecoded)
    class_labels = {c: f for c, f in ds.features.items() if isinstance(f, datasets.ClassLabel)}
    for row in ds:
        # Class labels arrive as ints; their names are what the options refer to.
        for column, feature in class_labels.items():
            if isinstance(row[column], int) and row[column] >= 0:
                row[column] = feature.int2str(row[column])
        yield row


def _undecoded(feature: Any) -> Any:
    """``feature`` with every Image inside it set to decode=False (the same object if it has none)."""
    from datasets import Image, LargeList, List, Sequence

    if isinstance(feature, Image):
        return Image(decode=False) if feature.decode else feature
    if isinstance(feature, (List, Sequence, LargeList)):
        inner = _undecoded(feature.feature)
        if inner is feature.feature:
            return feature
        if isinstance(feature, LargeList):
            return LargeList(inner)
        return List(inner, length=feature.length)
    if isinstance(feature, dict):
        items = {k: _undecoded(v) for k, v in feature.items()}
        return feature if all(items[k] is feature[k] for k in feature) else items
    return feature


@dataclass
class _RowConverter:
    """Turns the rows of one config into samples, writing their images into the cache."""

    config: str
    format: Format
    is_test: bool
    cache_dir: Path
    # Where an image given only by path may be read from: the dataset's own folder or HF's cache.
    image_roots: tuple[Path, ...] = ()

    def __post_init__(self) -> None:
        self.unknown_tasks: set[str] = set()
        self.off_gold: list[str] = []
        self.example_id = ""  # of the row being converted, for error messages

    def sample(self, row: Mapping[str, Any]) -> Sample:
        row = dict(row)
        raw_id = row.pop("example_id", None)
        if raw_id is None or str(raw_id).strip() == "":
            raise RowError(self.config, raw_id, "example_id", "missing example_id")
        self.example_id = str(raw_id)
        raw_task = _pop_first(row, ("task_name", "task", "category"))
        if not isinstance(raw_task, str) or not raw_task.strip():
            raise self.error("task_name", f"missing task name (got {raw_task!r})")
        task = normalize_task(raw_task)
        if task not in TASKS:
            self.unknown_tasks.add(raw_task)
        source = _pop_first(row, ("dataset_name", "source"))

        fmt, statement = self.format, ""
        if self.format == "caption_foil":
            question = ""
            caption, foil = row.pop("caption", None), row.pop("foil", None)
            if _blank(caption) != _blank(foil):
                # A VSR-style statement: a caption without foil is true, a foil without caption false.
                fmt, statement = "binary", self.text(foil if _blank(caption) else caption, "caption")
                choices, answer = list(BINARY_CHOICES), BINARY_CHOICES[int(_blank(caption))]
            elif _blank(caption):
                raise self.error("caption", "neither caption nor foil holds text")
            else:
                choices = [self.text(caption, "caption"), self.text(foil, "foil")]
                answer = choices[0]
        else:
            question = self.text(row.pop("question", None), "question")
            choices = self.options(row)
            answer = self.answer(row, choices)

        images = [self.store_image(img, field) for img, field in self.images(row)]
        demo_keys = self.demo_keys(row) if self.is_test else {}
        rationale = self.rationale(row.pop("cot_info", None), choices)
        meta: dict[str, Any] = {"config": self.config, "example_id": raw_id, "task_name": raw_task}
        if rationale is not None and rationale.answer != answer:
            # A demonstration must show the gold answer: kept aside, reported, skipped by CoT settings.
            self.off_gold.append(f"{self.config}[{self.example_id}]")
            meta["off_gold_rationale"] = rationale.model_dump()
            rationale = None
        if row:
            meta["extra"] = {k: _jsonable(v) for k, v in row.items()}
        return Sample(
            id=self.example_id,
            task=task,
            source=str(source) if source not in (None, "") else "unknown",
            format=fmt,
            images=images,
            question=question,
            statement=statement,
            choices=choices,
            answer=answer,
            rationale=rationale,
            demo_keys=demo_keys,
            meta={"fewmmbench": meta},
        )

    def error(self, field: str, message: str) -> RowError:
        return RowError(self.config, self.example_id, field, message)

    def text(self, value: Any, field: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.error(field, f"expected non-empty text, got {value!r}")
        return value

    # -- MCQA ---------------------------------------------------------------------------------

    def options(self, row: dict[str, Any]) -> list[str]:
        field = "options" if "options" in row else "choices"
        value = row.pop(field, None)
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                value = [line for line in value.splitlines() if line.strip()]
        if isinstance(value, Mapping):
            value = [v for _, v in sorted(value.items()) if v is not None]
        if not isinstance(value, list) or len(value) < 2:
            raise self.error(field, f"expected a list of at least 2 options, got {value!r}")
        if not all(isinstance(v, str) and v.strip() for v in value):
            raise self.error(field, f"every option must be non-empty text, got {value!r}")
        return _strip_letter_prefixes(value)

    def answer(self, row: dict[str, Any], choices: list[str]) -> str:
        field = next((f for f in ("answer", "label", "correct_answer") if f in row), "answer")
        value = row.pop(field, None)
        if isinstance(value, bool) or value is None:
            raise self.error(field, f"missing or unusable answer {value!r}")
        if isinstance(value, int):
            if 0 <= value < len(choices):
                return choices[value]
            raise self.error(field, f"answer index {value} out of range for {len(choices)} options")
        if isinstance(value, str):
            matches = _match_choice(value, choices)
            if len(matches) == 1:
                return matches[0]
            if len(matches) > 1:
                raise self.error(field, f"answer {value!r} fits several options {matches!r}")
        raise self.error(field, f"cannot resolve answer {value!r} against options {choices!r}")

    # -- images -------------------------------------------------------------------------------

    def images(self, row: dict[str, Any]) -> list[tuple[Any, str]]:
        """(image value, field name) pairs in prompt order, from exactly one of the accepted columns."""
        numbered = sorted((int(m.group(1)), k) for k in row if (m := re.fullmatch(r"image_?(\d+)", k)))
        groups: dict[str, list[tuple[Any, str]]] = {}
        images = row.pop("images", None)
        if images:
            if not isinstance(images, list):
                raise self.error("images", f"expected a list of images, got {type(images).__name__}")
            groups["images"] = [(img, f"images[{i}]") for i, img in enumerate(images)]
        numbered_values = [(row.pop(k), k) for _, k in numbered]
        if any(v is not None for v, _ in numbered_values):
            groups["image_<n>"] = numbered_values
        single = row.pop("image", None)
        if single is not None:
            groups["image"] = [(single, "image")]
        if len(groups) != 1:
            what = "no image" if not groups else f"images in several columns {sorted(groups)}"
            raise self.error("image", f"{what}; expected exactly one of image, images, image_<n>")
        (found,) = groups.values()
        for value, field in found:
            if value is None:
                raise self.error(field, "missing image")
        return found

    def store_image(self, value: Any, field: str) -> str:
        """Write the image's encoded bytes once, content-addressed; return its path relative to the cache."""
        data, hint = self.image_bytes(value, field)
        ext = self.image_extension(data, hint, field)
        digest = hashlib.sha256(data).hexdigest()
        rel = f"images/{digest[:2]}/{digest}.{ext}"
        _write_once(self.cache_dir / rel, data)
        return rel

    def image_bytes(self, value: Any, field: str) -> tuple[bytes, str]:
        if isinstance(value, Mapping):
            data, path = value.get("bytes"), value.get("path")
            if data:
                return bytes(data), path or ""
            if path and Path(path).is_file():
                resolved = Path(path).resolve()
                if not any(resolved.is_relative_to(root) for root in self.image_roots):
                    raise self.error(field, "image path lies outside the dataset folder and the datasets cache")
                return resolved.read_bytes(), path
            raise self.error(field, f"image has no bytes and no readable file (path {path!r})")
        if isinstance(value, (bytes, bytearray)):
            return bytes(value), ""
        try:
            from PIL import Image as PILImage
        except ImportError:  # pragma: no cover - pillow is a dependency
            PILImage = None
        if PILImage is not None and isinstance(value, PILImage.Image):
            # Only reachable when a column was not an Image feature; there are no original bytes to keep.
            buffer = io.BytesIO()
            value.save(buffer, format=value.format or "PNG")
            return buffer.getvalue(), ""
        raise self.error(field, f"unsupported image value of type {type(value).__name__}")

    def image_extension(self, data: bytes, hint: str, field: str) -> str:
        from PIL import Image as PILImage

        try:
            with PILImage.open(io.BytesIO(data)) as im:  # reads the header only; nothing is decoded
                fmt = im.format or ""
        except Exception as exc:
            raise self.error(field, f"unreadable image bytes ({hint or 'embedded'}): {exc}") from exc
        return _IMAGE_EXTENSIONS.get(fmt) or fmt.lower() or Path(hint).suffix.lstrip(".").lower() or "bin"

    # -- demo keys and rationales ---------------------------------------------------------------

    def demo_keys(self, row: dict[str, Any]) -> dict[str, list[str]]:
        keys: dict[str, list[str]] = {}
        for column, strategy in DEMO_KEY_COLUMNS.items():
            if column not in row:
                raise self.error(column, "test row has no demo keys column")
            value = row.pop(column)
            if not isinstance(value, list) or not all(isinstance(k, (str, int)) for k in value):
                raise self.error(column, f"expected a list of demo example_ids, got {value!r}")
            keys[strategy] = [str(k) for k in value]
        return keys

    def rationale(self, cot: Any, choices: list[str]) -> Rationale | None:
        if isinstance(cot, str):
            if not cot.strip():
                return None
            try:
                cot = json.loads(cot)
            except json.JSONDecodeError as exc:
                raise self.error("cot_info", f"not a {{reasonings, answer}} record: {cot[:80]!r}") from exc
        if cot is None:
            return None
        if not isinstance(cot, Mapping):
            raise self.error("cot_info", f"expected a {{reasonings, answer}} record, got {type(cot).__name__}")
        reasoning = cot.get("reasonings", cot.get("reasoning"))
        answer = cot.get("answer")
        has_reasoning = isinstance(reasoning, str) and bool(reasoning.strip())
        has_answer = answer is not None and str(answer).strip() != ""
        if not has_reasoning and not has_answer:
            return None
        if not has_reasoning:
            raise self.error("cot_info.reasonings", f"rationale has an answer ({answer!r}) but no reasoning")
        if not has_answer:
            raise self.error("cot_info.answer", "rationale has reasoning but no answer")
        return Rationale(reasoning=reasoning, answer=self.rationale_answer(answer, choices))

    def rationale_answer(self, value: Any, choices: list[str]) -> str:
        if isinstance(value, int) and not isinstance(value, bool):
            if 0 <= value < len(choices):
                return choices[value]
        elif isinstance(value, str):
            matches = _match_rationale_answer(value, choices, self.format)
            if len(matches) == 1:
                return matches[0]
            if len(matches) > 1:
                raise self.error("cot_info.answer", f"{value!r} fits several choices {matches!r}")
        raise self.error("cot_info.answer", f"cannot map {value!r} onto one of the choices {choices!r}")


def _pop_first(row: dict[str, Any], names: Sequence[str]) -> Any:
    for name in names:
        if name in row:
            return row.pop(name)
    return None


def _blank(value: Any) -> bool:
    """No text: a missing, None or whitespace-only cell."""
    return value is None or (isinstance(value, str) and not value.strip())


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold().rstrip(".")


def _strip_letter_prefixes(options: list[str]) -> list[str]:
    """Drop "A. "-style prefixes, but only when every option has its own letter, in order."""
    if len(options) > len(_LETTERS):
        return options
    stripped = []
    for letter, option in zip(_LETTERS, options, strict=False):
        m = re.match(rf"\s*\(?{letter}\s*[.):]\s+(.*\S)\s*$", option, flags=re.DOTALL)
        if not m:
            return options
        stripped.append(m.group(1))
    return stripped


def _letter_index(text: str, n: int) -> int | None:
    """0-based index for "B", "(B)", "B.", "B)", "Option B" (case-insensitive), if in range."""
    m = re.fullmatch(r"\s*(?:option\s+|choice\s+)?\(?([A-Za-z])\)?\s*[.:]?\s*", text, flags=re.IGNORECASE)
    if m:
        index = _LETTERS.index(m.group(1).upper())
        return index if index < n else None
    return None


def _match_choice(value: str, choices: list[str]) -> list[str]:
    """Choices ``value`` names: by text (exact, then loosely), then as a letter. Empty when none."""
    exact = [c for c in choices if c.strip() == value.strip()]
    if exact:
        return list(dict.fromkeys(exact))
    loose = [c for c in choices if _norm(c) == _norm(value)]
    if loose:
        return list(dict.fromkeys(loose))
    index = _letter_index(value, len(choices))
    if index is not None:
        return [choices[index]]
    # "B. <text of option B>": accept only when the text agrees with the letter.
    m = re.fullmatch(r"\s*\(?([A-Za-z])\s*[.):]\s+(.*\S)\s*", value, flags=re.DOTALL)
    if m:
        index = _letter_index(m.group(1), len(choices))
        if index is not None and _norm(choices[index]) == _norm(m.group(2)):
            return [choices[index]]
    return []


def _match_rationale_answer(value: str, choices: list[str], format: Format) -> list[str]:
    text = re.sub(r"^\s*(?:final\s+answer|answer)\s*[:\-]\s*", "", value, flags=re.IGNORECASE)
    for candidate in dict.fromkeys((value, text)):
        matches = _match_choice(candidate, choices)
        if matches:
            return matches
    words = _norm(text).strip("*\"' ")
    m = re.fullmatch(r"(?:the\s+)?caption\s*(\d+)", words)
    if m:
        index = int(m.group(1))
        return [choices[index]] if index < len(choices) else []
    m = re.fullmatch(rf"(?:the\s+)?({'|'.join(_ORDINALS)})(?:\s+(?:caption|sentence|option|choice|one))?", words)
    if m:
        index = _ORDINALS.index(m.group(1))
        return [choices[index]] if index < len(choices) else []
    if format == "caption_foil" and len(choices) == 2:
        if words in _YES:
            return [choices[0]]
        if words in _NO:
            return [choices[1]]
    folded = " ".join(value.split()).casefold()
    contained = [c for c in choices if _norm(c) and _norm(c) in folded]
    # A choice inside a longer contained choice ("two dogs" in "two dogs and a cat") is not a separate hit.
    outer = [c for c in contained if not any(c != o and _norm(c) in _norm(o) for o in contained)]
    return list(dict.fromkeys(outer))


def _jsonable(value: Any) -> Any:
    """Raw fields kept in meta must survive JSON and Parquet round-trips."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value)} bytes>"
    return str(value)


def _write_once(path: Path, data: bytes) -> None:
    """Write ``data`` at ``path`` unless it exists; content-addressed names make an existing file correct."""
    if path.is_file() and path.stat().st_size == len(data):
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)  # atomic, so a concurrent loader never sees half an image
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# --------------------------------------------------------------------------------------------
# Writing the released layout


def save_fewmmbench_layout(bench: Benchmark, out: Path, skip_unsupported: bool = False) -> Path:
    """Write ``bench`` as the released hub layout: one parquet per config + README.md with ``configs:``.

    Caption/foil samples become ``caption_foil_*`` rows (exactly two choices, one image), and so do
    binary statements (VSR), with the statement as caption when true and as foil when false, the
    other cell empty (see the module docstring); MCQA samples become ``multiple_choice_qa_*`` rows
    with ``options``, the answer as option text and an ``images`` list. Only the
    ``similar``/``random`` demo keys exist in this layout. What the layout cannot hold (see
    `layout_left_out`: ``open`` items, caption/foil items with more than one foil or not exactly
    one image) raises, or with ``skip_unsupported`` is left out — with every demo key pointing at
    it — and listed in ``README.md``; the caller reports `layout_left_out`'s answer.
    """
    from datasets import Dataset

    out = Path(out)
    left_out = {}
    for table, samples in (("queries", bench.queries), ("demos", bench.demos)):
        for s in samples:
            problem = _layout_problem(s)
            if problem is None:
                continue
            if not skip_unsupported:
                raise ValueError(f"{table}[{s.id}].{problem[0]}: {problem[1]}")
            left_out[s.id] = problem[1]
    out.mkdir(parents=True, exist_ok=True)
    by_kind: dict[str, tuple[list[Sample], list[Sample]]] = {kind: ([], []) for kind in KINDS}
    for table, samples in (("queries", bench.queries), ("demos", bench.demos)):
        for s in samples:
            if s.id in left_out:
                continue
            if table == "queries" and left_out:
                keys = {k: [d for d in ids if d not in left_out] for k, ids in s.demo_keys.items()}
                s = s.model_copy(update={"demo_keys": keys})
            by_kind[LAYOUT_KIND[s.format]][table == "demos"].append(s)

    written: list[str] = []
    for kind, (queries, demos) in by_kind.items():
        if not queries and not demos:
            continue
        for table, samples in (("test", queries), ("demonstrations", demos)):
            config = f"{kind}_{table}"
            rows = [_released_row(bench, s, kind, is_test=table == "test") for s in samples]
            features = _released_features(kind, is_test=table == "test")
            columns = {name: [r[name] for r in rows] for name in features}
            folder = out / config
            folder.mkdir(exist_ok=True)
            for old in folder.glob(f"{SPLIT}-*.parquet"):
                old.unlink()  # a shorter rewrite must not leave stale shards behind
            Dataset.from_dict(columns, features=features).to_parquet(str(folder / f"{SPLIT}-00000-of-00001.parquet"))
            written.append(config)
    (out / "README.md").write_text(_readme(written, bench.description, left_out), encoding="utf-8")
    return out


def layout_lists(bench: Benchmark) -> Benchmark:
    """``bench`` with each query's demo lists cut to the layout's columns (``similar``, ``random``).

    The other strategies' lists (``mmr``, ``image-similar``, …) live in mmctx's own layout only; a
    demo only they reference still gets its row, so the tables stay the same set.
    """
    kept = set(DEMO_KEY_COLUMNS.values())
    queries = [
        q.model_copy(update={"demo_keys": {k: v for k, v in q.demo_keys.items() if k in kept}}) for q in bench.queries
    ]
    return replace(bench, queries=queries)


# The layout's config kind per sample format; binary statements are caption/foil rows with one side empty.
LAYOUT_KIND: dict[str, str] = {"caption_foil": "caption_foil", "binary": "caption_foil", "mcqa": "multiple_choice_qa"}


def layout_left_out(bench: Benchmark) -> dict[str, str]:
    """Sample id -> why the released layout cannot hold it, for every query and demo it cannot."""
    return {s.id: problem[1] for s in bench.queries + bench.demos if (problem := _layout_problem(s)) is not None}


def _layout_problem(s: Sample) -> tuple[str, str] | None:
    """(field, reason) when ``s`` has no row in the released layout, else None."""
    if s.format not in LAYOUT_KIND:
        return "format", f"{s.format!r} has no FewMMBench config"
    if s.format == "caption_foil" and len(s.choices) != 2:
        return "choices", f"{len(s.choices)} captions; a caption/foil row holds one caption and one foil"
    if LAYOUT_KIND[s.format] == "caption_foil" and len(s.images) != 1:
        return "images", f"{len(s.images)} images; a caption/foil row holds one"
    return None


def _released_features(kind: str, is_test: bool) -> Any:
    from datasets import Features, Image, List, Value

    text = Value("string")
    if kind == "caption_foil":
        fields: dict[str, Any] = {"example_id": text, "caption": text, "foil": text, "image": Image()}
    else:
        fields = {"example_id": text, "question": text, "options": List(text), "answer": text, "images": List(Image())}
    fields |= {"task_name": text, "dataset_name": text}
    if is_test:
        fields |= {column: List(text) for column in DEMO_KEY_COLUMNS}
    else:
        fields["cot_info"] = {"reasonings": text, "answer": text}
    return Features(fields)


def _released_row(bench: Benchmark, s: Sample, kind: str, is_test: bool) -> dict[str, Any]:
    def bad(field: str, message: str) -> ValueError:
        return ValueError(f"{'queries' if is_test else 'demos'}[{s.id}].{field}: {message}")

    raw = s.meta.get("fewmmbench", {})
    images = []
    for i, rel in enumerate(s.images):
        try:
            images.append({"bytes": bench.image_path(rel).read_bytes(), "path": Path(rel).name})
        except OSError as exc:
            raise bad(f"images[{i}]", f"cannot read {rel!r}: {exc}") from exc
    row: dict[str, Any] = {
        "example_id": s.id,
        "task_name": raw.get("task_name") or s.task,
        "dataset_name": s.source,
    }
    if kind == "caption_foil" and s.format == "binary":
        if s.answer not in BINARY_CHOICES or not s.statement.strip():
            raise bad("answer", f"a binary row needs a statement and a Yes/No answer, has {s.answer!r}")
        true = s.answer == BINARY_CHOICES[0]
        row |= {"caption": s.statement if true else None, "foil": None if true else s.statement, "image": images[0]}
    elif kind == "caption_foil":
        if len(s.choices) != 2 or s.answer not in s.choices:
            raise bad("choices", f"caption/foil needs 2 choices including the answer, has {s.choices!r}")
        if len(images) != 1:
            raise bad("images", f"caption/foil needs exactly 1 image, has {len(images)}")
        foil = s.choices[1] if s.answer == s.choices[0] else s.choices[0]
        row |= {"caption": s.answer, "foil": foil, "image": images[0]}
    else:
        if s.answer not in s.choices:
            raise bad("answer", f"{s.answer!r} is not among choices")
        row |= {"question": s.question, "options": list(s.choices), "answer": s.answer, "images": images}
    if is_test:
        extra = sorted(set(s.demo_keys) - set(DEMO_KEY_COLUMNS.values()))
        if extra:
            raise bad("demo_keys", f"strategies {extra} have no column in the FewMMBench layout")
        for column, strategy in DEMO_KEY_COLUMNS.items():
            row[column] = list(s.demo_keys.get(strategy, []))
    else:
        r = s.rationale
        row["cot_info"] = {"reasonings": r.reasoning, "answer": r.answer} if r else None
    return row


def _readme(configs: list[str], description: str, left_out: dict[str, str]) -> str:
    lines = ["---", "configs:"]
    for config in configs:
        lines += [
            f"- config_name: {config}",
            "  data_files:",
            f"  - split: {SPLIT}",
            f"    path: {config}/{SPLIT}-*",
        ]
    lines += ["---", "", "# FewMMBench (written by mmctx)", ""]
    if description:
        lines += [description, ""]
    if left_out:
        lines += [f"{len(left_out)} sample(s) have no row in this layout and were left out:", ""]
        lines += [f"- `{sid}`: {reason}" for sid, reason in left_out.items()] + [""]
    return "\n".join(lines)
