#!/usr/bin/env bash
# Build the trlstack image from this checkout, reproducibly: the same commit gives the same image.
# Sets what bake cannot compute (UV_LOCK_SHA256, GIT_COMMIT, SOURCE_DATE_EPOCH), bakes the SBOM
# (dist/sbom/sbom.cdx.json) and passes its sha256 to the image build, which checks it and puts it in a label.
# SOURCE_DATE_EPOCH, the time every file and date in the image gets, is the time of the last commit that changed
# uv.lock: a function of the commit that stays the same across code-only commits, so their builds reuse the cache.
# Arguments go to the image's `docker buildx bake` (e.g. `--set trlstack.tags=trlstack:mine`); the other bake
# variables (BASE_IMAGE, CA_BUNDLE, WITH_KERNEL_CACHE, ...) come from the environment (docker/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bake=(docker buildx bake -f docker/docker-bake.hcl)

UV_LOCK_SHA256=$(sha256sum uv.lock | cut -d' ' -f1)
GIT_COMMIT=${GIT_COMMIT:-$(git rev-parse HEAD)}
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct "$GIT_COMMIT" -- uv.lock)}
# Kernels are baked only when pinned: without docker/kernels/kernels.lock (made where the Hub is reachable with
# `kernels lock docker/kernels`) the default is to bake none.
if [ -z "${WITH_KERNEL_CACHE:-}" ] && [ ! -f docker/kernels/kernels.lock ]; then
  echo "build: docker/kernels/kernels.lock is absent, so no Hub kernels are baked (WITH_KERNEL_CACHE=0)" >&2
  WITH_KERNEL_CACHE=0
fi
export UV_LOCK_SHA256 GIT_COMMIT SOURCE_DATE_EPOCH WITH_KERNEL_CACHE=${WITH_KERNEL_CACHE:-1}

"${bake[@]}" sbom
SBOM_SHA256=$(sha256sum dist/sbom/sbom.cdx.json | cut -d' ' -f1)
export SBOM_SHA256
echo "build: commit $GIT_COMMIT, SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH, uv.lock $UV_LOCK_SHA256, SBOM $SBOM_SHA256" >&2
"${bake[@]}" "$@" trlstack
