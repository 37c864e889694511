"""Tiny, randomly initialised image-text-to-text checkpoints built offline, one per model family.

No weights can be downloaded on the machines mmctx is developed on, so tests and the built-in
demo model are real transformers checkpoints built here: a BPE tokenizer trained with
`tokenizers`, a tiny config of the family's real architecture, its real processor class and a
chat template that renders like the released checkpoint's, `save_pretrained`, and then loaded
back through the very same `from_pretrained` path as any hub model. Their weights are random:
a model built here answers at chance level.

A family is one module in this package that registers a `TinyFamily` with `register_tiny`; what
it must mirror of the release it names (template verbatim, the tokenizer's BOS behaviour, the
processor's text rewriting, the attention layout) is what a defect would hide behind.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mmctx.models.tiny.clip import CLIP_MAX_TOKENS, build_clip_tokenizer, build_tiny_clip
from mmctx.models.tiny.tokenizer import _BOS, _EOS, _PAD, _UNK, build_tokenizer

__all__ = [
    "CLIP_MAX_TOKENS", "FAMILIES", "TinyFamily", "TinySize", "build_clip_tokenizer", "build_tiny_clip",
    "build_tiny_vlm", "build_tokenizer", "register_tiny", "tiny_families", "_BOS", "_EOS", "_PAD", "_UNK",
]  # fmt: skip


@dataclass(frozen=True)
class TinySize:
    """How big a tiny checkpoint is: image side (px), language-model width and depth."""

    image_size: int = 64
    hidden: int = 64
    layers: int = 2


@dataclass(frozen=True)
class TinyFamily:
    """One buildable family.

    ``build(out, size)`` writes a complete checkpoint (weights, config, processor or its parts,
    tokenizer, chat template) to ``out``; torch is seeded before it is called. ``mirrors`` names
    the released checkpoint(s) whose template, tokenizer and processor settings it copies.
    """

    name: str
    mirrors: str
    build: Callable[[Path, TinySize], None]
    notes: str = ""


_REGISTRY: dict[str, TinyFamily] = {}


def register_tiny(family: TinyFamily) -> TinyFamily:
    if family.name in _REGISTRY:
        raise ValueError(f"tiny family {family.name!r} is registered twice")
    _REGISTRY[family.name] = family
    return family


def tiny_families() -> dict[str, TinyFamily]:
    """Every registered family by name, in name order (family modules are imported on first call)."""
    if not getattr(tiny_families, "loaded", False):
        for module in pkgutil.iter_modules(__path__):
            if module.name not in ("clip", "tokenizer", "parts"):
                importlib.import_module(f"{__name__}.{module.name}")
        tiny_families.loaded = True  # type: ignore[attr-defined]
    return dict(sorted(_REGISTRY.items()))


def build_tiny_vlm(
    out: Path,
    family: str = "idefics3",
    seed: int = 0,
    image_size: int = 64,
    hidden: int = 64,
    layers: int = 2,
) -> Path:
    """Write a tiny random-weight checkpoint of ``family`` (model + processor + chat template) to ``out``.

    ``hidden`` and ``layers`` size the language model; benchmarks use a larger one so that
    model compute, not Python overhead, dominates what they time.
    """
    import torch

    known = tiny_families()
    if family not in known:
        raise ValueError(f"unknown tiny family {family!r}; choose from {', '.join(known)}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    known[family].build(out, TinySize(image_size=image_size, hidden=hidden, layers=layers))
    return out


def __getattr__(name: str):
    # FAMILIES is computed on first use so that importing this package stays cheap.
    if name == "FAMILIES":
        return tuple(tiny_families())
    raise AttributeError(name)
