"""The launch decision, pure: settings + config + GPUs -> the accelerate command and the merged config."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trlstack import addresses, policy
from trlstack.command import Command
from trlstack.defaults import VLLM_ENV, Env
from trlstack.errors import UsageError
from trlstack.gpus import PCI_BUS_ID, Gpu, nccl_host_id
from trlstack.plan import memory
from trlstack.recipes import RUNNER, Recipe
from trlstack.run import asynchronous, sharding
from trlstack.run.checks import check_contradictions, resolve_recipe
from trlstack.run.ranks import fixed_kv_cache, push_bound, rank_sharing, training_processes
from trlstack.run.settings import TrainSettings
from trlstack.run.trl_config import model_init_kwargs, run_config


@dataclass(frozen=True)
class Launch:
    """What main() carries out: the command, the merged config and where it goes, and the notes to log."""

    command: Command
    config: dict[str, Any]
    config_path: Path
    notes: list[str]
    sharding: str = "none"
    processes: int = 1  # over all machines
    accelerate_config: dict[str, Any] | None = None  # --sharding fsdp2: written to accelerate_path
    accelerate_path: Path | None = None


def vllm_settings(settings: TrainSettings) -> dict[str, Any]:
    """The config keys that point the trainer at its generator."""
    keys: dict[str, Any] = {"use_vllm": True, "vllm_mode": settings.mode}
    if settings.mode == "server":
        keys.update(vllm_server_base_url=settings.vllm_url, vllm_group_port=settings.vllm_group_port)
    return keys


# accelerate's launcher run as a module: the parser and launch of `accelerate launch`, without the
# `accelerate` command first importing every other subcommand's module, which took 2.1 s of its 3.5 s in the
# image on a CPU machine and 8 s of 11.7 s on an H200 host, at every (re)start (bench/README.md, "Server mode
# on one GPU").
LAUNCHER = (sys.executable, "-m", "accelerate.commands.launch")


def accelerate_launch(processes: int, precision: str, cpu: bool, machines: int = 1) -> list[str]:
    """`accelerate launch` and every option it would otherwise guess or read from its own config file;
    `processes` on each of `machines` (accelerate counts them over all machines).

    accelerate's --cpu runs one process; more, on one machine or several, go through torch elastic
    (--multi_gpu), whatever the device: the config's use_cpu then makes them one gloo process group on the
    CPU.
    """
    total = processes * machines
    argv = [*LAUNCHER, *(["--cpu"] if cpu and total == 1 else [])]
    argv += ["--num_processes", str(total)]
    if total > 1:
        argv.append("--multi_gpu")
    mixed = precision if precision in ("bf16", "fp16") else "no"
    return [*argv, "--num_machines", str(machines), "--mixed_precision", mixed, "--dynamo_backend", "no"]


# accelerate turns FSDP on only for accelerators: on the CPU its processes make a gloo group (MULTI_CPU),
# which AcceleratorState never shards (FSDP is set only for the GPU-like distributed types).
CPU_SHARDING = (
    "--sharding fsdp2 with --cpu: accelerate shards only on GPUs (on the CPU it never turns FSDP on), so the "
    "smoke run cannot shard; drop --sharding (or set it to none) for --cpu"
)


def training_memory(
    settings: TrainSettings,
    config: Mapping[str, Any],
    recipe: Recipe,
    gpus: Sequence[Gpu],
    model_config: Mapping[str, Any] | None,
    processes: int,
) -> sharding.Memory:
    """What the sharding choice weighs: the estimate for the model's config.json (None: not readable here),
    the smallest training GPU, vLLM's share of it when it runs on the same GPU."""
    from trlstack.plan import SHARED_MEMORY_FRACTION

    if model_config is None:
        estimate, why = None, f"no config.json of {config.get('model_name_or_path')} is readable here"
    else:
        estimate, why = memory.estimate(model_config, recipe.name, config)
    sizes = [gpu.memory_bytes for gpu in gpus]
    smallest = min(size for size in sizes if size) if sizes and all(sizes) else None
    if smallest is not None:  # ranks sharing a GPU share its memory
        smallest //= settings.ranks_per_gpu
    server = SHARED_MEMORY_FRACTION if settings.share_gpus and settings.mode == "server" else None
    share = memory.vllm_share(settings.mode, config, recipe.name, server)
    if settings.mode == "colocate":  # an engine in each rank, each its share of the whole GPU
        share *= settings.ranks_per_gpu
    return sharding.Memory(estimate, why, smallest, share, processes)


def machine_options(settings: TrainSettings) -> list[str]:
    """accelerate's options that place this machine among several (none on one machine, where torch keeps its
    own port). The static rendezvous gives each machine the rank it is told, so the rank-0 machine, which
    hosts the rendezvous, is the one at --main-process-ip."""
    if settings.num_machines == 1:
        return []
    return [
        "--machine_rank",
        str(settings.machine_rank),
        "--main_process_ip",
        str(settings.main_process_ip),
        "--main_process_port",
        str(settings.main_process_port),
        "--rdzv_backend",
        "static",
    ]


def build_launch(
    settings: TrainSettings,
    user_config: Mapping[str, Any],
    source: str,
    gpus: Sequence[Gpu],
    checkpoint: Path | None = None,
    unavailable: Callable[[str], str | None] = lambda implementation: None,
    model_config: Mapping[str, Any] | None = None,
    route: Callable[[str, int], str] = addresses.local_address_toward,
    is_local: Callable[[str], bool] = addresses.is_local_address,
) -> Launch:
    """The accelerate command and the merged config for a run; UsageError naming the fix for bad input.

    `model_config` is the model's config.json (None: not readable), for the memory estimate that decides
    --sharding auto; `unavailable` says why a Hub kernel cannot be used; `route` and `is_local` find and
    check the trainer's address for a server on another host (addresses.trainer_host_ip)."""
    from trlstack.run import trl_config  # YAML: not imported for --help

    recipe = resolve_recipe(settings.recipe)
    check_contradictions(settings, recipe)
    config = run_config(settings, user_config, recipe, source)
    config["output_dir"] = settings.output_dir or config.get("output_dir") or f"outputs/{recipe.name}"
    seen = trl_config.with_passed(config, settings.extra, recipe)  # what memory is weighed on

    env, notes = rank_sharing(settings)
    if settings.cpu:
        processes, precision, why = settings.num_processes or 1, "fp32", "CPU run"
        attention: tuple[str, list[str]] = ("sdpa", [])
    else:
        if settings.mode == "server":
            # Where the server's workers reach this trainer for the weight-transfer rendezvous.
            host_ip, why = addresses.trainer_host_ip(settings.vllm_url, settings.host_ip, route, is_local)
            env[Env.VLLM_HOST_IP] = host_ip
            notes.append(f"{Env.VLLM_HOST_IP}={host_ip} ({why})")
            if settings.share_gpus:
                env.update(nccl_host_id("train"))
                notes.append(
                    f"sharing the GPUs with the server: {Env.NCCL_HOSTID}={env[Env.NCCL_HOSTID]}, the weight "
                    "push goes over NCCL sockets"
                )
        processes = training_processes(settings, gpus)
        env[Env.CUDA_DEVICE_ORDER] = PCI_BUS_ID  # CUDA numbers the GPUs as NVML, so `gpus` are CUDA's
        if recipe.server_only:
            config.update(asynchronous.config_keys(settings))
        else:
            config.update(vllm_settings(settings))
            bound, bound_notes = push_bound(settings)
            env.update(bound)
            notes += bound_notes
        if settings.mode == "colocate":
            env.update(VLLM_ENV)  # vLLM runs inside the trainer
            kv_env, kv_notes = fixed_kv_cache(
                settings, gpus, memory.vllm_share("colocate", seen, recipe.name, None)
            )
            env.update(kv_env)
            notes += kv_notes
        if "bf16" in user_config or "fp16" in user_config:
            precision = "bf16" if config.get("bf16") else "fp16" if config.get("fp16") else "fp32"
            why = f"set in {source}"
        else:
            precision, why = policy.precision(gpus)
            config["bf16"], config["fp16"] = precision == "bf16", precision == "fp16"
        # async-grpo's trainer always uses tree-packing attention: nothing to choose (or ask the Hub about)
        attention = ("sdpa", []) if recipe.server_only else policy.choose_attention(gpus, unavailable)
    notes.append(f"precision {precision} ({why})")
    if settings.num_machines > 1:
        where = f"{settings.main_process_ip}:{settings.main_process_port}"
        notes.append(f"machine rank {settings.machine_rank} of {settings.num_machines}, meeting at {where}")

    total = processes * settings.num_machines
    if settings.cpu and settings.sharding == "fsdp2":
        raise UsageError(CPU_SHARDING)
    weighed = training_memory(settings, seen, recipe, gpus, model_config, total)
    asked = settings.sharding
    if recipe.server_only:  # several ranks of TRL's AsyncGRPOTrainer only with FSDP2, and at most two
        asked, rank_notes = asynchronous.sharding_for(total, settings.sharding)
        notes += rank_notes
    chosen = sharding.choose(asked, weighed, settings.cpu)
    notes += [] if settings.cpu else weighed.lines()
    notes.append(f"sharding {chosen.sharding} ({chosen.why})")

    init_kwargs = model_init_kwargs(config, source)
    if recipe.server_only:
        notes += asynchronous.NOTES
    elif "attn_implementation" in init_kwargs or config.get("attn_implementation"):
        notes.append(f"attention as set in {source}")
    else:
        implementation, skipped = attention
        notes += [f"attention: {note}" for note in skipped] + [f"attention {implementation}"]
        config["model_init_kwargs"] = {**init_kwargs, "attn_implementation": implementation}

    if config.pop("enable_jit_checkpoint", False):
        notes.append(f"enable_jit_checkpoint in {source} left off: train saves a checkpoint when stopped")

    if checkpoint is not None and not user_config.get("resume_from_checkpoint"):
        config["resume_from_checkpoint"] = str(checkpoint)
        notes.append(f"resuming from {checkpoint}")

    if recipe.name == "online-dpo" or recipe.server_only:
        env[Env.TRL_EXPERIMENTAL_SILENCE] = (
            "1"  # its trainer lives in trl.experimental; we chose it knowingly
        )
    path = trl_config.merged_path(config["output_dir"], recipe)
    layout: dict[str, Any] | None = None
    if chosen.sharding == "fsdp2":
        layout = sharding.accelerate_config(
            processes,
            settings.num_machines,
            settings.machine_rank,
            precision,
            settings.main_process_ip,
            settings.main_process_port,
        )
        launcher = [*LAUNCHER, "--config_file", str(path.with_name(sharding.ACCELERATE_NAME))]
    else:
        launcher = accelerate_launch(processes, precision, settings.cpu, settings.num_machines)
        launcher += machine_options(settings)
    argv = [
        *launcher,
        "-m",
        RUNNER,  # runs recipe.module so that a stop signal ends it with a checkpoint
        recipe.module,
        "--config",
        str(path),
    ]
    return Launch(
        Command(argv=argv + settings.extra, env=env),
        config=config,
        config_path=path,
        notes=notes,
        sharding=chosen.sharding,
        processes=total,
        accelerate_config=layout,
        accelerate_path=path.with_name(sharding.ACCELERATE_NAME) if layout else None,
    )
