#!/usr/bin/env bash
# Provide a Nix >= 2.18 on a Debian 12 (bookworm) host, idempotently, for the flake checks in tests/nix:
#   - a Debian 13 (trixie) root made with debootstrap, holding trixie's nix-bin (bookworm's 2.8 is too old),
#   - `nix` and `nix-instantiate` wrappers that run it there in a private mount namespace, with /proc, /dev,
#     /tmp and the current git work tree bind-mounted at the same paths (nothing stays mounted afterwards).
# The root is kept between runs (a ready marker makes reruns instant). A host that already has a Nix >= 2.18
# on PATH is left as it is.
# Progress goes to stderr; stdout is only `export` lines, so callers can `eval "$(bash scripts/nix.sh)"`.
# Needs root. Settings (env): TRLSTACK_NIX_ROOT (where the root and the wrappers live,
# default ${XDG_CACHE_HOME:-$HOME/.cache}/trlstack/nix-trixie), DEBIAN_MIRROR (default http://deb.debian.org/debian).
set -euo pipefail

home=${TRLSTACK_NIX_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/trlstack/nix-trixie}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
root=$home/root
bin=$home/bin

log() { echo "nix: $*" >&2; }
started=$(date +%s)

# Nix 2.18 is the oldest release the flake and its inputs are evaluated with.
recent_nix() {
  local version
  version=$("$1" --version 2>/dev/null | awk '{print $NF}') || return 1
  [ -n "$version" ] && [ "$(printf '%s\n' 2.18 "$version" | sort -V | head -n1)" = 2.18 ]
}

if command -v nix >/dev/null && [ "$(command -v nix)" != "$bin/nix" ] && recent_nix nix; then
  log "using $(command -v nix) ($(nix --version))"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "nix: run as root (debootstrap, chroot and bind mounts need it), or put a Nix >= 2.18 on PATH" >&2
  exit 1
fi

if [ ! -e "$root/.trlstack-ready" ]; then
  if ! command -v debootstrap >/dev/null; then
    log "installing debootstrap"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >&2
  fi
  log "making a trixie root with nix-bin in $root"
  rm -rf "$root"
  mkdir -p "$root"
  # libdbi-perl provides perl-dbdabi-94, a virtual package bookworm's debootstrap cannot resolve for nix-bin.
  if ! debootstrap --variant=minbase --include=nix-bin,libdbi-perl trixie "$root" "$mirror" >"$home/debootstrap.log" 2>&1; then
    tail -n 20 "$home/debootstrap.log" >&2
    echo "nix: debootstrap failed; full log in $home/debootstrap.log" >&2
    exit 1
  fi
  # Single-user store inside the root: no build users, no sandbox (only evaluation runs here).
  mkdir -p "$root/etc/nix"
  cat >"$root/etc/nix/nix.conf" <<'EOF'
build-users-group =
sandbox = false
experimental-features = nix-command flakes
EOF
  touch "$root/.trlstack-ready"
fi

mkdir -p "$bin"
cat >"$bin/nix" <<EOF
#!/bin/sh
# Runs Debian 13's Nix from $root on the current directory.
exec unshare --mount --propagation private "$bin/.in-root" "$root" "\$(basename "\$0")" "\$@"
EOF
cat >"$bin/.in-root" <<'EOF'
#!/bin/sh
# In a private mount namespace: mount what Nix needs into the root, then run the command there from the same cwd.
set -e
root=$1
shift
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount --bind /tmp "$root/tmp"
top=$(git rev-parse --show-toplevel 2>/dev/null || pwd)
mkdir -p "$root$top"
mount --bind "$top" "$root$top"
exec chroot "$root" /bin/sh -c 'cd "$1" && shift && exec "$@"' sh "$PWD" "$@"
EOF
chmod +x "$bin/nix" "$bin/.in-root"
ln -sf nix "$bin/nix-instantiate"

log "$("$bin/nix" --version) ready in $(($(date +%s) - started)) s"
echo "export PATH=\"$bin:\$PATH\""
