"""install.sh, the script the bundle carries to the target: `install.sh` beside this module, its @NAME@
placeholders filled in with the bundle's format and target."""

from __future__ import annotations

import re
import shlex
from importlib import resources

from trlstack.commands.bundle.target import python_tag

FORMATS = ("wheelhouse", "site")


def render_install_script(fmt: str, python_version: str, platform: str) -> str:
    """install.sh for the target: checks the interpreter, then installs offline."""
    if fmt not in FORMATS:
        raise ValueError(f"no install.sh for the format {fmt!r}")
    values = {"FORMAT": fmt, "PYTHON": python_tag(python_version)[0], "PLATFORM": platform}
    text = resources.files("trlstack.commands.bundle").joinpath("install.sh").read_text()
    # Each value is one shell word (checked: a format, X.Y, a platform tag); quoted all the same.
    return re.sub(r"@([A-Z]+)@", lambda found: shlex.quote(values[found.group(1)]), text)
