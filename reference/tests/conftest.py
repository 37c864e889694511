"""What the reference tests share with mmctx's: no network, and built-in models built into a
per-session cache, never into the user's home.

The package is importable from the checkout even where ``pip install -e ./reference`` was not
run, so mmctx's own test command runs these tests too.
"""

from __future__ import annotations

import os
import sys
from importlib.util import find_spec
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

if find_spec("mmctx_reference") is None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import pytest  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _mmctx_cache(tmp_path_factory):
    os.environ["MMCTX_CACHE"] = str(tmp_path_factory.mktemp("mmctx-cache"))
