"""Where vLLM generates for a run that names no mode, decided as the plan decides it: on one GPU with no
server named, vLLM runs inside the trainer (plan.one_gpu_colocate), so `train grpo` on a one-GPU host trains
at once instead of waiting for a server nobody started; named or not, every other run reaches a server."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from trlstack.defaults import DEFAULT_VLLM_URL, Env
from trlstack.errors import UsageError
from trlstack.plan import one_gpu_colocate
from trlstack.plan.memory import count_parameters
from trlstack.recipes import Recipe
from trlstack.run.settings import TrainSettings
from trlstack.transfer import AUTO


def server_named(settings: TrainSettings) -> bool:
    """Whether the settings describe a server to train against: its address, the GPUs it runs on, or how the
    weights reach it."""
    described = settings.share_gpus or settings.serve_gpus is not None or settings.weight_transfer != AUTO
    return settings.vllm_url is not None or described


def choose_mode(
    settings: TrainSettings, recipe: Recipe, gpus: int, model_config: Mapping[str, Any] | None = None
) -> tuple[TrainSettings, list[str]]:
    """The settings with vLLM's mode decided for a run on `gpus` training GPUs, and the note saying why: as
    asked (--vllm-mode, --cpu); else a server where one is named (server_named); else by the plan's one-GPU
    rule for the model (`model_config`'s size; None: the default model's), colocate on one GPU. Where that
    rule wants a server, or the recipe has no colocate mode, none having been named, it is refused naming
    both ways on; on more GPUs, a server at DEFAULT_VLLM_URL."""
    if settings.cpu or settings.vllm_mode is not None:
        return settings, []
    named = server_named(settings)
    parameters = count_parameters(model_config)[0] if model_config else None
    colocate, why = one_gpu_colocate(gpus, named, parameters)
    if why and (recipe.server_only or not colocate):
        reason = (
            "generates only through a vLLM server" if recipe.server_only else f"runs best beside one ({why})"
        )
        raise UsageError(
            f"{recipe.name} {reason}, and on this one GPU none is named (--vllm-url, {Env.VLLM_URL}). Start "
            f"one beside the trainer and name it: `serve-vllm --share-gpus` then `train {recipe.name} "
            f"--share-gpus --vllm-url {DEFAULT_VLLM_URL}`; or with compose, `trlstack plan --share-gpus "
            f"--format env -o .env` then `docker compose up {recipe.name}`"
            + ("." if recipe.server_only else "; or --vllm-mode colocate for vLLM inside the trainer.")
        )
    if not colocate:
        return replace(settings, vllm_mode="server"), []
    note = (
        f"vLLM mode colocate: one GPU and no server named (--vllm-url, {Env.VLLM_URL}), so vLLM runs inside "
        "the trainer, as `trlstack plan` plans one GPU; --vllm-mode server trains against a server instead"
    )
    return replace(settings, vllm_mode="colocate"), [note]
