"""What the stage-2 benchmarks share: the shipped VLM, a small shapes-world benchmark, and its
images' tokens cached by the VLM's tower, as `train_shapes_vlm` caches them."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from mmctx_reference.vlm import QueryPools, Renderer, _pixels, cached_image_tokens, load_for_training

from mmctx.data.shapes import build_benchmark
from mmctx.models.shipped import VLM_NAME, shipped
from mmctx.schema import Benchmark


@dataclass
class Stage2:
    model: Any
    bench: Benchmark
    renderer: Renderer
    pools: QueryPools
    images: dict[str, torch.Tensor]
    pad: int


@contextmanager
def stage2(queries_per_task: int = 20) -> Iterator[Stage2]:
    model, processor, adapter = load_for_training(shipped(VLM_NAME))
    with tempfile.TemporaryDirectory() as tmp:
        bench = build_benchmark(Path(tmp), queries_per_task=queries_per_task, seed=0)
        renderer = Renderer(processor, adapter, bench.root)
        model.eval()
        images = cached_image_tokens(model, *_pixels(renderer, [*bench.queries, *bench.demos]))
        yield Stage2(model, bench, renderer, QueryPools(bench), images, processor.tokenizer.pad_token_id)


def language_parameters(model) -> list:
    """What stage 2 trains: the language model and its head (not the tower, not the connector)."""
    return [p for name, p in model.named_parameters() if "text_model" in name or "lm_head" in name]


def train_only(model, params: list) -> list:
    """Freezes ``model`` but ``params``, and returns them."""
    model.requires_grad_(False)
    for p in params:
        p.requires_grad_(True)
    return params
