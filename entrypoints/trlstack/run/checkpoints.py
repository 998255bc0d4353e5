"""Find where a run left off: the newest complete `checkpoint-N` in an output directory."""

from __future__ import annotations

import re
from pathlib import Path

_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")

# transformers writes trainer_state.json last, after the weights, optimizer and RNG states.
COMPLETE_MARKER = "trainer_state.json"
# transformers' own save-on-SIGTERM (enable_jit_checkpoint) marks a checkpoint it is still writing with this
# file and removes it when done; a checkpoint that still has it was cut short.
INCOMPLETE_MARKER = "checkpoint-is-incomplete.txt"


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


def is_complete(checkpoint: Path) -> bool:
    """Whether a checkpoint folder was written to the end."""
    return (checkpoint / COMPLETE_MARKER).is_file() and not (checkpoint / INCOMPLETE_MARKER).exists()


def newest_checkpoint(output_dir: Path) -> tuple[Path | None, list[Path]]:
    """The newest complete checkpoint (or None), and newer incomplete ones passed over (left in place)."""
    skipped: list[Path] = []
    for _, path in reversed(checkpoints(output_dir)):
        if is_complete(path):
            return path, skipped
        skipped.append(path)
    return None, skipped


def sharded_over(checkpoint: Path) -> int | None:
    """How many processes an FSDP2 checkpoint was saved by (its model folder holds one .distcp file for each),
    or None for a whole checkpoint, as DDP saves it."""
    from trlstack.run.sharding import SHARDED_MODEL_DIR, checkpoint_shards

    folder = checkpoint / SHARDED_MODEL_DIR
    return checkpoint_shards([path.name for path in folder.iterdir()]) if folder.is_dir() else None
