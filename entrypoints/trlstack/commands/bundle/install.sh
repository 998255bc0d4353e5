#!/bin/sh
# Offline install of this bundle (trlstack bundle --format @FORMAT@, CPython @PYTHON@, @PLATFORM@).
# PYTHON picks the target interpreter (default python3). Variables the target needs: bundle.env.
# Usage, --format wheelhouse: sh install.sh [more pip install arguments, e.g. --target DIR or --user]
# Usage, --format site:       sh install.sh [DEST]   (default: ./site beside this script; DEST: empty or absent)
set -eu
# trlstack bundle writes the bundle's format and target Python in here (trlstack/bundle/script.py).
format=@FORMAT@
short=@PYTHON@
here=$(cd "$(dirname "$0")" && pwd)
python=$(command -v "${PYTHON:-python3}") || {
  echo "install.sh: no ${PYTHON:-python3} found; set PYTHON=/path/to/python$short" >&2
  exit 1
}
have=$("$python" -c 'import sys; print(*sys.version_info[:2], sep=chr(46))')
if [ "$have" != "$short" ]; then
  echo "install.sh: the bundle is for Python $short, $python is $have; set PYTHON=/path/to/python$short" >&2
  exit 1
fi

install_wheelhouse() {
  "$python" -m pip install --no-index --no-deps --find-links "$here/wheels" -r "$here/requirements.txt" "$@"
  echo "installed; before running, load $here/bundle.env (set -a; . $here/bundle.env; set +a)"
}

install_site() {
  dest=${1:-$here/site}
  if [ -d "$dest" ] && [ -n "$(ls -A "$dest")" ]; then
    echo "install.sh: $dest is not empty; give an empty or new folder" >&2
    exit 1
  fi
  expected=$(cat "$here/site.sha256")
  actual=$(cat "$here"/site.tar.xz* | sha256sum | cut -d' ' -f1)
  if [ "$actual" != "$expected" ]; then
    echo "install.sh: site.tar.xz pieces are incomplete or damaged (sha256 $actual, expected $expected)" >&2
    exit 1
  fi
  mkdir -p "$dest"
  dest=$(cd "$dest" && pwd)
  cat "$here"/site.tar.xz* | tar -xJ -C "$dest"
  # pip wrote the console scripts for the interpreter that built the bundle: point them at this one.
  for script in "$dest"/bin/*; do
    [ -f "$script" ] && sed -i "1s|^#!.*python.*$|#!$python|" "$script"
  done
  # Python reads .pth files only in a site-packages folder, never in one on PYTHONPATH: the folders they name
  # (the CUTLASS DSL's `cutlass`, under nvidia_cutlass_dsl/python_packages) go on PYTHONPATH too. Their
  # import lines are left out: they only set up optional shims.
  extra=""
  for pth in "$dest"/*.pth; do
    [ -f "$pth" ] || continue
    while IFS= read -r line || [ -n "$line" ]; do
      case $line in "" | "#"* | import*) continue ;; esac
      if [ -d "$dest/$line" ]; then extra="$extra:$dest/$line"; fi
    done <"$pth"
  done
  {
    echo "export PYTHONPATH=$dest$extra\${PYTHONPATH:+:\$PYTHONPATH}"
    echo "export PATH=$dest/bin:\$PATH"
    grep -v '^#' "$here/bundle.env" | sed 's/^/export /'
  } >"$dest/activate"
  echo "installed in $dest; use it with: . $dest/activate"
}

case $format in
  wheelhouse) install_wheelhouse "$@" ;;
  site) install_site "$@" ;;
esac
