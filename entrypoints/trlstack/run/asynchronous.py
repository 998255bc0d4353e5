"""`train async-grpo`: what differs from the other recipes, pure.

TRL's AsyncGRPOTrainer generates only through a vLLM server (a rollout worker sends it requests while the
trainer trains), so colocate and the CPU smoke run are refused with the reason; its config names the server
by `vllm_server_base_url` alone (it opens the weight-transfer group on a port of its own choosing) and takes
no `use_vllm`/`vllm_mode`. Its model always uses tree-packing attention, so train chooses no attention here.
Several trainer ranks run only sharded with FSDP2 (`--sharding`, which auto then chooses); more than two are
refused: TRL's issues 6797 and 7103 report runs of more ranks hanging.

The pipeline's settings are declared in pipeline.py.
"""

from __future__ import annotations

from typing import Any

from trlstack.defaults import Env
from trlstack.errors import UsageError
from trlstack.recipes import Recipe
from trlstack.run.pipeline import PIPELINE
from trlstack.run.settings import TrainSettings

MAX_RANKS = 2  # trainer processes over all machines; more hang in TRL 1.16 (issues 6797, 7103)


def given(settings: TrainSettings) -> dict[str, Any]:
    """The pipeline settings given, by flag."""
    return {
        flag: getattr(settings, name)
        for flag, (name, _, _) in PIPELINE.items()
        if getattr(settings, name) is not None
    }


def check(settings: TrainSettings, recipe: Recipe) -> None:
    """UsageError for what a server-only recipe cannot do, and for its settings given to another recipe."""
    if not recipe.server_only:
        for flag in given(settings):
            env = PIPELINE[flag][2]
            raise UsageError(
                f"{flag} ({env}) sets the asynchronous pipeline, which only async-grpo has; this run is "
                f"{recipe.name}. Drop it, or train async-grpo."
            )
        return
    why = (
        f"{recipe.name} generates only through a vLLM server: TRL's AsyncGRPOTrainer has a rollout worker "
        "send the server requests while it trains, and no generator of its own"
    )
    if settings.cpu:
        raise UsageError(
            f"--cpu ({Env.CPU}) runs without vLLM, but {why}, and pushes its weights to it over NCCL, "
            "which needs a GPU. For a smoke run on the CPU, try `train grpo --cpu`."
        )
    if settings.vllm_mode == "colocate":
        raise UsageError(
            f"--vllm-mode colocate ({Env.VLLM_MODE}) runs vLLM inside the trainer, but {why}. Start the "
            "server (serve-vllm; on one GPU with --share-gpus beside the trainer) and drop --vllm-mode."
        )
    if settings.reward_model:
        raise UsageError(
            f"--reward-model ({Env.REWARD_MODEL}): {recipe.name} scores completions in a rollout process "
            "without a GPU, with reward functions only; set reward_funcs in the config instead."
        )
    if settings.weight_push_timeout is not None:
        raise UsageError(
            f"--weight-push-timeout ({Env.WEIGHT_PUSH_TIMEOUT}) bounds the weight push of grpo, rloo and "
            f"online-dpo; {recipe.name} pushes through TRL's own weight transfer, which "
            f"--weight-sync-timeout ({Env.WEIGHT_SYNC_TIMEOUT}) bounds. Drop it, or set that one."
        )


def config_keys(settings: TrainSettings) -> dict[str, Any]:
    """The config keys train sets for async-grpo: the server, and the pipeline settings given."""
    keys: dict[str, Any] = {"vllm_server_base_url": settings.server_url}
    for flag, value in given(settings).items():
        keys[PIPELINE[flag][1]] = value
    return keys


def sharding_for(total: int, asked: str) -> tuple[str, list[str]]:
    """The --sharding for `total` trainer processes of async-grpo, and the notes to log; UsageError past two
    processes, or for two unsharded."""
    if total > MAX_RANKS:
        raise UsageError(
            f"async-grpo with {total} trainer processes: TRL 1.16's AsyncGRPOTrainer hangs with more than "
            f"{MAX_RANKS} (its issues 6797 and 7103). Train on one or two GPUs (--num-processes, "
            f"{Env.NUM_PROCESSES}), or use grpo for more."
        )
    if total == 1:
        return asked, []
    if asked == "none":
        raise UsageError(
            f"async-grpo with {total} trainer processes and --sharding none ({Env.SHARDING}): TRL's "
            "AsyncGRPOTrainer runs several processes only sharded with FSDP2. Use --sharding fsdp2 (or "
            "auto), or one process."
        )
    return "fsdp2", [f"{total} trainer processes: FSDP2, which TRL's AsyncGRPOTrainer needs for several"]


NOTES = [
    "attention: tree packing, always, in async-grpo (tree_attention_kernel in the config chooses its kernel; "
    "the run's log says which serves)",
    "the weight-transfer group's port: an open one TRL chooses (async-grpo does not take --group-port)",
]
