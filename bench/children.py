"""One benchmark case in a process of its own (a crash or an out-of-memory ends only that case), its result
read from the last JSON line it prints."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence


def run_case(argv: Sequence[str], timeout: float, env: Mapping[str, str] | None = None) -> dict:
    """{"status": "ok", **result}, or {"status": "failed" or "oom", "reason": the last lines it wrote}."""
    try:
        done = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            timeout=timeout,
            env=None if env is None else dict(env),
        )
    except subprocess.TimeoutExpired:
        return {"status": "failed", "reason": f"timed out after {timeout:g} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode == 0 and lines:
        return {"status": "ok", **json.loads(lines[-1])}
    text = done.stderr or done.stdout
    sys.stderr.write(text[-3000:])
    if "OutOfMemoryError" in text or "out of memory" in text:
        return {"status": "oom", "reason": "out of GPU memory"}
    return {"status": "failed", "reason": " | ".join(text.strip().splitlines()[-6:])[-800:]}
