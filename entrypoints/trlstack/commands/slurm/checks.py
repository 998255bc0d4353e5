"""Every check of a job that needs nothing but its settings, made once: `check` returns the checked `Job`
that `render` takes, so rendering never checks again.

The roles keep their own guards on the cluster (serve-vllm's bind check, train's address toward the server,
its stale-run check and checkpoint on stop); what can be checked before submitting is checked here with the
same code: the plan, the arguments passed on to TRL and vLLM.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from trlstack.commands.slurm.layout import Layout, make_layout
from trlstack.commands.slurm.settings import RUNTIMES, SERVER_SETTINGS, SlurmSettings, limit_seconds
from trlstack.errors import UsageError
from trlstack.models import read_config
from trlstack.plan.rules import attention_heads, check_ports
from trlstack.recipes import Recipe, resolve_recipe
from trlstack.roles.serve import settings as serve
from trlstack.run import task, trl_config
from trlstack.run.checks import check_job
from trlstack.run.passthrough import VLLM, check_passthrough, receiver, script_args

INTERFACE = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")

# What the roles set themselves (trl_config.TAKEN, serve.TAKEN: the same keys), with what to do here.
TRAIN_TAKEN = {
    **trl_config.TAKEN,
    "config": "use --config (before `--`)",
    "vllm_mode": "use --serve-nodes 0 for vLLM inside every trainer",
    "vllm_server_base_url": "the script points every trainer at the server node",
    "vllm_group_port": "use --group-port",
}
SERVER_TAKEN = {
    **serve.TAKEN,
    **{
        dest: f"use trlstack slurm's --{dest.replace('_', '-')}"
        for dest in ("model", "port", *SERVER_SETTINGS)
    },
    "host": "the script binds the server node's cluster address",
    "tensor_parallel_size": "use trlstack slurm's --tensor-parallel-size",
    "data_parallel_size": "the plan sets it from --gpus-per-node and --tensor-parallel-size",
}

_CHECKED = object()  # held by `check` alone: a Job made anywhere else is refused


@dataclass(frozen=True)
class Job:
    """A job that passed every check: its settings (train's model the run's, which both roles get), its
    layout, its recipe and the run's config, and where that config came from: the file (`source`), the
    folder its paths are relative to (`root`: the task's, else the working folder) and the model's
    config.json (None: not readable here). Only `check` makes one."""

    settings: SlurmSettings
    layout: Layout
    recipe: Recipe
    config: dict[str, Any]
    source: Path = Path()
    root: Path = Path()
    model_config: Mapping[str, Any] | None = None
    made_by: object = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.made_by is not _CHECKED:
            raise TypeError(
                "a Job comes from trlstack.commands.slurm.checks.check(settings), which checks it"
            )


def check(settings: SlurmSettings) -> Job:
    """The checked job; UsageError naming the fix for a request that cannot run. The run is checked as train
    checks it on start, with the same code: its config, the arguments passed on to TRL and vLLM, its
    settings against the layout, which the plan makes with the attention heads of the run's model."""
    _check_request(settings)
    # the run as train takes it: the job's recipe, and the arguments after `--` for the TRL script
    train = replace(settings.train, recipe=settings.recipe, extra=list(settings.train_args))
    recipe = resolve_recipe(train.recipe)
    script = script_args(train.extra, recipe.name, TRAIN_TAKEN, "trlstack slurm")
    check_passthrough(settings.vllm_args, receiver(VLLM), SERVER_TAKEN, "serve-vllm", "in --vllm-args")
    source, root = task.config_path(train, recipe), task.base_folder(train, Path.cwd())
    config, _ = trl_config.run_config(train, trl_config.load_config(source), recipe, str(source), script)
    config.update(task.task_launch(train, config, {}, Path.cwd())[0])  # the task's paths absolute
    model = config.get("model_name_or_path")  # the run's: both roles get it
    if model != settings.train.model:
        settings = replace(settings, train=replace(settings.train, model=model))
    model_config = read_config(str(model), os.environ) if model else None
    heads = settings.num_heads if settings.num_heads is not None else attention_heads(model_config)
    layout = make_layout(replace(settings, num_heads=heads))  # the heads of the model's config.json
    ranks = None if layout.gpus_per_node is None else layout.gpus_per_node * layout.train_nodes
    check_job(train, recipe, layout.mode, "--serve-nodes 0", ranks and ranks * train.ranks_per_gpu)
    return Job(settings, layout, recipe, config, source, root, model_config, _CHECKED)


def _check_request(settings: SlurmSettings) -> None:
    """What the request's own values allow, before the layout: runtime and image, the server's arguments,
    shared paths, the network interface, binds, the stop's grace and the time limit, then the ports."""
    if settings.runtime not in RUNTIMES:
        raise UsageError(f"--runtime {settings.runtime!r}: choose one of {', '.join(RUNTIMES)}.")
    _check_image(settings)
    if settings.vllm_args and not settings.serve_nodes:
        raise UsageError(
            "--vllm-args go to the server node's `vllm serve`, and with --serve-nodes 0 there is none; drop "
            "them."
        )
    for name, path in (("--output-dir", settings.output_dir), ("--cache-dir", settings.cache)):
        if not path.startswith("/"):
            raise UsageError(f"{name} {path} must be an absolute path on storage every node shares.")
    if settings.network_interface is not None and not INTERFACE.match(settings.network_interface):
        raise UsageError(f"--network-interface {settings.network_interface!r} is not an interface name.")
    for bind in settings.bind:
        if not all(part.startswith("/") for part in bind.split(":")[:2]):
            raise UsageError(f"--bind {bind}: give SRC or SRC:DST as absolute paths.")
    if settings.stop_grace < 30:
        raise UsageError(
            f"--stop-grace {settings.stop_grace}: give the trainers at least 30 s to write a checkpoint."
        )
    limit = limit_seconds(settings.time) if settings.time else None
    if limit is not None and limit <= settings.stop_grace:
        raise UsageError(
            f"--time {settings.time} is {limit} s, no more than --stop-grace {settings.stop_grace}: the job "
            "would stop to requeue itself as soon as it started. Give a longer --time (or a shorter "
            "--stop-grace, at least 30)."
        )
    ports = settings.ports
    check_ports(
        {
            "--port": ports.port,
            "--group-port": ports.group_port,
            "--main-process-port": ports.main_process_port,
        }
    )


def _check_image(settings: SlurmSettings) -> None:
    if settings.runtime in ("apptainer", "pyxis") and not settings.image:
        kind = "a .sif file" if settings.runtime == "apptainer" else "an image reference or a .sqsh file"
        raise UsageError(
            f"--runtime {settings.runtime} needs --image ({kind}); make one from the built image with "
            f"`trlstack export --format {'sif' if settings.runtime == 'apptainer' else 'sqsh'} IMAGE`."
        )
    if settings.runtime == "apptainer" and not str(settings.image).endswith(".sif"):
        raise UsageError(
            f"--image {settings.image}: --runtime apptainer runs a .sif file; make one with "
            "`trlstack export --format sif IMAGE`."
        )
