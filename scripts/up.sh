#!/usr/bin/env bash
# The main job on a fresh GPU machine: `scripts/up.sh grpo` (or rloo, online-dpo, async-grpo).
# Builds the image if this machine lacks it, writes .env with this machine's GPU plan if there is none, makes the
# outputs folder, then hands over to `docker compose up METHOD`. Each step is skipped once done, so later runs are
# plain `docker compose up METHOD`.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  cat <<'EOF'
usage: scripts/up.sh [METHOD]

Train METHOD on this GPU machine with the compose stack: grpo (the default), rloo, online-dpo or async-grpo.
Builds the image if this machine lacks it (docker/build.sh), writes .env with this machine's GPU plan if there
is none (`trlstack plan` in the image), makes the outputs folder, then runs `docker compose up METHOD`; each
step is skipped once done. It stops before the build where no GPU can be given to containers, naming the fix.

Variables: TRLSTACK_IMAGE (the image's tag), BASE_IMAGE (the image the build starts from), TRLSTACK_OUTPUTS
(the outputs folder, ./outputs). Compose's own options: run `docker compose up METHOD ...` once .env exists.
Without a GPU, the CPU smoke of the stack, from the image (compose/README.md):
  bash docker/build.sh && mkdir -p outputs && docker compose -f compose.yaml -f compose/smoke.yaml up grpo
EOF
}

# Every argument is read before anything long starts: a mistyped one stops here, not after a 15-minute build.
case "${1:-}" in
  -h | --help) usage; exit 0 ;;
  -*) echo "up: unknown option '$1'; scripts/up.sh takes one METHOD (see scripts/up.sh --help)" >&2; exit 1 ;;
esac
if [ "$#" -gt 1 ]; then
  echo "up: unexpected argument '$2': scripts/up.sh takes one METHOD; give compose's options to" \
    "\`docker compose up $1 ...\` once .env exists (see scripts/up.sh --help)" >&2
  exit 1
fi
method=${1:-grpo}
case "$method" in
  grpo | rloo | online-dpo | async-grpo) ;;
  *) echo "up: unknown method '$method'; use grpo, rloo, online-dpo or async-grpo" >&2; exit 1 ;;
esac
image=${TRLSTACK_IMAGE:-trlstack:0.1.0-torch2.11-vllm0.25-cu13}

# Before anything long: a GPU that containers can be given. Both roles need one, and the image build alone
# takes a quarter of an hour.
# (grep reads the whole list: `grep -q` would end at the first GPU, and under pipefail nvidia-smi's SIGPIPE on
# the next line would count as no GPU)
if ! command -v nvidia-smi >/dev/null || [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -eq 0 ]; then
  smoke=$method
  [ "$method" = async-grpo ] && smoke=grpo  # async-grpo has no CPU mode: it generates through a server only
  echo "up: no NVIDIA GPU is visible here (nvidia-smi lists none); install the NVIDIA driver (>= 580) or run" \
    "on a GPU machine. Without a GPU, the CPU smoke of the stack runs here, from the image:" \
    "\`bash docker/build.sh && mkdir -p outputs &&" \
    "docker compose -f compose.yaml -f compose/smoke.yaml up $smoke\` (compose/README.md)." >&2
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

# A layout compose has no file for fails inside compose ("no such file"), before its plan check can name the
# fix: the plan check in the image says it instead. The layouts: plan/env_check.py's LAYOUT_VARIANTS.
variant=${TRLSTACK_VARIANT:-$(sed -n 's/^[[:space:]]*\(export[[:space:]]\+\)\?TRLSTACK_VARIANT=["'"'"']\?\([^"'"'"'#[:space:]]*\).*/\2/p' .env | tail -1)}
case "${variant:-shared}" in
  shared | isolated | colocate) ;;
  *)
    docker run --rm --network none -e TRLSTACK_VARIANT="$variant" "$image" trlstack plan --check
    exit 1
    ;;
esac

mkdir -p "${TRLSTACK_OUTPUTS:-./outputs}"
exec docker compose up "$method"
