#!/usr/bin/env bash
# Remove from the venv (argument 1) bytes neither role loads; docker/README.md holds the evidence for each.
# Every file changed here is listed in the manifest (argument 2), sorted, one per line, path relative to the venv:
#   removed<TAB>PATH            or            stripped<TAB>PATH<TAB>SHA256 of the stripped file
# so `trlstack verify` knows these differences from the wheels by definition and checks the stripped files' bytes.
set -euo pipefail
venv=$1
manifest=$2
site=$(echo "$venv"/lib/python3*/site-packages)
before=$(du -sm "$venv" | cut -f1)
changes=$(mktemp)

# Static archives: only a linker reads them, and nothing links against these at run time.
for archive in "$site"/xgrammar/lib/libxgrammar.a "$site"/triton/backends/nvidia/lib/cupti/*_static.a; do
  if [ -f "$archive" ]; then
    rm "$archive"
    printf 'removed\t%s\n' "${archive#"$venv"/}" >>"$changes"
  fi
done

# A build backend two wheels leak into site-packages' top level (flashinfer-python and torch-c-dlpack-ext each
# ship their own build_backend.py): nothing imports it at run time, and which copy survives would depend on the
# order uv installs the two in, so no build keeps either.
leaked="$site"/build_backend.py
if [ -f "$leaked" ]; then
  rm "$leaked" "$site"/__pycache__/build_backend.*.pyc
  printf 'removed\t%s\n' "${leaked#"$venv"/}" >>"$changes"
fi

# Debug sections of shared libraries: the loader never maps them (libtriton alone carries 230 MB).
find "$site" -name '*.so*' -type f -print0 |
  while IFS= read -r -d '' lib; do
    # Read the whole section list first: `readelf | grep -q` under pipefail fails whenever grep exits before
    # readelf has written everything (SIGPIPE), which would leave a file unstripped in some builds only.
    sections=$(readelf -S "$lib" 2>/dev/null || true)
    if [[ $sections == *.debug_info* ]]; then
      strip --strip-debug "$lib"
      printf 'stripped\t%s\t%s\n' "${lib#"$venv"/}" "$(sha256sum "$lib" | cut -d' ' -f1)" >>"$changes"
    fi
  done

LC_ALL=C sort "$changes" >"$manifest"
rm "$changes"
echo "slim: $before MB -> $(du -sm "$venv" | cut -f1) MB, $(wc -l <"$manifest") files changed" >&2
