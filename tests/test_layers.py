"""Layers import downward only (the contract is in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _lint(config: Path | None = None) -> subprocess.CompletedProcess:
    script = Path(sys.executable).with_name("lint-imports")
    if not script.exists():
        pytest.fail("import-linter is a test dependency: pip install -e '.[test]'")
    args = [str(script), "--no-cache"] + (["--config", str(config)] if config else [])
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_layers_import_downward_only():
    result = _lint()
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "1 kept, 0 broken" in result.stdout


def test_the_check_catches_an_upward_import(tmp_path):
    """The same contract with scoring placed below run must fail: scoring reads run folders
    through the run layer, so the check sees real imports and the test can fail."""
    text = (ROOT / "pyproject.toml").read_text()
    assert '  "mmctx.scoring",\n  "mmctx.run",\n' in text
    swapped = text.replace('  "mmctx.scoring",\n  "mmctx.run",\n', '  "mmctx.run",\n  "mmctx.scoring",\n', 1)
    strict = tmp_path / "swapped.toml"
    strict.write_text(swapped)
    result = _lint(strict)
    assert result.returncode != 0 and "mmctx.scoring is not allowed to import mmctx.run" in result.stdout
