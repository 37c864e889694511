"""Backends register themselves: a spec's prefix names the backend, its options dataclass what it takes.

A backend is a class (or a factory) decorated with `backend`, beside a frozen dataclass of its
options::

    @dataclass(frozen=True)
    class EchoOptions:
        letter: str = "A"

    @backend("echo", options=EchoOptions)
    class EchoBackend:
        def __init__(self, spec: str, options: EchoOptions): ...

**Which backend a spec names.** The text before the spec's first ``:`` names a registered
backend (``openai:``, ``vllm:``, a plugin's ``echo:``); every other spec — an HF id, a local
folder, ``builtin:<name>`` — goes to the default backend, ``hf``.

**Where backends come from.** The built-in ones (hf, openai, vllm) are imported the first time
their name is asked for, so an ``openai:`` run never imports torch. A third-party package adds
one with no edit to mmctx: it declares a Python entry point in group ``mmctx.backends``
(``echo = "my_package.echo:EchoBackend"``), loaded the first time its name is asked for.

**How a backend is built.** ``target.from_spec(spec, options)`` when the target defines
``from_spec`` (to parse its spec itself), else ``target(spec, options)``. Only the backend's own
options reach it.

**Options from flat values** (`options_for`: CLI flags, `mmctx.tasks.fewshot.evaluate`'s keyword
arguments). A value the chosen backend's dataclass has a field for is taken; ``None`` means not
set (the field's default applies). A value it has no field for is refused with
`BackendOptionError`, naming the option and the backend — unless it was not set:

- ``None``, ``False`` (a switch left off) and ``"auto"`` (let the backend decide) are what the
  CLI's model flags default to (``--device auto``, ``--dtype auto``, no
  ``--trust-remote-code``, no ``--quantization``), so they count as not set;
- `RUN_SETTINGS` (``batch_size``, ``device``) steer the run as well as the backend: the runner
  sends ``batch_size`` prompts per call and Ray places replicas by ``device``. A backend with
  the field takes them; one without ignores them (a server has no device).

So ``--quantization 4bit`` with an ``openai:`` model fails before anything loads, while
``--batch-size 32`` with it only changes how many prompts each call sends.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, TypeVar

from mmctx.models.base import Backend
from mmctx.models.spans import ModelError

ENTRY_POINT_GROUP = "mmctx.backends"
DEFAULT_BACKEND = "hf"
# Built-in backends, imported when first asked for (their modules register them).
BUILT_IN = {"hf": "mmctx.models.hf", "openai": "mmctx.models.openai", "vllm": "mmctx.models.vllm"}
# Flat values that steer the run as well as the backend: taken by a backend that has the field,
# ignored by one that has not, never refused.
RUN_SETTINGS = frozenset({"batch_size", "device"})

T = TypeVar("T")


class BackendOptionError(ModelError, ValueError):
    """A value was set that the chosen backend does not take."""


@dataclass(frozen=True)
class BackendEntry:
    """One registered backend: its name (the spec prefix), how to build it and what it takes."""

    name: str
    target: Callable[..., Backend]
    options: type  # a frozen dataclass
    sized_by_plan: bool = False  # told up front the most images one prompt holds (``max_images``)
    remote: bool = False  # runs elsewhere (a server): a replica of it needs no GPU here

    def build(self, spec: str, options: Any) -> Backend:
        if not isinstance(options, self.options):
            raise TypeError(f"the {self.name} backend takes {self.options.__name__}, not {type(options).__name__}")
        make = getattr(self.target, "from_spec", self.target)
        return make(spec, options)


_registry: dict[str, BackendEntry] = {}


def backend(name: str, *, options: type, sized_by_plan: bool = False, remote: bool = False) -> Callable[[T], T]:
    """Register the decorated class (or factory) as the backend for specs ``<name>:…``.

    ``options`` is the frozen dataclass of what the backend takes; ``sized_by_plan``: a run
    tells it the most images one prompt holds (``max_images``) before it starts; ``remote``:
    it calls a server, so distributed runs give its replicas no GPU.
    """
    if not (dataclasses.is_dataclass(options) and options.__dataclass_params__.frozen):  # type: ignore[attr-defined]
        raise TypeError(f"backend {name!r}: options must be a frozen dataclass, not {options!r}")

    def register(target: T) -> T:
        entry = BackendEntry(name, target, options, sized_by_plan, remote)  # type: ignore[arg-type]
        _add(entry)
        target.backend_entry = entry  # type: ignore[attr-defined] - how an entry point's object is recognised
        return target

    return register


def _add(entry: BackendEntry) -> None:
    module = getattr(entry.target, "__module__", None)
    if entry.name in BUILT_IN and module != BUILT_IN[entry.name]:
        raise ValueError(f"backend name {entry.name!r} is mmctx's own; register under another name")
    known = _registry.get(entry.name)
    if known is not None and _origin(known.target) != _origin(entry.target):
        raise ValueError(
            f"backend {entry.name!r} is already registered by {_origin(known.target)}; "
            f"{_origin(entry.target)} cannot take its name"
        )
    _registry[entry.name] = entry


def _origin(target: Any) -> str:
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', repr(target))}"


def spec_prefix(spec: str) -> str | None:
    """The backend name a spec starts with (``"openai"`` for ``openai:gpt-4o``), or None."""
    prefix, colon, _ = spec.partition(":")
    return prefix if colon and prefix else None


def backend_entry(spec: str) -> BackendEntry:
    """The registered backend a spec names; the default (HF) backend for any other spec."""
    prefix = spec_prefix(spec)
    if prefix is not None:
        found = _find(prefix)
        if found is not None:
            return found
    found = _find(DEFAULT_BACKEND)
    assert found is not None, "the HF backend registers itself"
    return found


def _find(name: str) -> BackendEntry | None:
    if name in _registry:
        return _registry[name]
    if name in BUILT_IN:
        importlib.import_module(BUILT_IN[name])
        return _registry[name]
    return _from_entry_point(name)


def _from_entry_point(name: str) -> BackendEntry | None:
    """A backend a package declares in group ``mmctx.backends``; importing it registers it."""
    for point in entry_points(group=ENTRY_POINT_GROUP, name=name):
        target = point.load()
        # Its own entry, not one inherited from a decorated base class.
        entry = getattr(target, "__dict__", {}).get("backend_entry")
        if not isinstance(entry, BackendEntry):
            raise TypeError(
                f"entry point {name} = {point.value!r} (group {ENTRY_POINT_GROUP}) is not a class or "
                "factory decorated with @mmctx.models.backend"
            )
        if name not in _registry:  # registered under another name by its decorator: the entry point's name wins too
            _add(dataclasses.replace(entry, name=name))
        return _registry[name]
    return None


def registered() -> list[str]:
    """Every backend name a spec may start with: built-in, registered and declared by installed packages."""
    declared = {point.name for point in entry_points(group=ENTRY_POINT_GROUP)}
    return sorted({*BUILT_IN, *_registry, *declared})


def sized_by_plan(spec: str) -> bool:
    """Whether the backend for ``spec`` must be told the most images one prompt holds (``max_images``)."""
    return backend_entry(spec).sized_by_plan


def is_remote(spec: str) -> bool:
    """Whether the backend for ``spec`` calls a server rather than running a model here."""
    return backend_entry(spec).remote


# ---- options -----------------------------------------------------------------------------------


def not_set(value: Any) -> bool:
    """Whether a flat value counts as not set: None, a switch left off (False), or ``"auto"``."""
    return value is None or value is False or (isinstance(value, str) and value == "auto")


def options_for(spec: str, values: Mapping[str, Any]) -> Any:
    """The options of the backend ``spec`` names, from flat values (see the module's docstring).

    Raises `BackendOptionError`, naming each option and the backend, for a value that was set
    and that the backend does not take.
    """
    entry = backend_entry(spec)
    fields = {f.name for f in dataclasses.fields(entry.options)}
    taken = {name: value for name, value in values.items() if name in fields and value is not None}
    refused = {
        name: value
        for name, value in values.items()
        if name not in fields and name not in RUN_SETTINGS and not not_set(value)
    }
    if refused:
        given = ", ".join(f"{name}={value!r}" for name, value in refused.items())
        hints = getattr(entry.options, "hints", {})
        notes = "".join(f"; {hints[name]}" for name in refused if name in hints)
        raise BackendOptionError(
            f"{spec}: the {entry.name} backend does not take {given}{notes}. "
            f"Its options: {', '.join(sorted(fields)) or 'none'}"
        )
    return entry.options(**taken)


def option_values(options: Any) -> dict[str, Any]:
    """Every field of an options record, by name (shallow: nested records stay records)."""
    return {f.name: getattr(options, f.name) for f in dataclasses.fields(options)}


def changed_values(options: Any) -> dict[str, Any]:
    """The fields of an options record that differ from the dataclass's defaults: what was set."""
    changed = {}
    for f in dataclasses.fields(options):
        value = getattr(options, f.name)
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            changed[f.name] = value
            continue
        if value != default:
            changed[f.name] = value
    return changed


def load_backend(spec: str, options: Any = None, **values: Any) -> Backend:
    """The backend ``spec`` names, built with ``options`` (its options dataclass).

    Instead of ``options``, flat keyword values may be given: they go through `options_for`
    (values the backend does not take are refused unless not set).
    """
    if options is not None and values:
        raise TypeError("give load_backend either an options record or keyword values, not both")
    if options is None:
        options = options_for(spec, values)
    return backend_entry(spec).build(spec, options)
