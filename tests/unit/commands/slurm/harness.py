"""What the trlstack slurm tests share: a job's settings, its script, and the script run once with the
stand-ins for Slurm and the nodes' network tools (stand_in.py, a Python program per command, recording its
calls). The real cluster runs in tests/slurm."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from trlstack.commands.slurm.checks import check
from trlstack.commands.slurm.render import render
from trlstack.commands.slurm.settings import SlurmSettings
from trlstack.run.settings import TrainSettings

MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
SIF = "/shared/images/trlstack.sif"
OUT = "/shared/runs"
STAND_IN = Path(__file__).with_name("stand_in.py")
STUBS = ("scontrol", "getent", "ip", "ss", "squeue", "scancel", "srun", "sbatch")


def settings(model: str | None = MODEL, cpu: bool = False, **changes) -> SlurmSettings:
    """A job of 2 x 8 GPUs (`model` and `cpu` are train's settings, the job's run)."""
    base = dict(recipe="grpo", nodes=2, gpus_per_node=8, image=SIF, output_dir=OUT)
    run = TrainSettings(recipe="grpo", model=model, cpu=cpu)
    return SlurmSettings(**{**base, **changes}, train=run)


def script(**changes) -> str:
    """The script `trlstack slurm` writes for settings(**changes)."""
    return render(check(settings(**changes)))


def flat(text: str) -> str:
    """The script with its continued lines joined, each run of spaces one space."""
    return " ".join(text.replace("\\\n", " ").split())


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
    """A folder with the stand-in under each command's name, run by this Python."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    _, program = STAND_IN.read_text().split("\n", 1)
    for name in STUBS:
        path = bin_dir / name
        path.write_text(f"#!{sys.executable}\n{program}")
        path.chmod(0o755)
    return bin_dir
