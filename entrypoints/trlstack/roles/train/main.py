"""`train`'s command line and its side effects, in order (the package's docstring says which)."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from trlstack import models, policy
from trlstack.command import Command, require_program
from trlstack.errors import run_main
from trlstack.files import write_atomically
from trlstack.gpus import Gpu
from trlstack.roles.command_line import Role, parse_role
from trlstack.roles.train import stopping
from trlstack.roles.train.launch import Launch, build_launch
from trlstack.roles.train.preflight import check_served_model, say
from trlstack.run import outputs, sharding, task
from trlstack.run.checkpoints import newest_checkpoint
from trlstack.run.checks import check_overlap, resolve_recipe
from trlstack.run.resume import previous_run_to_move
from trlstack.run.settings import TrainSettings
from trlstack.run.task_check import require_task

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
    argv = launch.command.argv
    for at, word in enumerate(argv):
        if word == "--max_steps" and at + 1 < len(argv):
            return argv[at + 1]
        if word.startswith("--max_steps="):
            return word.split("=", 1)[1]
    return str(launch.config["max_steps"])


def with_task(launch: Launch, settings: TrainSettings, environ: Mapping[str, str]) -> Launch:
    """The launch with what it takes from the task folder (run/task.py: paths absolute, the folder on the
    ranks' PYTHONPATH). Belongs in the launch's stages; here until they take it."""
    keys, env, notes = task.task_launch(settings, launch.config, environ, Path.cwd())
    command = Command(launch.command.argv, {**launch.command.env, **env})
    return dataclasses.replace(
        launch, command=command, config={**launch.config, **keys}, notes=[*launch.notes, *notes]
    )


def main(argv: Sequence[str] | None = None) -> int:
    def body() -> int:
        from trlstack import gpus as gpu_probe
        from trlstack.roles.train import health
        from trlstack.run import trl_config

        environ = os.environ
        settings, args = parse_role(ROLE, TrainSettings, sys.argv[1:] if argv is None else argv, environ)
        recipe = resolve_recipe(settings.recipe)
        config_path = task.config_path(settings, recipe)
        user_config = trl_config.load_config(config_path)

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
        model = settings.model or user_config.get("model_name_or_path")
        model_config = models.read_config(str(model), environ) if model else None

        def decide(checkpoint: Path | None) -> Launch:
            unavailable = policy.hub_kernel_unavailable
            source = str(config_path)
            launch = build_launch(
                settings, user_config, source, visible, checkpoint, unavailable, model_config
            )
            return with_task(launch, settings, environ)

        launch = decide(checkpoint)
        layout = (launch.sharding, launch.processes)
        aside = previous_run_to_move(settings, output_dir, recipe, launch.config, say, layout)
        if aside is not None:  # this run starts anew
            incomplete = []
            launch = decide(None)
        for path in incomplete:
            say(f"{path} is incomplete (cut short while saving); left in place, not resumed from")
        if settings.cpu:
            print(BANNER.format(steps=smoke_steps(launch)), file=sys.stderr, flush=True)
        for note in launch.notes:
            say(note)

        files = [(launch.config_path, trl_config.render(launch.config, str(config_path)))]
        if launch.accelerate_path is not None and launch.accelerate_config is not None:
            files.append((launch.accelerate_path, sharding.render(launch.accelerate_config)))
        if args.print_command:
            print(launch.command.shell())
            for path, text in files:
                print(f"# {path} (written when train runs):")
                print("\n".join(f"#   {line}" for line in text.splitlines()))
            return 0
        require_program(launch.command)
        # The task (rewards called on its rows, its data and model) before waiting for the server: seconds.
        root = task.base_folder(settings, Path.cwd())
        say(require_task(launch.config, recipe, config_path, root, "task check").text("task check"))
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
        for path, text in files:
            write_atomically(path, text)
            say(f"wrote {path}")
        return stopping.run(launch.command, environ)

    return run_main("train", body)
