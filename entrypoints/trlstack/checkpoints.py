"""Find where a run left off: the newest complete `checkpoint-N` in an output directory."""

from __future__ import annotations

import re
from pathlib import Path

_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")

# transformers writes trainer_state.json last, after the weights, optimizer and RNG states.
COMPLETE_MARKER = "trainer_state.json"


def checkpoints(output_dir: Path) -> list[tuple[int, Path]]:
    """(step, path) of every checkpoint-N folder, oldest first."""
    if not output_dir.is_dir():
        return []
    found = []
    for path in output_dir.iterdir():
        match = _CHECKPOINT.match(path.name)
        if match and path.is_dir():
            found.append((int(match.group(1)), path))
    return sorted(found)


def newest_checkpoint(output_dir: Path) -> tuple[Path | None, list[Path]]:
    """The newest complete checkpoint (or None), and newer incomplete ones passed over (left in place)."""
    skipped: list[Path] = []
    for _, path in reversed(checkpoints(output_dir)):
        if (path / COMPLETE_MARKER).is_file():
            return path, skipped
        skipped.append(path)
    return None, skipped
