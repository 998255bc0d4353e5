"""What a Slurm job is asked for: trlstack slurm's own flags, declared once here, and the settings of the
roles it passes on, taken as train and serve-vllm declare them."""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

from trlstack.option_types import positive_int
from trlstack.options import declared, flag
from trlstack.plan import TENSOR_PARALLEL
from trlstack.ports import Ports, main_process_port_setting
from trlstack.recipes import RECIPES
from trlstack.roles.serve.settings import ServeSettings
from trlstack.run.settings import TrainSettings

RUNTIMES = ("apptainer", "pyxis", "none")
DEFAULT_STOP_GRACE = 300
# Each role's job step is named after its command, whatever runs it (apptainer, pyxis, an environment):
# sacct shows them so, and the script stops the trainers' steps by that name before the server's.
SERVER_STEP, TRAINER_STEP, CHECK_STEP = "serve-vllm", "train", "node-check"

# The roles' settings the job takes, as the roles declare them (flag, variable, help, default). train's: the
# run's config and what overrides it, and --resume/--fresh, decided once on the submit host.
RUN_SETTINGS = (
    "config",
    "model",
    "dataset",
    "reward_model",
    "cpu",
    "sharding",
    "ranks_per_gpu",
    "vllm_kv_cache_gib",
    "weight_push_timeout",
)
DECIDED_ONCE = ("resume", "fresh")
TRAIN_SETTINGS = (*RUN_SETTINGS, *DECIDED_ONCE)
# serve-vllm's, passed on to the server node when not serve-vllm's default.
SERVER_SETTINGS = ("gpu_memory_utilization", "max_model_len", "dtype", "allow_public_bind")
SERVER_DEFAULTS = ServeSettings()

# trlstack slurm's own settings by --help group, each in the order declared below.
JOB = (
    "nodes",
    "gpus_per_node",
    "serve_nodes",
    "partition",
    "account",
    "time",
    "job_name",
    "output_dir",
    "cache_dir",
    "stop_grace",
)
IMAGE = ("runtime", "image", "bind")
NETWORK = ("network_interface",)


# Slurm's time limit, as sbatch --time reads it: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS, and
# UNLIMITED or INFINITE (any case; 0 too means no limit).
TIME_FORMS = "minutes (90), MM:SS, HH:MM:SS (24:00:00), D-HH, D-HH:MM, D-HH:MM:SS (1-12:00:00) or UNLIMITED"
_TIME = re.compile(r"(?:(\d+)-(\d+)(?::(\d+)(?::(\d+))?)?|(\d+)(?::(\d+)(?::(\d+))?)?)", re.ASCII)
NO_LIMIT = ("UNLIMITED", "INFINITE")
# A partition, an account or a job name: a word of letters, digits and . _ + - (what #SBATCH lines, file names
# and Slurm's own name checks all take; a space, a quote or a % would change what sbatch reads).
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*", re.ASCII)
NAME_FORMS = "letters, digits and . _ + - (starting with a letter or digit)"


def time_limit(raw: str) -> str:
    """argparse type: a time limit sbatch accepts (TIME_FORMS), as given."""
    if raw.upper() in NO_LIMIT or _TIME.fullmatch(raw):
        return raw
    raise argparse.ArgumentTypeError(f"{raw!r} is not a Slurm time limit; give {TIME_FORMS}")


def limit_seconds(limit: str) -> int | None:
    """The seconds a time limit sbatch accepts stands for; None for no limit (UNLIMITED, or 0)."""
    if limit.upper() in NO_LIMIT:
        return None
    match = _TIME.fullmatch(limit)
    assert match is not None, limit  # time_limit checked it
    days, hours, minutes, seconds, first, second, third = (int(part or 0) for part in match.groups())
    if match.group(1) is None:  # minutes[:seconds], or hours:minutes:seconds
        hours, minutes, seconds = (first, second, third) if match.group(7) else (0, first, second)
    total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    return total or None


def slurm_name(what: str, lists: bool = False) -> Callable[[str], str]:
    """argparse type: a partition, an account or a job name as sbatch takes it (NAME_FORMS); `lists`: a
    comma-separated list of them (--partition a,b: the first that can run the job)."""

    def name(raw: str) -> str:
        parts = raw.split(",") if lists else [raw]
        if all(_NAME.fullmatch(part) for part in parts) and len(raw) <= 200:
            return raw
        listed = ", or several joined by commas" if lists else ""
        raise argparse.ArgumentTypeError(f"{raw!r} is not a Slurm {what}; give {NAME_FORMS}{listed}")

    return name


def shell_words(raw: str) -> tuple[str, ...]:
    """argparse type: one string split into words as the shell would (--vllm-args)."""
    try:
        return tuple(shlex.split(raw))
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{raw!r}: {error}") from None


@dataclass(frozen=True)
class JobPorts(Ports):
    """The ports of a job: vLLM's HTTP API and the weight transfer (as `trlstack plan`), and the trainers'
    rendezvous (as `train`)."""

    main_process_port: int = main_process_port_setting()


@dataclass(frozen=True)
class SlurmSettings:
    """A job as asked for. Paths are absolute once the command line is read (`command.settings_from`).

    `train` and `serve` are the roles' own settings objects: the fields named in TRAIN_SETTINGS and
    SERVER_SETTINGS are the job's (train's model is the one both roles get); the script sets every other one
    on the nodes, so those keep the roles' defaults and mean nothing here. The ports are `ports`.
    """

    recipe: str = flag("the recipe to run", positional=True, choices=list(RECIPES))
    nodes: int = flag("nodes in all (>= 2)", type=positive_int, metavar="N")
    # the job
    gpus_per_node: int | None = flag("GPUs of each node", None, positive_int, metavar="G")
    serve_nodes: int = flag(
        "1: the first node runs the vLLM server; 0: vLLM in every trainer (none with --cpu)",
        1,
        int,
        metavar="{0,1}",
    )
    partition: str | None = flag("Slurm partition (several: a,b)", None, slurm_name("partition", lists=True))
    account: str | None = flag("Slurm account", None, slurm_name("account"))
    time: str | None = flag(
        "time limit: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED (the job requeues "
        "itself before it)",
        None,
        time_limit,
        shown="the partition's",
    )
    job_name: str | None = flag("job name", None, slurm_name("job name"), shown="trlstack-RECIPE")
    output_dir: str = flag(
        "shared folder for checkpoints (OUTPUT_DIR/RECIPE), the log and the script",
        "outputs",
    )
    cache_dir: str | None = flag("shared folder mounted at /cache", None, shown="OUTPUT_DIR/cache")
    stop_grace: int = flag(
        "stop and requeue this long before the time limit",
        DEFAULT_STOP_GRACE,
        positive_int,
        metavar="SECONDS",
    )
    # the image
    runtime: str = flag("what runs the roles on each node", "apptainer", choices=RUNTIMES)
    image: str | None = flag("a .sif (apptainer), an image or .sqsh (pyxis), an environment (none)", None)
    bind: tuple[str, ...] = flag(
        "another shared folder for the container, e.g. where models live (repeatable)",
        metavar="SRC[:DST]",
        repeated=True,
    )
    # the run: trlstack slurm's part of it
    tensor_parallel_size: int | None = declared(TENSOR_PARALLEL)  # as `trlstack plan` takes it
    num_heads: int | None = flag("the model's attention heads, to check TP", None, positive_int, metavar="N")
    vllm_args: tuple[str, ...] = flag(
        'more arguments for `vllm serve`, one string (--vllm-args="--enforce-eager")',
        (),
        shell_words,
        metavar='"ARGS"',
    )
    # network
    network_interface: str | None = flag(
        "the interface NCCL and gloo use, e.g. ib0", None, metavar="IFACE", shown="the route's"
    )
    # the roles' settings and the ports, declared where the roles declare them
    train: TrainSettings = field(default_factory=TrainSettings)
    serve: ServeSettings = field(default_factory=ServeSettings)
    ports: JobPorts = field(default_factory=JobPorts)
    train_args: tuple[str, ...] = ()  # after `--`: passed to the TRL script unchanged

    @property
    def run_dir(self) -> str:
        return f"{self.output_dir.rstrip('/')}/{self.recipe}"

    @property
    def cache(self) -> str:
        return self.cache_dir or f"{self.output_dir.rstrip('/')}/cache"

    @property
    def name(self) -> str:
        return self.job_name or f"trlstack-{self.recipe}"
