"""Compile the sources in site-packages (argument 1) that have no bytecode yet, as uv does: hash-based.

uv skips a file whose compilation fails; on a busy machine that can be a worker's failure, not the file's,
and then that build alone lacks the .pyc. Files that do not compile (Python 2 code some wheels vendor) fail
here too and keep no .pyc, in every build."""

import contextlib
import importlib.util
import py_compile
import sys
from pathlib import Path

for source in sorted(Path(sys.argv[1]).rglob("*.py")):
    if not Path(importlib.util.cache_from_source(str(source))).exists():
        with contextlib.suppress(py_compile.PyCompileError, SyntaxError, ValueError):
            py_compile.compile(
                str(source), doraise=True, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH
            )
