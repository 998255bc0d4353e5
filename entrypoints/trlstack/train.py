"""`train RECIPE`: run a TRL recipe with `accelerate launch`, generating with the vLLM server.

Decisions are pure (`build_launch`: settings + config + GPUs -> command and merged config); main() does the
side effects in order, so bad input stops before anything starts: read the config, probe the GPUs, wait
for the server and check its weight-transfer engine, write the merged config, then exec accelerate.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trlstack import policy, trainconfig
from trlstack.checkpoints import newest_checkpoint
from trlstack.command import Command, exec_command, require_program
from trlstack.errors import UsageError, run_main
from trlstack.gpus import Gpu, describe_indices, parse_gpu_spec
from trlstack.options import (
    Parser,
    add_preview,
    add_setting,
    add_switch,
    check_preview,
    port_number,
    positive_float,
    positive_int,
    split_extra,
)
from trlstack.recipes import RECIPES, Recipe

DEFAULT_VLLM_URL = "http://127.0.0.1:8000"
DEFAULT_GROUP_PORT = 51216
DEFAULT_HOST_IP = "127.0.0.1"
DEFAULT_HEALTH_TIMEOUT = 1800.0
DEFAULT_MAIN_PROCESS_PORT = 29500  # accelerate's and torchrun's rendezvous port
VLLM_MODES = ("server", "colocate")

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
class TrainSettings:
    recipe: str
    config: str | None = None
    model: str | None = None
    dataset: str | None = None
    reward_model: str | None = None
    vllm_url: str = DEFAULT_VLLM_URL
    vllm_group_port: int = DEFAULT_GROUP_PORT
    host_ip: str = DEFAULT_HOST_IP
    num_processes: int | None = None
    serve_gpus: str | None = None
    output_dir: str | None = None
    health_timeout: float = DEFAULT_HEALTH_TIMEOUT
    vllm_mode: str | None = None  # None means the default, server
    cpu: bool = False
    # Multi-node: this machine's place among the training machines (accelerate's --num_machines etc.).
    num_machines: int = 1
    machine_rank: int = 0
    main_process_ip: str | None = None
    main_process_port: int = DEFAULT_MAIN_PROCESS_PORT
    extra: list[str] = field(default_factory=list)

    @property
    def mode(self) -> str:
        """ "cpu", "server" or "colocate"."""
        return "cpu" if self.cpu else (self.vllm_mode or "server")


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
        raise UsageError(f"name a recipe: train RECIPE, one of {choices} (or set TRLSTACK_RECIPE).")
    if name not in RECIPES:
        raise UsageError(f"unknown recipe {name!r}; choose one of {choices}.")
    return RECIPES[name]


# TRL options train decides itself, and what to use instead; given after `--` they would override it unseen.
OWN_OPTIONS = {
    "--config": "--config (before `--`)",
    "--output_dir": "--output-dir (checkpoints are looked for there)",
    "--use_vllm": "--cpu for a run without vLLM",
    "--vllm_mode": "--vllm-mode",
    "--vllm_server_base_url": "--vllm-url",
    "--vllm_group_port": "--vllm-group-port",
    "--bf16": "bf16/fp16 in the config file",
    "--fp16": "bf16/fp16 in the config file",
}


def check_extra(extra: Sequence[str]) -> None:
    for word in extra:
        option = word.split("=", 1)[0]
        if option in OWN_OPTIONS:
            raise UsageError(
                f"{option} after `--` would override train's setting; use {OWN_OPTIONS[option]}."
            )


def check_contradictions(settings: TrainSettings) -> None:
    check_extra(settings.extra)
    if settings.cpu and settings.vllm_mode is not None:
        raise UsageError(
            f"--cpu runs without vLLM, but --vllm-mode {settings.vllm_mode} (or TRLSTACK_VLLM_MODE) asks "
            "for it; drop one of the two."
        )
    if settings.cpu and settings.num_processes not in (None, 1):
        raise UsageError(f"--cpu runs one process; drop --num-processes {settings.num_processes}.")
    check_machines(settings)
    if settings.vllm_group_port == urllib.parse.urlsplit(settings.vllm_url).port:
        raise UsageError(
            f"--vllm-group-port {settings.vllm_group_port} is the server's HTTP port in --vllm-url; the "
            "NCCL weight-transfer group needs another port (default 51216)."
        )


def check_machines(settings: TrainSettings) -> None:
    """A multi-node run needs every machine's rank below the count and the first machine's address."""
    if settings.machine_rank >= settings.num_machines:
        raise UsageError(
            f"--machine-rank {settings.machine_rank} is not below --num-machines {settings.num_machines}; "
            f"ranks count from 0 to {settings.num_machines - 1}."
        )
    if settings.num_machines > 1 and not settings.main_process_ip:
        raise UsageError(
            f"--num-machines {settings.num_machines} needs --main-process-ip: the address of the machine "
            "with rank 0, which every other machine connects to."
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
    shared = [gpu for gpu in train if gpu.uuid in serving]
    if shared:
        names = ", ".join(f"GPU {serving[gpu.uuid]} ({gpu.uuid})" for gpu in shared)
        raise UsageError(
            f"the trainer would use {names}, which --serve-gpus gives the vLLM server. Give the two "
            "disjoint GPU sets through CUDA_VISIBLE_DEVICES (`trlstack plan` prints a split), or on one "
            "GPU use --vllm-mode colocate."
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
    """`accelerate launch` and every option it would otherwise guess or read from its own config file.

    `processes` is per machine; accelerate wants the total over all `machines`.
    """
    total = processes * machines
    argv = ["accelerate", "launch", *(["--cpu"] if cpu else []), "--num_processes", str(total)]
    if total > 1 and not cpu:
        argv.append("--multi_gpu")
    mixed = precision if precision in ("bf16", "fp16") else "no"
    return [*argv, "--num_machines", str(machines), "--mixed_precision", mixed, "--dynamo_backend", "no"]


def machine_launch(settings: TrainSettings) -> tuple[list[str], dict[str, str]]:
    """accelerate's options and the environment that place this machine in a multi-node run (none on one).

    On GPUs torchrun meets the other machines through a c10d rendezvous at the rank-0 machine. On the CPU
    accelerate starts the script itself, and torch.distributed (gloo) finds its rank and world size in the
    environment, one process per machine.
    """
    if settings.num_machines == 1:
        return [], {}
    argv = ["--machine_rank", str(settings.machine_rank), "--main_process_ip", str(settings.main_process_ip)]
    argv += ["--main_process_port", str(settings.main_process_port)]
    if not settings.cpu:
        return [*argv, "--rdzv_backend", "c10d"], {}
    env = {"RANK": str(settings.machine_rank), "WORLD_SIZE": str(settings.num_machines)}
    env |= {"LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"}
    # accelerate would name the device cpu:0, which torch.load cannot map a checkpoint to on resume.
    return argv, {**env, "ACCELERATE_TORCH_DEVICE": "cpu"}


def build_launch(
    settings: TrainSettings,
    user_config: Mapping[str, Any],
    source: str,
    gpus: Sequence[Gpu],
    checkpoint: Path | None = None,
    unavailable: Callable[[str], str | None] = lambda implementation: None,
) -> Launch:
    """The accelerate command and the merged config for a run; UsageError naming the fix for bad input."""
    recipe = resolve_recipe(settings.recipe)
    check_contradictions(settings)
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
    config["output_dir"] = settings.output_dir or config.get("output_dir") or f"outputs/{recipe.name}"

    env: dict[str, str] = {}
    if settings.cpu:
        config.update(SMOKE, **SMOKE_BY_RECIPE[recipe.name])
        processes, precision, why = 1, "fp32", "CPU run"
        attention: tuple[str, list[str]] = ("sdpa", [])
    else:
        processes = training_processes(settings, gpus)
        config.update(vllm_settings(settings))
        if settings.mode == "server":
            env["VLLM_HOST_IP"] = settings.host_ip  # where the server's workers reach this trainer
        if "bf16" in user_config or "fp16" in user_config:
            precision = "bf16" if config.get("bf16") else "fp16" if config.get("fp16") else "fp32"
            why = f"set in {source}"
        else:
            precision, why = policy.precision(gpus)
            config["bf16"], config["fp16"] = precision == "bf16", precision == "fp16"
        attention = policy.choose_attention(gpus, unavailable)
    notes = [f"precision {precision} ({why})"]
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

    if checkpoint is not None and not user_config.get("resume_from_checkpoint"):
        config["resume_from_checkpoint"] = str(checkpoint)
        notes.append(f"resuming from {checkpoint}")

    if recipe.name == "online-dpo":
        env["TRL_EXPERIMENTAL_SILENCE"] = "1"  # its trainer lives in trl.experimental; we chose it knowingly
    path = trainconfig.merged_path(config["output_dir"], recipe)
    machine_argv, machine_env = machine_launch(settings)
    env.update(machine_env)
    argv = [
        *accelerate_launch(processes, precision, settings.cpu, settings.num_machines),
        *machine_argv,
        "-m",
        recipe.module,
        "--config",
        str(path),
    ]
    return Launch(Command(argv=argv + settings.extra, env=env), config=config, config_path=path, notes=notes)


def checked_url(raw: str) -> str:
    parts = urllib.parse.urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(f"{raw!r} is not an http(s)://HOST:PORT URL")
    try:
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} has an invalid port") from None
    return raw.rstrip("/")


def checked_host(raw: str) -> str:
    if not raw or "/" in raw or " " in raw:
        raise argparse.ArgumentTypeError(f"{raw!r} is not an IP address or host name")
    return raw


def machine_rank(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is not a rank (0 or more)")
    return value


def vllm_mode(raw: str) -> str:
    if raw not in VLLM_MODES:
        raise argparse.ArgumentTypeError(f"{raw!r} is not one of {', '.join(VLLM_MODES)}")
    return raw


def make_parser(environ: Mapping[str, str]) -> argparse.ArgumentParser:
    parser = Parser(
        prog="train",
        description="Train with a TRL recipe through `accelerate launch`, generating with the vLLM "
        "server. Arguments after `--` go to the TRL script (they override the config).",
    )
    parser.add_argument(
        "recipe",
        nargs="?",
        default=environ.get("TRLSTACK_RECIPE") or None,
        metavar="RECIPE",
        help=f"one of {', '.join(RECIPES)} [env TRLSTACK_RECIPE]",
    )

    def setting(flag, env, help, default=None, type=str):
        add_setting(parser, flag, env, help, default, type, environ=environ)

    setting("--config", "TRLSTACK_CONFIG", "YAML config in TRL's format (default: the recipe's own)")
    setting("--model", "TRLSTACK_MODEL", "model to train; overrides model_name_or_path")
    setting("--dataset", "TRLSTACK_DATASET", "dataset (Hub id or local path); overrides dataset_name")
    setting("--reward-model", "TRLSTACK_REWARD_MODEL", "reward model judging completions")
    setting("--vllm-url", "TRLSTACK_VLLM_URL", "the vLLM server", DEFAULT_VLLM_URL, checked_url)
    setting(
        "--vllm-group-port",
        "TRLSTACK_VLLM_GROUP_PORT",
        "port of the NCCL weight-transfer group",
        DEFAULT_GROUP_PORT,
        port_number,
    )
    setting(
        "--host-ip",
        "VLLM_HOST_IP",
        "this trainer's address as the server reaches it (NCCL rendezvous)",
        DEFAULT_HOST_IP,
        checked_host,
    )
    setting(
        "--num-processes",
        "TRLSTACK_NUM_PROCESSES",
        "training processes (default: visible GPUs)",
        type=positive_int,
    )
    setting(
        "--serve-gpus",
        "TRLSTACK_SERVE_GPUS",
        "the server's GPU indices on the host, e.g. 0-3, to refuse training on them (needs all GPUs visible)",
    )
    setting("--output-dir", "TRLSTACK_OUTPUT_DIR", "where checkpoints go; overrides output_dir")
    setting(
        "--health-timeout",
        "TRLSTACK_HEALTH_TIMEOUT",
        "seconds to wait for the server's /health",
        DEFAULT_HEALTH_TIMEOUT,
        positive_float,
    )
    setting("--vllm-mode", "TRLSTACK_VLLM_MODE", "server, or colocate (one GPU)", type=vllm_mode)
    add_switch(parser, "--cpu", "TRLSTACK_CPU", "smoke run on the CPU: no vLLM, tiny steps", environ=environ)
    machines = parser.add_argument_group("multi-node (one train per machine; `trlstack slurm` sets these)")
    add_setting(
        machines,
        "--num-machines",
        "TRLSTACK_NUM_MACHINES",
        "training machines in all",
        1,
        positive_int,
        environ=environ,
    )
    add_setting(
        machines,
        "--machine-rank",
        "TRLSTACK_MACHINE_RANK",
        "this machine's rank, from 0",
        0,
        machine_rank,
        environ=environ,
    )
    add_setting(
        machines,
        "--main-process-ip",
        "TRLSTACK_MAIN_PROCESS_IP",
        "address of the rank-0 machine, where the others meet",
        type=checked_host,
        environ=environ,
    )
    add_setting(
        machines,
        "--main-process-port",
        "TRLSTACK_MAIN_PROCESS_PORT",
        "rendezvous port on the rank-0 machine",
        DEFAULT_MAIN_PROCESS_PORT,
        port_number,
        environ=environ,
    )
    add_preview(parser, "the command and merged config")
    return parser


def parse_settings(
    argv: Sequence[str], environ: Mapping[str, str]
) -> tuple[TrainSettings, argparse.Namespace]:
    own, extra = split_extra(argv)
    args = make_parser(environ).parse_args(own)
    check_preview(args, "the training GPUs")
    settings = TrainSettings(
        recipe=args.recipe,
        config=args.config,
        model=args.model,
        dataset=args.dataset,
        reward_model=args.reward_model,
        vllm_url=args.vllm_url,
        vllm_group_port=args.vllm_group_port,
        host_ip=args.host_ip,
        num_processes=args.num_processes,
        serve_gpus=args.serve_gpus,
        output_dir=args.output_dir,
        health_timeout=args.health_timeout,
        vllm_mode=args.vllm_mode,
        cpu=args.cpu,
        num_machines=args.num_machines,
        machine_rank=args.machine_rank,
        main_process_ip=args.main_process_ip,
        main_process_port=args.main_process_port,
        extra=extra,
    )
    return settings, args


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
        from trlstack import health

        environ = os.environ
        settings, args = parse_settings(sys.argv[1:] if argv is None else argv, environ)
        recipe = resolve_recipe(settings.recipe)
        config_path = Path(settings.config) if settings.config else recipe.bundled_config
        user_config = trainconfig.load_config(config_path)

        if settings.cpu:
            visible: list[Gpu] = []
        elif args.gpus is not None:
            visible = [Gpu(index) for index in range(args.gpus)]
        else:
            visible = gpu_probe.visible_gpus(environ)
            if settings.serve_gpus and settings.mode == "server":
                serve = parse_gpu_spec(settings.serve_gpus, "--serve-gpus")
                check_overlap(visible, serve, gpu_probe.probe().gpus)

        output_dir = settings.output_dir or user_config.get("output_dir") or f"outputs/{recipe.name}"
        checkpoint, incomplete = newest_checkpoint(Path(output_dir))
        launch = build_launch(
            settings, user_config, str(config_path), visible, checkpoint, policy.hub_kernel_unavailable
        )
        for path in incomplete:
            say(f"{path} is incomplete (no trainer_state.json); left in place, not resumed from")
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
            trained = launch.config["model_name_or_path"]
            if served and served != trained:
                # A local copy of the same model is fine; a different model fails at the first weight sync.
                say(
                    f"note: the server serves {served} and this run trains {trained}; they must be the "
                    "same model (set --model / TRLSTACK_MODEL alike for serve-vllm and train)"
                )
        trainconfig.write_atomically(launch.config_path, trainconfig.render(launch.config, str(config_path)))
        say(f"wrote {launch.config_path}")
        exec_command(launch.command, environ)
        return 0  # not reached: exec replaced this process

    return run_main("train", body)
