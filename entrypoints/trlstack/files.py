"""Writing the files users keep (.env, plans, merged training configs): whole or not at all.

The mode rule: a file that is replaced keeps its own mode (a .env kept at 0600 for its token stays so); a new
file gets what open() gives under the umask, like every other file a run writes.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path


def write_atomically(path: str | Path, text: str) -> None:
    """Replace `path` with `text` in one step: readers see the old file or the new one, never a part, and a
    crash leaves the old file and no temporary one. The folder must exist."""
    path = Path(path)
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else None
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies
    try:
        with os.fdopen(handle, "w") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
