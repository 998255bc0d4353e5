"""The train role for real in the built image, through the stack and compose/smoke.yaml (CPU, tiny offline
assets made in the HF cache volume): killed mid-run and brought up again, it resumes from its newest
checkpoint, and nothing it wrote before the kill is lost."""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
import subprocess
import time
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


def container_state(name: str) -> dict:
    done = subprocess.run(["docker", "inspect", name], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)[0]["State"]


def test_trainer_killed_mid_run_resumes_from_its_checkpoint(project, trlstack_image, tmp_path):
    outputs = outputs_folder(tmp_path)
    run = outputs / "grpo"
    compose = project(
        files=(COMPOSE_FILE, SMOKE_FILE),
        TRLSTACK_IMAGE=trlstack_image,
        TRLSTACK_OUTPUTS=str(outputs),
        SMOKE_STEPS=str(STEPS),
    )
    trainer = f"{compose.project}-grpo-1"

    # First run: wait for the first complete checkpoint, then kill the trainer as a crash would.
    first_log = tmp_path / "first.log"
    first = compose.popen("up", "grpo", log=first_log)
    try:
        deadline = time.monotonic() + 600
        while not complete_checkpoints(run):
            assert first.poll() is None, (
                f"the first run ended before a checkpoint:\n{first_log.read_text()[-4000:]}"
            )
            assert time.monotonic() < deadline, f"no checkpoint in 600 s:\n{first_log.read_text()[-4000:]}"
            time.sleep(0.2)
        compose.run("kill", "grpo")
        first.wait(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
    state = container_state(trainer)
    assert not state["Running"] and state["ExitCode"] == 137, state
    before = {step: fingerprint(path) for step, path in complete_checkpoints(run).items()}
    killed_at = max(before)
    assert killed_at < STEPS, f"the run reached step {killed_at} before the kill; raise STEPS"
    assert "resuming from" not in first_log.read_text()

    # Brought up again, it resumes from the newest complete checkpoint and reaches the last step.
    since = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    compose.run("up", "grpo", timeout=900)
    assert container_state(trainer)["ExitCode"] == 0
    second = compose.run("logs", "--no-log-prefix", "--since", since, "grpo").stdout
    assert f"train: resuming from /outputs/grpo/checkpoint-{killed_at}" in second, second[-4000:]
    assert "SMOKE RUN (--cpu)" in second

    after = complete_checkpoints(run)
    assert max(after) == STEPS
    final = json.loads((after[STEPS] / "trainer_state.json").read_text())
    assert final["global_step"] == STEPS
    logged = sorted(entry["step"] for entry in final["log_history"] if "loss" in entry)
    assert logged == list(range(1, STEPS + 1)), f"steps missing from the training history: {logged}"

    # Nothing written before the kill is lost or rewritten.
    for step, files in before.items():
        assert step in after, f"checkpoint-{step} from before the kill is gone"
        assert fingerprint(after[step]) == files, f"checkpoint-{step} changed after the restart"
    print(f"\nkilled after checkpoint-{killed_at}, resumed from it, finished at step {STEPS}")
