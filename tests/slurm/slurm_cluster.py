"""The test Slurm cluster as the tests drive it: a compose project of tests/slurm/compose.yaml (a controller
and three nodes made from the trlstack image), commands run on its machines, and jobs followed through squeue
and sacct."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

HERE = Path(__file__).resolve().parent
COMPOSE_FILE = HERE / "compose.yaml"
CLUSTER_DIR = HERE / "cluster"
NODES = ("node1", "node2", "node3")
CONTROLLER = "slurmctld"
USER = "trlstack"  # the image's user submits and runs the jobs, as on a cluster without root
TINY = "/shared/tiny"  # the tiny offline model and dataset, made once per cluster
SACCT_FIELDS = ("JobID", "JobName", "State", "ExitCode", "NodeList", "Elapsed")
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED"}


def image_tag(trlstack_image: str) -> str:
    """The node image's tag for a trlstack image: trlstack:r1 -> trlstack-slurm:r1."""
    name, _, tag = trlstack_image.rpartition(":")
    return f"{name.rsplit('/', 1)[-1]}-slurm:{tag or 'latest'}"


@dataclass
class Cluster:
    image: str
    project: str = field(default_factory=lambda: f"trlstack-slurm-{uuid.uuid4().hex[:8]}")

    def compose(
        self, *args: str, timeout: float = 300, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        argv = ["docker", "compose", "-p", self.project, "-f", str(COMPOSE_FILE), *args]
        done = subprocess.run(
            argv, capture_output=True, text=True, errors="replace", timeout=timeout, env=self._environ()
        )
        if check and done.returncode != 0:
            raise AssertionError(f"`{' '.join(argv)}` exited {done.returncode}:\n{done.stderr[-4000:]}")
        return done

    def _environ(self) -> dict[str, str]:
        """The caller's environment without compose settings, naming the node image."""
        env = {key: value for key, value in os.environ.items() if not key.startswith("COMPOSE_")}
        return {**env, "TRLSTACK_SLURM_IMAGE": self.image}

    def up(self) -> None:
        self.compose("up", "--detach", "--wait", timeout=300)
        deadline = time.monotonic() + 120
        while self.run("sinfo", "--noheader", "--format=%T %D").stdout.split() != ["idle", str(len(NODES))]:
            assert time.monotonic() < deadline, self.run("sinfo").stdout + self.compose("logs").stdout[-4000:]
            time.sleep(1)

    def down(self) -> None:
        self.compose("down", "--volumes", "--timeout", "5", check=False)

    def run(
        self,
        *argv: str,
        machine: str = CONTROLLER,
        user: str = USER,
        env: dict[str, str] | None = None,
        stdin: IO[bytes] | None = None,
        timeout: float = 300,
    ) -> subprocess.CompletedProcess[str]:
        """argv on a machine of the cluster, in /shared, as `user`; `stdin` is streamed to it."""
        flags = [arg for name, value in (env or {}).items() for arg in ("-e", f"{name}={value}")]
        full = ["docker", "compose", "-p", self.project, "-f", str(COMPOSE_FILE)]
        full += ["exec", "-T", "-u", user, "-w", "/shared", *flags, machine, *argv]
        return subprocess.run(
            full,
            stdin=stdin,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            env=self._environ(),
        )

    def slurm(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`trlstack slurm ARGS` on the controller, the login node of this cluster (offline: no Hub here)."""
        return self.run("trlstack", "slurm", *args, env={"HF_HUB_OFFLINE": "1"})

    def submit(self, *args: str) -> str:
        done = self.slurm(*args, "--submit") if "--" not in args else self._submit_with_extra(args)
        assert done.returncode == 0, done.stderr[-4000:]
        return done.stdout.strip()

    def _submit_with_extra(self, args: Sequence[str]) -> subprocess.CompletedProcess[str]:
        at = list(args).index("--")
        return self.slurm(*args[:at], "--submit", *args[at:])

    def state(self, job: str) -> tuple[str, str]:
        """(state, reason) of a job Slurm still holds, or ("", "") once it left the queue."""
        done = self.run("squeue", "--noheader", "--jobs", job, "--format=%T %r")
        fields = done.stdout.split()
        return (fields[0], fields[1]) if len(fields) == 2 else ("", "")

    def wait_until(self, job: str, states: set[str], timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while (state := self.state(job)[0]) not in states:
            assert time.monotonic() < deadline, f"job {job} still {state} after {timeout} s"
            time.sleep(1)
        return state

    def wait_nodes_idle(self, timeout: float) -> None:
        """Until every node is idle: done with the steps and the epilog of a job that ended on it."""
        deadline = time.monotonic() + timeout
        while (states := set(self.run("sinfo", "--noheader", "--format=%T").stdout.split())) != {"idle"}:
            assert time.monotonic() < deadline, f"nodes still {sorted(states)} after {timeout} s"
            time.sleep(1)

    def sacct(self, job: str) -> list[dict[str, str]]:
        """Every record of the job and its steps, every attempt (-D), once accounting has its end."""
        deadline = time.monotonic() + 60
        while True:
            done = self.run(
                "sacct", "--duplicates", "--parsable2", "--noheader", "--jobs", job,
                f"--format={','.join(SACCT_FIELDS)}",
            )  # fmt: skip
            rows = [
                dict(zip(SACCT_FIELDS, line.split("|"), strict=True)) for line in done.stdout.splitlines()
            ]
            jobs = [row for row in rows if row["JobID"] == job]
            if jobs and jobs[-1]["State"].split()[0] in ENDED:
                return rows
            assert time.monotonic() < deadline, f"sacct has no end for job {job}:\n{done.stdout}"
            time.sleep(1)

    def submit_lines(self, job: str, step_name: str) -> list[str]:
        """The command lines (sacct's SubmitLine) of the job's steps called `step_name`, every attempt."""
        done = self.run(
            "sacct", "--duplicates", "--parsable2", "--noheader", "--jobs", job, "--format=JobName,SubmitLine"
        )
        # A command line can span lines (the node check's script): only the lines a record starts are read.
        return [
            line.split("|", 1)[1] for line in done.stdout.splitlines() if line.startswith(f"{step_name}|")
        ]

    def sacct_table(self, job: str) -> str:
        """sacct's own table of the job, for the test's output."""
        return self.run("sacct", "--duplicates", "--jobs", job, f"--format={','.join(SACCT_FIELDS)}").stdout

    def elapsed(self, row: dict[str, str]) -> int:
        """A sacct row's Elapsed in seconds (Slurm's own measure of the job's run time)."""
        days, _, clock = row["Elapsed"].rpartition("-")
        hours, minutes, seconds = (int(part) for part in clock.split(":"))
        return ((int(days or 0) * 24 + hours) * 60 + minutes) * 60 + seconds

    def wait_done(self, job: str, timeout: float) -> list[dict[str, str]]:
        deadline = time.monotonic() + timeout
        while self.state(job)[0]:
            assert time.monotonic() < deadline, f"job {job} did not end in {timeout} s:\n{self.read_log(job)}"
            time.sleep(1)
        return self.sacct(job)

    def cancel_all(self) -> None:
        """End every job of USER and wait until the nodes are idle again: the next test starts clean."""
        self.run("scancel", "--user", USER)
        deadline = time.monotonic() + 120
        while self.run("squeue", "--noheader").stdout.strip():
            assert time.monotonic() < deadline, self.run("squeue").stdout + self.run("sinfo").stdout
            time.sleep(1)
        self.wait_nodes_idle(timeout=120)

    def read(self, path: str) -> str:
        done = self.run("cat", path)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def read_log(self, job: str) -> str:
        return self.run("bash", "-c", f"cat /shared/*/trlstack-*-{job}.out").stdout

    def exists(self, path: str) -> bool:
        return self.run("test", "-e", path).returncode == 0

    def trainer_state(self, checkpoint: str) -> dict:
        return json.loads(self.read(f"{checkpoint}/trainer_state.json"))

    def checkpoints(self, run_dir: str) -> dict[int, str]:
        """step -> folder of every complete checkpoint (trainer_state.json is written last)."""
        done = self.run("bash", "-c", f"ls -d {run_dir}/checkpoint-*/trainer_state.json 2>/dev/null")
        found = {}
        for line in done.stdout.split():
            folder = line.rsplit("/", 1)[0]
            found[int(folder.rsplit("-", 1)[1])] = folder
        return found

    def fingerprint(self, folder: str) -> str:
        listing = self.run("bash", "-c", f"cd {folder} && sha256sum *").stdout
        return hashlib.sha256(listing.encode()).hexdigest()

    def processes(self, machine: str) -> list[str]:
        """The command lines of USER's processes on a machine (what a job may have left behind)."""
        done = self.run("ps", "-u", USER, "-o", "args=", machine=machine, user="root")
        return [line for line in done.stdout.splitlines() if line and not line.startswith("ps ")]
