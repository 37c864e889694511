"""Converters for FewMMBench's ten source datasets, and their registry.

Each converter module defines ``INFO: SourceInfo`` and ``convert(ctx: SourceContext) -> Conversion``
and is listed in `SOURCE_MODULES`; `sources()` imports them lazily.
"""

from __future__ import annotations

import importlib

from mmctx.data.sources.base import Conversion, Converter, SourceContext, SourceError, SourceInfo

SOURCE_MODULES: dict[str, str] = {
    "valse": "mmctx.data.sources.valse",
    "aro": "mmctx.data.sources.aro",
    "vsr": "mmctx.data.sources.vsr",
    "whatsup": "mmctx.data.sources.whatsup",
    "seedbench": "mmctx.data.sources.seedbench",
    "mmbench": "mmctx.data.sources.mmbench",
    "mme": "mmctx.data.sources.mme",
    "cvbench": "mmctx.data.sources.cvbench",
    "milebench": "mmctx.data.sources.milebench",
    "gvtbench": "mmctx.data.sources.gvtbench",
}


def source(name: str) -> tuple[SourceInfo, Converter]:
    try:
        module = importlib.import_module(SOURCE_MODULES[name])
    except KeyError:
        raise ValueError(f"unknown source {name!r}; known: {sorted(SOURCE_MODULES)}") from None
    return module.INFO, module.convert


def sources() -> dict[str, tuple[SourceInfo, Converter]]:
    return {name: source(name) for name in SOURCE_MODULES}


__all__ = ["Conversion", "Converter", "SourceContext", "SourceError", "SourceInfo", "source", "sources"]
