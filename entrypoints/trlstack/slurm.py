"""`trlstack slurm RECIPE`: one sbatch script that runs a recipe across the nodes of a Slurm cluster.

The first node serves generations (`serve-vllm` with the plan's tensor x data parallel layout on its GPUs),
the other nodes train (`train`, one `accelerate launch` per node, meeting at the first trainer node).
`render` is a pure function of the settings; the script it writes explains each step in a comment. `run`
writes it to the output folder, prints it (--dry-run) or submits it (--submit). Details: slurm/README.md.

The roles keep their own guards on the cluster (serve-vllm's bind check, train's address toward the server,
its stale-run check and checkpoint on stop); what can be checked before submitting is checked here with the
same code: the plan, the arguments passed on to TRL and vLLM, the training config.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trlstack import serve, train
from trlstack.defaults import DEFAULT_GROUP_PORT, DEFAULT_MAIN_PROCESS_PORT, DEFAULT_VLLM_PORT, Env
from trlstack.errors import UsageError
from trlstack.files import write_atomically
from trlstack.gpus import PCI_BUS_ID, Gpu
from trlstack.options import add_setting, add_settings, positive_int, split_extra
from trlstack.passthrough import VLLM, check_passthrough, receiver
from trlstack.plan import TENSOR_PARALLEL, Plan, make_plan
from trlstack.ports import Ports, main_process_port_setting

RUNTIMES = ("apptainer", "pyxis", "none")
DEFAULT_STOP_GRACE = 300
# Where a job's files would stay on one node: other nodes (and the next attempt elsewhere) never see them.
NODE_LOCAL_PREFIXES = ("/tmp", "/var/tmp", "/dev/shm", "/run")
NODE_LOCAL_FILESYSTEMS = frozenset({"tmpfs", "ramfs", "devtmpfs", "overlay"})
INTERFACE = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")
# Each role's job step is named after its command, whatever runs it (apptainer, pyxis, an environment):
# sacct shows them so, and the script stops the trainers' steps by that name before the server's.
SERVER_STEP, TRAINER_STEP, CHECK_STEP = "serve-vllm", "train", "node-check"
# serve-vllm's settings the job takes as serve-vllm declares them, passed on when not serve-vllm's default.
SERVER_SETTINGS = ("gpu_memory_utilization", "max_model_len", "dtype", "allow_public_bind")
SERVER_DEFAULTS = serve.ServeSettings()

# What the roles set themselves (train.TAKEN, serve.TAKEN: the same keys), with what to do instead here.
TRAIN_TAKEN = {
    **train.TAKEN,
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


@dataclass(frozen=True)
class SlurmSettings:
    recipe: str
    nodes: int
    output_dir: str  # absolute
    gpus_per_node: int | None = None
    serve_nodes: int = 1
    runtime: str = "apptainer"
    image: str | None = None
    partition: str | None = None
    account: str | None = None
    time: str | None = None
    job_name: str | None = None
    model: str | None = None
    dataset: str | None = None
    reward_model: str | None = None
    config: str | None = None
    tensor_parallel_size: int | None = None
    num_heads: int | None = None
    port: int = DEFAULT_VLLM_PORT
    group_port: int = DEFAULT_GROUP_PORT
    main_process_port: int = DEFAULT_MAIN_PROCESS_PORT
    gpu_memory_utilization: float = SERVER_DEFAULTS.gpu_memory_utilization
    max_model_len: int | None = SERVER_DEFAULTS.max_model_len
    dtype: str = SERVER_DEFAULTS.dtype
    allow_public_bind: bool = False
    network_interface: str | None = None
    cache_dir: str | None = None  # default: OUTPUT_DIR/cache
    binds: tuple[str, ...] = ()
    stop_grace: int = DEFAULT_STOP_GRACE
    cpu: bool = False
    resume: bool = False  # trainers continue a run that differs (checked on the submit host: run())
    vllm_args: tuple[str, ...] = ()
    train_args: tuple[str, ...] = ()

    @property
    def run_dir(self) -> str:
        return f"{self.output_dir.rstrip('/')}/{self.recipe}"

    @property
    def cache(self) -> str:
        return self.cache_dir or f"{self.output_dir.rstrip('/')}/cache"

    @property
    def name(self) -> str:
        return self.job_name or f"trlstack-{self.recipe}"


@dataclass(frozen=True)
class Layout:
    """Who does what: server and trainer node counts, and on GPUs the plan over all the job's GPUs."""

    serve_nodes: int
    train_nodes: int
    gpus_per_node: int | None
    plan: Plan | None  # GPU runs with a server node

    @property
    def mode(self) -> str:
        """ "server" (vLLM on the first node), "colocate" (vLLM inside every trainer) or "cpu"."""
        if self.gpus_per_node is None:
            return "cpu"
        return "server" if self.serve_nodes else "colocate"

    def local_gpus(self, role: str) -> str:
        """CUDA_VISIBLE_DEVICES of a role's node as the plan gives it (node-local indices)."""
        assert self.gpus_per_node is not None
        if self.plan is None:
            return ",".join(map(str, range(self.gpus_per_node)))
        gpus = self.plan.serve if role == "serve" else self.plan.train[: self.gpus_per_node]
        return ",".join(str(gpu.index % self.gpus_per_node) for gpu in gpus)


# -------------------------------------------------------------------------------------------- decisions


def make_layout(settings: SlurmSettings) -> Layout:
    """The layout of a job; UsageError naming the fix for a request that cannot run."""
    if settings.nodes < 2:
        raise UsageError(
            f"--nodes {settings.nodes}: a Slurm run spans at least 2 nodes (one serves, one trains). On one "
            "machine use compose (scripts/up.sh) or `train` directly."
        )
    if settings.serve_nodes >= settings.nodes:
        raise UsageError(
            f"--serve-nodes {settings.serve_nodes} with --nodes {settings.nodes} leaves no node to train on; "
            f"raise --nodes or use --serve-nodes 1."
        )
    if settings.serve_nodes not in (0, 1):
        raise UsageError(
            f"--serve-nodes {settings.serve_nodes}: one vLLM server node is supported (TRL's client talks to "
            "one server); use --serve-nodes 1, or 0 to generate inside every trainer (vLLM colocate)."
        )
    train_nodes = settings.nodes - settings.serve_nodes
    if settings.cpu:
        if settings.gpus_per_node is not None:
            raise UsageError(
                f"--cpu requests no GPUs, but --gpus-per-node {settings.gpus_per_node} asks for them; "
                "drop one of the two."
            )
        return Layout(settings.serve_nodes, train_nodes, None, None)
    if settings.gpus_per_node is None:
        raise UsageError("name the GPUs of each node: --gpus-per-node G (e.g. 8), or --cpu for a smoke run.")
    g = settings.gpus_per_node
    if not settings.serve_nodes:
        return Layout(0, train_nodes, g, None)
    # The plan over every GPU of the job: the server node's GPUs serve, the trainer nodes' GPUs train.
    cluster = [Gpu(index) for index in range(settings.nodes * g)]
    plan = make_plan(
        cluster,
        serve_gpus=list(range(g)),
        train_gpus=list(range(g, settings.nodes * g)),
        tensor_parallel_size=settings.tensor_parallel_size,
        num_heads=settings.num_heads,
        port=settings.port,
        group_port=settings.group_port,
    )
    return Layout(1, train_nodes, g, plan)


def check_settings(settings: SlurmSettings) -> Layout:
    """Every check that needs nothing but the settings; returns the layout."""
    recipe = train.resolve_recipe(settings.recipe)
    if settings.runtime not in RUNTIMES:
        raise UsageError(f"--runtime {settings.runtime!r}: choose one of {', '.join(RUNTIMES)}.")
    layout = make_layout(settings)
    ports = {"--port": settings.port, "--group-port": settings.group_port}
    ports["--main-process-port"] = settings.main_process_port
    for flag, port in ports.items():
        others = [other for other, value in ports.items() if value == port and other != flag]
        if others:
            raise UsageError(f"{flag} and {others[0]} are both {port}; every role's port must differ.")
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
    for name, path in (("--output-dir", settings.output_dir), ("--cache-dir", settings.cache)):
        if not path.startswith("/"):
            raise UsageError(f"{name} {path} must be an absolute path on storage every node shares.")
    if settings.network_interface is not None and not INTERFACE.match(settings.network_interface):
        raise UsageError(f"--network-interface {settings.network_interface!r} is not an interface name.")
    for bind in settings.binds:
        if not all(part.startswith("/") for part in bind.split(":")[:2]):
            raise UsageError(f"--bind {bind}: give SRC or SRC:DST as absolute paths.")
    if settings.stop_grace < 30:
        raise UsageError(
            f"--stop-grace {settings.stop_grace}: give the trainers at least 30 s to write a checkpoint."
        )
    if settings.vllm_args and not layout.serve_nodes:
        raise UsageError(
            "--vllm-args go to the server node's `vllm serve`, and with --serve-nodes 0 there is none; drop "
            "them."
        )
    # The guards by meaning of train and serve-vllm, before anything is queued.
    check_passthrough(settings.train_args, receiver(recipe.name), TRAIN_TAKEN, "trlstack slurm")
    check_passthrough(settings.vllm_args, receiver(VLLM), SERVER_TAKEN, "serve-vllm", "in --vllm-args")
    return layout


# ------------------------------------------------------------------------------------------- rendering


class Var(str):
    """A shell word the script expands at run time (written as is); plain strings are quoted."""


def _quote(word: str) -> str:
    return word if isinstance(word, Var) else shlex.quote(word)


def assign(name: str, value: str | int | None) -> str:
    return f"{name}={shlex.quote(str(value)) if value not in (None, '') else ''}"


def _sbatch_header(settings: SlurmSettings, layout: Layout) -> list[str]:
    lines = [
        f"#SBATCH --job-name={settings.name}",
        f"#SBATCH --nodes={settings.nodes}",
        "# One task per node: each role is started on its node by its own srun below.",
        "#SBATCH --ntasks-per-node=1",
    ]
    if layout.gpus_per_node is not None:
        lines.append(f"#SBATCH --gpus-per-node={layout.gpus_per_node}")
    lines += [
        "# Whole nodes: the roles take every GPU and fixed ports; another job there would collide with them.",
        "#SBATCH --exclusive",
    ]
    queue = [("partition", settings.partition), ("account", settings.account), ("time", settings.time)]
    lines += [f"#SBATCH --{key}={value}" for key, value in queue if value]
    lines += [
        "# One log for every attempt, on shared storage: a requeued job appends to it.",
        f"#SBATCH --output={settings.output_dir.rstrip('/')}/{settings.name}-%j.out",
        "#SBATCH --open-mode=append",
        f"# {settings.stop_grace} s before the time limit Slurm sends USR1 to this script only (B:), not to",
        "# the roles: the script then stops the trainers first, so the server still answers while they",
        "# finish their step and save, then the server, then requeues the job (see Stopping below).",
        f"#SBATCH --signal=B:USR1@{settings.stop_grace}",
        "# Requeued (by this script, by preemption or by hand), the job resumes from the newest complete",
        "# checkpoint in its output folder.",
        "#SBATCH --requeue",
    ]
    return lines


def _runtime(settings: SlurmSettings, layout: Layout) -> tuple[list[str], list[str]]:
    """(srun options, command prefix) that run a role's command in the image."""
    if settings.runtime == "apptainer":
        prefix = ["apptainer", "exec", *(["--nv"] if layout.gpus_per_node else [])]
        prefix += ["--bind", Var('"$OUTPUT_DIR"'), "--bind", Var('"$CACHE_DIR:/cache"')]
        for bind in settings.binds:
            prefix += ["--bind", bind]
        return [], [*prefix, Var('"$IMAGE"')]
    if settings.runtime == "pyxis":
        mounts = ",".join([settings.output_dir, f"{settings.cache}:/cache", *settings.binds])
        options = [Var('--container-image="$IMAGE"'), f"--container-mounts={mounts}"]
        return [*options, "--no-container-mount-home", Var('--container-workdir="$OUTPUT_DIR"')], []
    if settings.image:  # an environment: its activate script first
        return [], ["bash", "-c", 'source "$1" && shift && exec "$@"', "trlstack-env", Var('"$ACTIVATE"')]
    return [], []


def _srun(node: str, step: str, settings: SlurmSettings, layout: Layout) -> list[str]:
    options, _ = _runtime(settings, layout)
    argv = ["srun", "--nodes=1", "--ntasks=1", Var(f'--nodelist="{node}"'), f"--job-name={step}"]
    argv.append("--kill-on-bad-exit=1")
    if layout.gpus_per_node is not None:
        argv.append(f"--gpus-per-node={layout.gpus_per_node}")
    return [*argv, "--export=ALL", *options]


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def server_command(settings: SlurmSettings, layout: Layout) -> list[str]:
    """serve-vllm on the server node: the plan's layout, bound to the node's cluster address only."""
    tp = layout.plan.tensor_parallel_size if layout.plan else 1
    dp = layout.plan.data_parallel_size if layout.plan else 1
    argv = ["serve-vllm", *(["--model", settings.model] if settings.model else [])]
    argv += ["--host", Var('"$SERVER_ADDR"'), "--port", Var('"$VLLM_PORT"')]
    argv += ["--tensor-parallel-size", str(tp), "--data-parallel-size", str(dp)]
    for name in SERVER_SETTINGS:
        value = getattr(settings, name)
        if value != getattr(SERVER_DEFAULTS, name):
            argv += [_flag(name)] if value is True else [_flag(name), str(value)]
    return argv + (["--", *settings.vllm_args] if settings.vllm_args else [])


def trainer_command(settings: SlurmSettings, layout: Layout) -> list[str]:
    """train on a trainer node; `$rank` is the script's loop variable."""
    argv = ["train", settings.recipe]
    for flag, value in (
        ("--config", settings.config),
        ("--model", settings.model),
        ("--dataset", settings.dataset),
        ("--reward-model", settings.reward_model),
    ):
        argv += [flag, value] if value else []
    argv += ["--output-dir", Var('"$RUN_DIR"'), *(["--resume"] if settings.resume else [])]
    if layout.mode == "cpu":
        argv.append("--cpu")
    elif layout.mode == "colocate":
        argv += ["--vllm-mode", "colocate"]
    else:
        argv += [
            "--vllm-url",
            Var('"http://$SERVER_ADDR:$VLLM_PORT"'),
            "--vllm-group-port",
            Var('"$GROUP_PORT"'),
        ]
    argv += ["--num-machines", str(layout.train_nodes), "--machine-rank", Var('"$rank"')]
    argv += ["--main-process-ip", Var('"$MAIN_ADDR"'), "--main-process-port", Var('"$MAIN_PORT"')]
    return argv + (["--", *settings.train_args] if settings.train_args else [])


def _role_env(layout: Layout, role: str, node: str) -> list[str]:
    """The variables a role's srun passes on: its GPUs as the plan says, and the network to use."""
    env: list[str] = []
    if layout.gpus_per_node is not None:
        gpus = layout.local_gpus(role)
        env += [Var(f"{Env.CUDA_VISIBLE_DEVICES}={gpus}"), Var(f"{Env.CUDA_DEVICE_ORDER}={PCI_BUS_ID}")]
    # The server's workers use its cluster address; a trainer's is decided by train itself, the address it
    # reaches the server from (trlstack.addresses), so a value from the submitting shell must not reach it.
    env.append(Var(f'{Env.VLLM_HOST_IP}="$SERVER_ADDR"' if role == "serve" else f"{Env.VLLM_HOST_IP}="))
    if role == "train":  # --fresh acted once, on the submit host; trainers on every node must not each move
        env.append(Var(f"{Env.FRESH}="))  # the output folder aside again
    for name in (Env.NCCL_SOCKET_IFNAME, Env.GLOO_SOCKET_IFNAME):
        env.append(Var(f'{name}="${{IFACE[{node}]}}"'))
    return env


def _chunks(words: Sequence[str]) -> list[str]:
    """Quoted shell words, an option joined with its value so a line break never parts them."""
    chunks: list[str] = []
    for word in words:
        text = _quote(word)
        option = chunks and chunks[-1].startswith("--") and " " not in chunks[-1] and "=" not in chunks[-1]
        if option and not word.startswith("-") and chunks[-1] != "--":
            chunks[-1] += " " + text
        else:
            chunks.append(text)
    return chunks


def _lines(words: Sequence[str], indent: str, width: int = 104) -> list[str]:
    lines: list[str] = []
    for chunk in _chunks(words):
        if lines and len(lines[-1]) + 1 + len(chunk) <= width:
            lines[-1] += " " + chunk
        else:
            lines.append(indent + chunk)
    return lines


# What sacct and the job's messages call each role; `label` prefixes the role's output.
ROLE_NAMES = {"serve": "vLLM server on $SERVER_NODE", "train": "trainer (machine rank $rank) on $node"}
ROLE_STEPS = {"serve": SERVER_STEP, "train": TRAINER_STEP}


def _start(
    role: str,
    node: str,
    label: str,
    command: Sequence[str],
    settings: SlurmSettings,
    layout: Layout,
    indent: str = "",
) -> list[str]:
    """A role's srun in the background with its GPUs, network and runtime, named in ROLE for the job."""
    _, prefix = _runtime(settings, layout)
    srun = _srun(node, ROLE_STEPS[role], settings, layout)
    groups = [_role_env(layout, role, node), srun, prefix, command]
    return [*_launch(label, groups, indent), f'{indent}ROLE[$!]="{ROLE_NAMES[role]}"']


def _launch(label: str, groups: Sequence[Sequence[str]], indent: str = "") -> list[str]:
    """A role in the background, its output prefixed with its name; `$!` is then the role's subshell."""
    body = [line for group in groups if group for line in _lines(group, indent + "    ")]
    body[0] = f"{indent}( {body[0].lstrip()}"
    return [
        *[line + " \\" for line in body],
        f'{indent}    2>&1 | sed -u "s/^/[{label}] /"',
        f'{indent}  exit "${{PIPESTATUS[0]}}" ) &',
    ]


def _describe(settings: SlurmSettings, layout: Layout) -> list[str]:
    image = f"{settings.image} ({settings.runtime})" if settings.image else f"none ({settings.runtime})"
    per_node = layout.gpus_per_node or 1
    if layout.mode == "server":
        assert layout.plan is not None
        tp, dp = layout.plan.tensor_parallel_size, layout.plan.data_parallel_size
        serve_text = f"vLLM on 1 node (tensor-parallel {tp} x data-parallel {dp})"
    elif layout.mode == "colocate":
        serve_text = "vLLM colocated in every trainer"
    else:
        serve_text = "serve-vllm on 1 node" if layout.serve_nodes else "no server node"
    training = "CPU smoke training" if layout.mode == "cpu" else "training"
    processes = f"{per_node} process{'es' if per_node > 1 else ''} each"
    return [
        f"# trlstack slurm {settings.recipe}: {serve_text}; {training} on {layout.train_nodes} node"
        f"{'s' if layout.train_nodes > 1 else ''} ({processes}); image {image}.",
        "# Written by `trlstack slurm`; submit it with `sbatch FILE`. Each step says why it is there.",
    ]


def render(settings: SlurmSettings) -> str:
    """The sbatch script for `settings`; UsageError naming the fix for a request that cannot run."""
    layout = check_settings(settings)
    lines = ["#!/bin/bash", *_describe(settings, layout), "#", *_sbatch_header(settings, layout), ""]
    lines += [
        "# Settings, as `trlstack slurm` rendered them.",
        assign("OUTPUT_DIR", settings.output_dir),
        assign("RUN_DIR", settings.run_dir),
        assign("CACHE_DIR", settings.cache),
        assign("IMAGE", settings.image),
        assign("SERVE_NODES", layout.serve_nodes),
        assign("NETWORK_INTERFACE", settings.network_interface),
        assign("VLLM_PORT", settings.port),
        assign("GROUP_PORT", settings.group_port),
        assign("MAIN_PORT", settings.main_process_port),
        "# The ports each role binds on its node, checked free before anything starts.",
        f'SERVER_PORTS="{"$VLLM_PORT" if layout.serve_nodes else ""}"',
        f'TRAINER_PORTS="{"$MAIN_PORT $GROUP_PORT" if layout.mode == "server" else "$MAIN_PORT"}"',
        "# Job step names: sacct shows each role under its command, and a stop signals the trainers' steps",
        "# by name before the server's.",
        f"SERVER_STEP={SERVER_STEP} TRAINER_STEP={TRAINER_STEP} CHECK_STEP={CHECK_STEP}",
    ]
    if settings.runtime == "none" and settings.image:
        lines.append('ACTIVATE="$IMAGE/activate"; [ -f "$ACTIVATE" ] || ACTIVATE="$IMAGE/bin/activate"')
    lines.append(PREPARE)

    if layout.serve_nodes:
        if layout.mode == "cpu":
            lines += [
                "# The vLLM server on the first node as on GPUs; with --cpu no GPU is requested, so on a",
                "# node without one serve-vllm refuses to start and the job ends, naming it.",
            ]
        else:
            lines += [
                "# The vLLM server on the first node, on the GPUs the plan gives it, bound to the node's",
                "# cluster address only (its dev-mode endpoints have no authentication; serve-vllm refuses",
                "# the any-address in every spelling). Trainers wait for its /health and check its",
                "# weight-transfer engine before they train.",
            ]
        server = server_command(settings, layout)
        lines += _start("serve", "$SERVER_NODE", "server $SERVER_NODE", server, settings, layout)
        lines += ['log "started the vLLM server on $SERVER_NODE"', ""]
    lines += [
        "# One trainer per node, accelerate multi-node: machine rank 0 (the first trainer node) hosts the",
        "# rendezvous. NCCL and gloo use the interface of the route to the server; each trainer sets",
        "# VLLM_HOST_IP to its own address on that route, where the server's workers reach it for the",
        "# weight transfer.",
        'for rank in "${!TRAINER_NODES[@]}"; do',
        "  node=${TRAINER_NODES[$rank]}",
    ]
    trainer = trainer_command(settings, layout)
    lines += _start("train", "$node", "trainer $rank $node", trainer, settings, layout, indent="  ")
    lines += [
        "done",
        'log "started ${#TRAINER_NODES[@]} trainer(s) on ${TRAINER_NODES[*]}"',
        SUPERVISE,
    ]
    return "\n".join(lines) + "\n"


# The script's fixed parts; they read only the settings above.
PREPARE = r"""
set -uo pipefail
log() { printf '%s trlstack: %s\n' "$(date +%T)" "$*"; }
fail() {
  log "error: $*"
  exit 1
}
declare -A ROLE ADDR IFACE

# Nodes by role, in the allocation's order: the first SERVE_NODES serve, the rest train.
mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
TRAINER_NODES=("${NODES[@]:$SERVE_NODES}")
SERVER_NODE=
[ "$SERVE_NODES" -eq 1 ] && SERVER_NODE=${NODES[0]}
REF_NODE=${SERVER_NODE:-${TRAINER_NODES[0]}}
log "job $SLURM_JOB_ID, attempt $((${SLURM_RESTART_COUNT:-0} + 1)):" \
  "server ${SERVER_NODE:-none}, trainers ${TRAINER_NODES[*]}"
mkdir -p "$RUN_DIR" "$CACHE_DIR" || fail "cannot create $RUN_DIR and $CACHE_DIR"

# The address every node reaches the server (or the first trainer) at: its name as the cluster resolves
# it, or the address of --network-interface on it when the fast network is not the one its name is on.
if [ -n "$NETWORK_INTERFACE" ]; then
  REF_ADDR=$(srun --nodes=1 --ntasks=1 --nodelist="$REF_NODE" --job-name="$CHECK_STEP" \
    ip -4 -o addr show dev "$NETWORK_INTERFACE" | awk '{sub("/.*", "", $4); print $4; exit}')
else
  REF_ADDR=$(getent ahostsv4 "$REF_NODE" | awk '{print $1; exit}')
fi
case "$REF_ADDR" in
  "") fail "no IPv4 address for $REF_NODE${NETWORK_INTERFACE:+ on $NETWORK_INTERFACE}" ;;
  127.* | 0.*) fail "$REF_NODE resolves to $REF_ADDR (loopback or the any-address), which other nodes" \
    "cannot reach; pass --network-interface IFACE to trlstack slurm" ;;
esac

# Every node, before any role starts: its address and interface on the route to REF_ADDR, its role's ports
# free, /dev/shm rid of segments a crashed run left, and the output folder the one the batch host sees.
read -r -d '' NODE_CHECK <<'CHECK'
node=$SLURMD_NODENAME
say() { echo "trlstack: $node: $*" >&2; }
if [ -n "$NETWORK_INTERFACE" ]; then
  iface=$NETWORK_INTERFACE
  addr=$(ip -4 -o addr show dev "$iface" 2>/dev/null | awk '{sub("/.*", "", $4); print $4; exit}')
else
  route=$(ip -4 route get "$REF_ADDR" 2>/dev/null | head -n 1)
  iface=$(sed -n 's/.* dev \([^ ]*\).*/\1/p' <<<"$route")
  addr=$(sed -n 's/.* src \([^ ]*\).*/\1/p' <<<"$route")
  if [ "$iface" = lo ]; then # on REF_NODE itself: its own address, on the interface that carries it
    addr=$REF_ADDR
    iface=$(ip -4 -o addr show | awk -v a="$REF_ADDR" '{split($4, p, "/")} p[1] == a {print $2; exit}')
  fi
fi
if [ -z "$addr" ] || [ -z "$iface" ]; then
  say "no route to $REF_ADDR${NETWORK_INTERFACE:+ on $NETWORK_INTERFACE} (ip -4 route get)"
  exit 1
fi
ports=$TRAINER_PORTS
[ "$node" = "$SERVER_NODE" ] && ports=$SERVER_PORTS
for port in $ports; do
  if command -v ss >/dev/null && [ -n "$(ss -Hltn "sport = :$port")" ]; then
    owner=$(ss -Hltnp "sport = :$port" | awk '{print $NF; exit}')
    say "port $port is in use ($owner), maybe by a crashed run; stop it or choose another port"
    exit 1
  fi
done
in_use=$(cat /proc/[0-9]*/maps 2>/dev/null | grep -o '/dev/shm/.*' | sort -u)
removed=0
for file in /dev/shm/nccl-* /dev/shm/psm_* /dev/shm/torch_* /dev/shm/sem.mp-*; do
  if [ -f "$file" ] && [ -O "$file" ] && ! grep -qxF "$file" <<<"$in_use"; then
    rm -f -- "$file" && removed=$((removed + 1))
  fi
done
[ "$removed" -eq 0 ] || say "removed $removed segment(s) a crashed run left in /dev/shm"
for _ in 1 2 3 4 5 6 7 8 9 10; do
  [ -f "$TOKEN" ] && break
  sleep 1
done
if [ ! -f "$TOKEN" ]; then
  say "cannot see $TOKEN, written on the batch host: $OUTPUT_DIR is not shared; choose --output-dir" \
    "on storage every node mounts"
  exit 1
fi
echo "$node $addr $iface"
CHECK
TOKEN="$OUTPUT_DIR/.trlstack-job-$SLURM_JOB_ID"
date >"$TOKEN" || fail "cannot write $TOKEN"
export REF_ADDR NETWORK_INTERFACE SERVER_NODE SERVER_PORTS TRAINER_PORTS OUTPUT_DIR TOKEN
NODE_INFO=$(srun --nodes="${#NODES[@]}" --ntasks-per-node=1 --job-name="$CHECK_STEP" --kill-on-bad-exit=1 \
  --export=ALL bash -c "$NODE_CHECK") ||
  fail "a node failed its check (its message is above); no role was started"
rm -f "$TOKEN"
while read -r node addr iface; do
  ADDR[$node]=$addr
  IFACE[$node]=$iface
  log "$node: $addr on $iface"
done <<<"$NODE_INFO"
SERVER_ADDR=${SERVER_NODE:+${ADDR[$SERVER_NODE]}}
MAIN_ADDR=${ADDR[${TRAINER_NODES[0]}]}

# Stopping. USR1 (the time limit ahead, or `scancel --signal=USR1 --batch JOB`) stops the trainers first:
# SIGTERM goes to every process of their steps on every node (scancel JOB.STEP), train's launchers ignore
# it, and every training process finishes the step in progress (the server still answers), then all of them
# save checkpoint-N together and exit. The server is stopped once they have, then the job is requeued.
# SIGTERM to this script means Slurm itself is ending the job (scancel, preemption, the time limit): every
# step got it at once; the trainers save the same way where the step in progress needs no more generation.
STOPPING=
SERVER_STOPPED=
stop_steps() { # stop_steps NAME: SIGTERM to every process of this job's steps called NAME, on every node
  local steps
  steps=$(squeue --noheader --steps --jobs "$SLURM_JOB_ID" --format='%i %j' |
    awk -v name="$1" '$2 == name {print $1}')
  [ -z "$steps" ] || scancel --signal=TERM $steps
}
on_usr1() {
  [ -n "$STOPPING" ] && return
  STOPPING=requeue
  log "stop requested: SIGTERM to the trainers (every process saves a checkpoint at the step reached)," \
    "then to the server; then the job is requeued"
  stop_steps "$TRAINER_STEP"
}
on_term() {
  STOPPING=${STOPPING:-end}
  log "Slurm is ending the job: every role got SIGTERM too and stops (trainers save a checkpoint)"
}
trap on_usr1 USR1
trap on_term TERM
"""

SUPERVISE = r"""
# Supervision: the job succeeds when every trainer has finished, and ends as soon as a role fails, naming
# its node and exit code; Slurm then stops what is left of the job on every node.
trainers_left=${#TRAINER_NODES[@]}
while [ "${#ROLE[@]}" -gt 0 ]; do
  wait -n # returns when a role ends or a signal arrives; the statuses are read below
  for pid in "${!ROLE[@]}"; do
    kill -0 "$pid" 2>/dev/null && continue
    wait "$pid"
    code=$?
    role=${ROLE[$pid]}
    unset "ROLE[$pid]"
    [[ $role == trainer* ]] && trainers_left=$((trainers_left - 1))
    if [ -n "$STOPPING" ]; then
      log "$role stopped (exit $code)"
    elif [[ $role == trainer* ]] && [ "$code" -eq 0 ]; then
      log "$role finished"
    else
      log "error: $role exited with $code; ending the job (its output above, prefixed with its name," \
        "says why)"
      scancel --signal=TERM "$SLURM_JOB_ID"
      exit $((code == 0 ? 1 : code))
    fi
  done
  if [ "$trainers_left" -eq 0 ] && [ -z "$SERVER_STOPPED" ]; then
    SERVER_STOPPED=1
    STOPPING=${STOPPING:-done}
    if [ "${#ROLE[@]}" -gt 0 ]; then
      log "the trainers have ended; stopping the vLLM server"
      stop_steps "$SERVER_STEP"
    fi
  fi
done
case "$STOPPING" in
  done) log "done: checkpoints and the final model are in $RUN_DIR" ;;
  requeue)
    log "every role has stopped; requeueing: the next attempt resumes from the newest complete checkpoint" \
      "in $RUN_DIR"
    scontrol requeue "$SLURM_JOB_ID" || fail "scontrol requeue failed; submit this script again to resume"
    sleep 300 # Slurm ends this attempt now
    ;;
  *) exit 143 ;;
esac
"""


# ------------------------------------------------------------------------------------- host side effects


def node_local(path: str, mounts: str | None = None) -> str | None:
    """Why `path` lives on one node only (a node-local folder or a memory filesystem), or None."""
    for prefix in NODE_LOCAL_PREFIXES:
        if path == prefix or path.startswith(prefix + "/"):
            return f"{prefix} is local to each node"
    if mounts is None:
        try:
            mounts = Path("/proc/self/mounts").read_text()
        except OSError:
            return None
    best, fstype = "", ""
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, fstype = point, fields[2]
    if fstype in NODE_LOCAL_FILESYSTEMS:
        return f"it is on {best} ({fstype}), a filesystem of this machine only"
    return None


def host_checks(
    settings: SlurmSettings,
    submit: bool,
    which: Callable[[str], str | None] = shutil.which,
    mounts: str | None = None,
) -> None:
    """Checks of the submit host before a script is written or submitted; UsageError naming the fix."""
    for flag, path in (("--output-dir", settings.output_dir), ("--cache-dir", settings.cache)):
        why = node_local(path, mounts)
        if why:
            raise UsageError(
                f"{flag} {path} is not shared between nodes ({why}); choose a folder on shared storage "
                "(home, project or scratch filesystem) that every node mounts at the same path."
            )
    if submit and which("sbatch") is None:
        raise UsageError("`sbatch` is not on PATH: submit from a Slurm login node, or use --dry-run.")
    image = settings.image
    if settings.runtime == "apptainer":
        if which("apptainer") is None:
            raise UsageError(
                "--runtime apptainer: `apptainer` is not on PATH on this host; load it (e.g. `module load "
                "apptainer`), or choose --runtime pyxis or none."
            )
        _check_image_file(image, "a .sif made by `trlstack export --format sif IMAGE`", mounts)
    elif settings.runtime == "pyxis":
        if not _pyxis_installed(which):
            raise UsageError(
                "--runtime pyxis: this cluster's srun has no --container-image (the Pyxis plugin is not "
                "installed); choose --runtime apptainer or none."
            )
        if image and (image.endswith(".sqsh") or image.startswith(("/", "./"))):
            _check_image_file(image, "a .sqsh made by `trlstack export --format sqsh IMAGE`", mounts)
    elif image:
        folder = Path(image)
        if not ((folder / "activate").is_file() or (folder / "bin" / "activate").is_file()):
            raise UsageError(
                f"--image {image}: --runtime none takes an environment with an `activate` script (made by "
                "`trlstack bundle ... --format site` and its install.sh, or a virtualenv)."
            )


def _check_image_file(image: str | None, what: str, mounts: str | None) -> None:
    path = os.path.abspath(str(image))
    if not os.path.isfile(path):
        raise UsageError(f"--image {image} does not exist; give {what}.")
    why = node_local(path, mounts)
    if why:
        raise UsageError(f"--image {image} is not shared between nodes ({why}); move it to shared storage.")


def _pyxis_installed(which: Callable[[str], str | None]) -> bool:
    srun = which("srun")
    if srun is None:
        return False
    done = subprocess.run([srun, "--help"], capture_output=True, text=True)
    return "--container-image" in done.stdout


# ----------------------------------------------------------------------------------------------- the CLI


@dataclass(frozen=True)
class JobPorts(Ports):
    """The ports of a job: vLLM's HTTP API and the weight transfer (as `trlstack plan`), and the trainers'
    rendezvous (as `train`)."""

    main_process_port: int = main_process_port_setting()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from trlstack.recipes import RECIPES

    environ = os.environ
    parser.description = (
        "Write an sbatch script that runs RECIPE across nodes: the first node serves generations (vLLM), the "
        "others train (accelerate multi-node), in the image through Apptainer or Pyxis, or in an "
        "environment. Arguments after `--` go to the TRL script. Details: slurm/README.md."
    )
    parser.add_argument("recipe", metavar="RECIPE", choices=list(RECIPES), help=", ".join(RECIPES))
    job = parser.add_argument_group("the job")
    job.add_argument("--nodes", type=positive_int, required=True, metavar="N", help="nodes in all (>= 2)")
    job.add_argument("--gpus-per-node", type=positive_int, metavar="G", help="GPUs of each node")
    job.add_argument(
        "--serve-nodes",
        type=int,
        default=1,
        metavar="{0,1}",
        help="1: the first node runs the vLLM server; 0: vLLM in every trainer (none with --cpu)",
    )
    job.add_argument("--partition", help="Slurm partition")
    job.add_argument("--account", help="Slurm account")
    job.add_argument("--time", help="time limit, e.g. 24:00:00 (the job requeues itself before it)")
    job.add_argument("--job-name", help="job name [default: trlstack-RECIPE]")
    job.add_argument(
        "--output-dir",
        default="outputs",
        help="shared folder for checkpoints (OUTPUT_DIR/RECIPE), the log and the script [default: outputs]",
    )
    job.add_argument("--cache-dir", help="shared folder mounted at /cache [default: OUTPUT_DIR/cache]")
    job.add_argument(
        "--stop-grace",
        type=positive_int,
        default=DEFAULT_STOP_GRACE,
        metavar="SECONDS",
        help=f"stop and requeue this long before the time limit [default: {DEFAULT_STOP_GRACE}]",
    )
    image = parser.add_argument_group("the image")
    image.add_argument("--runtime", choices=RUNTIMES, default="apptainer", help="[default: apptainer]")
    image.add_argument("--image", help="a .sif (apptainer), an image or .sqsh (pyxis), an environment (none)")
    image.add_argument(
        "--bind",
        action="append",
        metavar="SRC[:DST]",
        help="another shared folder for the container, e.g. where models live (repeatable)",
    )
    run_group = parser.add_argument_group("the run (as train and serve-vllm take them)")
    run_settings = ("config", "model", "dataset", "reward_model", "cpu")
    add_settings(run_group, train.TrainSettings, environ, only=run_settings)
    add_setting(run_group, "tensor_parallel_size", TENSOR_PARALLEL, None, environ)
    run_group.add_argument(
        "--num-heads", type=positive_int, metavar="N", help="the model's attention heads, to check TP"
    )
    add_settings(run_group, serve.ServeSettings, environ, only=SERVER_SETTINGS)
    run_group.add_argument(
        "--vllm-args",
        default="",
        metavar='"ARGS"',
        help='more arguments for `vllm serve`, one string (--vllm-args="--enforce-eager")',
    )
    # As train decides on start, but once, here: checked on the submit host, which sees the shared folder.
    add_settings(run_group, train.TrainSettings, environ, only=("resume", "fresh"))
    network = parser.add_argument_group("network")
    network.add_argument("--network-interface", metavar="IFACE", help="e.g. ib0 [default: the route's]")
    add_settings(network, JobPorts, environ)
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--dry-run", action="store_true", help="print the script, write and submit nothing")
    what.add_argument("--submit", action="store_true", help="write the script and submit it with sbatch")
    parser.add_argument(
        "-o", "--output", metavar="FILE", help="script file [default: OUTPUT_DIR/NAME.sbatch]"
    )
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


def settings_from(args: argparse.Namespace, extra: Sequence[str]) -> tuple[SlurmSettings, dict[str, Any]]:
    """Settings with paths made absolute, and the config that says what the run is, checked as train will
    check it; the model both roles get is the config's when not given."""
    from trlstack import trainconfig

    try:
        vllm_args = tuple(shlex.split(args.vllm_args))
    except ValueError as error:
        raise UsageError(f"--vllm-args {args.vllm_args!r}: {error}.") from None
    recipe = train.resolve_recipe(args.recipe)
    source = Path(args.config) if args.config else recipe.bundled_config
    wanted = train.TrainSettings(
        recipe=args.recipe,
        model=args.model,
        dataset=args.dataset,
        reward_model=args.reward_model,
        resume=args.resume,
        fresh=args.fresh,
        cpu=args.cpu,
    )
    train.check_resume_choice(wanted)
    config = train.run_config(wanted, trainconfig.load_config(source), recipe, str(source))
    settings = SlurmSettings(
        recipe=args.recipe,
        nodes=args.nodes,
        output_dir=os.path.abspath(args.output_dir),
        gpus_per_node=args.gpus_per_node,
        serve_nodes=args.serve_nodes,
        runtime=args.runtime,
        image=_absolute(args.image) if args.image and args.runtime != "pyxis" else args.image,
        partition=args.partition,
        account=args.account,
        time=args.time,
        job_name=args.job_name,
        model=config.get("model_name_or_path"),
        dataset=args.dataset,
        reward_model=args.reward_model,
        config=_absolute(args.config),
        tensor_parallel_size=args.tensor_parallel_size,
        num_heads=args.num_heads,
        port=args.port,
        group_port=args.group_port,
        main_process_port=args.main_process_port,
        **{name: getattr(args, name) for name in SERVER_SETTINGS},
        network_interface=args.network_interface,
        cache_dir=_absolute(args.cache_dir),
        binds=tuple(args.bind or ()),
        stop_grace=args.stop_grace,
        cpu=args.cpu,
        resume=args.resume,
        vllm_args=vllm_args,
        train_args=tuple(extra),
    )
    return settings, config


def say(message: str) -> None:
    print(f"trlstack slurm: {message}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from trlstack import outputs

    settings, config = settings_from(args, args.extra)
    text = render(settings)
    if args.dry_run:
        sys.stdout.write(text)
        return 0
    host_checks(settings, submit=args.submit)
    # A different run in the run folder is refused now, not on every trainer once the job starts; --fresh
    # moves it aside here, once (never deleted), --resume lets the trainers continue it.
    run_dir = Path(settings.run_dir)
    wanted = train.TrainSettings(recipe=settings.recipe, resume=args.resume, fresh=args.fresh)
    aside = train.previous_run_to_move(wanted, run_dir, train.resolve_recipe(settings.recipe), config, say)
    if aside is not None:
        outputs.move_aside(run_dir, aside)
        say(f"moved {run_dir} to {aside}; nothing in it was changed or deleted")
    path = Path(args.output or f"{settings.output_dir}/{settings.name}.sbatch")
    try:
        # Slurm cannot create the log's folder itself: a job whose --output folder is missing fails unseen.
        Path(settings.output_dir).mkdir(parents=True, exist_ok=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, text)
    except OSError as error:
        raise UsageError(f"cannot write {path}: {error.strerror}; choose a writable --output-dir.") from None
    if not args.submit:
        print(f"trlstack slurm: wrote {path}; submit it with: sbatch {shlex.quote(str(path))}")
        return 0
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
