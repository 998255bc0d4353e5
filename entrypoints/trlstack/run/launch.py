"""A training run's launch, pure: settings + config + GPUs -> accelerate's command, the merged TRL config and
accelerate's config file. What the run needs is decided by the stages of run/stages.py; this module turns
their result into accelerate's command line. roles/train/main.py carries it out.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trlstack import addresses
from trlstack.command import Command
from trlstack.gpus import Gpu
from trlstack.recipes import RUNNER
from trlstack.run import outputs, stages
from trlstack.run.settings import TrainSettings

ACCELERATE_NAME = "trlstack-accelerate.yaml"  # beside the merged TRL config in the output folder


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
    mode: str = "server"  # where vLLM generates, as decided for the run: cpu, server or colocate
    seen: Mapping[str, Any] = field(default_factory=dict)  # the config as the script sees it (with `--`)


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

    `checkpoint` is the one to resume from; `model_config` the model's config.json (None: not readable), for
    the memory estimate that decides --sharding auto; `unavailable` says why a Hub kernel cannot be used;
    `route` and `is_local` find and check the trainer's address for a server on another host."""
    run = stages.make_run(
        settings, user_config, source, gpus, checkpoint, model_config, unavailable, route, is_local
    )
    decided = stages.decide(run)
    processes, sharded = decided.accelerate["processes"], decided.accelerate["sharding"] == "fsdp2"
    path = outputs.merged_path(Path(decided.config["output_dir"]), run.recipe.name)
    precision = stages.precision_of(decided.config)
    layout: dict[str, Any] | None = None
    if sharded:
        layout = accelerate_config(processes, settings.num_machines, settings.machine_rank, precision,
                                   settings.main_process_ip, settings.main_process_port)  # fmt: skip
        launcher = [*LAUNCHER, "--config_file", str(path.with_name(ACCELERATE_NAME))]
    else:
        launcher = accelerate_launch(processes, precision, settings.cpu, settings.num_machines)
        launcher += machine_options(settings)
    # RUNNER runs recipe.module so that a stop signal ends it with a checkpoint
    argv = [*launcher, "-m", RUNNER, run.recipe.module, "--config", str(path), *settings.extra]
    return Launch(
        Command(argv=argv, env=decided.env),
        config=decided.config,
        config_path=path,
        notes=decided.notes,
        sharding="fsdp2" if sharded else "none",
        processes=processes * settings.num_machines,
        accelerate_config=layout,
        accelerate_path=path.with_name(ACCELERATE_NAME) if layout else None,
        mode=run.settings.mode,
        seen=run.seen,
    )


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


def accelerate_config(
    processes: int,
    machines: int,
    machine_rank: int,
    precision: str,
    main_process_ip: str | None = None,
    main_process_port: int | None = None,
) -> dict[str, Any]:
    """accelerate's config file for an FSDP2 run of `processes` on each of `machines` (accelerate counts them
    over all machines), as data."""
    config: dict[str, Any] = {
        "compute_environment": "LOCAL_MACHINE",
        "distributed_type": "FSDP",
        "num_processes": processes * machines,
        "num_machines": machines,
        "machine_rank": machine_rank,
        "mixed_precision": precision if precision in ("bf16", "fp16") else "no",
        "use_cpu": False,  # accelerate shards only on accelerators: FSDP on the CPU would launch one process
        "downcast_bf16": "no",
        "dynamo_config": {"dynamo_backend": "NO"},
        "fsdp_config": {
            "fsdp_version": 2,
            # each decoder layer its own unit (the classes in the model's _no_split_modules)
            "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
            # one process reads the weights from disk, the others get their shards from it
            "fsdp_cpu_ram_efficient_loading": True,
            "fsdp_sync_module_states": True,  # accelerate requires it with the above
            "fsdp_offload_params": False,
            # a layer's gathered weights are freed after its forward and gathered again for the backward
            "fsdp_reshard_after_forward": True,
            # checkpoints: every process writes its own shard; the final model is saved whole
            # (trlstack.rank.run), which TRL's weight push to vLLM does not need (it gathers each one)
            "fsdp_state_dict_type": "SHARDED_STATE_DICT",
            "fsdp_activation_checkpointing": False,  # gradient_checkpointing in the TRL config does this
        },
    }
    if machines > 1:
        config.update(
            main_process_ip=main_process_ip,
            main_process_port=main_process_port,
            rdzv_backend="static",
            same_network=True,
        )
    return config


def render(config: Mapping[str, Any]) -> str:
    import yaml

    header = "# Written by `train` for this run (--sharding fsdp2): accelerate's config; not read back.\n"
    return header + yaml.safe_dump(dict(config), sort_keys=False, default_flow_style=False)
