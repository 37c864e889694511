"""Where the shipped reference checkpoints live inside the package, and a clear error when one is missing."""

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
        if name == VLM_NAME:
            raise MissingReferenceModel(
                "builtin:shapes-vlm is not shipped yet (no trained one meets its quality bars); train one with "
                "`mmctx train-reference --only vlm --out DIR` and pass `--model DIR/shapes-vlm`"
            )
        raise MissingReferenceModel(
            f"the shipped checkpoint {folder} is missing; train one with `mmctx train-reference --only clip --out DIR` "
            "and pass `--encoder clip:DIR/shapes-clip`"
        )
    return folder
