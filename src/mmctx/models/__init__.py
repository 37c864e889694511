"""Backends behind one protocol; `load_backend` turns a model spec into one.

Specs:
  - ``builtin:shapes-clip`` / ``builtin:shapes-vlm``: reference models trained by
    ``mmctx train-reference``, shipped inside the package (`mmctx.models.shipped`; if a folder is
    missing, an error names the command that trains it). shapes-vlm is the default model.
  - ``builtin:tiny-idefics3`` / ``builtin:tiny-llava``: a tiny random-weight checkpoint built
    offline on first use (chance-level; for pipelines and tests, not for scores).
  - ``openai:<model>`` or ``openai:<model>@<base_url>``: an OpenAI-compatible chat-completions
    server (vLLM, SGLang, hosted APIs); base URL from the spec, ``base_url=`` or
    ``OPENAI_BASE_URL``; key from the environment, never the spec (see `mmctx.models.openai`).
  - ``vllm:<model>`` (an HF id, a local folder or ``builtin:<name>``): offline vLLM in this
    process (``pip install 'mmctx[vllm]'``, CUDA; see `mmctx.models.vllm`).
  - ``<name>:<rest>`` for a backend a package registers (`mmctx.models.registry`: the
    ``@backend`` decorator, entry points in group ``mmctx.backends``).
  - anything else: an HF model id or a local folder, loaded by the HF transformers backend.

Each backend takes its own options (a frozen dataclass beside its class: `HFOptions`,
`OpenAIOptions`, `VLLMOptions`); `options_for` builds them from flat CLI values and refuses a
value the chosen backend does not take.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from mmctx.models.base import (
    Backend,
    Capabilities,
    GenerateRequest,
    Generation,
    ModelInfo,
    OptionScores,
    ScoreRequest,
)
from mmctx.models.registry import BackendOptionError, backend, load_backend, options_for, sized_by_plan

BUILTIN_PREFIX = "builtin:"
BUILTINS = {"tiny-idefics3": "idefics3", "tiny-llava": "llava"}  # built on first use: name -> family
SHIPPED = {"shapes-vlm": "chat", "shapes-clip": "encoder"}  # trained, inside the package (`mmctx.models.shipped`)
DEFAULT_MODEL = "builtin:shapes-vlm"  # trained on shapes-world: the demo's scores mean something


def cache_root() -> Path:
    return Path(os.environ.get("MMCTX_CACHE", Path.home() / ".cache" / "mmctx"))


def builtin_kind(name: str) -> str | None:
    """``"chat"`` or ``"encoder"`` for a built-in model's name; None for an unknown one."""
    return "chat" if name in BUILTINS else SHIPPED.get(name)


def resolve_builtin(spec: str, kind: str = "chat") -> Path:
    """The local folder of a built-in model of ``kind``, building it the first time it is asked for."""
    from mmctx.models.tiny import build_tiny_vlm

    name = spec.removeprefix(BUILTIN_PREFIX)
    found = builtin_kind(name)
    if found is None:
        known = [BUILTIN_PREFIX + n for n in (*SHIPPED, *BUILTINS)]
        raise ValueError(f"unknown built-in model {spec!r}; choose from {known}")
    if found != kind:
        noun = {"chat": "a chat model", "encoder": "an encoder"}
        same = [BUILTIN_PREFIX + n for n in (*SHIPPED, *BUILTINS) if builtin_kind(n) == kind]
        raise ValueError(f"{spec} is {noun[found]}, not {noun[kind]}; built-in {kind} models: {same}")
    if name in SHIPPED:
        from mmctx.models.shipped import shipped

        return shipped(name)
    folder = cache_root() / "models" / name
    if not (folder / "config.json").exists():
        # Each process builds in its own folder; the first rename wins (shards and Ray workers
        # may ask at the same time).
        tmp = folder.with_name(f"{folder.name}.partial-{os.getpid()}")
        build_tiny_vlm(tmp, family=BUILTINS[name], seed=0)
        try:
            tmp.rename(folder)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    return folder


__all__ = [
    "Backend",
    "BackendOptionError",
    "Capabilities",
    "DEFAULT_MODEL",
    "GenerateRequest",
    "Generation",
    "ModelInfo",
    "OptionScores",
    "SHIPPED",
    "ScoreRequest",
    "backend",
    "load_backend",
    "options_for",
    "resolve_builtin",
    "sized_by_plan",
]
