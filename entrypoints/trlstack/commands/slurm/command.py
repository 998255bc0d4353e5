"""The command line of `trlstack slurm`: its flags as the settings declare them, the settings read from them,
and the command's steps in order (`run`), each done by its own module: the job checked, its script rendered,
the submit host and the task checked, the run folder made ready, the script printed (--dry-run), written, or
written and submitted (--submit)."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace

from trlstack.commands.slurm.checks import check
from trlstack.commands.slurm.delivery import Delivery, deliver, say
from trlstack.commands.slurm.host import check_host
from trlstack.commands.slurm.render import render
from trlstack.commands.slurm.run_folder import ready_run_folder
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
from trlstack.options import add_settings, settings_from
from trlstack.roles.serve.settings import ServeSettings
from trlstack.run import task
from trlstack.run.passthrough import split_extra
from trlstack.run.settings import TrainSettings
from trlstack.run.task_check import require_task


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
        train=replace(
            given.train,
            config=_absolute(given.train.config),
            task=str(task.task_folder(given.train.task)) if given.train.task else None,
        ),
        output_dir=os.path.abspath(given.output_dir),
        image=_absolute(given.image) if given.image and given.runtime != "pyxis" else given.image,
        cache_dir=_absolute(given.cache_dir),
    )
    return settings, settings_from(Delivery, args)


def run(args: argparse.Namespace) -> int:
    """The job checked, its script rendered, the submit host checked (a dry run's folders only), the task
    checked as train checks it, the run folder made ready, then the script printed, written or submitted."""
    settings, delivery = read_settings(args)
    job = check(settings)
    text = render(job)
    # A dry run refuses what writing would refuse of the job's folders, the run already in its run folder
    # included, and moves nothing.
    check_host(settings, delivery.script(settings), delivery.dry_run, delivery.submit)
    # The task check train runs when it starts, here, before anything is queued: a broken task is refused in
    # seconds, not on every trainer once the job runs.
    report = require_task(job.config, job.recipe, job.source, job.root, "task check", settings.train_args)
    if settings.train.task:
        say(report.text("task check"))
    ready_run_folder(job, delivery.dry_run)
    return deliver(settings, delivery, text)
