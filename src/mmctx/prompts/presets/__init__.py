"""Prompt presets: the wording a run asks its samples in, kept as YAML data.

A preset is chosen by a built-in name (a file ``<name>.yaml`` in this folder) or by the path of
the user's own YAML file, and recorded in every run by its name and `Preset.fingerprint`.

Each sample format has an item template (what a user turn says about one sample) and three
answer styles:

- ``letter``: generation without reasoning; the model answers with the option's letter
  (``Yes``/``No`` for binary verification).
- ``cot``: generation with reasoning; the model reasons step by step, then ends with a line
  ``Answer: <letter>``. Demonstrations show their rationale followed by that line.
- ``text``: option ranking by log-likelihood (the ``ppl`` scorer). The scored continuation is
  the option's own text, so demonstrations answer with their option text too: the demo turns
  show the model exactly the form of answer whose likelihood is measured.

The file format (every key but ``formats``'s entries is optional when the file ``extends``
another preset, whose values it inherits and overrides key by key)::

    name: my-wording            # default: the file's stem; may not be a built-in's name
    extends: fewmmbench         # a built-in name, or a path relative to this file
    description: ...
    preamble: ...               # the system turn ("" for none)
    single_turn: false          # true: demos and query in one user turn
    labels: [A, B, C, D]        # option labels, in shown order
    formats:
      mcqa:                     # a sample format: mcqa, caption_foil or binary
        item: "{question}\\n{options}"   # fields: question, options, statement, context
        instructions: {letter: ..., cot: ..., text: ...}

Under ``extends``, a format given in the file overrides its base's item and, style by style,
its instructions; formats not named are inherited unchanged. A name given on the command line
is looked up among the built-ins first, so a file called ``fewmmbench`` in the current folder
is reached as ``./fewmmbench``.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import string
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal, get_args

import yaml

from mmctx.schema import FORMATS

AnswerStyle = Literal["letter", "cot", "text"]
ANSWER_STYLES: tuple[str, ...] = get_args(AnswerStyle)
# What `mmctx.prompts.build.item_text` passes to an item template's ``str.format``.
ITEM_FIELDS: tuple[str, ...] = ("question", "options", "statement", "context")
# Open-answer items have no options to label: no preset asks them (`preset_problem` says so too).
PRESET_FORMATS: tuple[str, ...] = tuple(f for f in FORMATS if f != "open")
SUFFIXES = (".yaml", ".yml")
_KEYS = ("name", "extends", "description", "preamble", "single_turn", "labels", "formats")
_FORMAT_KEYS = ("item", "instructions")


class PresetError(ValueError):
    """A preset file or name that cannot be used; the message names the file and every bad key."""


@dataclass(frozen=True)
class FormatTemplate:
    """How one sample format is asked, and the closing instruction per answer style."""

    item: str  # str.format fields: ITEM_FIELDS
    instructions: dict[str, str]


@dataclass(frozen=True)
class Preset:
    name: str
    preamble: str
    formats: dict[str, FormatTemplate]
    single_turn: bool = False
    labels: tuple[str, ...] = ("A", "B", "C", "D", "E", "F", "G", "H")
    description: str = ""

    def content(self) -> dict[str, Any]:
        """Everything that shapes a prompt, as plain data (name and description do not)."""
        formats = {fmt: asdict(template) for fmt, template in self.formats.items()}
        return {
            "preamble": self.preamble,
            "single_turn": self.single_turn,
            "labels": list(self.labels),
            "formats": formats,
        }

    def fingerprint(self) -> str:
        """SHA-256 of `content`: equal for presets that render every prompt alike, whatever their file."""
        canonical = json.dumps(self.content(), sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(canonical.encode()).hexdigest()

    def to_yaml(self) -> str:
        """A self-contained preset file (no ``extends``) that `get_preset` loads back to this preset.

        A built-in's copy keeps the built-in's name, which a file may not take: rename it to edit it.
        """
        data = {"name": self.name, "description": self.description} | self.content()
        return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=1_000_000)


class _Dumper(yaml.SafeDumper):
    """Writes a string that holds a line break double-quoted with ``\\n``, as the built-in files do."""

    def represent_str(self, data: str) -> yaml.ScalarNode:
        return self.represent_scalar("tag:yaml.org,2002:str", data, style='"' if "\n" in data else None)


_Dumper.add_representer(str, _Dumper.represent_str)


@dataclass(frozen=True)
class _Source:
    """Where a preset's text comes from: a built-in (``folder`` None) or a user's file."""

    label: str  # how messages name it
    stem: str
    text: str
    folder: Path | None


def _builtin_source(name: str) -> _Source | None:
    for suffix in SUFFIXES:
        entry = resources.files(__name__).joinpath(f"{name}{suffix}")
        if entry.is_file():
            return _Source(f"built-in preset {name!r}", name, entry.read_text(encoding="utf-8"), None)
    return None


def _file_source(path: Path) -> _Source:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PresetError(f"{path}: no such preset file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PresetError(f"{path}: cannot be read: {exc}") from None
    return _Source(str(path), path.stem, text, path.resolve().parent)


def _names_a_file(ref: str) -> bool:
    return ref.endswith(SUFFIXES) or "/" in ref or "\\" in ref


def _reference(ref: str, relative_to: Path | None) -> _Source:
    """The preset ``ref`` names: a built-in name, else a file (relative to ``relative_to``)."""
    if not _names_a_file(ref):
        found = _builtin_source(ref)
        if found is not None:
            return found
    path = Path(ref).expanduser()
    if relative_to is not None and not path.is_absolute():
        path = relative_to / path
    if _names_a_file(ref) or path.is_file():
        return _file_source(path)
    raise PresetError(
        f"unknown prompt preset {ref!r}; choose from {sorted(PRESETS)} or give the path of a preset .yaml file"
    )


def _suggest(key: str, known: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(key, known, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _item_problems(item: str) -> list[str]:
    """What is wrong with an item template, checked the way ``str.format`` will read it."""
    try:
        parsed = list(string.Formatter().parse(item))
    except ValueError as exc:
        return [f"not a valid str.format template: {exc} (write a literal brace as {{{{ or }}}})"]
    fields = [field for _, field, _, _ in parsed if field is not None]
    offered = ", ".join("{" + f + "}" for f in ITEM_FIELDS)
    return [
        f"field {{{field}}} is not one an item template is given; use {offered}"
        for field in fields
        if field not in ITEM_FIELDS
    ]


def _check_format(fmt: str, entry: Any, base: FormatTemplate | None, where: str) -> list[str]:
    if fmt not in PRESET_FORMATS:
        return [f"{where}: unknown sample format{_suggest(fmt, PRESET_FORMATS)}; presets ask {list(PRESET_FORMATS)}"]
    if not isinstance(entry, dict):
        return [f"{where}: must be a mapping with keys {list(_FORMAT_KEYS)}"]
    problems = [f"{where}.{k}: unknown key{_suggest(k, _FORMAT_KEYS)}" for k in entry if k not in _FORMAT_KEYS]
    item = entry.get("item", base.item if base else None)
    if item is None:
        problems.append(f"{where}.item: missing")
    elif not isinstance(item, str):
        problems.append(f"{where}.item: must be a string")
    else:
        problems += [f"{where}.item: {p}" for p in _item_problems(item)]
    given = entry.get("instructions", {})
    if not isinstance(given, dict):
        return problems + [f"{where}.instructions: must be a mapping of answer style to instruction"]
    for style, text in given.items():
        if style not in ANSWER_STYLES:
            problems.append(f"{where}.instructions.{style}: unknown answer style; styles are {list(ANSWER_STYLES)}")
        elif not isinstance(text, str):
            problems.append(f"{where}.instructions.{style}: must be a string")
    inherited = base.instructions if base else {}
    for style in ANSWER_STYLES:
        if style not in given and style not in inherited:
            problems.append(f"{where}.instructions: missing the instruction for answer style {style!r}")
    return problems


def _is_label(value: Any) -> bool:
    # YAML reads `[1, 2, 3]` as numbers: whole numbers are taken as their digits. A YAML boolean
    # (`[Yes, No]` unquoted) is refused rather than turned into "True".
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, str) and value != "")


def _check_top(data: dict, base: Preset | None) -> list[str]:
    problems = [f"{k}: unknown key{_suggest(str(k), _KEYS)}" for k in data if k not in _KEYS]
    for key in ("name", "description", "preamble", "extends"):
        if key in data and not isinstance(data[key], str):
            problems.append(f"{key}: must be a string")
    if data.get("name") == "":
        problems.append("name: must not be empty")
    if "single_turn" in data and not isinstance(data["single_turn"], bool):
        problems.append("single_turn: must be true or false")
    labels = data.get("labels")
    if labels is not None:
        if not isinstance(labels, list) or not labels or not all(_is_label(x) for x in labels):
            problems.append("labels: must be a non-empty list of non-empty strings (or whole numbers)")
        elif len({str(x) for x in labels}) != len(labels):
            problems.append("labels: must be distinct (an answer names its option by label)")
    if base is None:
        problems += [f"{key}: missing (required unless the preset extends another)" for key in ("preamble", "formats")
                     if key not in data]  # fmt: skip
    formats = data.get("formats", {})
    if not isinstance(formats, dict) or (base is None and not formats):
        problems.append("formats: must be a non-empty mapping of sample format to its template")
    return problems


def _parse(source: _Source, chain: tuple[str, ...] = ()) -> Preset:
    """The preset ``source`` holds, with its ``extends`` chain resolved, or a `PresetError`."""
    if source.label in chain:
        raise PresetError(f"{source.label}: extends itself through {' -> '.join(chain + (source.label,))}")
    try:
        data = yaml.safe_load(source.text)
    except yaml.YAMLError as exc:
        raise PresetError(f"{source.label}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise PresetError(f"{source.label}: a preset file is a mapping with keys {list(_KEYS)}")
    base = None
    if isinstance(data.get("extends"), str):
        base = _parse(_reference(data["extends"], source.folder), chain + (source.label,))
    problems = _check_top(data, base)
    formats = data.get("formats") if isinstance(data.get("formats"), dict) else {}
    for fmt, entry in formats.items():
        problems += _check_format(str(fmt), entry, base.formats.get(fmt) if base else None, f"formats.{fmt}")
    name = data.get("name", source.stem)
    if source.folder is not None and name in _builtin_names():
        problems.append(f"name: {name!r} is a built-in preset's name; give this preset its own (or drop the key)")
    if problems:
        raise PresetError(f"{source.label} is not a valid preset:\n" + "\n".join(f"  {p}" for p in problems))
    return _merged(name, data, base)


def _merged(name: str, data: dict, base: Preset | None) -> Preset:
    """``data``'s values over ``base``'s (checked already): formats by format, instructions by style."""
    formats = dict(base.formats) if base else {}
    for fmt, entry in data.get("formats", {}).items():
        inherited = formats.get(fmt)
        formats[fmt] = FormatTemplate(
            item=entry.get("item", inherited.item if inherited else ""),
            instructions={**(inherited.instructions if inherited else {}), **entry.get("instructions", {})},
        )
    fallback = base or Preset(name=name, preamble="", formats={})
    return Preset(
        name=name,
        preamble=data.get("preamble", fallback.preamble),
        formats=formats,
        single_turn=data.get("single_turn", fallback.single_turn),
        labels=tuple(str(label) for label in data.get("labels", fallback.labels)),
        description=data.get("description", fallback.description),
    )


def _builtin_names() -> list[str]:
    entries = resources.files(__name__).iterdir()
    return sorted(e.name.rsplit(".", 1)[0] for e in entries if e.name.endswith(SUFFIXES))


def load_preset(path: str | Path) -> Preset:
    """The preset in the YAML file at ``path``, validated, its ``extends`` resolved."""
    return _parse(_file_source(Path(path).expanduser()))


def get_preset(name_or_path: str | Path) -> Preset:
    """A built-in preset by name, or the preset in the user's YAML file at that path."""
    if isinstance(name_or_path, Path):
        return load_preset(name_or_path)
    if name_or_path in PRESETS:
        return PRESETS[name_or_path]
    return _parse(_reference(name_or_path, None))


def register_preset(preset: Preset) -> Preset:
    """Make ``preset`` reachable by name (e.g. from a task package); a built-in name is refused."""
    if preset.name in _builtin_names():
        raise PresetError(f"{preset.name!r} is a built-in preset's name; give this preset its own")
    PRESETS[preset.name] = preset
    return preset


PRESETS: dict[str, Preset] = {name: _parse(_builtin_source(name)) for name in _builtin_names()}  # type: ignore[arg-type]
