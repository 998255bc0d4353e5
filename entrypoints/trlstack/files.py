"""Writing the files users keep (.env, plans, merged training configs): whole or not at all.

The mode rule: a file that is replaced keeps its own mode (a .env kept at 0600 for its token stays so); a new
file gets what open() gives under the umask, like every other file a run writes.
"""

from __future__ import annotations

import os
import stat


def write_atomically(path: str | os.PathLike[str], text: str) -> None:
    """Replace `path` with `text` in one step: readers see the old file or the new one, never a part, and a
    crash leaves the old file and no temporary one. The folder must exist."""
    path = os.fspath(path)
    mode = stat.S_IMODE(os.stat(path).st_mode) if os.path.exists(path) else None
    folder, name = os.path.split(path)
    temporary = os.path.join(folder, f".{name}.{os.urandom(6).hex()}.tmp")
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
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def cannot_create_in(folder: str | os.PathLike[str]) -> str | None:
    """Why nothing can be created in the existing `folder`, or None. Tried for real (a folder made there and
    removed at once): permission bits say nothing of a read-only or pseudo file system such as /proc."""
    import tempfile

    try:
        os.rmdir(tempfile.mkdtemp(prefix=".trlstack-probe-", dir=folder))
    except OSError as error:
        return error.strerror or str(error)
    return None
