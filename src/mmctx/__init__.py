"""mmctx: multimodal in-context benchmarks.

The public API (`mmctx.api`): ``mmctx.evaluate``, ``mmctx.score``, ``mmctx.report``,
``mmctx.view``, ``mmctx.judge_cot``, with tasks from `mmctx.tasks` (``mmctx.Task``, ``mmctx.task``). They are imported
on first use, so ``import mmctx`` stays light.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_API = {
    "evaluate": "mmctx.api",
    "score": "mmctx.api",
    "report": "mmctx.api",
    "view": "mmctx.api",
    "judge_cot": "mmctx.api",
    "EvalResult": "mmctx.api",
    "ContextOptions": "mmctx.api",
    "Task": "mmctx.tasks",
    "task": "mmctx.tasks",
    "get_task": "mmctx.tasks",
    "task_names": "mmctx.tasks",
    "jsonl_task": "mmctx.tasks",
}


def __getattr__(name: str) -> Any:
    import importlib

    if name in _API:
        return getattr(importlib.import_module(_API[name]), name)
    # Submodules (mmctx.schema, mmctx.data, …) keep resolving the ordinary way.
    raise AttributeError(f"module 'mmctx' has no attribute {name!r}")


__all__ = [*_API, "__version__"]
