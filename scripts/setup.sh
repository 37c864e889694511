#!/usr/bin/env bash
# Set up mmctx in ./.venv on a fresh machine: CPU torch from the local wheel, then mmctx.
# Idempotent: a second call only checks that everything is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
. .venv/bin/activate
if ! python -c "import torch" 2>/dev/null; then
  # Installed first and pinned: this release lies on the machine's disk as a CPU wheel, while a
  # bare "torch" requirement would fetch a multi-GB CUDA build.
  pip install --quiet "torch==2.13.0"
fi
pip install --quiet -e ".[test]"
