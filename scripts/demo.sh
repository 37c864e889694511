#!/usr/bin/env bash
# The main job: set up (idempotent), then evaluate the built-in model on shapes-world over the
# paper's full settings grid with both scorers, and write the report.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
mmctx demo --out runs/demo "$@"
