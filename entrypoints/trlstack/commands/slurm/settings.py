"""What a Slurm job is asked for: trlstack slurm's own flags, declared once here, and the settings of the
roles it passes on, taken as train and serve-vllm declare them."""

from __future__ import annotations

import argparse
import shlex
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
# run's task and config and what overrides them, and --resume/--fresh, decided once on the submit host.
RUN_SETTINGS = (
    "task",
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

    recipe: str = flag(", ".join(RECIPES), positional=True, choices=list(RECIPES))
    nodes: int = flag("nodes in all (>= 2)", type=positive_int, metavar="N")
    # the job
    gpus_per_node: int | None = flag("GPUs of each node", None, positive_int, metavar="G")
    serve_nodes: int = flag(
        "1: the first node runs the vLLM server; 0: vLLM in every trainer (none with --cpu)",
        1,
        int,
        metavar="{0,1}",
    )
    partition: str | None = flag("Slurm partition", None)
    account: str | None = flag("Slurm account", None)
    time: str | None = flag("time limit, e.g. 24:00:00 (the job requeues itself before it)", None)
    job_name: str | None = flag("job name [default: trlstack-RECIPE]", None)
    output_dir: str = flag(
        "shared folder for checkpoints (OUTPUT_DIR/RECIPE), the log and the script [default: outputs]",
        "outputs",
    )
    cache_dir: str | None = flag("shared folder mounted at /cache [default: OUTPUT_DIR/cache]", None)
    stop_grace: int = flag(
        f"stop and requeue this long before the time limit [default: {DEFAULT_STOP_GRACE}]",
        DEFAULT_STOP_GRACE,
        positive_int,
        metavar="SECONDS",
    )
    # the image
    runtime: str = flag("[default: apptainer]", "apptainer", choices=RUNTIMES)
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
    network_interface: str | None = flag("e.g. ib0 [default: the route's]", None, metavar="IFACE")
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
