"""Whether the output folder's disk has room for a checkpoint, decided before a run starts.

A checkpoint holds the trained weights and the optimizer's states: AdamW (TRL's default `optim`) keeps two
moments per weight, each in the weights' dtype, so 3 copies of the weights, 12 bytes a parameter for
float32 and 6 for bf16 weights (the CPU smoke's tiny model, 358,784 parameters: 4.3 MB counted, 4.4 MB as
saved). Gradients and a reference model are not saved; the tokenizer, the configs, the RNG and trainer
states add a few MB, which the count leaves out: it is a floor, so a disk below it cannot hold one
checkpoint. The parameters are counted from config.json (plan/memory.py), without torch. Where they cannot
be (an architecture not counted there, an adapter, another optimizer), the size is unknown and train warns
instead of refusing.

A save that still runs out of room mid-run is caught in the rank (rank/space.py) and reported by train
(roles/train/reports.py).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trlstack.defaults import Env
from trlstack.errors import UsageError
from trlstack.plan import memory

# The copies of the weights a checkpoint holds, each in the weights' dtype: the weights, AdamW's two moments.
CHECKPOINT_COPIES = 3


def checkpoint_bytes(
    config: Mapping[str, Any], model_config: Mapping[str, Any] | None
) -> tuple[int | None, str]:
    """(the bytes one checkpoint of this run takes at least, how they were counted), or (None, why unknown),
    for the merged TRL `config` and the model's config.json."""
    if model_config is None:
        return None, "the model's config.json is not readable here"
    if config.get("use_peft"):
        return None, "use_peft saves an adapter, whose size is not counted"
    optim = str(config.get("optim") or "adamw_torch")
    if not optim.startswith("adamw"):
        return None, f"optim {optim}'s states are not counted (AdamW's are)"
    parameters, how = memory.count_parameters(model_config)
    if parameters is None:
        return None, how
    dtype = memory.weights_dtype(config, model_config)
    if dtype is None:
        return None, f"model_init_kwargs.dtype is not one of {', '.join(memory.WEIGHT_BYTES)}"
    copies = 1 if config.get("save_only_model") else CHECKPOINT_COPIES
    what = "the weights (save_only_model)" if copies == 1 else "the weights and AdamW's two moments"
    each = copies * memory.WEIGHT_BYTES[dtype]
    return parameters * each, f"{parameters:,} parameters x {each} bytes: {what} in {dtype}"


def room_for_checkpoint(
    folder: Path, free: int, need: int | None, how: str, flag: str = f"--output-dir ({Env.OUTPUT_DIR})"
) -> str | None:
    """UsageError naming the fix (another output folder: `flag`) when `free` bytes cannot hold one checkpoint
    of `need` bytes; a warning to show where `need` is unknown (`how` says why); None when it fits."""
    if need is None:
        return (
            f"cannot tell how much room a checkpoint needs ({how}); {size(free)} free for {folder}: "
            "a save that finds the disk full ends the run, and a rerun resumes from the last whole checkpoint"
        )
    if free >= need:
        return None
    raise UsageError(
        f"{folder} has {size(free)} free, and one checkpoint of this run takes at least {size(need)} "
        f"({how}): the first save would fill the disk. Free space there, or choose another {flag} on a disk "
        "with room for the checkpoints you keep (save_total_limit N keeps the N newest)."
    )


def free_space(folder: Path) -> int:
    """The bytes this process may still write on the disk of `folder`, or of its nearest existing parent."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    return shutil.disk_usage(existing).free


def size(count: float) -> str:
    """A byte count for people: 4.3 MB, 6.1 GB (powers of 1000, as df -H and file managers show them)."""
    for unit in ("bytes", "kB", "MB", "GB", "TB"):
        if abs(count) < 1000 or unit == "TB":
            return f"{count:.0f} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1000
    raise AssertionError("unreachable")
