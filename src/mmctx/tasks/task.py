"""A task, and the registry that finds one by name, by entry point or in a Python file.

A `Task` says everything about a benchmark except the model: where its samples come from (and
how to write them where a run can read them), how a sample becomes a prompt (the preset, or the
context-learning templates), the settings grid it runs by default, the scorers, and which report
layout its results take. FewMMBench-style few-shot, CLBench-V context learning and "any JSONL
with images" are tasks on the same machinery (`mmctx.tasks.builtin`).

A task is registered by a function decorated with `@task` that returns one (the function's
arguments, if any, are the task's options: ``get_task("fewmmbench", path=...)``). Another package
adds tasks through the Python entry-point group ``mmctx.tasks`` (name -> ``"module:function"``);
a single file adds them by being passed as ``path/to/file.py`` (or ``file.py@name``).
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Literal

from mmctx.prompts.presets import Preset
from mmctx.run.plan import GenerationLimits
from mmctx.run.settings import DEFAULT_SCORERS, PAPER_GRID

TaskKind = Literal["fewshot", "context"]
ENTRY_POINT_GROUP = "mmctx.tasks"


@dataclass(frozen=True)
class Task:
    """A benchmark and how it is run; see the module docstring.

    ``prepare(work)`` returns the folder (few-shot: a benchmark folder; context: a suite file or
    folder) a run reads. A task whose samples already lie in such a folder returns it; one that
    builds its samples writes them under ``work`` (a folder inside the run) and returns that, so
    a run folder holds what it was run on and resumes on the same bytes.
    """

    name: str
    kind: TaskKind
    prepare: Callable[[Path], Path]
    preset: str | Preset = "fewmmbench"  # few-shot: how a sample becomes a prompt
    grid: tuple[str, ...] = tuple(s.name for s in PAPER_GRID)  # few-shot settings run by default
    scorers: tuple[str, ...] = DEFAULT_SCORERS
    limits: GenerationLimits = field(default_factory=GenerationLimits)
    report: Literal["fewmmbench", "clbench"] = "fewmmbench"  # which tables its results take
    description: str = ""


TaskFactory = Callable[..., Task]
_REGISTRY: dict[str, TaskFactory] = {}
# While a task file loads, its tasks go here instead: a file's names are its own, never global.
_FILE_SCOPE: list[dict[str, TaskFactory]] = []


def task(factory: TaskFactory | None = None, *, name: str | None = None):
    """Register a function returning a `Task` under ``name`` (default: the function's name with
    ``_`` written ``-``). Usable bare (``@task``) or with a name (``@task(name="my-bench")``)."""

    def register(fn: TaskFactory) -> TaskFactory:
        key = name or fn.__name__.replace("_", "-")
        target = _FILE_SCOPE[-1] if _FILE_SCOPE else _REGISTRY
        known = target.get(key)
        if known is not None and known is not fn:
            raise ValueError(f"task {key!r} is registered twice ({known.__module__} and {fn.__module__})")
        target[key] = fn
        fn.task_name = key  # type: ignore[attr-defined]
        return fn

    return register(factory) if factory is not None else register


class TaskNotFound(LookupError):
    """No registered task, entry point or task file by that name."""


class TaskFileError(ValueError):
    """A task file that raises while it loads."""


def _load_entry_points() -> None:
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in _REGISTRY:
            continue
        try:
            fn = ep.load()
        except Exception as exc:  # a broken plug-in names itself instead of hiding every task
            raise TaskNotFound(
                f"entry point {ep.name!r} ({ep.value}) of group {ENTRY_POINT_GROUP} fails to load: {exc}"
            ) from exc
        task(fn, name=ep.name)


def task_names() -> list[str]:
    """Every task known now: built-in (registered when `mmctx.tasks` is imported) and entry points."""
    _load_entry_points()
    return sorted(_REGISTRY)


def load_task_file(path: Path, name: str | None = None) -> TaskFactory:
    """The `@task` function of a Python file (the one named ``name`` when the file has several)."""
    path = Path(path)
    if not path.is_file():
        raise TaskNotFound(f"{path}: no such task file")
    module_name = f"mmctx_task_file_{abs(hash(path.resolve()))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling look their module up here
    _FILE_SCOPE.append({})
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's file: its fault is named by file (and line), not a traceback
        line = f" (line {exc.lineno})" if isinstance(exc, SyntaxError) and exc.lineno else ""
        raise TaskFileError(f"{path}{line}: the task file fails to load: {type(exc).__name__}: {exc}") from exc
    finally:
        found = _FILE_SCOPE.pop()
    if name is not None:
        if name not in found:
            raise TaskNotFound(f"{path} defines no task {name!r}; it defines {sorted(found)}")
        return found[name]
    if len(found) != 1:
        raise TaskNotFound(f"{path} defines {len(found)} tasks {sorted(found)}; name one as {path}@NAME")
    return next(iter(found.values()))


def get_task(spec: str | Path, **options) -> Task:
    """The task ``spec`` names, built with ``options``: a registered name, ``file.py`` or ``file.py@name``."""
    text = str(spec)
    file, _, inner = text.partition("@")
    if file.endswith(".py"):
        factory = load_task_file(Path(file), inner or None)
    else:
        names = task_names()
        if text not in _REGISTRY:
            raise TaskNotFound(
                f"unknown task {text!r}; known: {names} (or a path: a benchmark folder, a .jsonl, a .py)"
            )
        factory = _REGISTRY[text]
    accepted = inspect.signature(factory).parameters
    unknown = [k for k in options if k not in accepted and not any(p.kind == p.VAR_KEYWORD for p in accepted.values())]
    if unknown:
        raise TypeError(f"task {text!r} takes no option(s) {unknown}; it takes {list(accepted)}")
    missing = [k for k, p in accepted.items() if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD,
               p.KEYWORD_ONLY) and k not in options]  # fmt: skip
    if missing:
        raise TypeError(f"task {text!r} needs the option(s) {missing} (as --task-option {missing[0]}=...)")
    _check_option_types(text, factory, options)
    built = factory(**options)
    if not isinstance(built, Task):
        raise TypeError(f"task {text!r} returned {type(built).__name__}, not a Task")
    return built


def _check_option_types(name: str, factory: TaskFactory, options: dict) -> None:
    """Refuse an option whose value the factory's annotation rules out (``queries_per_task="abc"``),
    before the task runs; a path may be given as a string, a float as an int."""
    try:
        hints = typing.get_type_hints(factory)
    except Exception:  # an annotation that does not resolve: nothing to check against
        return
    for key, value in options.items():
        hint = hints.get(key)
        if hint is None or value is None:
            continue
        allowed = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
        allowed = tuple(t for t in allowed if isinstance(t, type))
        if not allowed:
            continue
        widened = allowed + ((str,) if Path in allowed else ()) + ((int,) if float in allowed else ())
        if isinstance(value, bool) and bool not in allowed or not isinstance(value, widened):
            names = " | ".join(t.__name__ for t in allowed)
            raise TypeError(f"task {name!r} option {key}: expected {names}, got {value!r}")
