"""`mmctx demo` prints the same tables as it always has (same seeds, same shipped model): the
golden file holds its stdout, progress lines aside. A change meant to move the demo's scores (a
different benchmark, model or default) re-captures it, and its commit says why."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

GOLDEN = Path(__file__).parent / "fixtures" / "demo_tables.md"


def test_demo_prints_the_golden_tables_and_writes_its_report_and_viewer(tmp_path):
    env = {**os.environ, "COLUMNS": "120"}
    done = subprocess.run([sys.executable, "-m", "mmctx", "demo", "--out", str(tmp_path / "demo")],
                          capture_output=True, text=True, timeout=900, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    printed = "".join(line for line in done.stdout.splitlines(keepends=True) if "samples/s" not in line)
    assert printed == GOLDEN.read_text()
    out = tmp_path / "demo"
    for path in ("report/report.md", "report.csv", "viewer/index.html", "clbench/report/table2.md"):
        assert (out / path).is_file(), path
