"""A GPU plan as .env holds it: the keys compose passes to both roles, checked as the roles will read them
before either starts (`trlstack plan --check`, compose's plan-check service). The colocate layout
(TRLSTACK_VARIANT=colocate, the one-GPU plan) runs the trainer alone, so it needs TRAIN_GPUS only, and a
service that needs a vLLM server (vllm itself, async-grpo) is refused there with the way to get one."""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Mapping

from trlstack.defaults import DEFAULT_GROUP_PORT, DEFAULT_VLLM_PORT, Env
from trlstack.errors import UsageError
from trlstack.gpus import is_index, parse_gpu_spec
from trlstack.option_types import fraction, parse_bool
from trlstack.plan import COLOCATE_VARIANT, ENV_KEYS, ROLE_VARIABLES
from trlstack.plan.rules import ENV_FILE, Layout, check_layout, check_no_server, check_processes
from trlstack.transfer import CHOICES, IPC, check, resolve

# The compose layouts TRLSTACK_VARIANT picks (compose/<name>.yaml); an unset one is shared, compose's default.
LAYOUT_VARIANTS = ("shared", "isolated", COLOCATE_VARIANT)

REWRITE = "`trlstack plan --format env -o .env` writes one"
SERVER_PLAN = "`trlstack plan --share-gpus --format env -o .env` writes the shared-GPU server layout"
# The compose services that need a vLLM server: the server itself, and the trainer that has no colocate mode.
NEEDS_SERVER = {
    "vllm": "the vllm service is a vLLM server",
    "async-grpo": "async-grpo generates only through a vLLM server (it has no colocate mode)",
}
SERVICES = ("vllm", "grpo", "rloo", "online-dpo", "async-grpo")
_INDEX_LIST = re.compile(r"^\d+(,\d+)*$", re.ASCII)


def _env_gpus(values: Mapping[str, str], key: str) -> tuple[int, ...]:
    """The GPU indices of a .env key (compose passes it unchanged to CUDA_VISIBLE_DEVICES, device_ids)."""
    raw = values.get(key, "")
    if not raw.strip():
        near = difflib.get_close_matches(key, [name for name in values if values[name]], n=1, cutoff=0.8)
        typo = f" ({near[0]} is set: rename it {key})" if near else ""
        raise UsageError(f"{key} is not set{typo}; write .env with `trlstack plan --format env -o .env`.")
    if not _INDEX_LIST.match(raw):
        try:
            indices = parse_gpu_spec(raw, key)
        except UsageError:
            raise UsageError(
                f"{key}={raw!r} in .env is not a list of GPU indices; write the indices nvidia-smi shows, "
                f"separated by commas (e.g. {key}=0,1); {REWRITE}."
            ) from None
        written = ",".join(map(str, indices))
        raise UsageError(
            f"{key}={raw!r} in .env: compose hands it unchanged to CUDA_VISIBLE_DEVICES and Docker's "
            f"device_ids, which take GPU indices separated by commas; write {key}={written}."
        )
    return parse_gpu_spec(raw, key)


def _env_count(values: Mapping[str, str], key: str) -> int | None:
    raw = values.get(key, "")
    if not raw:
        return None  # compose passes an empty value; the role then uses its default
    if not is_index(raw) or int(raw) < 1:
        raise UsageError(f"{key}={raw!r} in .env is not a positive whole number; fix or remove the line.")
    return int(raw)


def _env_port(values: Mapping[str, str], key: str, default: int) -> int:
    raw = values.get(key, "")
    if not raw:
        return default
    if not is_index(raw) or not 1 <= int(raw) <= 65535:
        raise UsageError(f"{key}={raw!r} in .env is not a TCP port (1-65535); fix or remove the line.")
    return int(raw)


def _env_switch(values: Mapping[str, str], key: str) -> bool:
    raw = values.get(key, "")
    try:
        return bool(raw.strip()) and parse_bool(raw)
    except ValueError:
        raise UsageError(f"{key}={raw!r} in .env is not 1 or 0 (yes/no); fix or remove the line.") from None


def _env_fraction(values: Mapping[str, str], key: str) -> float | None:
    raw = values.get(key, "")
    if not raw:
        return None
    try:
        return fraction(raw)
    except (ValueError, argparse.ArgumentTypeError):
        raise UsageError(
            f"{key}={raw!r} in .env is not a fraction above 0 and at most 1; fix or remove the line."
        ) from None


def _env_transfer(values: Mapping[str, str], share: bool, variant: str) -> None:
    """WEIGHT_TRANSFER as both roles will read it: empty (auto), or a transport that reaches the server."""
    key = Env.PLAN_WEIGHT_TRANSFER
    raw = values.get(key, "")
    if not raw:
        return
    if raw not in CHOICES:
        raise UsageError(f"{key}={raw!r} in .env is not one of {', '.join(CHOICES)}; fix or remove the line.")
    if raw == IPC and variant == "isolated":
        raise UsageError(
            f"{key}=ipc in .env: CUDA IPC needs the two roles in one IPC and PID namespace on loopback, and "
            f"{Env.VARIANT}=isolated keeps them apart (it always pushes over NCCL); write {key}=nccl, or use "
            "the shared layout."
        )
    try:
        check(resolve(raw, share), share)
    except UsageError:
        raise UsageError(
            f"{key}={raw} in .env hands the server CUDA-IPC handles to the trainer's GPU memory, which needs "
            f"the two on the same GPUs ({Env.PLAN_SHARE_GPUS}=1); write {key}=nccl for disjoint GPUs "
            f"({REWRITE})."
        ) from None


def _ranks_per_gpu(values: Mapping[str, str]) -> int:
    key = Env.RANKS_PER_GPU  # the trainer's own variable, which compose passes on unchanged
    return _env_count(values, key) or 1


def check_colocate(values: Mapping[str, str], service: str | None) -> str:
    """Check a colocate plan: the trainer's GPUs and processes; no server, so nothing that needs one."""
    variant = f"{Env.VARIANT}={COLOCATE_VARIANT}"
    train_key, share_key = Env.PLAN_TRAIN_GPUS, Env.PLAN_SHARE_GPUS
    if service in NEEDS_SERVER:
        raise UsageError(
            f"{NEEDS_SERVER[service]}, but {variant} (the one-GPU plan) runs vLLM inside the trainer "
            f"and no server. {SERVER_PLAN} ({Env.VARIANT}=shared, {share_key}=1): "
            "the server and the trainer on the same GPU."
        )
    if _env_switch(values, share_key):
        raise UsageError(
            f"{share_key}={values[share_key]} runs a vLLM server beside the trainer, but {variant} runs vLLM "
            "inside the "
            f"trainer and no server; remove {share_key} for colocate, or {SERVER_PLAN}."
        )
    transfer_key = Env.PLAN_WEIGHT_TRANSFER
    if values.get(transfer_key, "").strip():
        raise UsageError(
            f"{transfer_key}={values[transfer_key]} sets how weights reach a vLLM server, but {variant} runs "
            f"vLLM inside the trainer and no server; remove {transfer_key} for colocate, or {SERVER_PLAN}."
        )
    tp = _env_count(values, Env.PLAN_TENSOR_PARALLEL_SIZE)
    check_no_server(tp, _env_fraction(values, Env.PLAN_GPU_MEMORY_UTILIZATION), ENV_FILE, variant)
    train = _env_gpus(values, train_key)
    processes = _env_count(values, Env.PLAN_NUM_PROCESSES)
    where = ENV_FILE.train.of(values[train_key])
    check_processes(processes, len(train), _ranks_per_gpu(values), ENV_FILE, where)
    return f"{variant}: training on {train_key}={values[train_key]} with vLLM inside the trainer, no server"


def check_variant(values: Mapping[str, str]) -> str:
    """The compose layout TRLSTACK_VARIANT names ("" for compose's default); UsageError for one compose has
    no file for."""
    variant = values.get(Env.VARIANT, "").strip()
    if variant and variant not in LAYOUT_VARIANTS:
        raise UsageError(
            f"{Env.VARIANT}={values[Env.VARIANT]!r} in .env names no compose layout: compose includes "
            f"compose/<{Env.VARIANT}>.yaml, so write one of {', '.join(LAYOUT_VARIANTS)}, spelled so."
        )
    return variant


def check_spellings(values: Mapping[str, str]) -> None:
    """One name a setting: a plan key written as the role's variable (ROLE_VARIABLES), which compose would
    leave out or let win unseen, is refused naming the key to write instead."""
    for key, variable in ROLE_VARIABLES.items():
        written = values.get(variable, "")
        if not written.strip():
            continue
        beside = f", beside {key}={values[key]}," if values.get(key, "").strip() else ""
        raise UsageError(
            f"{variable}={written} in .env (or compose's environment){beside} is the role's name for {key}, "
            f"which .env holds under the plan's name, {key}; write {key}={written} and remove {variable}."
        )


def check_env(values: Mapping[str, str], service: str | None = None) -> str:
    """Check a plan as .env holds it (`values`: ENV_KEYS and TRLSTACK_VARIANT as compose passes them), as
    the roles will read it, for `service` (one of SERVICES) or any; a summary, or UsageError naming the key
    as the user wrote it. The rules are the plan's own (plan/rules.py)."""
    check_spellings(values)
    variant = check_variant(values)
    if variant == COLOCATE_VARIANT:
        return check_colocate(values, service)
    serve_key, train_key, tp_key, dp_key, processes_key, port_key, group_key, share_key, memory_key, _ = (
        ENV_KEYS
    )
    serve, train = _env_gpus(values, serve_key), _env_gpus(values, train_key)
    share = _env_switch(values, share_key)
    layout = Layout(
        serve=serve,
        train=train,
        tensor_parallel_size=_env_count(values, tp_key),
        data_parallel_size=_env_count(values, dp_key),
        share_gpus=share,
        gpu_memory_utilization=_env_fraction(values, memory_key),
        port=_env_port(values, port_key, DEFAULT_VLLM_PORT),
        group_port=_env_port(values, group_key, DEFAULT_GROUP_PORT),
        processes=_env_count(values, processes_key),
        ranks_per_gpu=_ranks_per_gpu(values),
    )
    sizes = check_layout(layout, ENV_FILE)
    _env_transfer(values, share, variant)
    how = "share their GPUs" if share else "are disjoint"
    return (
        f"{serve_key}={values[serve_key]} and {train_key}={values[train_key]} {how}; vLLM on "
        f"{len(serve)} GPU{'s' if len(serve) > 1 else ''} (tensor-parallel {sizes.tensor_parallel_size} x "
        f"data-parallel {sizes.data_parallel_size}), training on {len(train)}"
    )
