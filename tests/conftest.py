"""Shared fixtures: tiny real checkpoints built offline, once per test session.

Nothing here reaches a network: the hub is switched off for the whole session, and every
model is built locally and loaded back through `from_pretrained`.
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest


@pytest.fixture(scope="session", autouse=True)
def _mmctx_cache(tmp_path_factory):
    """Built-in models are built into a per-session cache, never into the user's home."""
    os.environ["MMCTX_CACHE"] = str(tmp_path_factory.mktemp("mmctx-cache"))


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    from mmctx.models.tiny import FAMILIES, build_tiny_vlm

    root = tmp_path_factory.mktemp("tiny-models")
    return {family: build_tiny_vlm(root / family, family=family, seed=0) for family in FAMILIES}


@pytest.fixture(scope="session")
def shapes_bench(tmp_path_factory):
    """A small shapes-world benchmark, built once."""
    from mmctx.data.shapes import build_benchmark

    out = tmp_path_factory.mktemp("shapes-bench")
    build_benchmark(out, queries_per_task=2, seed=0)
    return out
