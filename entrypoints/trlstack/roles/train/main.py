"""`train`'s command line and its side effects, in order (the package's docstring says which)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from trlstack import models, policy
from trlstack.command import require_program
from trlstack.errors import UsageError, run_main
from trlstack.files import write_atomically
from trlstack.gpus import Gpu
from trlstack.recipes import resolve_recipe
from trlstack.roles.command_line import Role, parse_role
from trlstack.roles.train import stopping
from trlstack.roles.train.preflight import check_served_model, say
from trlstack.run import checkpoints, outputs, space, task
from trlstack.run.checkpoints import newest_checkpoint
from trlstack.run.checks import check_overlap
from trlstack.run.launch import Launch, build_launch, render
from trlstack.run.resume import previous_run_to_move
from trlstack.run.settings import TrainSettings
from trlstack.run.task_check import require_task
from trlstack.run.weight_transfer import check_server, chosen

ROLE = Role(
    "train",
    "Train with a TRL recipe through `accelerate launch`, generating with the vLLM server. Arguments after "
    "`--` go to the TRL script (they override the config).",
    prints="the command and merged config",
    chooses="the training GPUs",
)

BANNER = """\
=====================================================================================
  SMOKE RUN (--cpu): no vLLM, fp32 on the CPU, {steps} tiny steps.
  It checks that model, data, rewards and checkpoints work end to end;
  it does not train a useful model. Drop --cpu on a GPU machine for the real run.
====================================================================================="""


def smoke_steps(launch: Launch) -> str:
    """The smoke run's step count as the TRL script will see it: a flag after `--` beats the config."""
    return str(launch.seen["max_steps"])


def write_files(files: list[tuple[Path, str]]) -> None:
    """Write the merged configs into the output folder; UsageError naming the fix where they cannot be."""
    for path, text in files:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(path, text)
        except OSError as error:
            raise UsageError(
                f"cannot write {path}: {error.strerror}; free space there or choose another --output-dir."
            ) from None
        say(f"wrote {path}")


def main(argv: Sequence[str] | None = None) -> int:
    return run_main("train", lambda: train(sys.argv[1:] if argv is None else argv, os.environ))


def train(argv: Sequence[str], environ: Mapping[str, str]) -> int:
    """train's steps in order: read the settings and the config, find the GPUs, decide the launch, then
    (unless previewing) wait for the server, write the merged config and run accelerate."""
    from trlstack.run import trl_config

    settings, args = parse_role(ROLE, TrainSettings, argv, environ)
    recipe = resolve_recipe(settings.recipe)
    source = task.config_path(settings, recipe)
    user_config = trl_config.load_config(source)
    gpus = training_gpus(settings, args.gpus, environ)
    launch, aside = decide(settings, user_config, source, gpus, args.print_command, environ)
    files = [(launch.config_path, trl_config.render(launch.config, str(source)))]
    if launch.accelerate_path is not None and launch.accelerate_config is not None:
        files.append((launch.accelerate_path, render(launch.accelerate_config)))
    if args.print_command:
        print(launch.command.shell())
        for path, text in files:
            print(f"# {path} (written when train runs):")
            print("\n".join(f"#   {line}" for line in text.splitlines()))
        return 0
    done = finished(launch)
    if done is not None:  # a restart after the last step (a restart policy, a resubmitted job): nothing to do
        say(done)
        return 0
    require_program(launch.command)
    # The task (rewards called on its rows, its data and model) before waiting for the server: seconds.
    root = task.base_folder(settings, Path.cwd())
    report = require_task(launch.config, recipe, source, root, "task check", settings.extra)
    say(report.text("task check"))
    if launch.mode == "server":  # decided with the launch: a run that names no server may be colocate
        wait_for_server(settings, launch.config["model_name_or_path"], environ)
    output_dir = Path(launch.config["output_dir"])
    if aside is not None:
        outputs.move_aside(output_dir, aside)
        say(f"moved {output_dir} to {aside}; nothing in it was changed or deleted")
    write_files(files)
    return stopping.run(launch.command, environ)


def finished(launch: Launch) -> str | None:
    """Why there is nothing to train: the checkpoint resumed from is the run's last step (its max_steps as the
    script sees it, a value after `--` included); None where there is."""
    resumed = launch.config.get("resume_from_checkpoint")
    step = checkpoints.finished(Path(resumed), launch.seen) if isinstance(resumed, str) else None
    if step is None:
        return None
    return (
        f"{resumed} is step {step}, where this run ends: nothing left to train, nothing started; raise "
        "max_steps to train on, or name another --output-dir."
    )


def training_gpus(settings: TrainSettings, preview: int | None, environ: Mapping[str, str]) -> list[Gpu]:
    """The GPUs this run trains on: none for --cpu, N alike for a preview (--gpus N), else the visible ones,
    refused where they overlap the server's (unless shared on purpose)."""
    from trlstack import gpus as gpu_probe

    if settings.cpu:
        return []
    if preview is not None:
        return [Gpu(index) for index in range(preview)]
    visible = gpu_probe.visible_gpus(environ)
    if visible and settings.serve_gpus and settings.mode == "server" and not settings.share_gpus:
        check_overlap(visible, settings.serve_gpus, gpu_probe.probe().gpus)
    return visible


def decide(
    settings: TrainSettings,
    user_config: Mapping[str, Any],
    source: Path,
    gpus: list[Gpu],
    preview: bool,
    environ: Mapping[str, str],
) -> tuple[Launch, Path | None]:
    """The launch, resuming the newest whole checkpoint of this run, and where the other run in the output
    folder goes (None: nowhere, it is this run or continued); logs the notes."""
    recipe = resolve_recipe(settings.recipe)
    output_dir = Path(settings.output_dir or user_config.get("output_dir") or f"outputs/{recipe.name}")
    if not preview:
        outputs.check_writable(output_dir)
    checkpoint, incomplete = newest_checkpoint(output_dir)
    model = settings.model or user_config.get("model_name_or_path")
    if model:  # a model folder of the task's, named relative to it
        model = task.local_folders({"model_name_or_path": model}, task.base_folder(settings, Path.cwd())).get(
            "model_name_or_path", model
        )
    model_config = models.read_config(str(model), environ) if model else None
    unavailable = policy.hub_kernel_unavailable

    def launch_from(checkpoint: Path | None) -> Launch:
        return build_launch(settings, user_config, str(source), gpus, checkpoint, unavailable, model_config)

    launch = launch_from(checkpoint)
    layout = (launch.sharding, launch.processes)
    aside = previous_run_to_move(settings, output_dir, recipe, launch.config, say, layout)
    if aside is not None:  # this run starts anew
        incomplete, launch = [], launch_from(None)
    for path in incomplete:
        say(f"{path} is incomplete (cut short while saving); left in place, not resumed from")
    if not preview:  # the disk this machine writes, not a preview's
        need, how = space.checkpoint_bytes(launch.config, model_config)
        warning = space.room_for_checkpoint(output_dir, space.free_space(output_dir), need, how)
        if warning:
            say(warning)
    if settings.cpu:
        print(BANNER.format(steps=smoke_steps(launch)), file=sys.stderr, flush=True)
    for note in launch.notes:
        say(note)
    return launch, aside


def wait_for_server(settings: TrainSettings, trained: str, environ: Mapping[str, str]) -> None:
    """Wait until the server answers, has a weight-transfer engine and serves the model trained."""
    from trlstack.roles.train import health

    health.wait_for_health(settings.server_url, settings.health_timeout)
    vllm_config = health.check_weight_transfer(settings.server_url)
    check_server(vllm_config, chosen(settings), settings.server_url)
    served = health.served_model(vllm_config)
    say(f"the vLLM server at {settings.server_url} is healthy and has a weight-transfer engine")
    if served:
        check_served_model(settings, served, trained, environ)
