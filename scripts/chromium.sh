#!/usr/bin/env bash
# Provision Debian's Chromium for the tests that open a page in a real headless browser (the dashboard:
# tests/browser.py), idempotently: the distribution's `chromium` package and a font to draw text with, never a
# browser a test tool downloads. Those tests skip without it and fail under CI=true. Needs root on Debian.
set -euo pipefail

if command -v chromium >/dev/null; then
  echo "chromium: $(chromium --version 2>/dev/null || echo present)" >&2
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "chromium: run as root (installs Debian's chromium package)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >&2
echo "chromium: $(chromium --version 2>/dev/null)" >&2
