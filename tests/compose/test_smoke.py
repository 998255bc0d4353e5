"""The train role for real in the built image, through the stack and compose/smoke.yaml (CPU, tiny offline
assets made in the HF cache volume): stopped mid-run it saves the step reached and `up` resumes after it, with
one or two training processes; killed mid-run and brought up again, or crashed and restarted by the restart
policy, it resumes from its newest checkpoint; another run in its output folder is refused until the user
chooses; nothing it wrote before is lost."""

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
from trlstack.ports import free_port
from trlstack.recipes import RECIPES, RUNNER

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


def check_resumed(run: Path, before: dict[int, dict[str, str]], log: str, steps: int = STEPS) -> int:
    """The step the run resumed from, once it says so, reached `steps`, and kept every earlier checkpoint."""
    resumed_at = max(before)
    assert resumed_at < steps, f"the run reached step {resumed_at} before it was stopped; raise its steps"
    assert f"train: resuming from /outputs/grpo/checkpoint-{resumed_at}" in log, log[-4000:]

    after = complete_checkpoints(run)
    assert max(after) == steps
    final = json.loads((after[steps] / "trainer_state.json").read_text())
    assert final["global_step"] == steps
    logged = [entry["step"] for entry in final["log_history"] if "loss" in entry]
    assert logged == list(range(1, steps + 1)), f"the training history is not every step once: {logged}"

    # Nothing written before the stop is lost or rewritten.
    for step, files in before.items():
        assert step in after, f"checkpoint-{step} from before the stop is gone"
        assert fingerprint(after[step]) == files, f"checkpoint-{step} changed after the restart"
    return resumed_at


def smoke_stack(project, image: str, outputs: Path, gpus: int = 2, **settings: str):
    """A compose project of the CPU smoke stack of `image` on the plan for `gpus`, writing into `outputs`."""
    return project(
        gpus,
        files=(COMPOSE_FILE, SMOKE_FILE),
        TRLSTACK_IMAGE=image,
        TRLSTACK_OUTPUTS=str(outputs),
        TRLSTACK_DASHBOARD_PORT=str(free_port()),  # the host's loopback: one port per stack
        **settings,
    )


@pytest.fixture
def smoke(project, trlstack_image, tmp_path):
    """(compose project of the CPU smoke stack, its grpo output folder on the host)."""
    outputs = outputs_folder(tmp_path)
    return smoke_stack(project, trlstack_image, outputs, SMOKE_STEPS=str(STEPS)), outputs / "grpo"


def wait_for(text: str, log: Path, running: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 600
    while text not in log.read_text():
        assert running(), f"the run ended before {text!r}:\n{log.read_text()[-4000:]}"
        assert time.monotonic() < deadline, f"no {text!r} in 600 s:\n{log.read_text()[-4000:]}"
        time.sleep(0.1)


def training_processes(trainer: str) -> list[str]:
    top = subprocess.run(["docker", "top", trainer, "-eo", "pid,args"], capture_output=True, text=True)
    rows = [line.split() for line in top.stdout.splitlines()]
    return [row[0] for row in rows if RUNNER in row[2:5] and "launch" not in row]  # not accelerate's own line


# A tiny CPU step takes ~0.2 s on an idle machine: the stop, sent after the first step, lands long before 40.
STOP_STEPS = 40


@pytest.mark.parametrize("processes", [1, 2])
def test_compose_stop_saves_the_step_reached_and_up_resumes_after_it(
    project, trlstack_image, tmp_path, processes
):
    outputs = outputs_folder(tmp_path)
    compose = smoke_stack(
        project,
        trlstack_image,
        outputs,
        gpus=1 + processes,  # the plan-check holds the smoke to a consistent plan: a training GPU per process
        SMOKE_STEPS=str(STOP_STEPS),
        SMOKE_SAVE_STEPS="1000",  # no periodic checkpoint: the only one is the stop's
        NUM_PROCESSES=str(processes),
    )
    run, trainer = outputs / "grpo", f"{compose.project}-grpo-1"

    first_log = tmp_path / "first.log"
    first = compose.popen("up", "grpo", log=first_log)
    try:
        wait_for("'loss'", first_log, lambda: first.poll() is None)
        assert len(training_processes(trainer)) == processes
        compose.run("stop", "grpo", timeout=400)
        first.wait(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
    log = first_log.read_text()
    # 143: every training process saved and exited 0, then train exited for SIGTERM (137 would be Docker's
    # SIGKILL at the end of the grace period; 1, a launcher reporting a failed or killed process).
    assert container(trainer)["State"]["ExitCode"] == 143, log[-4000:]
    assert "Traceback" not in log and "ChildFailedError" not in log, log[-4000:]
    (step,) = map(
        int, re.findall(r"train: SIGTERM: step (\d+) done; saving checkpoint-\1, then stopping", log)
    )
    assert set(complete_checkpoints(run)) == {step}, sorted(run.iterdir())
    before = {step: fingerprint(complete_checkpoints(run)[step])}

    since = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    compose.run("up", "grpo", timeout=900)
    assert container(trainer)["State"]["ExitCode"] == 0
    second = compose.run("logs", "--no-log-prefix", "--since", since, "grpo").stdout
    check_resumed(run, before, second, steps=STOP_STEPS)
    print(
        f"\n{processes} process(es): stopped after step {step}, checkpoint-{step} saved, exit 143; "
        f"up again: resumed from it, steps {step + 1}-{STOP_STEPS}, each step once"
    )


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
    # `up grpo` started the trainer, the plan check, the assets it needs and the dashboard, no server and no
    # other trainer.
    services = set(compose.run("ps", "--all", "--services").stdout.split())
    assert services == {"plan-check", "tiny", "dashboard", "grpo"}

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
    (pid,) = [row[0] for row in rows if row[2:5] == ["-m", RUNNER, "trl.scripts.grpo"]]
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


def test_another_run_in_the_output_folder_is_refused_until_env_says_fresh(project, trlstack_image, tmp_path):
    outputs = outputs_folder(tmp_path)
    compose = smoke_stack(project, trlstack_image, outputs, SMOKE_STEPS="1")
    run = outputs / "grpo"
    compose.run("up", "grpo", timeout=600)
    before = {step: fingerprint(path) for step, path in complete_checkpoints(run).items()}
    merged = (run / "trlstack-grpo.yaml").read_text()

    # The user changes what is rewarded in .env (through their own config file) and brings the stack up again.
    mine = outputs / "mine.yaml"
    mine.write_text(
        RECIPES["grpo"].bundled_config.read_text().replace("accuracy_reward", "think_format_reward")
    )
    env = tmp_path / ".env"
    env.write_text(compose.env_file.read_text() + "TRLSTACK_CONFIG=/outputs/mine.yaml\n")
    compose.env_file = env
    since = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    compose.run("up", "grpo", timeout=600, check=False)
    logs = compose.run("logs", "--no-log-prefix", "--since", since, "grpo").stdout
    assert container(f"{compose.project}-grpo-1")["State"]["ExitCode"] == 1
    assert "train: error: /outputs/grpo holds another run than this one" in logs, logs[-3000:]
    assert "    reward_funcs: ['accuracy_reward'] -> ['think_format_reward']\n" in logs
    assert "--fresh (TRLSTACK_FRESH=1): move it aside to /outputs/grpo." in logs
    assert "Traceback" not in logs
    assert {step: fingerprint(path) for step, path in complete_checkpoints(run).items()} == before
    assert (run / "trlstack-grpo.yaml").read_text() == merged

    # TRLSTACK_FRESH=1: the old run is moved aside, whole, and a new one starts in the folder.
    env.write_text(env.read_text() + "TRLSTACK_FRESH=1\n")
    since = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    compose.run("up", "grpo", timeout=600)
    logs = compose.run("logs", "--no-log-prefix", "--since", since, "grpo").stdout
    (aside,) = outputs.glob("grpo.*")
    assert (
        f"train: moved /outputs/grpo to /outputs/{aside.name}; nothing in it was changed or deleted" in logs
    )
    assert {step: fingerprint(path) for step, path in complete_checkpoints(aside).items()} == before
    assert (aside / "trlstack-grpo.yaml").read_text() == merged
    assert "resuming from" not in logs
    assert "think_format_reward" in (run / "trlstack-grpo.yaml").read_text() and complete_checkpoints(run)
