"""Find where a run left off: the newest complete `checkpoint-N` in an output directory."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

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


def finished(checkpoint: Path, config: Mapping[str, Any]) -> int | None:
    """The step `checkpoint` saved where, under `config`, its run has nothing left to train (its max_steps,
    or, for as many epochs as it ran, its own count of steps); None while there is. transformers resumed from
    a run's last step trains one step past it (it checks for the end after a step), so train stops first."""
    try:
        state = json.loads((checkpoint / COMPLETE_MARKER).read_text())
    except (OSError, ValueError):
        return None
    step = int(state.get("global_step") or 0)
    target = int(config.get("max_steps") or -1)
    epochs = config.get("num_train_epochs")
    if target <= 0 and epochs is not None and float(epochs) == float(state.get("num_train_epochs") or -1):
        target = int(state.get("max_steps") or 0)
    return step if 0 < target <= step else None


def sharded_over(checkpoint: Path) -> int | None:
    """How many processes an FSDP2 checkpoint was saved by (its model folder holds one .distcp file for each),
    or None for a whole checkpoint, as DDP saves it."""
    from trlstack.run.sharding import SHARDED_MODEL_DIR, checkpoint_shards

    folder = checkpoint / SHARDED_MODEL_DIR
    return checkpoint_shards([path.name for path in folder.iterdir()]) if folder.is_dir() else None
