"""The `mmctx` command line: one module per group of commands, each only parsing arguments and
calling `mmctx.api` (or, for building and curating benchmarks, the package that does the work)."""

from __future__ import annotations

import sys

# isort: off
# Each module registers its commands; the help lists them in this order.
from mmctx.cli import evaluate, benchmarks, curation, models, demo  # noqa: F401

# isort: on
from mmctx.cli.annotate import app as annotate_app
from mmctx.cli.clbench import app as clbench_app
from mmctx.cli.common import app

app.add_typer(annotate_app, name="annotate")
app.add_typer(clbench_app, name="clbench")


def main() -> None:  # pragma: no cover
    sys.exit(app())


__all__ = ["app", "main"]
