"""Layers import downward only, and no import cycle between sibling modules (the contracts are in
pyproject.toml)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _lint(config: Path | None = None, cwd: Path = ROOT, env: dict | None = None) -> subprocess.CompletedProcess:
    script = Path(sys.executable).with_name("lint-imports")
    if not script.exists():
        pytest.fail("import-linter is a test dependency: pip install -e '.[test]'")
    args = [str(script), "--no-cache"] + (["--config", str(config)] if config else [])
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


def test_layers_import_downward_only_and_siblings_have_no_cycle():
    result = _lint()
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "layers import downward only KEPT" in result.stdout
    assert "no import cycles between sibling modules KEPT" in result.stdout
    assert "2 kept, 0 broken" in result.stdout


def test_the_layers_have_no_exceptions():
    """Every crossing was removed by moving code to its layer; none may come back as an exception."""
    assert "ignore_imports" not in (ROOT / "pyproject.toml").read_text()


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


def test_the_cycle_check_catches_a_cycle_between_siblings(tmp_path):
    """The project's acyclic-siblings contract, pointed at a package whose two modules import each
    other, must fail and name the import to remove."""
    package = tmp_path / "cyclic"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "one.py").write_text("from cyclic import two\n")
    (package / "two.py").write_text("from cyclic import one\n")
    text = (ROOT / "pyproject.toml").read_text()
    contract = text[text.index('[[tool.importlinter.contracts]]\nname = "no import cycles') :]
    config = tmp_path / "cycle.toml"
    config.write_text('[tool.importlinter]\nroot_package = "cyclic"\n\n' + contract.replace('"mmctx"', '"cyclic"'))
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    result = _lint(config, cwd=tmp_path, env=env)
    assert result.returncode != 0, result.stdout[-3000:]
    assert "no import cycles between sibling modules BROKEN" in result.stdout
    assert "No cycles are allowed in cyclic." in result.stdout and "- .two -> .one" in result.stdout
