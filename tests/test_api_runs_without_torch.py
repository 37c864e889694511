"""A run against an OpenAI-compatible server never imports torch or transformers (seconds of
start-up and gigabytes of memory a client machine need not pay)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.fixtures.chat_server import ChatServer

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "colour_quiz"

SCRIPT = """
import json, sys
from mmctx.cli import app
try:
    app(sys.argv[1:], standalone_mode=False)
finally:
    print(json.dumps({m: m in sys.modules for m in ("torch", "transformers", "torchvision")}))
"""


def test_an_openai_run_imports_no_torch(tmp_path):
    with ChatServer() as server:
        args = ["eval", str(EXAMPLE / "task.py"), "--model", "openai:toy", "--base-url", server.base_url,
                "--out", str(tmp_path / "run"), "--scorers", "generate", "--no-progress"]  # fmt: skip
        env = {**os.environ, "OPENAI_API_KEY": "sk-test"}
        done = subprocess.run([sys.executable, "-c", SCRIPT, *args], capture_output=True, text=True, timeout=300,
                              env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"torch": False, "transformers": False,
                                                                "torchvision": False}  # fmt: skip
    assert sum(r.path.endswith("chat/completions") for r in server.records) == 8 * 3
