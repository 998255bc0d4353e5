"""What each role runs on its node: its srun, in the image through the runtime, with its GPUs as the plan
gives them and the network to use, its command (serve-vllm or train), in the background, its output
prefixed with its name."""

from __future__ import annotations

from collections.abc import Sequence

from trlstack.commands.slurm.checks import Job
from trlstack.commands.slurm.settings import SERVER_DEFAULTS, SERVER_SETTINGS, SERVER_STEP, TRAINER_STEP
from trlstack.commands.slurm.shell import Var, lines
from trlstack.defaults import Env
from trlstack.gpus import PCI_BUS_ID

# What sacct and the job's messages call each role; `label` prefixes the role's output.
ROLE_NAMES = {"serve": "vLLM server on $SERVER_NODE", "train": "trainer (machine rank $rank) on $node"}
ROLE_STEPS = {"serve": SERVER_STEP, "train": TRAINER_STEP}


def runtime(job: Job) -> tuple[list[str], list[str]]:
    """(srun options, command prefix) that run a role's command in the image."""
    settings = job.settings
    # The task folder at its own path, read-only: its config, rewards, data and model, for both roles.
    task = [f"{settings.train.task}:{settings.train.task}:ro"] if settings.train.task else []
    if settings.runtime == "apptainer":
        prefix = ["apptainer", "exec", *(["--nv"] if job.layout.gpus_per_node else [])]
        prefix += ["--bind", Var('"$OUTPUT_DIR"'), "--bind", Var('"$CACHE_DIR:/cache"')]
        for bind in [*task, *settings.bind]:
            prefix += ["--bind", bind]
        return [], [*prefix, Var('"$IMAGE"')]
    if settings.runtime == "pyxis":
        mounts = ",".join([settings.output_dir, f"{settings.cache}:/cache", *task, *settings.bind])
        options = [Var('--container-image="$IMAGE"'), f"--container-mounts={mounts}"]
        return [*options, "--no-container-mount-home", Var('--container-workdir="$OUTPUT_DIR"')], []
    if settings.image:  # an environment: its activate script first
        return [], ["bash", "-c", 'source "$1" && shift && exec "$@"', "trlstack-env", Var('"$ACTIVATE"')]
    return [], []


def _srun(node: str, step: str, job: Job) -> list[str]:
    options, _ = runtime(job)
    argv = ["srun", "--nodes=1", "--ntasks=1", Var(f'--nodelist="{node}"'), f"--job-name={step}"]
    argv.append("--kill-on-bad-exit=1")
    if job.layout.gpus_per_node is not None:
        argv.append(f"--gpus-per-node={job.layout.gpus_per_node}")
    return [*argv, "--export=ALL", *options]


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def server_command(job: Job) -> list[str]:
    """serve-vllm on the server node: the plan's layout, bound to the node's cluster address only."""
    settings, plan = job.settings, job.layout.plan
    tp = plan.tensor_parallel_size if plan else 1
    dp = plan.data_parallel_size if plan else 1
    model = settings.train.model  # the run's: both roles get it
    argv = ["serve-vllm", *(["--model", model] if model else [])]
    argv += ["--host", Var('"$SERVER_ADDR"'), "--port", Var('"$VLLM_PORT"')]
    argv += ["--tensor-parallel-size", str(tp), "--data-parallel-size", str(dp)]
    for name in SERVER_SETTINGS:
        value = getattr(settings.serve, name)
        if value != getattr(SERVER_DEFAULTS, name):
            argv += [_flag(name)] if value is True else [_flag(name), str(value)]
    return argv + (["--", *settings.vllm_args] if settings.vllm_args else [])


def trainer_command(job: Job) -> list[str]:
    """train on a trainer node; `$rank` is the script's loop variable."""
    settings, run, layout = job.settings, job.settings.train, job.layout
    argv = ["train", settings.recipe]
    for flag, value in (
        ("--task", run.task),
        ("--config", run.config),
        ("--model", run.model),
        ("--dataset", run.dataset),
        ("--reward-model", run.reward_model),
    ):
        argv += [flag, value] if value else []
    argv += ["--sharding", run.sharding] if run.sharding != "auto" else []  # auto: each node alike decides
    argv += ["--ranks-per-gpu", str(run.ranks_per_gpu)] if run.ranks_per_gpu != 1 else []
    argv += ["--vllm-kv-cache-gib", f"{run.vllm_kv_cache_gib!r}"] if run.vllm_kv_cache_gib is not None else []
    if run.weight_push_timeout is not None:  # unset: train's default, on every node alike
        argv += ["--weight-push-timeout", f"{run.weight_push_timeout:g}"]
    argv += ["--output-dir", Var('"$RUN_DIR"'), *(["--resume"] if run.resume else [])]
    if layout.mode == "cpu":
        argv.append("--cpu")
    elif layout.mode == "colocate":
        argv += ["--vllm-mode", "colocate"]
    else:
        argv += [
            "--vllm-url",
            Var('"http://$SERVER_ADDR:$VLLM_PORT"'),
            "--group-port",
            Var('"$GROUP_PORT"'),
        ]
    argv += ["--num-machines", str(layout.train_nodes), "--machine-rank", Var('"$rank"')]
    argv += ["--main-process-ip", Var('"$MAIN_ADDR"'), "--main-process-port", Var('"$MAIN_PORT"')]
    return argv + (["--", *settings.train_args] if settings.train_args else [])


def _role_env(job: Job, role: str, node: str) -> list[str]:
    """The variables a role's srun passes on: its GPUs as the plan says, and the network to use."""
    env: list[str] = []
    if job.layout.gpus_per_node is not None:
        gpus = job.layout.local_gpus(role)
        env += [Var(f"{Env.CUDA_VISIBLE_DEVICES}={gpus}"), Var(f"{Env.CUDA_DEVICE_ORDER}={PCI_BUS_ID}")]
    # The server's workers use its cluster address; a trainer's is decided by train itself, the address it
    # reaches the server from (trlstack.addresses), so a value from the submitting shell must not reach it.
    env.append(Var(f'{Env.VLLM_HOST_IP}="$SERVER_ADDR"' if role == "serve" else f"{Env.VLLM_HOST_IP}="))
    if role == "train":  # --fresh acted once, on the submit host; trainers on every node must not each move
        env.append(Var(f"{Env.FRESH}="))  # the output folder aside again
    for name in (Env.NCCL_SOCKET_IFNAME, Env.GLOO_SOCKET_IFNAME):
        env.append(Var(f'{name}="${{IFACE[{node}]}}"'))
    return env


def start(role: str, node: str, label: str, command: Sequence[str], job: Job, indent: str = "") -> list[str]:
    """A role's srun in the background with its GPUs, network and runtime, named in ROLE for the job."""
    _, prefix = runtime(job)
    srun = _srun(node, ROLE_STEPS[role], job)
    groups = [_role_env(job, role, node), srun, prefix, command]
    return [*_launch(label, groups, indent), f'{indent}ROLE[$!]="{ROLE_NAMES[role]}"']


def _launch(label: str, groups: Sequence[Sequence[str]], indent: str = "") -> list[str]:
    """A role in the background, its output prefixed with its name; `$!` is then the role's subshell."""
    body = [line for group in groups if group for line in lines(group, indent + "    ")]
    body[0] = f"{indent}( {body[0].lstrip()}"
    return [
        *[line + " \\" for line in body],
        f'{indent}    2>&1 | sed -u "s/^/[{label}] /"',
        f'{indent}  exit "${{PIPESTATUS[0]}}" ) &',
    ]
