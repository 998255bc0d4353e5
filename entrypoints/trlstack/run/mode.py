"""Where vLLM generates for a run that names no mode, decided as the plan decides it: on one GPU with no
server named, vLLM runs inside the trainer (plan.one_gpu_colocate), so `train grpo` on a one-GPU host trains
at once instead of waiting for a server nobody started; named or not, every other run reaches a server."""

from __future__ import annotations

from dataclasses import replace

from trlstack.defaults import DEFAULT_VLLM_URL, Env
from trlstack.errors import UsageError
from trlstack.plan import one_gpu_colocate
from trlstack.recipes import Recipe
from trlstack.run.settings import TrainSettings


def server_named(settings: TrainSettings) -> bool:
    """Whether the settings describe a server to train against: its address, or GPUs it runs on."""
    return settings.vllm_url is not None or settings.share_gpus or settings.serve_gpus is not None


def choose_mode(settings: TrainSettings, recipe: Recipe, gpus: int) -> tuple[TrainSettings, list[str]]:
    """The settings with vLLM's mode decided for a run on `gpus` training GPUs, and the note saying why: as
    asked (--vllm-mode, --cpu); else a server where one is named (server_named); else by the plan's one-GPU
    rule, colocate on one GPU (a recipe that has no colocate mode refused there, naming both ways to get a
    server), a server at DEFAULT_VLLM_URL on more."""
    if settings.cpu or settings.vllm_mode is not None:
        return settings, []
    named = server_named(settings)
    if not one_gpu_colocate(gpus, named):
        return replace(settings, vllm_mode="server"), []
    if recipe.server_only:
        raise UsageError(
            f"{recipe.name} generates only through a vLLM server, and on this one GPU none is named "
            f"(--vllm-url, {Env.VLLM_URL}). Start one beside the trainer and name it: `serve-vllm "
            f"--share-gpus` then `train {recipe.name} --share-gpus --vllm-url {DEFAULT_VLLM_URL}`; or "
            "with compose, `trlstack plan --share-gpus --format env -o .env` then "
            f"`docker compose up {recipe.name}`."
        )
    note = (
        f"vLLM mode colocate: one GPU and no server named (--vllm-url, {Env.VLLM_URL}), so vLLM runs inside "
        "the trainer, as `trlstack plan` plans one GPU; --vllm-mode server trains against a server instead"
    )
    return replace(settings, vllm_mode="colocate"), [note]
