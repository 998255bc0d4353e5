#!/usr/bin/env bash
# Provision a Docker engine for the image and compose tests on a Debian 12 (bookworm) host, idempotently:
#   - dockerd 26 (BuildKit 0.13: SOURCE_DATE_EPOCH for reproducible images), containerd 1.7 and tini from Debian 13
#     (trixie): their .debs are unpacked into ENGINE_DIR, nothing of trixie is installed through dpkg; they need
#     glibc >= 2.34, so they run here. runc (and iptables, debootstrap) come from the host's own suite,
#   - the buildx and compose CLI plugins from trixie's docker-buildx / docker-compose packages,
#   - the docker CLI from trixie's docker-cli when the host has none,
#   - a running dockerd (started in the background when `docker info` fails),
#   - a local Debian trixie base image made with debootstrap, for hosts that cannot pull from a registry.
# A running engine older than Docker 26 (bookworm's docker.io 20.10 embeds BuildKit 0.8) is not touched: the script
# stops with what to do. Progress goes to stderr; stdout is only `export` lines, so callers can
# `eval "$(bash scripts/docker-engine.sh)"`.
# Needs root. Settings (env): TRLSTACK_BASE_IMAGE (tag of the base to make, default trlstack-base:trixie),
# DEBIAN_MIRROR (default http://deb.debian.org/debian), DOCKERD_LOG (default /var/log/dockerd.log),
# ENGINE_DIR (default /usr/local/lib/trlstack-docker), DOCKER_HOST (an engine elsewhere; then nothing is started),
# DOCKER_DATA_ROOT (where a started engine keeps images, volumes and build cache; default dockerd's own).
set -euo pipefail

base_image=${TRLSTACK_BASE_IMAGE:-trlstack-base:trixie}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
dockerd_log=${DOCKERD_LOG:-/var/log/dockerd.log}
engine_dir=${ENGINE_DIR:-/usr/local/lib/trlstack-docker}
data_root=(${DOCKER_DATA_ROOT:+--data-root "$DOCKER_DATA_ROOT"})
plugin_dir=/usr/local/lib/docker/cli-plugins
ca_bundle=/etc/ssl/certs/ca-certificates.crt
# Debian 13 packages unpacked here, and the binaries each gives.
trixie_packages=(docker.io containerd tini docker-buildx docker-compose docker-cli)
min_engine=26

log() { echo "docker-engine: $*" >&2; }
started=$(date +%s)

if [ "$(id -u)" -ne 0 ]; then
  echo "docker-engine: run as root (installs packages and starts dockerd)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive

# 1. runc, iptables and debootstrap from the host's own suite (trixie's runc needs glibc 2.38).
missing=()
command -v runc >/dev/null || missing+=(runc)
command -v iptables >/dev/null || missing+=(iptables)
command -v debootstrap >/dev/null || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

# 2. The engine and the CLI plugins from trixie, through a private apt configuration so the host's sources stay
#    as they are; the .debs are unpacked, never installed.
stamp="$engine_dir/.packages"
if [ "$(cat "$stamp" 2>/dev/null)" != "${trixie_packages[*]}" ] || ! docker buildx version >/dev/null 2>&1 ||
  ! docker compose version >/dev/null 2>&1; then
  log "fetching ${trixie_packages[*]} from trixie"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/lists/partial" "$work/debs" "$work/root"
  echo "deb $mirror trixie main" >"$work/sources.list"
  apt_trixie=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
    -o "Dir::State::Lists=$work/lists" -o Debug::NoLocking=1)
  apt-get "${apt_trixie[@]}" update -qq >&2
  (cd "$work/debs" && apt-get "${apt_trixie[@]}" download "${trixie_packages[@]}" >&2)
  for deb in "$work"/debs/*.deb; do dpkg -x "$deb" "$work/root"; done
  mkdir -p "$engine_dir" "$plugin_dir"
  for binary in usr/sbin/dockerd usr/sbin/docker-proxy usr/bin/containerd usr/bin/containerd-shim-runc-v2; do
    install -m 0755 "$work/root/$binary" "$engine_dir/"
  done
  # dockerd runs `docker-init` for `--init` containers; Debian's is tini-static.
  install -m 0755 "$work/root/usr/bin/tini-static" "$engine_dir/docker-init"
  install -m 0755 "$work/root/usr/libexec/docker/cli-plugins/docker-buildx" "$plugin_dir/docker-buildx"
  install -m 0755 "$work/root/usr/libexec/docker/cli-plugins/docker-compose" "$plugin_dir/docker-compose"
  command -v docker >/dev/null || install -m 0755 "$work/root/usr/bin/docker" /usr/local/bin/docker
  echo "${trixie_packages[*]}" >"$stamp"
fi

# 3. The daemon: this engine, unless one answers already (it must be recent enough to build the image
#    reproducibly; an older one belongs to someone, so it is left running and the operator is told what to do).
if docker info >/dev/null 2>&1; then
  running=$(docker version --format '{{.Server.Version}}')
  if [ "${running%%.*}" -lt "$min_engine" ]; then
    pid=$(cat /var/run/docker.pid 2>/dev/null || echo PID)
    log "the running engine is Docker $running; reproducible image builds need Docker >= $min_engine (BuildKit >= 0.13)."
    log "Stop it (\`kill $pid\`, which stops its containers; images and volumes in its data-root are kept and"
    log "the new engine uses them), then run this script again: it starts $engine_dir/dockerd."
    exit 1
  fi
else
  if [ -n "${DOCKER_HOST:-}" ]; then
    log "DOCKER_HOST=$DOCKER_HOST does not answer; unset it to use the engine this script starts"
    exit 1
  fi
  log "starting $engine_dir/dockerd ${data_root[*]} (log: $dockerd_log)"
  PATH="$engine_dir:$PATH" nohup "$engine_dir/dockerd" "${data_root[@]}" >"$dockerd_log" 2>&1 &
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
