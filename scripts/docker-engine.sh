#!/usr/bin/env bash
# Provision a Docker engine for the image and compose tests on a Debian 12 (bookworm) host, idempotently:
#   - dockerd + containerd + runc from bookworm's docker.io,
#   - the buildx and compose CLI plugins from trixie's docker-buildx / docker-compose packages
#     (bookworm has none; they are static Go binaries, so trixie's builds run here),
#   - a running dockerd (started in the background when `docker info` fails),
#   - a local Debian trixie base image made with debootstrap, for hosts that cannot pull from a registry.
# Progress goes to stderr; stdout is only `export` lines, so callers can `eval "$(bash scripts/docker-engine.sh)"`.
# Needs root. Settings (env): TRLSTACK_BASE_IMAGE (tag of the base to make, default trlstack-base:trixie),
# DEBIAN_MIRROR (default http://deb.debian.org/debian), DOCKERD_LOG (default /var/log/dockerd.log).
set -euo pipefail

base_image=${TRLSTACK_BASE_IMAGE:-trlstack-base:trixie}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
dockerd_log=${DOCKERD_LOG:-/var/log/dockerd.log}
plugin_dir=/usr/local/lib/docker/cli-plugins
ca_bundle=/etc/ssl/certs/ca-certificates.crt

log() { echo "docker-engine: $*" >&2; }
started=$(date +%s)

if [ "$(id -u)" -ne 0 ]; then
  echo "docker-engine: run as root (installs packages and starts dockerd)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive

# 1. Engine and debootstrap from the host's own suite.
missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v debootstrap >/dev/null || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

# 2. buildx and compose plugins from trixie, through a private apt configuration so the host's sources stay as they are.
if ! docker buildx version >/dev/null 2>&1 || ! docker compose version >/dev/null 2>&1; then
  log "fetching docker-buildx and docker-compose from trixie"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/lists/partial" "$work/debs" "$work/root"
  echo "deb $mirror trixie main" >"$work/sources.list"
  apt_trixie=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$work/lists" -o Debug::NoLocking=1)
  apt-get "${apt_trixie[@]}" update -qq >&2
  (cd "$work/debs" && apt-get "${apt_trixie[@]}" download docker-buildx docker-compose >&2)
  for deb in "$work"/debs/*.deb; do dpkg -x "$deb" "$work/root"; done
  mkdir -p "$plugin_dir"
  install -m 0755 "$work/root/usr/libexec/docker/cli-plugins/docker-buildx" "$plugin_dir/docker-buildx"
  install -m 0755 "$work/root/usr/libexec/docker/cli-plugins/docker-compose" "$plugin_dir/docker-compose"
fi

# 3. The daemon.
if ! docker info >/dev/null 2>&1; then
  log "starting dockerd (log: $dockerd_log)"
  nohup dockerd >"$dockerd_log" 2>&1 &
  for _ in $(seq 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  docker info >/dev/null 2>&1 || { log "dockerd did not come up; see $dockerd_log"; tail -n 20 "$dockerd_log" >&2; exit 1; }
fi

# 4. The base image: a debootstrap trixie minbase, imported once.
if ! docker image inspect "$base_image" >/dev/null 2>&1; then
  log "building $base_image with debootstrap"
  rootfs=$(mktemp -d)
  debootstrap --variant=minbase trixie "$rootfs" "$mirror" >&2
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' - "$base_image" >&2
  rm -rf "$rootfs"
fi

log "ready in $(($(date +%s) - started)) s: $(docker version --format '{{.Server.Version}}'), $(docker buildx version | cut -d' ' -f2), compose $(docker compose version --short)"
echo "export TRLSTACK_BASE_IMAGE=$base_image"
echo "export TRLSTACK_CA_BUNDLE=$ca_bundle"
