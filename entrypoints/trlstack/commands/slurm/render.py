"""The sbatch script of a checked job: the header Slurm reads, the settings as shell variables, the fixed
parts (prepare.sh with node-check.sh, supervise.sh) around the lines that start the roles. A pure function
of the `Job`, which `check` made: rendering checks nothing again. The script explains each step in a
comment."""

from __future__ import annotations

from trlstack.commands.slurm.checks import Job
from trlstack.commands.slurm.roles import server_command, start, trainer_command
from trlstack.commands.slurm.settings import CHECK_STEP, SERVER_STEP, TRAINER_STEP
from trlstack.commands.slurm.shell import assembled, assign, fixed_part
from trlstack.defaults import DEFAULT_DASHBOARD_PORT


def _sbatch_header(job: Job) -> list[str]:
    settings = job.settings
    lines = [
        f"#SBATCH --job-name={settings.name}",
        f"#SBATCH --nodes={settings.nodes}",
        "# One task per node: each role is started on its node by its own srun below.",
        "#SBATCH --ntasks-per-node=1",
    ]
    if job.layout.gpus_per_node is not None:
        lines.append(f"#SBATCH --gpus-per-node={job.layout.gpus_per_node}")
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


def _describe(job: Job) -> list[str]:
    settings, layout = job.settings, job.layout
    image = f"{settings.image} ({settings.runtime})" if settings.image else f"none ({settings.runtime})"
    per_node = (layout.gpus_per_node or 1) * settings.train.ranks_per_gpu
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


def _settings(job: Job) -> list[str]:
    settings, layout, ports = job.settings, job.layout, job.settings.ports
    lines = [
        "# Settings, as `trlstack slurm` rendered them.",
        assign("OUTPUT_DIR", settings.output_dir),
        assign("RUN_DIR", settings.run_dir),
        assign("CACHE_DIR", settings.cache),
        assign("IMAGE", settings.image),
        assign("SERVE_NODES", layout.serve_nodes),
        assign("NETWORK_INTERFACE", settings.network_interface),
        assign("VLLM_PORT", ports.port),
        assign("GROUP_PORT", ports.group_port),
        assign("MAIN_PORT", ports.main_process_port),
        "# The ports each role binds on its node, checked free before anything starts.",
        f'SERVER_PORTS="{"$VLLM_PORT" if layout.serve_nodes else ""}"',
        f'TRAINER_PORTS="{"$MAIN_PORT $GROUP_PORT" if layout.mode == "server" else "$MAIN_PORT"}"',
        "# Job step names: sacct shows each role under its command, and a stop signals the trainers' steps",
        "# by name before the server's.",
        f"SERVER_STEP={SERVER_STEP} TRAINER_STEP={TRAINER_STEP} CHECK_STEP={CHECK_STEP}",
    ]
    if settings.runtime == "none" and settings.image:
        lines.append('ACTIVATE="$IMAGE/activate"; [ -f "$ACTIVATE" ] || ACTIVATE="$IMAGE/bin/activate"')
    return lines


def dashboard_command(job: Job) -> str:
    """`trlstack dashboard RUN_DIR` as a person runs it on the login node, where the shared folder is mounted:
    through the job's runtime where one runs there (Apptainer, an environment), else from a checkout."""
    runtime, served = job.settings.runtime, 'trlstack dashboard "$RUN_DIR"'
    if runtime == "apptainer":
        return f'apptainer exec --bind "$OUTPUT_DIR" "$IMAGE" {served}'
    if runtime == "none" and job.settings.image:
        return f'source "$ACTIVATE" && {served}'
    if runtime == "none":
        return served
    return f"uv run --extra dashboard {served} (in a trlstack checkout; pyxis runs only inside jobs)"


def _watch(job: Job) -> list[str]:
    """The log lines that say how to watch the run: its dashboard on the login node, through an SSH tunnel."""
    port = DEFAULT_DASHBOARD_PORT
    command = dashboard_command(job).replace('"', '\\"')
    return [
        "# How to watch the run: train records its metrics in RUN_DIR/trackio; a dashboard on the login node",
        "# (which mounts the shared folder) serves them on its loopback, reached through an SSH tunnel.",
        f'log "watch the run: on ${{SLURM_SUBMIT_HOST:-the login node}} run: {command}"',
        f'log "then on your machine: ssh -N -L {port}:127.0.0.1:{port} ${{USER:-you}}@'
        f"${{SLURM_SUBMIT_HOST:-LOGIN_NODE}} and open http://127.0.0.1:{port}/ (trlstack report "
        f'\\"$RUN_DIR\\" draws the run, anywhere)"',
    ]


def render(job: Job) -> str:
    """The sbatch script of the checked `job`."""
    layout = job.layout
    lines = ["#!/bin/bash", *_describe(job), "#", *_sbatch_header(job), "", *_settings(job)]
    lines += ["", *assembled("prepare.sh"), ""]
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
        lines += start("serve", "$SERVER_NODE", "server $SERVER_NODE", server_command(job), job)
        lines += ['log "started the vLLM server on $SERVER_NODE"', ""]
    lines += [
        "# One trainer per node, accelerate multi-node: machine rank 0 (the first trainer node) hosts the",
        "# rendezvous. NCCL and gloo use the interface of the route to the server; each trainer sets",
        "# VLLM_HOST_IP to its own address on that route, where the server's workers reach it for the",
        "# weight transfer.",
        'for rank in "${!TRAINER_NODES[@]}"; do',
        "  node=${TRAINER_NODES[$rank]}",
    ]
    lines += start("train", "$node", "trainer $rank $node", trainer_command(job), job, indent="  ")
    lines += ["done", 'log "started ${#TRAINER_NODES[@]} trainer(s) on ${TRAINER_NODES[*]}"']
    lines += _watch(job)
    return "\n".join([*lines, "", *fixed_part("supervise.sh"), ""]) + "\n"
