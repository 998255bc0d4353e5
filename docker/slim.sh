#!/usr/bin/env bash
# Remove from the venv (argument 1) bytes neither role loads; docker/README.md holds the evidence for each.
set -euo pipefail
site=$(echo "$1"/lib/python3*/site-packages)
before=$(du -sm "$1" | cut -f1)

# Static archives: only a linker reads them, and nothing links against these at run time.
rm -f "$site"/xgrammar/lib/libxgrammar.a "$site"/triton/backends/nvidia/lib/cupti/*_static.a

# Debug sections of shared libraries: the loader never maps them (libtriton alone carries 230 MB).
find "$site" -name '*.so*' -type f -print0 |
  while IFS= read -r -d '' lib; do
    if readelf -S "$lib" 2>/dev/null | grep -q '\.debug_info'; then strip --strip-debug "$lib"; fi
  done

echo "slim: $before MB -> $(du -sm "$1" | cut -f1) MB" >&2
