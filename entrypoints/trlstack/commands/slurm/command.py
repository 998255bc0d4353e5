"""The command line of `trlstack slurm`: its flags as the settings declare them, the settings read from them,
and what it does with the script: print it (--dry-run), write it, or write and submit it (--submit)."""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from trlstack.commands.slurm.checks import Job, check
from trlstack.commands.slurm.host import folder_checks, host_checks
from trlstack.commands.slurm.render import render
from trlstack.commands.slurm.settings import (
    DECIDED_ONCE,
    IMAGE,
    JOB,
    NETWORK,
    RUN_SETTINGS,
    SERVER_SETTINGS,
    TRAIN_SETTINGS,
    JobPorts,
    SlurmSettings,
)
from trlstack.errors import UsageError
from trlstack.files import write_atomically
from trlstack.options import add_settings, flag, settings_from, switch
from trlstack.roles.serve.settings import ServeSettings
from trlstack.run import outputs
from trlstack.run.passthrough import split_extra
from trlstack.run.resume import previous_run_to_move
from trlstack.run.settings import TrainSettings


@dataclass(frozen=True)
class Delivery:
    """What becomes of the script: printed (dry_run), or written to `output` and maybe submitted."""

    dry_run: bool = switch(
        None,
        "print the script, write and submit nothing (the job's folders are checked as for writing; the "
        "image and this host's tools, sbatch and the runtime, when writing)",
    )
    submit: bool = switch(None, "write the script and submit it with sbatch")
    output: str | None = flag(
        "script file", None, metavar="FILE", aliases=("-o",), shown="OUTPUT_DIR/NAME.sbatch"
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    environ = os.environ
    parser.description = (
        "Write an sbatch script that runs RECIPE across nodes: the first node serves generations (vLLM), the "
        "others train (accelerate multi-node), in the image through Apptainer or Pyxis, or in an "
        "environment. Arguments after `--` go to the TRL script. Details: slurm/README.md."
    )
    add_settings(parser, SlurmSettings, environ, only=("recipe",))
    add_settings(parser.add_argument_group("the job"), SlurmSettings, environ, only=JOB)
    add_settings(parser.add_argument_group("the image"), SlurmSettings, environ, only=IMAGE)
    run_group = parser.add_argument_group("the run (as train and serve-vllm take them)")
    add_settings(run_group, TrainSettings, environ, only=RUN_SETTINGS)
    add_settings(run_group, SlurmSettings, environ, only=("tensor_parallel_size", "num_heads"))
    add_settings(run_group, ServeSettings, environ, only=SERVER_SETTINGS)
    add_settings(run_group, SlurmSettings, environ, only=("vllm_args",))
    # As train decides on start, but once, here: checked on the submit host, which sees the shared folder.
    add_settings(run_group, TrainSettings, environ, only=DECIDED_ONCE)
    network = parser.add_argument_group("network")
    add_settings(network, SlurmSettings, environ, only=NETWORK)
    add_settings(network, JobPorts, environ)
    add_settings(parser.add_mutually_exclusive_group(), Delivery, environ, only=("dry_run", "submit"))
    add_settings(parser, Delivery, environ, only=("output",))
    _keep_extra_apart(parser)


def _keep_extra_apart(parser: argparse.ArgumentParser) -> None:
    """Arguments after `--` go to the TRL script: kept apart (args.extra) before argparse reads the rest."""
    parse_known = parser.parse_known_args

    def parse_known_args(args=None, namespace=None):  # type: ignore[no-untyped-def]
        own, extra = split_extra(sys.argv[1:] if args is None else args)
        parsed, rest = parse_known(own, namespace)
        parsed.extra = extra
        return parsed, rest

    parser.parse_known_args = parse_known_args  # type: ignore[method-assign]


def _absolute(path: str | None) -> str | None:
    return os.path.abspath(path) if path else None


def read_settings(args: argparse.Namespace) -> tuple[SlurmSettings, Delivery]:
    """The job as asked for, with paths made absolute, and what becomes of its script."""
    given = settings_from(
        SlurmSettings,
        args,
        train=settings_from(TrainSettings, args, only=TRAIN_SETTINGS, recipe=args.recipe),
        serve=settings_from(ServeSettings, args, only=SERVER_SETTINGS),
        ports=settings_from(JobPorts, args),
        train_args=tuple(args.extra),
    )
    settings = replace(
        given,
        train=replace(given.train, config=_absolute(given.train.config)),
        output_dir=os.path.abspath(given.output_dir),
        image=_absolute(given.image) if given.image and given.runtime != "pyxis" else given.image,
        cache_dir=_absolute(given.cache_dir),
    )
    return settings, settings_from(Delivery, args)


def say(message: str) -> None:
    print(f"trlstack slurm: {message}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    settings, delivery = read_settings(args)
    job = check(settings)
    text = render(job)
    path = Path(delivery.output or f"{settings.output_dir}/{settings.name}.sbatch")
    # A dry run refuses what writing would refuse of the job's folders, the run already in its run folder
    # included, and moves nothing.
    folder_checks(settings, path)
    if delivery.dry_run:
        settle_run_folder(job, move=False)
        sys.stdout.write(text)
        return 0
    host_checks(settings, submit=delivery.submit)
    room_on_storage(job)
    settle_run_folder(job, move=True)
    write_script(settings, path, text)
    if not delivery.submit:
        print(f"trlstack slurm: wrote {path}; submit it with: sbatch {shlex.quote(str(path))}")
        return 0
    return submit(settings, path)


def room_on_storage(job: Job) -> None:
    """Refuse a run folder whose shared disk cannot hold one checkpoint, as each trainer would once the job
    starts (run/space.py), before anything is queued; say so where the size is unknown here (a model this
    host has not cached)."""
    from trlstack import models
    from trlstack.run import space

    model = job.config.get("model_name_or_path")
    model_config = models.read_config(str(model), os.environ) if model else None
    need, how = space.checkpoint_bytes(job.config, model_config)
    run_dir = Path(job.settings.run_dir)
    warning = space.room_for_checkpoint(run_dir, space.free_space(run_dir), need, how, "--output-dir")
    if warning:
        say(f"{warning}; each trainer checks again before it starts")


def settle_run_folder(job: Job, move: bool) -> None:
    """A different run in the run folder is refused now, not on every trainer once the job starts; --fresh
    moves it aside here, once (never deleted; `move` False: a dry run, which only says so), --resume lets the
    trainers continue it."""

    run_dir = Path(job.settings.run_dir)
    aside = previous_run_to_move(job.settings.train, run_dir, job.recipe, job.config, say)
    if aside is not None and move:
        outputs.move_aside(run_dir, aside)
        say(f"moved {run_dir} to {aside}; nothing in it was changed or deleted")
    elif aside is not None:
        say(f"a dry run: {run_dir} stays where it is")


def write_script(settings: SlurmSettings, path: Path, text: str) -> None:
    try:
        # Slurm cannot create the log's folder itself: a job whose --output folder is missing fails unseen.
        Path(settings.output_dir).mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(
            f"cannot make the output folder {settings.output_dir} ({error.strerror}); choose a writable "
            "--output-dir."
        ) from None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, text)
    except OSError as error:
        raise UsageError(
            f"cannot write {path} ({error.strerror}); choose a writable --output (or --output-dir)."
        ) from None


def submit(settings: SlurmSettings, path: Path) -> int:
    done = subprocess.run(["sbatch", "--parsable", str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        raise UsageError(f"sbatch refused {path}: {done.stderr.strip()}")
    job = done.stdout.strip().split(";")[0]
    log = f"{settings.output_dir.rstrip('/')}/{settings.name}-{job}.out"
    print(job)
    print(
        f"trlstack slurm: submitted {path} as job {job}; watch: squeue -j {job}; tail -f {log}",
        file=sys.stderr,
    )
    return 0
