"""Where the shipped reference checkpoints live inside the package, and a clear error when one is missing.

The checkpoints are package data (``mmctx/reference_models/``), so ``builtin:shapes-vlm`` and
``clip:builtin:shapes-clip`` load with mmctx alone; training them is the separate
``mmctx-reference`` distribution (``reference/`` in the repository).
"""

from __future__ import annotations

from pathlib import Path

REFERENCE_MODELS = Path(__file__).resolve().parents[1] / "reference_models"
CLIP_NAME, VLM_NAME = "shapes-clip", "shapes-vlm"


class MissingReferenceModel(FileNotFoundError):
    """A shipped checkpoint is not on disk (a stripped install, or a checkout before training)."""


def shipped(name: str) -> Path:
    """The folder of the shipped ``shapes-clip`` or ``shapes-vlm`` checkpoint."""
    if name not in (CLIP_NAME, VLM_NAME):
        raise ValueError(f"no shipped reference model {name!r}; choose {CLIP_NAME} or {VLM_NAME}")
    folder = REFERENCE_MODELS / name
    if not (folder / "config.json").exists():
        part, use = (
            ("vlm", f"--model DIR/{VLM_NAME}") if name == VLM_NAME else ("clip", f"--encoder clip:DIR/{CLIP_NAME}")
        )
        raise MissingReferenceModel(
            f"the shipped checkpoint {folder} is missing; train one with "
            f"`mmctx train-reference --only {part} --out DIR` and pass `{use}`"
        )
    return folder
