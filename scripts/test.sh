#!/usr/bin/env bash
# The test command README gives: installs the locked dev environment, checks the lock, style and types, runs every
# test (shellcheck on every .sh file and hadolint on the Dockerfiles are tests too: tests/structure).
# Docker-engine tests skip with their reason where no engine runs (CI provisions one and fails instead);
# GPU tests skip where no CUDA GPU is present.
set -euo pipefail
cd "$(dirname "$0")/.."

uv_version=0.13.9
if ! command -v uv >/dev/null; then
  python3 -m pip install --quiet "uv==${uv_version}"
  # pip puts uv beside its interpreter, which need not be on PATH (pyenv shims, user installs); tests call uv too.
  PATH="$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"
  export PATH
fi

uv lock --check          # CI fails when uv.lock is stale against pyproject.toml
uv sync --frozen
uv run --frozen ruff check .
uv run --frozen ruff format --check .
uv run --frozen mypy     # strict on entrypoints/trlstack ([tool.mypy] in pyproject.toml)
uv run --frozen pytest "$@"
