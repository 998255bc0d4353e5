"""`train`'s command line and its side effects, in order (the package's docstring says which)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from trlstack import models, policy
from trlstack.command import require_program
from trlstack.errors import UsageError, run_main
from trlstack.files import write_atomically
from trlstack.gpus import Gpu
from trlstack.roles.command_line import Role, parse_role
from trlstack.roles.train import stopping
from trlstack.roles.train.launch import Launch, build_launch
from trlstack.roles.train.preflight import check_served_model, say
from trlstack.run import outputs, sharding, space
from trlstack.run.checkpoints import newest_checkpoint
from trlstack.run.checks import check_overlap, resolve_recipe
from trlstack.run.resume import previous_run_to_move
from trlstack.run.settings import TrainSettings

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
    def body() -> int:
        from trlstack import gpus as gpu_probe
        from trlstack.roles.train import health
        from trlstack.run import trl_config

        environ = os.environ
        settings, args = parse_role(ROLE, TrainSettings, sys.argv[1:] if argv is None else argv, environ)
        recipe = resolve_recipe(settings.recipe)
        config_path = Path(settings.config) if settings.config else recipe.bundled_config
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
            return build_launch(settings, user_config, source, visible, checkpoint, unavailable, model_config)

        launch = decide(checkpoint)
        layout = (launch.sharding, launch.processes)
        aside = previous_run_to_move(settings, output_dir, recipe, launch.config, say, layout)
        if aside is not None:  # this run starts anew
            incomplete = []
            launch = decide(None)
        for path in incomplete:
            say(f"{path} is incomplete (cut short while saving); left in place, not resumed from")
        if not args.print_command:  # the disk this machine writes, not a preview's
            need, how = space.checkpoint_bytes(launch.config, model_config)
            warning = space.room_for_checkpoint(output_dir, space.free_space(output_dir), need, how)
            if warning:
                say(warning)
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
        if settings.mode == "server":
            health.wait_for_health(settings.vllm_url, settings.health_timeout)
            served = health.served_model(health.check_weight_transfer(settings.vllm_url))
            say(f"the vLLM server at {settings.vllm_url} is healthy and has a weight-transfer engine")
            if served:
                check_served_model(settings, served, launch.config["model_name_or_path"], environ)
        if aside is not None:
            outputs.move_aside(output_dir, aside)
            say(f"moved {output_dir} to {aside}; nothing in it was changed or deleted")
        write_files(files)
        return stopping.run(launch.command, environ)

    return run_main("train", body)
