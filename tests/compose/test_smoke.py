"""The train role for real in the built image, through the stack and compose/smoke.yaml (CPU, tiny offline
assets made in the HF cache volume): killed mid-run and brought up again, or crashed and restarted by the
restart policy, it resumes from its newest checkpoint, and nothing it wrote before is lost."""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from stacks import COMPOSE_FILE, SMOKE_FILE

pytestmark = pytest.mark.docker

STEPS = 12  # enough that the kill, a step or two after the first checkpoint, lands mid-run
IMAGE_UID = 1000


def complete_checkpoints(run: Path) -> dict[int, Path]:
    """step -> checkpoint folder, for checkpoints whose trainer_state.json (written last) exists."""
    found = {}
    for path in run.glob("checkpoint-*"):
        if re.fullmatch(r"checkpoint-\d+", path.name) and (path / "trainer_state.json").is_file():
            found[int(path.name.split("-")[1])] = path
    return found


def fingerprint(checkpoint: Path) -> dict[str, str]:
    return {
        file.name: hashlib.sha256(file.read_bytes()).hexdigest()
        for file in sorted(checkpoint.iterdir())
        if file.is_file()
    }


def outputs_folder(tmp_path: Path) -> Path:
    """A host folder the image's user can write, as README asks users to make one."""
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    if os.geteuid() == 0:
        os.chown(outputs, IMAGE_UID, IMAGE_UID)
    else:
        outputs.chmod(0o777)
    return outputs


def container(name: str) -> dict:
    done = subprocess.run(["docker", "inspect", name], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)[0]


def wait_for_checkpoint(run: Path, running: Callable[[], bool], log: Callable[[], str]) -> None:
    deadline = time.monotonic() + 600
    while not complete_checkpoints(run):
        assert running(), f"the run ended before its first checkpoint:\n{log()[-4000:]}"
        assert time.monotonic() < deadline, f"no checkpoint in 600 s:\n{log()[-4000:]}"
        time.sleep(0.2)


def check_resumed(run: Path, before: dict[int, dict[str, str]], log: str) -> int:
    """The step the run resumed from, once it says so, reached STEPS, and kept every earlier checkpoint."""
    resumed_at = max(before)
    assert resumed_at < STEPS, f"the run reached step {resumed_at} before it was stopped; raise STEPS"
    assert f"train: resuming from /outputs/grpo/checkpoint-{resumed_at}" in log, log[-4000:]

    after = complete_checkpoints(run)
    assert max(after) == STEPS
    final = json.loads((after[STEPS] / "trainer_state.json").read_text())
    assert final["global_step"] == STEPS
    logged = sorted(entry["step"] for entry in final["log_history"] if "loss" in entry)
    assert logged == list(range(1, STEPS + 1)), f"steps missing from the training history: {logged}"

    # Nothing written before the stop is lost or rewritten.
    for step, files in before.items():
        assert step in after, f"checkpoint-{step} from before the stop is gone"
        assert fingerprint(after[step]) == files, f"checkpoint-{step} changed after the restart"
    return resumed_at


@pytest.fixture
def smoke(project, trlstack_image, tmp_path):
    """(compose project of the CPU smoke stack, its grpo output folder on the host)."""
    outputs = outputs_folder(tmp_path)
    compose = project(
        files=(COMPOSE_FILE, SMOKE_FILE),
        TRLSTACK_IMAGE=trlstack_image,
        TRLSTACK_OUTPUTS=str(outputs),
        SMOKE_STEPS=str(STEPS),
    )
    return compose, outputs / "grpo"


def test_trainer_killed_mid_run_resumes_when_brought_up_again(smoke, tmp_path):
    compose, run = smoke
    trainer = f"{compose.project}-grpo-1"

    # First run: wait for the first complete checkpoint, then kill the trainer.
    first_log = tmp_path / "first.log"
    first = compose.popen("up", "grpo", log=first_log)
    try:
        wait_for_checkpoint(run, lambda: first.poll() is None, first_log.read_text)
        compose.run("kill", "grpo")
        first.wait(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
    state = container(trainer)["State"]
    assert not state["Running"] and state["ExitCode"] == 137, state
    before = {step: fingerprint(path) for step, path in complete_checkpoints(run).items()}
    assert "resuming from" not in first_log.read_text()
    # `up grpo` started the trainer, the plan check and the assets it needs, no server and no other trainer.
    assert set(compose.run("ps", "--all", "--services").stdout.split()) == {"plan-check", "tiny", "grpo"}

    # Brought up again, it resumes from the newest complete checkpoint and reaches the last step.
    since = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    compose.run("up", "grpo", timeout=900)
    assert container(trainer)["State"]["ExitCode"] == 0
    second = compose.run("logs", "--no-log-prefix", "--since", since, "grpo").stdout
    resumed_at = check_resumed(run, before, second)
    print(
        f"\nkilled after checkpoint-{resumed_at}; brought up again, resumed from it, finished at step {STEPS}"
    )


def test_crashed_trainer_is_restarted_by_the_policy_and_resumes(smoke):
    compose, run = smoke
    trainer = f"{compose.project}-grpo-1"
    compose.run("up", "--detach", "grpo", timeout=600)
    logs = lambda: compose.run("logs", "--no-log-prefix", "grpo").stdout  # noqa: E731
    wait_for_checkpoint(run, lambda: container(trainer)["State"]["Running"], logs)

    # Crash: SIGKILL the TRL training process, as the OOM killer would; accelerate then exits non-zero.
    top = subprocess.run(
        ["docker", "top", trainer, "-eo", "pid,args"], capture_output=True, text=True, check=True
    )
    rows = [line.split() for line in top.stdout.splitlines()]
    (pid,) = [row[0] for row in rows if row[2:4] == ["-m", "trl.scripts.grpo"]]  # python -m trl.scripts.grpo
    # The stack shares the host's PID namespace, so the container sees the PID `docker top` shows.
    compose.run("exec", "-T", "grpo", "python", "-c", f"import os; os.kill({pid}, 9)")
    before = {step: fingerprint(path) for step, path in complete_checkpoints(run).items()}

    deadline = time.monotonic() + 600
    while (info := container(trainer))["RestartCount"] < 1 or info["State"]["Running"]:
        assert time.monotonic() < deadline, f"not restarted and finished in 600 s:\n{logs()[-4000:]}"
        time.sleep(1)
    assert info["State"]["ExitCode"] == 0 and info["RestartCount"] == 1, info["State"]
    text = logs()
    assert "died with <Signals.SIGKILL: 9>" in text, text[-4000:]
    resumed_at = check_resumed(run, before, text)
    print(
        f"\ncrashed after checkpoint-{resumed_at}; restarted by the policy, resumed, finished at step {STEPS}"
    )


def test_a_missing_outputs_folder_stops_the_trainer_before_it_starts(project, trlstack_image, tmp_path):
    # Docker would otherwise make it as root, and the trainer (uid 1000) could not write its checkpoints.
    missing = tmp_path / "outputs"
    compose = project(
        files=(COMPOSE_FILE, SMOKE_FILE), TRLSTACK_IMAGE=trlstack_image, TRLSTACK_OUTPUTS=str(missing)
    )
    done = compose.run("up", "grpo", check=False, timeout=600)
    assert done.returncode != 0
    assert f"bind source path does not exist: {missing}" in done.stderr, done.stderr[-3000:]
    assert not missing.exists()
    assert "grpo" not in compose.run("ps", "--all", "--services").stdout.split()  # never created
