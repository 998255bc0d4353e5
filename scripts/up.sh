#!/usr/bin/env bash
# The main job on a fresh GPU machine: `scripts/up.sh grpo` (or rloo, online-dpo).
# Builds the image if this machine lacks it, writes .env with this machine's GPU plan if there is none, makes the
# outputs folder, then hands over to `docker compose up METHOD`. Each step is skipped once done, so later runs are
# plain `docker compose up METHOD`.
set -euo pipefail
cd "$(dirname "$0")/.."

method=${1:-grpo}
case "$method" in
  grpo | rloo | online-dpo) ;;
  *) echo "up: unknown method '$method'; use grpo, rloo or online-dpo" >&2; exit 1 ;;
esac
image=${TRLSTACK_IMAGE:-trlstack:0.1.0-torch2.11-vllm0.25-cu13}

if ! docker image inspect "$image" >/dev/null 2>&1; then
  echo "up: building $image (docker/README.md lists the build options)" >&2
  bash docker/build.sh
fi

if [ ! -f .env ]; then
  # The plan runs in the image, so the host needs no Python; it fails with the fix if the GPUs can't be split.
  docker run --rm --gpus all "$image" trlstack plan --format env > .env.new || { rm -f .env.new; exit 1; }
  mv .env.new .env
  echo "up: wrote .env for this machine's GPUs (edit it, or rerun trlstack plan, to change the split)" >&2
fi

mkdir -p "${TRLSTACK_OUTPUTS:-./outputs}"
exec docker compose up "$method"
