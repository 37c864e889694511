#!/usr/bin/env bash
# Install the headless browser the viewer tests drive: Debian's chromium and its matching
# chromedriver (no browser or driver download of a tool's own). Idempotent: does nothing when
# both are already on PATH. Needs root (or sudo) and the Debian package mirror.
set -euo pipefail

have() { command -v "$1" >/dev/null 2>&1; }

if have chromium && have chromedriver; then
  echo "chromium: $(chromium --version 2>/dev/null || echo present); chromedriver: present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if have sudo; then SUDO="sudo"; else
    echo "install-browser.sh: need root (or sudo) to apt-get install chromium chromium-driver" >&2
    exit 1
  fi
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver fonts-dejavu-core >/dev/null
echo "installed: $(chromium --version 2>/dev/null || echo chromium)"
