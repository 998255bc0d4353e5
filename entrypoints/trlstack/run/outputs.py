"""The output folder of a run: whether this process can write it, and whether the run already there is the one
being started.

A restarted trainer resumes from the newest checkpoint in its folder, and compose gives each recipe one fixed
folder; so a run started with another model or other data would silently continue the old run's weights. The
merged config `train` writes there (trlstack-RECIPE.yaml) says what that run was: where the keys that make a
run what it is differ, `train` refuses, and the user chooses to resume anyway or to start afresh with the old
run moved aside under a dated name (never deleted).
"""

from __future__ import annotations

import datetime
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trlstack.defaults import Env
from trlstack.errors import UsageError
from trlstack.files import cannot_create_in

MERGED_PREFIX, MERGED_SUFFIX = "trlstack-", ".yaml"  # the merged config's name: trlstack-RECIPE.yaml

# The config keys that make a run what it is, each with why: resumed across a change, a checkpoint would go on
# training other weights, on other data or toward another reward than the run it came from. Every other key
# (learning rate, max_steps and epochs, saving, logging, evaluation, lengths, precision, attention, vLLM) may
# change between a stop and a resume.
RUN_DEFINING: dict[str, str] = {
    "model_name_or_path": "the weights being trained",
    "model_revision": "the weights being trained",
    "dataset_name": "the training data",
    "dataset_config": "the training data",
    "datasets": "the training data",
    "dataset_train_split": "the training data",
    "reward_funcs": "what is rewarded",
    "reward_weights": "what is rewarded",
    "reward_model_name_or_path": "what is rewarded (GRPO, RLOO)",
    "reward_model_path": "what is rewarded (Online DPO)",
    "use_peft": "what trains, an adapter or the whole model: the checkpoints differ in shape",
    "lora_r": "the adapter's shape",
    "lora_target_modules": "which layers the adapter changes",
    "per_device_train_batch_size": "what one step is: resume skips the data of the steps done",
    "gradient_accumulation_steps": "what one step is: resume skips the data of the steps done",
    "num_generations": "what one step is, and the group each completion's reward is compared within",
    "seed": "the data order that resume skips through",
}


# Writing ------------------------------------------------------------------------------------------------


def check_writable(output_dir: Path) -> None:
    """UsageError naming the fix when this process can neither write `output_dir` nor create it."""
    existing = output_dir
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(
            f"cannot make the output folder {output_dir}: {existing} is a file. Choose another --output-dir "
            f"({Env.OUTPUT_DIR})."
        )
    if os.access(existing, os.W_OK | os.X_OK):
        problem = cannot_create_in(existing)
        if problem is None:
            return
        raise UsageError(
            f"cannot make the output folder {output_dir}: nothing can be made in {existing} ({problem}; a "
            "read-only or pseudo file system such as /proc?). Choose another --output-dir "
            f"({Env.OUTPUT_DIR})."
        )
    info = existing.stat()
    uid, gid = os.getuid(), os.getgid()
    raise UsageError(
        f"cannot write the output folder {output_dir}: {existing} belongs to uid {info.st_uid} (mode "
        f"{stat.filemode(info.st_mode)}) and train runs as uid {uid}. Make it writable for uid {uid} "
        f"(`sudo chown -R {uid}:{gid} FOLDER`; under compose FOLDER is the host folder {Env.OUTPUTS}, "
        f"./outputs by default), run as its owner (UID and GID in .env), or choose another --output-dir "
        f"({Env.OUTPUT_DIR})."
    )


# The run already there ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PreviousRun:
    """The merged config a run left in the output folder."""

    path: Path
    recipe: str
    config: Mapping[str, Any] | None  # None: not a YAML mapping, so what the run was is unknown


def merged_path(output_dir: Path, recipe: str) -> Path:
    """Where train writes the run's merged config in its output folder: trlstack-RECIPE.yaml."""
    return output_dir / f"{MERGED_PREFIX}{recipe}{MERGED_SUFFIX}"


def previous_run(output_dir: Path, recipe: str) -> PreviousRun | None:
    """The run in `output_dir` that left checkpoints or a model, by its merged config (this recipe's first);
    None for a folder that holds no such run, or only runs from before train wrote merged configs."""
    if not output_dir.is_dir():
        return None
    entries = sorted(path for path in output_dir.iterdir() if not path.name.startswith("."))
    configs = [
        path
        for path in entries
        if path.name.startswith(MERGED_PREFIX) and path.name.endswith(MERGED_SUFFIX) and path.is_file()
    ]
    results = [path for path in entries if path not in configs]
    if not configs or not results:
        return None  # a run that stopped before it trained leaves nothing to continue
    own = merged_path(output_dir, recipe)
    path = own if own in configs else configs[0]
    return PreviousRun(path, path.name[len(MERGED_PREFIX) : -len(MERGED_SUFFIX)], _read(path))


def _read(path: Path) -> Mapping[str, Any] | None:
    import yaml

    try:
        config = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    return config if isinstance(config, dict) else None


def differences(previous: PreviousRun, recipe: str, config: Mapping[str, Any]) -> list[str]:
    """`key: old -> new` for the recipe and each run-defining key that differs; empty for the same run."""
    if previous.config is None:
        return [f"{previous.path.name} cannot be read as a config, so what that run was is unknown"]
    found = [f"recipe: {previous.recipe} -> {recipe}"] if previous.recipe != recipe else []
    for key in RUN_DEFINING:
        old, new = previous.config.get(key), config.get(key)
        if old != new:
            found.append(f"{key}: {_shown(old)} -> {_shown(new)}")
    return found


def _shown(value: Any) -> str:
    return "(unset)" if value is None else str(value)


def aside_name(output_dir: Path, now: datetime.datetime) -> Path:
    """Where --fresh moves a previous run: beside it, named by the time (a number added if that is taken)."""
    base = output_dir.with_name(f"{output_dir.name}.{now:%Y%m%d-%H%M%S}")
    aside, number = base, 1
    while aside.exists():
        number += 1
        aside = base.with_name(f"{base.name}-{number}")
    return aside


def refusal(output_dir: Path, previous: PreviousRun, found: list[str], aside: Path) -> str:
    lines = "\n".join(f"    {line}" for line in found)
    return (
        f"{output_dir} holds another run than this one (compared with its {previous.path.name}):\n{lines}\n"
        "Resuming would continue that run's checkpoints with these settings. Choose:\n"
        f"    --fresh ({Env.FRESH}=1): move it aside to {aside} and start this run anew\n"
        f"    --resume ({Env.RESUME}=1): continue it anyway, with the settings above\n"
        f"or give this run another --output-dir ({Env.OUTPUT_DIR})."
    )


def move_aside(output_dir: Path, aside: Path) -> None:
    try:
        output_dir.rename(aside)
    except OSError as error:
        raise UsageError(
            f"cannot move the other run {output_dir} aside to {aside}: {error.strerror}. Move or rename it "
            "yourself (nothing was deleted), or give this run another --output-dir."
        ) from None
