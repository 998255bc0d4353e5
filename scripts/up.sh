#!/usr/bin/env bash
# The main job on a fresh GPU machine: `scripts/up.sh grpo` (or rloo, online-dpo, async-grpo).
# Builds the image if this machine lacks it, writes .env with this machine's GPU plan if there is none, makes the
# outputs folder, then hands over to `docker compose up METHOD`. Each step is skipped once done, so later runs are
# plain `docker compose up METHOD`.
set -euo pipefail
cd "$(dirname "$0")/.."

method=${1:-grpo}
case "$method" in
  grpo | rloo | online-dpo | async-grpo) ;;
  *) echo "up: unknown method '$method'; use grpo, rloo, online-dpo or async-grpo" >&2; exit 1 ;;
esac
image=${TRLSTACK_IMAGE:-trlstack:0.1.0-torch2.11-vllm0.25-cu13}

# Before anything long: a GPU that containers can be given. Both roles need one, and the image build alone
# takes a quarter of an hour.
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "up: no NVIDIA GPU is visible here (nvidia-smi lists none); install the NVIDIA driver (>= 580) or run" \
    "on a GPU machine. Without a GPU, \`train grpo --cpu\` runs the smoke test." >&2
  exit 1
fi
if ! command -v nvidia-container-runtime-hook >/dev/null && ! command -v nvidia-ctk >/dev/null &&
  ! docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q nvidia; then
  echo "up: Docker cannot give containers the GPU: install the NVIDIA Container Toolkit and run" \
    "\`sudo nvidia-ctk runtime configure --runtime=docker\`, then restart Docker." >&2
  exit 1
fi

if ! docker image inspect "$image" >/dev/null 2>&1; then
  # The base image the build starts from (docker/docker-bake.hcl's default unless BASE_IMAGE names one).
  base=${BASE_IMAGE:-$(sed -n 's/^variable "BASE_IMAGE" { default = "\(.*\)" }$/\1/p' docker/docker-bake.hcl)}
  if ! docker image inspect "$base" >/dev/null 2>&1 && ! docker buildx imagetools inspect "$base" >/dev/null 2>&1; then
    echo "up: the base image $base is neither on this machine nor reachable from it, so $image cannot be" \
      "built. Pass a local Debian trixie image as BASE_IMAGE (docker/README.md, Build)," \
      "or load $image built elsewhere (docker load)." >&2
    exit 1
  fi
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
