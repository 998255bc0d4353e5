#!/usr/bin/env bash
# Build the trlstack image from this checkout, reproducibly: the same commit gives the same image (Hub kernels
# included once docker/kernels/kernels.lock pins them).
# Sets what bake cannot compute (UV_LOCK_SHA256, GIT_COMMIT, SOURCE_DATE_EPOCH), bakes the SBOM
# (dist/sbom/sbom.cdx.json, with the kernels stage's kernels.txt and kernels.lock) and passes the sha256s of the
# SBOM and of the kernels lock to the image build, which checks both (labels: org.trlstack.sbom.sha256, and
# org.trlstack.kernel-cache, 1 when there is a lock).
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
# WITH_KERNEL_CACHE (auto, 1 or 0: docker/README.md, "Kernels"). Without docker/kernels/kernels.lock the build
# locks the kernels itself, so each build asks the Hub again: KERNELS_ASKED, the time of this build, is part of
# the kernels stage's cache key (a cached answer would be an old lock, or an earlier build's "the Hub could not
# be reached"), and the image build below reuses the answer the SBOM's build got.
KERNELS_ASKED=
if [ "${WITH_KERNEL_CACHE:-auto}" != 0 ] && [ ! -f docker/kernels/kernels.lock ]; then
  KERNELS_ASKED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
fi
export UV_LOCK_SHA256 GIT_COMMIT SOURCE_DATE_EPOCH WITH_KERNEL_CACHE=${WITH_KERNEL_CACHE:-auto} KERNELS_ASKED

rm -rf dist/sbom
"${bake[@]}" sbom
SBOM_SHA256=$(sha256sum dist/sbom/sbom.cdx.json | cut -d' ' -f1)
KERNELS_LOCK_SHA256=
if [ -f dist/sbom/kernels.lock ]; then
  KERNELS_LOCK_SHA256=$(sha256sum dist/sbom/kernels.lock | cut -d' ' -f1)
fi
export SBOM_SHA256 KERNELS_LOCK_SHA256
echo "build: commit $GIT_COMMIT, SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH, uv.lock $UV_LOCK_SHA256, SBOM $SBOM_SHA256" >&2
"${bake[@]}" "$@" trlstack
# What the kernels stage baked, in one line, last so it is seen; a lock the build made is printed to commit.
cat dist/sbom/kernels.txt >&2
if [ -n "$KERNELS_LOCK_SHA256" ] && [ ! -f docker/kernels/kernels.lock ]; then
  echo "build: this build locked the kernels it baked (dist/sbom/kernels.lock, below; the image holds it as" \
    "/opt/trlstack/kernels/kernels.lock); commit it to bake the same ones in every build:" \
    "cp dist/sbom/kernels.lock docker/kernels/kernels.lock" >&2
  cat dist/sbom/kernels.lock >&2
  echo >&2
fi
