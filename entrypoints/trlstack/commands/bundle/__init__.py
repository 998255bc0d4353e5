"""`trlstack bundle`: the locked GPU stack as an offline install for a machine without a package index.

From uv.lock (through `uv export`: pins and hashes exactly the lock's), for one target Python and platform:

- `--format wheelhouse`: `wheels/` fetched with `pip download --only-binary=:all: --no-deps --require-hashes`,
  installed on the target by `install.sh` (`pip install --no-index --no-deps --find-links wheels -r ...`);
- `--format site`: the same packages installed into one folder by `uv pip install --target --python-platform
  --python-version --require-hashes`, packed as `site.tar.xz` (optionally split into `--piece-size` pieces),
  unpacked on the target by `install.sh DEST`, which points the console scripts at the target's interpreter
  and writes `DEST/activate`.

Packages the target already has at the locked version (`--exclude-present`: `pip list --format=freeze` there)
and optional heavy ones (`--without`, `--slim`) are left out; `bundle.env` lists the variables the target then
needs. The bundle is written into `DIR.partial`, renamed to DIR when complete.

The modules, decisions first: `target` (the target's Python and platform as tags and markers), `contents`
(what goes in, from the lock) and `script` (install.sh, a shell file beside it, filled in) are pure;
`tools` (uv, pip, tar, xz) and `build` do the side effects; `settings` declares each flag once and `command`
is the command line, which hands `build` a frozen BundleSettings.
"""

from trlstack.commands.bundle.command import add_arguments, run

__all__ = ["add_arguments", "run"]
