#!/usr/bin/env bash
# The test command: set up (idempotent), then run the whole suite. Exit code 5 (no tests
# collected) is a failure, never a pass.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1
# The HTML viewer is tested in Debian's headless Chromium; installed once if missing.
bash scripts/install-browser.sh || exit 1
. .venv/bin/activate
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# Lint and formatting first: a seconds-long check that fails before the long suite starts.
ruff check . || exit 1
ruff format --check . || exit 1
python -m pytest -n 2 -q "$@"
status=$?
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
exit "$status"
