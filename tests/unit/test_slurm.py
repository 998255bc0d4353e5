"""trlstack slurm: the rendered script for 2 x 8 and 4 x 8 GPUs, and what it does when it runs: which node
runs what, with which environment, and how it ends. Slurm and the nodes' network tools are stand-ins here (a
Python stub per command, recording its calls); the real cluster runs in tests/slurm."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from trlstack import slurm
from trlstack.cli import main
from trlstack.errors import UsageError
from trlstack.slurm import SlurmSettings, host_checks, node_local, render

MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
SIF = "/shared/images/trlstack.sif"
OUT = "/shared/runs"


def settings(**changes) -> SlurmSettings:
    base = dict(recipe="grpo", nodes=2, gpus_per_node=8, image=SIF, output_dir=OUT, model=MODEL)
    return SlurmSettings(**{**base, **changes})


# ------------------------------------------------------------------------------------- the script's text


def test_the_header_asks_for_whole_gpu_nodes_a_shared_log_a_stop_signal_and_requeue():
    text = render(settings(partition="gpu", account="rl", time="24:00:00"))
    header = [line for line in text.splitlines() if line.startswith("#SBATCH")]
    assert header == [
        "#SBATCH --job-name=trlstack-grpo",
        "#SBATCH --nodes=2",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --gpus-per-node=8",
        "#SBATCH --exclusive",
        "#SBATCH --partition=gpu",
        "#SBATCH --account=rl",
        "#SBATCH --time=24:00:00",
        "#SBATCH --output=/shared/runs/trlstack-grpo-%j.out",
        "#SBATCH --open-mode=append",
        "#SBATCH --signal=B:USR1@300",
        "#SBATCH --requeue",
    ]
    assert text.startswith(
        "#!/bin/bash\n# trlstack slurm grpo: vLLM on 1 node (tensor-parallel 1 x data-parallel 8)"
    )
    assert "IMAGE=/shared/images/trlstack.sif\n" in text
    assert "RUN_DIR=/shared/runs/grpo\n" in text
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)


def test_the_example_in_slurm_readme_is_what_trlstack_slurm_writes():
    # Regenerate with: trlstack slurm grpo --nodes 2 --gpus-per-node 8 --image /shared/images/trlstack.sif
    #   --partition gpu --time 24:00:00 --output-dir /shared/runs/grpo-2x8 --dry-run > slurm/grpo-2x8.sbatch
    example = Path(__file__).resolve().parents[2] / "slurm" / "grpo-2x8.sbatch"
    expected = settings(
        image="/shared/images/trlstack.sif",
        partition="gpu",
        time="24:00:00",
        output_dir="/shared/runs/grpo-2x8",
    )
    assert example.read_text() == render(expected)


def test_every_step_of_the_script_says_why():
    lines = render(settings()).splitlines()

    def comment_before(prefix: str) -> str:
        at = next(i for i, line in enumerate(lines) if line.lstrip().startswith(prefix))
        return lines[at - 1].strip()

    for step in ("#SBATCH --ntasks", "#SBATCH --exclusive", "#SBATCH --output", "#SBATCH --signal"):
        assert comment_before(step).startswith("# "), step
    assert comment_before("#SBATCH --requeue").startswith("# checkpoint in its output folder")
    assert comment_before("( CUDA_VISIBLE_DEVICES").startswith("# weight-transfer engine before")
    assert comment_before('for rank in "${!TRAINER_NODES[@]}"').startswith("# weight transfer.")
    assert any(line.startswith("# Stopping. USR1") for line in lines)


def flat(text: str) -> str:
    """The script with its continued lines joined, each run of spaces one space."""
    return " ".join(text.replace("\\\n", " ").split())


def test_cpu_runs_request_no_gpu_and_train_with_cpu():
    text = render(settings(cpu=True, gpus_per_node=None, serve_nodes=0, runtime="none", image=None))
    assert "--gpus-per-node" not in text
    assert "--nv" not in text and "CUDA_VISIBLE_DEVICES" not in text
    assert 'train grpo --model Qwen/Qwen2.5-0.5B-Instruct --output-dir "$RUN_DIR" --cpu' in flat(text)
    assert "started the vLLM server" not in text and "serve-vllm --" not in flat(text)


def test_pyxis_runs_the_image_through_srun_without_the_home_folder():
    text = render(settings(runtime="pyxis", image="nvcr.io#org/trlstack:1", binds=("/shared/models",)))
    assert '--container-image="$IMAGE"' in text
    assert "--container-mounts=/shared/runs,/shared/runs/cache:/cache,/shared/models" in text
    assert "--no-container-mount-home" in text
    assert "apptainer" not in text


def test_an_environment_is_activated_on_each_node_for_runtime_none():
    text = render(settings(runtime="none", image="/shared/envs/trlstack"))
    assert 'ACTIVATE="$IMAGE/activate"; [ -f "$ACTIVATE" ] || ACTIVATE="$IMAGE/bin/activate"' in text
    assert 'bash -c \'source "$1" && shift && exec "$@"\' trlstack-env "$ACTIVATE"' in text


# --------------------------------------------------------------------------- the script, run with stand-ins

STUB = r'''#!{python}
"""Stand-ins for Slurm and the nodes' network tools; each call is recorded in $STUB_DIR."""
import json, os, signal, subprocess, sys, time
from pathlib import Path

name, args = Path(sys.argv[0]).name, sys.argv[1:]
state = Path(os.environ["STUB_DIR"])
nodes = os.environ["STUB_NODES"].split()
addrs = dict(zip(nodes, os.environ["STUB_ADDRS"].split()))
me = os.environ.get("STUB_NODE", "")


def record(kind, **fields):
    with (state / f"{kind}.jsonl").open("a") as out:
        out.write(json.dumps(fields) + "\n")


def steps():
    """The role steps whose process still runs."""
    path = state / "steps.jsonl"
    found = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    alive = []
    for step in found:
        try:
            os.kill(step["pid"], 0)
        except ProcessLookupError:
            continue
        alive.append(step)
    return alive


if name == "scontrol":
    if args[:2] == ["show", "hostnames"]:
        print("\n".join(nodes))
    else:
        record("scontrol", argv=args)
        if args[0] == "requeue":  # Slurm ends the attempt
            os.kill(os.getppid(), signal.SIGKILL)
elif name == "getent":
    print(f"{os.environ.get('STUB_RESOLVE') or addrs[args[1]]}  STREAM {args[1]}")
elif name == "ip":
    if "route" in args:
        target = args[-1]
        if target == addrs[me]:
            print(f"local {target} dev lo src {target} uid 0")
        else:
            print(f"{target} dev ib0 src {addrs[me]} uid 0")
    else:
        lines = {"lo": "1: lo    inet 127.0.0.1/8 scope host lo",
                 "ib0": f"3: ib0    inet {addrs[me]}/16 brd 10.0.255.255 scope global ib0"}
        shown = [args[args.index("dev") + 1]] if "dev" in args else list(lines)
        print("\n".join(lines[name] for name in shown if name in lines))
elif name == "ss":
    port = args[-1].split(":")[-1]
    if port in json.loads(os.environ.get("STUB_BUSY", "{}")).get(me, []):
        print(f'LISTEN 0 128 0.0.0.0:{port} 0.0.0.0:* users:(("python3",pid=99,fd=3))')
elif name == "squeue":  # the job's steps still running: `JOB.STEP NAME`
    for step in steps():
        print(f"{step['id']} {step['name']}")
elif name == "scancel":  # `--signal=TERM JOB` signals every step, `--signal=TERM JOB.STEP ...` those steps
    record("scancel", argv=args)
    targets = [arg for arg in args if not arg.startswith("-")]
    for step in steps():
        if step["id"] in targets or step["id"].split(".")[0] in targets:
            try:
                os.kill(step["pid"], signal.SIGTERM)
            except ProcessLookupError:
                pass
elif name == "srun":
    options = {}
    while args and args[0].startswith("-"):
        key, _, value = args.pop(0).partition("=")
        options[key] = value
    if args[:2] == ["bash", "-c"]:  # the node check, on every node
        for node in nodes:
            done = subprocess.run(args, env={**os.environ, "SLURMD_NODENAME": node, "STUB_NODE": node})
            if done.returncode:
                sys.exit(done.returncode)
    elif args[0] == "ip":
        sys.exit(subprocess.run(args, env={**os.environ, "STUB_NODE": options["--nodelist"]}).returncode)
    else:  # a role
        node = options["--nodelist"]
        server = "serve-vllm" in args
        waits = server or os.environ.get("STUB_TRAIN_UNTIL_TERM")

        def stop(*_):
            record("stopped", node=node, step=options["--job-name"])
            sys.exit(0 if server else 143)

        signal.signal(signal.SIGTERM, stop)
        record("steps", id=f"42.{os.getpid()}", name=options["--job-name"], pid=os.getpid())
        keep = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "VLLM_HOST_IP", "NCCL_SOCKET_IFNAME",
                "GLOO_SOCKET_IFNAME")
        env = {key: os.environ[key] for key in keep if key in os.environ}
        record("roles", node=node, options=options, argv=args, env=env)
        code = json.loads(os.environ.get("STUB_EXIT", "{}")).get(node)
        time.sleep(0.3)
        if code is not None:
            print(f"{node}: exiting with {code}")
            sys.exit(code)
        while waits:
            time.sleep(0.05)
elif name == "sbatch":
    record("sbatch", argv=args)
    print("4242")
'''
STUBS = ("scontrol", "getent", "ip", "ss", "squeue", "scancel", "srun", "sbatch")


class Run:
    """The rendered script run once with the stand-ins; what each stand-in saw."""

    def __init__(self, tmp_path: Path, text: str, nodes: int, **env: str):
        self.dir = tmp_path / "stub"
        self.dir.mkdir()
        self.bin = make_stubs(tmp_path)
        self.nodes = [f"gpu-{chr(ord('a') + i)}" for i in range(nodes)]
        self.addrs = [f"10.0.0.{i + 1}" for i in range(nodes)]
        self.shm = tmp_path / "shm"
        self.shm.mkdir(exist_ok=True)
        out = tmp_path / "shared"
        out.mkdir(exist_ok=True)
        # The node check's /dev/shm, and the output folder, live in the test's folder.
        self.text = text.replace("/dev/shm/", f"{self.shm}/").replace(OUT, str(out))
        self.env = {
            **os.environ,
            "PATH": f"{self.bin}{os.pathsep}{os.environ['PATH']}",
            "STUB_DIR": str(self.dir),
            "STUB_NODES": " ".join(self.nodes),
            "STUB_ADDRS": " ".join(self.addrs),
            "SLURM_JOB_NODELIST": "gpu-[a-z]",
            "SLURM_JOB_ID": "42",
            **env,
        }
        self.script = tmp_path / "job.sbatch"
        self.script.write_text(self.text)

    def start(self) -> subprocess.Popen[str]:
        return subprocess.Popen(
            ["bash", str(self.script)],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def __call__(self) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(self.script)], env=self.env, capture_output=True, text=True, timeout=60
        )

    def calls(self, kind: str) -> list[dict]:
        path = self.dir / f"{kind}.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def roles(self) -> dict[str, dict]:
        return {call["node"]: call for call in self.calls("roles")}

    def step_ids(self, name: str) -> list[str]:
        return [step["id"] for step in self.calls("steps") if step["name"] == name]


def make_stubs(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in STUBS:
        path = bin_dir / name
        path.write_text(STUB.replace("{python}", sys.executable))
        path.chmod(0o755)
    return bin_dir


def after_image(argv: list[str]) -> list[str]:
    """The role's own command: what follows the image in `apptainer exec ... IMAGE CMD`."""
    return argv[argv.index(SIF) + 1 :] if SIF in argv else argv


@pytest.mark.parametrize(("nodes", "tp"), [(2, 1), (4, 1), (4, 2)])
def test_the_first_node_serves_the_others_train_each_with_its_gpus_and_addresses(tmp_path, nodes, tp):
    run = Run(tmp_path, render(settings(nodes=nodes, tensor_parallel_size=tp)), nodes)
    done = run()
    assert done.returncode == 0, done.stdout + done.stderr
    roles = run.roles()
    assert list(roles) == run.nodes or sorted(roles) == run.nodes  # one role per node, every node
    server, *trainers = run.nodes
    server_addr, *trainer_addrs = run.addrs
    shared = str(tmp_path / "shared")

    serve = roles[server]
    assert serve["options"]["--gpus-per-node"] == "8" and serve["options"]["--kill-on-bad-exit"] == "1"
    assert serve["options"]["--job-name"] == "serve-vllm"
    assert serve["argv"][:3] == ["apptainer", "exec", "--nv"]
    assert after_image(serve["argv"]) == [
        "serve-vllm", "--model", MODEL, "--host", server_addr, "--port", "8000",
        "--tensor-parallel-size", str(tp), "--data-parallel-size", str(8 // tp),
    ]  # fmt: skip
    assert serve["env"] == {
        "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "VLLM_HOST_IP": server_addr,
        "NCCL_SOCKET_IFNAME": "ib0",
        "GLOO_SOCKET_IFNAME": "ib0",
    }
    for rank, node in enumerate(trainers):
        train = roles[node]
        assert train["options"]["--job-name"] == "train"
        # Each trainer sets VLLM_HOST_IP itself, to its address on the route to the server
        # (trlstack.addresses); one from the submitting shell is cleared.
        assert after_image(train["argv"]) == [
            "train", "grpo", "--model", MODEL, "--output-dir", f"{shared}/grpo",
            "--vllm-url", f"http://{server_addr}:8000", "--vllm-group-port", "51216",
            "--num-machines", str(nodes - 1), "--machine-rank", str(rank),
            "--main-process-ip", trainer_addrs[0], "--main-process-port", "29500",
        ]  # fmt: skip
        assert train["env"] == {
            "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7",
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
            "VLLM_HOST_IP": "",
            "NCCL_SOCKET_IFNAME": "ib0",
            "GLOO_SOCKET_IFNAME": "ib0",
        }
    # Training finished: the server's step is stopped with SIGTERM and the job succeeds.
    assert run.calls("scancel") == [{"argv": ["--signal=TERM", run.step_ids("serve-vllm")[0]]}]
    assert "the trainers have ended; stopping the vLLM server" in done.stdout
    assert f"done: checkpoints and the final model are in {shared}/grpo" in done.stdout


def test_trl_and_vllm_arguments_reach_their_roles(tmp_path):
    text = render(settings(vllm_args=("--enforce-eager",), train_args=("--max_steps", "10")))
    run = Run(tmp_path, text, 2)
    assert run().returncode == 0
    roles = run.roles()
    assert roles["gpu-a"]["argv"][-2:] == ["--", "--enforce-eager"]
    assert roles["gpu-b"]["argv"][-3:] == ["--", "--max_steps", "10"]


def test_a_failed_role_ends_the_job_naming_it_its_node_and_exit_code(tmp_path):
    run = Run(tmp_path, render(settings(nodes=3)), 3, STUB_EXIT=json.dumps({"gpu-c": 3}))
    done = run()
    assert done.returncode == 3
    assert "error: trainer (machine rank 1) on gpu-c exited with 3; ending the job" in done.stdout
    assert "[trainer 1 gpu-c] gpu-c: exiting with 3" in done.stdout
    assert run.calls("scancel") == [{"argv": ["--signal=TERM", "42"]}]


def test_a_server_that_ends_while_trainers_run_fails_the_job(tmp_path):
    run = Run(tmp_path, render(settings()), 2, STUB_EXIT=json.dumps({"gpu-a": 0}), STUB_TRAIN_UNTIL_TERM="1")
    done = run()
    assert done.returncode == 1
    assert "error: vLLM server on gpu-a exited with 0; ending the job" in done.stdout


def test_usr1_stops_the_trainers_then_the_server_then_requeues(tmp_path):
    run = Run(tmp_path, render(settings(nodes=3)), 3, STUB_TRAIN_UNTIL_TERM="1")
    job = run.start()
    deadline = time.monotonic() + 30
    while len(run.calls("roles")) < 3:
        assert time.monotonic() < deadline and job.poll() is None
        time.sleep(0.05)
    job.send_signal(signal.SIGUSR1)
    output, _ = job.communicate(timeout=30)
    assert job.returncode == -signal.SIGKILL  # ended by Slurm's requeue
    assert "stop requested: SIGTERM to the trainers (every process saves a checkpoint at the step" in output
    assert "trainer (machine rank 0) on gpu-b stopped (exit 143)" in output
    # Every process of both trainer steps first, while the server still answers; the server once they ended.
    trainers = sorted(run.step_ids("train"))
    assert [sorted(call["argv"][1:]) for call in run.calls("scancel")] == [
        trainers,
        run.step_ids("serve-vllm"),
    ]
    stopped = [call["step"] for call in run.calls("stopped")]
    assert stopped == ["train", "train", "serve-vllm"]
    assert run.calls("scontrol") == [{"argv": ["requeue", "42"]}]


def test_a_busy_port_stops_the_job_before_any_role_starts(tmp_path):
    run = Run(tmp_path, render(settings()), 2, STUB_BUSY=json.dumps({"gpu-b": ["29500"]}))
    done = run()
    assert done.returncode == 1
    assert (
        'gpu-b: port 29500 is in use (users:(("python3",pid=99,fd=3))), maybe by a crashed run' in done.stderr
    )
    assert "a node failed its check" in done.stdout
    assert run.calls("roles") == []


@pytest.mark.parametrize("address", ["127.0.1.1", "0.0.0.0"])
def test_a_name_that_resolves_to_loopback_or_the_any_address_asks_for_the_interface(tmp_path, address):
    run = Run(tmp_path, render(settings()), 2, STUB_RESOLVE=address)
    done = run()
    assert done.returncode == 1
    assert f"gpu-a resolves to {address} (loopback or the any-address)" in done.stdout
    assert "pass --network-interface IFACE" in done.stdout
    assert run.calls("roles") == []


def test_the_interface_named_gives_every_address(tmp_path):
    run = Run(tmp_path, render(settings(network_interface="ib0")), 2)
    assert run().returncode == 0
    server, trainer = run.roles()["gpu-a"], run.roles()["gpu-b"]
    assert server["argv"][server["argv"].index("--host") + 1] == "10.0.0.1"
    assert trainer["argv"][trainer["argv"].index("--main-process-ip") + 1] == "10.0.0.2"
    assert trainer["env"]["NCCL_SOCKET_IFNAME"] == "ib0"


def test_leftover_shared_memory_of_crashed_runs_is_removed_and_live_segments_kept(tmp_path):
    import mmap

    run = Run(tmp_path, render(settings()), 2)
    stale = [run.shm / "nccl-abc123", run.shm / "psm_1f2e"]
    for path in [*stale, run.shm / "psm_live", run.shm / "dataset.bin"]:
        path.write_bytes(b"x" * 4096)
    with (run.shm / "psm_live").open("r+b") as handle, mmap.mmap(handle.fileno(), 4096):  # mapped: in use
        done = run()
    assert done.returncode == 0
    assert not any(path.exists() for path in stale)
    assert (run.shm / "psm_live").exists() and (run.shm / "dataset.bin").exists()
    assert "gpu-a: removed 2 segment(s) a crashed run left" in done.stderr


def test_an_output_folder_other_nodes_cannot_see_stops_the_job(tmp_path):
    run = Run(tmp_path, render(settings()), 2)
    # The stand-in token is never visible: the check looks for it under another name.
    unseen = run.text.replace('-f "$TOKEN"', '-f "$TOKEN.elsewhere"')
    run.script.write_text(unseen.replace("for _ in 1 2 3 4 5 6 7 8 9 10; do", "for _ in 1; do"))
    done = run()
    assert done.returncode == 1
    assert "is not shared; choose --output-dir on storage every node mounts" in done.stderr
    assert run.calls("roles") == []


# ------------------------------------------------------------------------------------ the command line


@pytest.fixture
def shared_tmp(tmp_path, monkeypatch):
    """The test's folder stands for shared storage (it is under /tmp, which is node-local on clusters)."""
    real = slurm.node_local

    def node_local(path, mounts=None):
        return None if path.startswith(str(tmp_path)) else real(path, mounts)

    monkeypatch.setattr(slurm, "node_local", node_local)
    return tmp_path


def test_dry_run_prints_the_script_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "runs"
    argv = ["slurm", "grpo", "--nodes", "4", "--gpus-per-node", "8", "--image", SIF, "--output-dir", str(out)]
    assert main([*argv, "--dry-run", "--", "--max_steps", "5"]) == 0
    text = capsys.readouterr().out
    assert text == render(settings(nodes=4, output_dir=str(out), train_args=("--max_steps", "5")))
    assert not out.exists()


def test_the_model_defaults_to_the_config_one_for_both_roles(tmp_path, capsys):
    config = tmp_path / "mine.yaml"
    config.write_text("model_name_or_path: org/other\ndataset_name: d\nreward_funcs: [accuracy_reward]\n")
    argv = ["slurm", "grpo", "--nodes", "2", "--gpus-per-node", "4", "--image", SIF, "--config", str(config)]
    assert main([*argv, "--output-dir", str(tmp_path), "--dry-run"]) == 0
    text = flat(capsys.readouterr().out)
    assert "serve-vllm --model org/other" in text
    assert f"train grpo --config {config} --model org/other" in text


def test_the_roles_settings_are_taken_as_the_roles_declare_them(tmp_path, capsys, monkeypatch):
    # serve-vllm's and train's flags and variables, and the ports as `trlstack plan` and `train` take them.
    monkeypatch.setenv("TRLSTACK_VLLM_PORT", "8100")
    monkeypatch.setenv("TRLSTACK_MAIN_PROCESS_PORT", "29600")
    monkeypatch.setenv("TRLSTACK_MODEL", "org/from-env")
    argv = ["slurm", "grpo", "--nodes", "2", "--gpus-per-node", "8", "--image", SIF]
    argv += ["--output-dir", str(tmp_path), "--gpu-memory-utilization", "0.8", "--max-model-len", "4096"]
    assert main([*argv, "--dtype", "bfloat16", "--allow-public-bind", "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "VLLM_PORT=8100\nGROUP_PORT=51216\nMAIN_PORT=29600\n" in text
    assert (
        'serve-vllm --model org/from-env --host "$SERVER_ADDR" --port "$VLLM_PORT" --tensor-parallel-size 1 '
        "--data-parallel-size 8 --gpu-memory-utilization 0.8 --max-model-len 4096 --dtype bfloat16 "
        "--allow-public-bind 2>&1" in flat(text)
    )
    assert "train grpo --model org/from-env" in flat(text)


def test_submit_writes_the_script_beside_the_outputs_and_prints_the_job_id(shared_tmp, capsys, monkeypatch):
    tmp_path = shared_tmp
    monkeypatch.setenv("PATH", f"{make_stubs(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("STUB_DIR", str(tmp_path))
    monkeypatch.setenv("STUB_NODES", "")
    monkeypatch.setenv("STUB_ADDRS", "")
    out = tmp_path / "runs"
    argv = ["slurm", "grpo", "--cpu", "--nodes", "2", "--runtime", "none", "--output-dir", str(out)]
    assert main([*argv, "--submit"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "4242\n"
    assert f"watch: squeue -j 4242; tail -f {out}/trlstack-grpo-4242.out" in captured.err
    script = out / "trlstack-grpo.sbatch"
    assert json.loads((tmp_path / "sbatch.jsonl").read_text()) == {"argv": ["--parsable", str(script)]}
    assert script.read_text().startswith("#!/bin/bash\n# trlstack slurm grpo")


def previous_run(run_dir: Path, model: str) -> None:
    """A run train left: its merged config and a checkpoint."""
    (run_dir / "checkpoint-3").mkdir(parents=True)
    config = {"model_name_or_path": model, "dataset_name": "d", "reward_funcs": ["accuracy_reward"]}
    (run_dir / "trlstack-grpo.yaml").write_text(json.dumps(config))


@pytest.fixture
def submit_host(shared_tmp, monkeypatch):
    """`sbatch` stand-in on PATH, the test's folder as shared storage."""
    monkeypatch.setenv("PATH", f"{make_stubs(shared_tmp)}{os.pathsep}{os.environ['PATH']}")
    for name, value in (("STUB_DIR", str(shared_tmp)), ("STUB_NODES", ""), ("STUB_ADDRS", "")):
        monkeypatch.setenv(name, value)
    config = shared_tmp / "mine.yaml"
    config.write_text("model_name_or_path: org/new\ndataset_name: d\nreward_funcs: [accuracy_reward]\n")
    return shared_tmp, ["slurm", "grpo", "--nodes", "2", "--gpus-per-node", "8", "--runtime", "none"]


def test_another_run_in_the_run_folder_is_refused_before_submitting(submit_host, capsys):
    tmp_path, argv = submit_host
    previous_run(tmp_path / "runs" / "grpo", "org/old")
    argv += ["--config", str(tmp_path / "mine.yaml"), "--output-dir", str(tmp_path / "runs"), "--submit"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path}/runs/grpo holds another run than this one" in err
    assert "model_name_or_path: org/old -> org/new" in err
    assert "--fresh (TRLSTACK_FRESH=1): move it aside" in err and "--resume (TRLSTACK_RESUME=1)" in err
    assert not (tmp_path / "sbatch.jsonl").exists()


def test_fresh_moves_the_other_run_aside_once_on_the_submit_host(submit_host, capsys):
    tmp_path, argv = submit_host
    previous_run(tmp_path / "runs" / "grpo", "org/old")
    argv += ["--config", str(tmp_path / "mine.yaml"), "--output-dir", str(tmp_path / "runs"), "--submit"]
    assert main([*argv, "--fresh"]) == 0
    aside = [path for path in (tmp_path / "runs").iterdir() if path.name.startswith("grpo.")]
    assert len(aside) == 1 and (aside[0] / "checkpoint-3").is_dir()
    assert not (tmp_path / "runs" / "grpo").exists()
    assert f"moved {tmp_path}/runs/grpo to {aside[0]}; nothing in it was changed or deleted" in (
        capsys.readouterr().err
    )
    # The trainers never move it again, whatever the submitting shell exported.
    script = (tmp_path / "runs" / "trlstack-grpo.sbatch").read_text()
    assert "TRLSTACK_FRESH= " in script and " --resume" not in script


def test_resume_lets_the_trainers_continue_the_other_run(submit_host, capsys):
    tmp_path, argv = submit_host
    previous_run(tmp_path / "runs" / "grpo", "org/old")
    argv += ["--config", str(tmp_path / "mine.yaml"), "--output-dir", str(tmp_path / "runs"), "--submit"]
    assert main([*argv, "--resume"]) == 0
    assert "continuing the run in" in capsys.readouterr().err
    assert (tmp_path / "runs" / "grpo" / "checkpoint-3").is_dir()
    script = flat((tmp_path / "runs" / "trlstack-grpo.sbatch").read_text())
    assert '--output-dir "$RUN_DIR" --resume --vllm-url' in script


def test_the_same_run_is_resumed_without_a_word(submit_host, capsys):
    tmp_path, argv = submit_host
    previous_run(tmp_path / "runs" / "grpo", "org/new")
    argv += ["--config", str(tmp_path / "mine.yaml"), "--output-dir", str(tmp_path / "runs"), "--submit"]
    assert main(argv) == 0
    assert (tmp_path / "runs" / "grpo" / "checkpoint-3").is_dir()


BAD = [
    (["--nodes", "1", "--gpus-per-node", "8"], "--nodes 1: a Slurm run spans at least 2 nodes"),
    (
        ["--nodes", "2", "--serve-nodes", "2", "--gpus-per-node", "8"],
        "--serve-nodes 2 with --nodes 2 leaves no",
    ),
    (["--nodes", "4", "--serve-nodes", "2", "--gpus-per-node", "8"], "one vLLM server node is supported"),
    (
        ["--nodes", "2", "--gpus-per-node", "8", "--tensor-parallel-size", "3"],
        "does not divide the 8 serving",
    ),
    (
        ["--nodes", "2", "--gpus-per-node", "8", "--tensor-parallel-size", "4", "--num-heads", "14"],
        "does not divide the model's 14 attention heads; choose one of 1, 2",
    ),
    (["--nodes", "2"], "name the GPUs of each node: --gpus-per-node G"),
    (["--nodes", "2", "--cpu", "--gpus-per-node", "8"], "--cpu requests no GPUs"),
    (["--nodes", "2", "--gpus-per-node", "0"], "0 is not a positive whole number"),
    (["--nodes", "2", "--gpus-per-node", "8", "--runtime", "pyxis"], "--runtime pyxis needs --image"),
    (["--nodes", "2", "--gpus-per-node", "8", "--image", "x.sqsh"], "--runtime apptainer runs a .sif file"),
    (["--nodes", "2", "--gpus-per-node", "8", "--runtime", "docker"], "invalid choice: 'docker'"),
    (["--nodes", "2", "--gpus-per-node", "8", "--port", "29500"], "--port and --main-process-port are both"),
    (["--nodes", "2", "--gpus-per-node", "8", "--network-interface", "eth0;rm"], "is not an interface name"),
    (["--nodes", "2", "--gpus-per-node", "8", "--stop-grace", "5"], "at least 30 s to write a checkpoint"),
    (["--nodes", "2", "--gpus-per-node", "8", "--", "--output_dir", "/x"], "--output_dir after `--`"),
    (["--nodes", "2", "--gpus-per-node", "8", "--", "--machine_rank", "1"], "no option --machine_rank"),
    # The guards of train and serve-vllm by meaning, before anything is queued: any spelling TRL's and
    # vLLM's parsers accept.
    (["--nodes", "2", "--gpus-per-node", "8", "--", "--output-d=/x"], "reads it as --output-dir"),
    (["--nodes", "2", "--gpus-per-node", "8", "--", "--vllm_mod", "colocate"], "use --serve-nodes 0"),
    (["--nodes", "2", "--gpus-per-node", "8", "--", "--vllm-server-base", "x"], "points every trainer"),
    (["--nodes", "2", "--gpus-per-node", "8", "--", "--learnig_rate", "1"], "did you mean --learning_rate"),
    (["--nodes", "2", "--gpus-per-node", "8", "--vllm-args", "--host 0.0.0.0"], "--host in --vllm-args"),
    (["--nodes", "2", "--gpus-per-node", "8", "--vllm-args=--host=::"], "binds the server node's"),
    (["--nodes", "2", "--gpus-per-node", "8", "--vllm-args", "--ho ::ffff:0.0.0.0"], "reads it as --host"),
    (["--nodes", "2", "--gpus-per-node", "8", "--vllm-args=--port=9"], "use trlstack slurm's --port"),
    (
        ["--nodes", "2", "--gpus-per-node", "8", "--vllm-args=--weight_transfer_config.backend=gloo"],
        "TRL needs the value serve-vllm sets",
    ),
    (["--nodes", "2", "--gpus-per-node", "8", "--vllm-args", "--max_model_len 9"], "--max-model-len"),
    (["--nodes", "2", "--serve-nodes", "0", "--gpus-per-node", "8", "--vllm-args=-O3"], "there is none"),
    (["--nodes", "2", "--gpus-per-node", "8", "--gpu-memory-utilization", "2"], "not a fraction"),
    (["--nodes", "2", "--gpus-per-node", "8", "--vllm-args", "'unclosed"], "No closing quotation"),
    (["--nodes", "2", "--gpus-per-node", "8", "--config", "absent.yaml"], "absent.yaml does not exist"),
    (["--nodes", "2", "--gpus-per-node", "8", "--dry-run", "--submit"], "not allowed with argument"),
    (["--nodes", "2", "--gpus-per-node", "8", "--resume", "--fresh"], "choose one"),
    (
        ["--nodes", "2", "--gpus-per-node", "8", "--image", "/nowhere/x.sif"],
        "--image /nowhere/x.sif does not exist",
    ),
    (["--nodes", "2", "--gpus-per-node", "8", "--output-dir", "/tmp/runs"], "is not shared between nodes"),
    (
        ["--nodes", "2", "--gpus-per-node", "8", "--output-dir", "/dev/shm/r"],
        "/dev/shm is local to each node",
    ),
]


@pytest.mark.parametrize(("argv", "message"), BAD, ids=[message[:40] for _, message in BAD])
def test_bad_input_exits_1_with_the_fix_and_submits_nothing(shared_tmp, monkeypatch, capsys, argv, message):
    tmp_path = shared_tmp
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"{make_stubs(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("STUB_DIR", str(tmp_path))
    (tmp_path / "bin" / "apptainer").write_text("#!/bin/sh\nexit 0\n")
    (tmp_path / "bin" / "apptainer").chmod(0o755)
    own, extra = (argv[: argv.index("--")], argv[argv.index("--") :]) if "--" in argv else (argv, [])
    if "--output-dir" not in own:
        own = [*own, "--output-dir", str(tmp_path / "runs")]
    if "--image" not in own and "--runtime" not in own:
        sif = tmp_path / "trlstack.sif"
        sif.write_bytes(b"")
        own = [*own, "--image", str(sif)]
    if "--dry-run" not in own:
        own = [*own, "--submit"]
    argv = [*own, *extra]
    assert main(["slurm", "grpo", *argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith("trlstack: error: "), err
    assert message in err
    assert not (tmp_path / "sbatch.jsonl").exists()
    assert not (tmp_path / "runs").exists()


def test_the_submit_host_must_have_the_runtime_and_sbatch():
    absent = lambda name: None  # noqa: E731
    with pytest.raises(UsageError, match="`apptainer` is not on PATH on this host"):
        host_checks(settings(), submit=False, which=absent, mounts="")
    with pytest.raises(UsageError, match="`sbatch` is not on PATH: submit from a Slurm login node"):
        host_checks(settings(), submit=True, which=absent, mounts="")
    with pytest.raises(UsageError, match="the Pyxis plugin is not installed"):
        host_checks(settings(runtime="pyxis", image="trlstack:1"), submit=False, which=absent, mounts="")


def test_node_local_folders_are_told_from_shared_ones():
    mounts = "\n".join([
        "overlay / overlay rw 0 0",
        "nfs:/export/home /home nfs4 rw 0 0",
        "tmpfs /scratch/ram tmpfs rw 0 0",
        "lustre@o2ib:/fs /lustre lustre rw 0 0",
    ])  # fmt: skip
    assert node_local("/home/me/runs", mounts) is None
    assert node_local("/lustre/project/runs", mounts) is None
    assert "tmpfs" in node_local("/scratch/ram/runs", mounts)
    assert "overlay" in node_local("/opt/runs", mounts)
    assert node_local("/tmp/runs", mounts) == "/tmp is local to each node"


def test_the_layout_follows_the_plan():
    layout = slurm.make_layout(settings(nodes=4, tensor_parallel_size=2))
    assert (layout.mode, layout.serve_nodes, layout.train_nodes) == ("server", 1, 3)
    assert layout.plan is not None
    assert (layout.plan.tensor_parallel_size, layout.plan.data_parallel_size) == (2, 4)
    assert layout.local_gpus("serve") == layout.local_gpus("train") == "0,1,2,3,4,5,6,7"
    colocate = slurm.make_layout(settings(nodes=2, serve_nodes=0))
    assert (colocate.mode, colocate.train_nodes, colocate.plan) == ("colocate", 2, None)
