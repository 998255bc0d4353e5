"""`train RECIPE`: run a TRL recipe with `accelerate launch`, generating with the vLLM server.

Decisions are pure (`build_launch`: settings + config + GPUs -> command and merged config); main() does the
side effects in order, so bad input stops before anything starts: read the config, probe the GPUs, wait
for the server and check its weight-transfer engine, write the merged config, then run accelerate as a child
that a stop signal ends with a checkpoint (stopping.py).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trlstack import addresses, outputs, policy, stopping
from trlstack.checkpoints import newest_checkpoint
from trlstack.command import Command, require_program
from trlstack.defaults import DEFAULT_GROUP_PORT, DEFAULT_HEALTH_TIMEOUT_S, DEFAULT_VLLM_URL, VLLM_ENV, Env
from trlstack.errors import UsageError, run_main
from trlstack.files import write_atomically
from trlstack.gpus import PCI_BUS_ID, Gpu, describe_indices, gpu_spec, nccl_host_id
from trlstack.option_types import one_of, positive_int, rank_number, wait_seconds
from trlstack.options import setting, switch
from trlstack.passthrough import check_passthrough, receiver
from trlstack.ports import group_port_setting, main_process_port_setting
from trlstack.recipes import RECIPES, RUNNER, Recipe
from trlstack.roles.command_line import Role, parse_role

ROLE = Role(
    "train",
    "Train with a TRL recipe through `accelerate launch`, generating with the vLLM server. Arguments after "
    "`--` go to the TRL script (they override the config).",
    prints="the command and merged config",
    chooses="the training GPUs",
)
VLLM_MODES = ("server", "colocate")


def checked_url(raw: str) -> str:
    """argparse type: an http(s)://HOST:PORT URL, without a trailing slash."""
    parts = urllib.parse.urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(f"{raw!r} is not an http(s)://HOST:PORT URL")
    try:
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} has an invalid port") from None
    return raw.rstrip("/")


def checked_host(raw: str) -> str:
    """argparse type: an IP address or host name."""
    if not raw or "/" in raw or " " in raw:
        raise argparse.ArgumentTypeError(f"{raw!r} is not an IP address or host name")
    return raw


@dataclass(frozen=True)
class TrainSettings:
    """train's settings: each field is a flag (`--output-dir`) and a variable (TRLSTACK_OUTPUT_DIR)."""

    recipe: str | None = setting(Env.RECIPE, f"one of {', '.join(RECIPES)}", positional=True)
    config: str | None = setting(Env.CONFIG, "YAML config in TRL's format (default: the recipe's own)")
    model: str | None = setting(Env.MODEL, "model to train; overrides model_name_or_path")
    dataset: str | None = setting(Env.DATASET, "dataset (Hub id or local path); overrides dataset_name")
    reward_model: str | None = setting(Env.REWARD_MODEL, "reward model judging completions")
    vllm_url: str = setting(Env.VLLM_URL, "the vLLM server", DEFAULT_VLLM_URL, checked_url)
    vllm_group_port: int = group_port_setting()
    host_ip: str | None = setting(
        Env.VLLM_HOST_IP,
        "this trainer's address as the server reaches it (NCCL rendezvous; default: 127.0.0.1 for a server "
        "on this machine, else the address this machine reaches the server from)",
        type=checked_host,
    )
    num_processes: int | None = setting(
        Env.NUM_PROCESSES, "training processes (default: visible GPUs; with --cpu, 1)", type=positive_int
    )
    serve_gpus: tuple[int, ...] | None = setting(
        Env.SERVE_GPUS,
        "the server's GPU indices on the host, e.g. 0-3, to refuse training on them (needs all GPUs visible)",
        type=gpu_spec,
    )
    share_gpus: bool = switch(
        Env.SHARE_GPUS,
        "the server runs on these GPUs too (a plan with SHARE_GPUS=1): train although --serve-gpus overlaps, "
        "and name this role a host of its own to NCCL, which refuses two ranks on one GPU of one host",
    )
    output_dir: str | None = setting(Env.OUTPUT_DIR, "where checkpoints go; overrides output_dir")
    resume: bool = switch(
        Env.RESUME,
        "where the output folder holds another run (other model, data, reward...): continue it anyway",
    )
    fresh: bool = switch(
        Env.FRESH,
        "where the output folder holds another run: move it aside to OUTPUT_DIR.DATE-TIME and start anew",
    )
    health_timeout: float = setting(
        Env.HEALTH_TIMEOUT,
        "seconds to wait for the server's /health",
        DEFAULT_HEALTH_TIMEOUT_S,
        wait_seconds,
    )
    vllm_mode: str | None = setting(  # None means the default, server
        Env.VLLM_MODE, "server, or colocate (one GPU)", type=one_of(*VLLM_MODES)
    )
    cpu: bool = switch(Env.CPU, "smoke run on the CPU: no vLLM, tiny steps")
    allow_other_served_model: bool = switch(
        Env.ALLOW_OTHER_SERVED_MODEL,
        "train although the server serves a model not recognised as this one (by name, Hub repo or "
        "config.json), e.g. a copy this machine cannot read; another model fails at the first weight sync",
    )
    # Several machines: one train on each, placed by its rank (`trlstack slurm` sets these).
    num_machines: int = setting(
        Env.NUM_MACHINES, "training machines in all, one train on each", 1, positive_int
    )
    machine_rank: int = setting(Env.MACHINE_RANK, "this machine's rank among them, from 0", 0, rank_number)
    main_process_ip: str | None = setting(
        Env.MAIN_PROCESS_IP,
        "with --num-machines: the rank-0 machine's address, where the machines meet",
        type=checked_host,
    )
    main_process_port: int = main_process_port_setting()
    extra: list[str] = field(default_factory=list)  # after `--`: passed to the TRL script unchanged

    @property
    def mode(self) -> str:
        """ "cpu", "server" or "colocate"."""
        return "cpu" if self.cpu else (self.vllm_mode or "server")


# --cpu: a few tiny steps that show the whole pipeline works on any machine; not a useful training run.
SMOKE: dict[str, Any] = {
    "use_vllm": False,
    "use_cpu": True,
    "bf16": False,
    "fp16": False,
    "max_steps": 2,
    "per_device_train_batch_size": 2,
    "gradient_accumulation_steps": 1,
    "gradient_checkpointing": False,
    "warmup_steps": 0,
    "logging_steps": 1,
    "save_strategy": "steps",
    "save_steps": 1,
    "report_to": "none",
    "dataloader_num_workers": 0,
}
SMOKE_BY_RECIPE: dict[str, dict[str, Any]] = {
    "grpo": {"num_generations": 2, "max_completion_length": 16, "log_completions": False},
    "rloo": {"num_generations": 2, "max_completion_length": 16, "log_completions": False},
    "online-dpo": {"max_new_tokens": 16, "max_length": 128},
}

BANNER = """\
=====================================================================================
  SMOKE RUN (--cpu): no vLLM, fp32 on the CPU, {steps} tiny steps.
  It checks that model, data, rewards and checkpoints work end to end;
  it does not train a useful model. Drop --cpu on a GPU machine for the real run.
====================================================================================="""


@dataclass(frozen=True)
class Launch:
    """What main() carries out: the command, the merged config and where it goes, and the notes to log."""

    command: Command
    config: dict[str, Any]
    config_path: Path
    notes: list[str]


def resolve_recipe(name: str | None) -> Recipe:
    choices = ", ".join(RECIPES)
    if not name:
        raise UsageError(f"name a recipe: train RECIPE, one of {choices} (or set {Env.RECIPE}).")
    if name not in RECIPES:
        raise UsageError(f"unknown recipe {name!r}; choose one of {choices}.")
    return RECIPES[name]


# TRL settings (argparse dests) train decides itself, and what to do instead; given after `--` they would
# override it unseen.
TAKEN = {
    "config": "use --config (before `--`)",
    "output_dir": "use --output-dir (checkpoints are looked for there)",
    "use_vllm": "use --cpu for a run without vLLM",
    "vllm_mode": "use --vllm-mode",
    "vllm_server_base_url": "use --vllm-url",
    "vllm_group_port": "use --vllm-group-port",
    "bf16": "use bf16/fp16 in the config file",
    "fp16": "use bf16/fp16 in the config file",
    "enable_jit_checkpoint": "train saves a checkpoint when stopped, in every process together",
}


def check_resume_choice(settings: TrainSettings) -> None:
    if settings.resume and settings.fresh:
        raise UsageError(
            f"--resume continues the other run in the output folder, --fresh moves it aside ({Env.RESUME}, "
            f"{Env.FRESH}); choose one."
        )


def check_contradictions(settings: TrainSettings, recipe: Recipe) -> None:
    check_passthrough(settings.extra, receiver(recipe.name), TAKEN, "train")
    check_resume_choice(settings)
    if settings.share_gpus and settings.mode != "server":
        raise UsageError(
            f"--share-gpus ({Env.SHARE_GPUS}) runs the trainer beside a vLLM server on the same GPUs, but "
            f"this is a {settings.mode} run, which starts no server; drop one of the two."
        )
    if settings.cpu and settings.vllm_mode is not None:
        raise UsageError(
            f"--cpu runs without vLLM, but --vllm-mode {settings.vllm_mode} (or {Env.VLLM_MODE}) asks "
            "for it; drop one of the two."
        )
    if settings.vllm_group_port == urllib.parse.urlsplit(settings.vllm_url).port:
        raise UsageError(
            f"--vllm-group-port {settings.vllm_group_port} is the server's HTTP port in --vllm-url; the "
            f"NCCL weight-transfer group needs another port (default {DEFAULT_GROUP_PORT})."
        )
    check_machines(settings)


def check_machines(settings: TrainSettings) -> None:
    """Several machines need each one's rank below their count and the rank-0 machine's address, one the
    others can dial: neither loopback nor the any-address, in any spelling."""
    if settings.machine_rank >= settings.num_machines:
        raise UsageError(
            f"--machine-rank {settings.machine_rank} ({Env.MACHINE_RANK}) is not below --num-machines "
            f"{settings.num_machines} ({Env.NUM_MACHINES}); ranks count from 0 to "
            f"{settings.num_machines - 1}."
        )
    if settings.num_machines == 1:
        return
    flag = f"--main-process-ip ({Env.MAIN_PROCESS_IP})"
    address = settings.main_process_ip
    if not address:
        raise UsageError(
            f"--num-machines {settings.num_machines} needs {flag}: the address of the machine with rank 0, "
            "which every other machine connects to."
        )
    if addresses.is_loopback(address) or addresses.is_any_address(address):
        raise UsageError(
            f"{flag} is {address}, which every machine reads as itself, so the machines would never meet; "
            "give the rank-0 machine's address on the network the machines share."
        )


def check_overlap(train: Sequence[Gpu], serve_indices: Sequence[int], machine: Sequence[Gpu]) -> None:
    """UsageError when a training GPU is one of the server's GPUs (compared by UUID)."""
    by_index = {gpu.index: gpu for gpu in machine}
    absent = [index for index in serve_indices if index not in by_index]
    if absent:
        raise UsageError(
            f"--serve-gpus names GPU {describe_indices(absent)}, but this machine shows GPUs "
            f"{describe_indices(list(by_index))}. Give the server's indices as the host numbers them "
            "(nvidia-smi), or leave --serve-gpus unset where this container sees only its own GPUs."
        )
    serving = {by_index[index].uuid: index for index in serve_indices if by_index[index].uuid}
    # A MIG device overlaps the GPU it is a slice of.
    shared = [uuid for uuid in (gpu.physical_uuid for gpu in train) if uuid in serving]
    if shared:
        names = ", ".join(f"GPU {serving[uuid]} ({uuid})" for uuid in shared)
        raise UsageError(
            f"the trainer would use {names}, which --serve-gpus gives the vLLM server. Give the two "
            "disjoint GPU sets through CUDA_VISIBLE_DEVICES (`trlstack plan` prints a split), on one "
            f"GPU use --vllm-mode colocate, or share the GPUs on purpose with --share-gpus "
            f"({Env.SHARE_GPUS}=1)."
        )


def _model_init_kwargs(config: Mapping[str, Any], source: str) -> dict[str, Any]:
    value = config.get("model_init_kwargs")
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            value = None
    if not isinstance(value, dict):
        raise UsageError(f"{source}: model_init_kwargs must be a mapping, e.g. {{dtype: bfloat16}}.")
    return dict(value)


def training_processes(settings: TrainSettings, gpus: Sequence[Gpu]) -> int:
    """One process per visible GPU unless told fewer."""
    if not gpus:
        raise UsageError(
            "train needs a CUDA GPU and none is visible. Check the driver (`trlstack doctor`) and "
            "CUDA_VISIBLE_DEVICES, give the container GPUs, or try --cpu for a smoke run."
        )
    processes = settings.num_processes or len(gpus)
    if processes > len(gpus):
        raise UsageError(
            f"--num-processes {processes} needs a GPU each, but {len(gpus)} are visible; lower it or "
            "make more GPUs visible with CUDA_VISIBLE_DEVICES."
        )
    return processes


def vllm_settings(settings: TrainSettings) -> dict[str, Any]:
    """The config keys that point the trainer at its generator."""
    keys: dict[str, Any] = {"use_vllm": True, "vllm_mode": settings.mode}
    if settings.mode == "server":
        keys.update(vllm_server_base_url=settings.vllm_url, vllm_group_port=settings.vllm_group_port)
    return keys


def accelerate_launch(processes: int, precision: str, cpu: bool, machines: int = 1) -> list[str]:
    """`accelerate launch` and every option it would otherwise guess or read from its own config file;
    `processes` on each of `machines` (accelerate counts them over all machines).

    accelerate's --cpu runs one process; more, on one machine or several, go through torch elastic
    (--multi_gpu), whatever the device: the config's use_cpu then makes them one gloo process group on the
    CPU.
    """
    total = processes * machines
    argv = ["accelerate", "launch", *(["--cpu"] if cpu and total == 1 else [])]
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


def run_config(
    settings: TrainSettings, user_config: Mapping[str, Any], recipe: Recipe, source: str
) -> dict[str, Any]:
    """The config that says what the run is: the user's, checked against the recipe, with --model, --dataset
    and --reward-model applied, and the smoke run's keys with --cpu (not yet train's choices for the machine);
    UsageError naming unknown keys and what is missing."""
    from trlstack import trainconfig  # YAML: not imported for --help

    trainconfig.check_keys(user_config, recipe, source)
    config = dict(user_config)
    overrides = {
        "model_name_or_path": settings.model,
        "dataset_name": settings.dataset,
        recipe.reward_model_key: settings.reward_model,
    }
    config.update({key: value for key, value in overrides.items() if value})
    if settings.dataset:
        config.pop("datasets", None)  # TRL prefers `datasets` over dataset_name; the flag must win
    trainconfig.check_required(config, recipe, source)
    if settings.cpu:
        config.update(SMOKE, **SMOKE_BY_RECIPE[recipe.name])
    return config


def build_launch(
    settings: TrainSettings,
    user_config: Mapping[str, Any],
    source: str,
    gpus: Sequence[Gpu],
    checkpoint: Path | None = None,
    unavailable: Callable[[str], str | None] = lambda implementation: None,
    route: Callable[[str, int], str] = addresses.local_address_toward,
    is_local: Callable[[str], bool] = addresses.is_local_address,
) -> Launch:
    """The accelerate command and the merged config for a run; UsageError naming the fix for bad input.

    `unavailable` says why a Hub kernel cannot be used; `route` and `is_local` find and check the trainer's
    address for a server on another host (addresses.trainer_host_ip)."""
    from trlstack import trainconfig  # YAML: not imported for --help

    recipe = resolve_recipe(settings.recipe)
    check_contradictions(settings, recipe)
    config = run_config(settings, user_config, recipe, source)
    config["output_dir"] = settings.output_dir or config.get("output_dir") or f"outputs/{recipe.name}"

    env: dict[str, str] = {}
    notes: list[str] = []
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
        config.update(vllm_settings(settings))
        if settings.mode == "colocate":
            env.update(VLLM_ENV)  # vLLM runs inside the trainer
        if "bf16" in user_config or "fp16" in user_config:
            precision = "bf16" if config.get("bf16") else "fp16" if config.get("fp16") else "fp32"
            why = f"set in {source}"
        else:
            precision, why = policy.precision(gpus)
            config["bf16"], config["fp16"] = precision == "bf16", precision == "fp16"
        attention = policy.choose_attention(gpus, unavailable)
    notes.append(f"precision {precision} ({why})")
    if settings.num_machines > 1:
        where = f"{settings.main_process_ip}:{settings.main_process_port}"
        notes.append(f"machine rank {settings.machine_rank} of {settings.num_machines}, meeting at {where}")

    init_kwargs = _model_init_kwargs(config, source)
    if "attn_implementation" in init_kwargs or config.get("attn_implementation"):
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

    if recipe.name == "online-dpo":
        env[Env.TRL_EXPERIMENTAL_SILENCE] = (
            "1"  # its trainer lives in trl.experimental; we chose it knowingly
        )
    path = trainconfig.merged_path(config["output_dir"], recipe)
    argv = [
        *accelerate_launch(processes, precision, settings.cpu, settings.num_machines),
        *machine_options(settings),
        "-m",
        RUNNER,  # runs recipe.module so that a stop signal ends it with a checkpoint
        recipe.module,
        "--config",
        str(path),
    ]
    return Launch(Command(argv=argv + settings.extra, env=env), config=config, config_path=path, notes=notes)


def previous_run_to_move(
    settings: TrainSettings,
    output_dir: Path,
    recipe: Recipe,
    config: Mapping[str, Any],
    tell: Callable[[str], None] | None = None,
) -> Path | None:
    """Where to move the other run in the output folder (--fresh), or None to resume what is there (the same
    run, or another one with --resume); UsageError showing the difference when neither was chosen. `tell`
    (default: train's log line) says which; trlstack slurm decides this on the submit host."""
    tell = tell or say
    previous = outputs.previous_run(output_dir, recipe.name)
    found = outputs.differences(previous, recipe.name, config) if previous else []
    if previous is None or not found:
        return None
    aside = outputs.aside_name(output_dir, datetime.datetime.now())
    if settings.resume:
        tell(f"continuing the run in {output_dir} although it differs (--resume): {'; '.join(found)}")
        return None
    if not settings.fresh:
        raise UsageError(outputs.refusal(output_dir, previous, found, aside))
    tell(f"the other run in {output_dir} differs ({'; '.join(found)}); --fresh moves it aside to {aside}")
    return aside


def check_served_model(
    settings: TrainSettings, served: str, trained: str, environ: Mapping[str, str]
) -> None:
    """UsageError, before anything starts, when the server serves another model than the one trained: TRL
    sends every parameter into the served model by name and shape."""
    from trlstack import models

    same, how = models.same_model(served, trained, lambda reference: models.read_config(reference, environ))
    if same:
        if served != trained:
            say(f"the server serves {served} and this run trains {trained}: one model ({how})")
        return
    flag = f"--allow-other-served-model ({Env.ALLOW_OTHER_SERVED_MODEL}=1)"
    if settings.allow_other_served_model:
        say(f"the server serves {served} and this run trains {trained}: allowed by {flag} ({how})")
        return
    raise UsageError(
        f"the vLLM server at {settings.vllm_url} serves {served}, but this run trains {trained}, and they "
        f"are not recognised as one model ({how}): TRL's first weight sync would fail. Serve and train the "
        f"same model (--model, or {Env.MODEL} in .env for both), or pass {flag} if they are one model under "
        "two names."
    )


def smoke_steps(launch: Launch) -> str:
    """The smoke run's step count as the TRL script will see it: a flag after `--` beats the config."""
    argv = launch.command.argv
    for at, word in enumerate(argv):
        if word == "--max_steps" and at + 1 < len(argv):
            return argv[at + 1]
        if word.startswith("--max_steps="):
            return word.split("=", 1)[1]
    return str(launch.config["max_steps"])


def say(message: str) -> None:
    print(f"train: {message}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    def body() -> int:
        from trlstack import gpus as gpu_probe
        from trlstack import health, trainconfig

        environ = os.environ
        settings, args = parse_role(ROLE, TrainSettings, sys.argv[1:] if argv is None else argv, environ)
        recipe = resolve_recipe(settings.recipe)
        config_path = Path(settings.config) if settings.config else recipe.bundled_config
        user_config = trainconfig.load_config(config_path)

        if settings.cpu:
            visible: list[Gpu] = []
        elif args.gpus is not None:
            visible = [Gpu(index) for index in range(args.gpus)]
        else:
            visible = gpu_probe.visible_gpus(environ)
            sharing = settings.share_gpus and settings.mode == "server"
            if visible and settings.serve_gpus and settings.mode == "server" and not sharing:
                check_overlap(visible, settings.serve_gpus, gpu_probe.probe().gpus)

        output_dir = Path(settings.output_dir or user_config.get("output_dir") or f"outputs/{recipe.name}")
        if not args.print_command:
            outputs.check_writable(output_dir)
        checkpoint, incomplete = newest_checkpoint(output_dir)
        launch = build_launch(
            settings, user_config, str(config_path), visible, checkpoint, policy.hub_kernel_unavailable
        )
        aside = previous_run_to_move(settings, output_dir, recipe, launch.config)
        if aside is not None:  # this run starts anew
            incomplete = []
            launch = build_launch(
                settings, user_config, str(config_path), visible, None, policy.hub_kernel_unavailable
            )
        for path in incomplete:
            say(f"{path} is incomplete (cut short while saving); left in place, not resumed from")
        if settings.cpu:
            print(BANNER.format(steps=smoke_steps(launch)), file=sys.stderr, flush=True)
        for note in launch.notes:
            say(note)

        if args.print_command:
            print(launch.command.shell())
            print(f"# {launch.config_path} (written when train runs):")
            print(
                "\n".join(
                    f"#   {line}" for line in trainconfig.render(launch.config, str(config_path)).splitlines()
                )
            )
            return 0
        require_program(launch.command)
        if settings.mode == "server":
            health.wait_for_health(settings.vllm_url, settings.health_timeout)
            served = health.served_model(health.check_weight_transfer(settings.vllm_url))
            say(f"the vLLM server at {settings.vllm_url} is healthy and has a weight-transfer engine")
            if served:
                check_served_model(settings, served, launch.config["model_name_or_path"], environ)
        if aside is not None:
            outputs.move_aside(output_dir, aside)
            say(f"moved {output_dir} to {aside}; nothing in it was changed or deleted")
        launch.config_path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(launch.config_path, trainconfig.render(launch.config, str(config_path)))
        say(f"wrote {launch.config_path}")
        return stopping.run(launch.command, environ)

    return run_main("train", body)
