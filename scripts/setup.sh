#!/usr/bin/env bash
# Set up mmctx in ./.venv on a fresh machine: CPU torch from the local wheel, then mmctx and
# mmctx-reference (reference/).
# Idempotent: a second call only checks that everything is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
. .venv/bin/activate
if ! python -c "import torch, torchvision" 2>/dev/null; then
  # Installed first and pinned as a matching pair, from the machine's package mirror. These are
  # CUDA builds that also run on CPU. torchvision is needed by transformers' processors for
  # Qwen2/2.5/3-VL and InternVL (video processors), Mistral 3 / Pixtral and Phi-4 (image
  # processors): the tests load those families as a user's environment does.
  pip install --quiet "torch==2.14.1" "torchvision==0.29.1"
fi
pip install --quiet -e ".[test]"
# The reference models' training, a distribution of its own (`mmctx train-reference` needs it);
# mmctx, its one dependency, is installed just above. Named as a path (./), since a package index
# has an unrelated project called `reference`.
pip install --quiet --no-deps -e ./reference
