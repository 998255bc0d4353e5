"""`train --cpu` stopped by a signal in the built image, outside compose, as a user stops it: Ctrl-C (SIGINT
to the terminal's whole foreground process group) saves a checkpoint at the step reached, exits 130 and leaves
no process behind, and the next run resumes after that step; SIGTERM while the run is still starting stops it
at once with nothing to save; an output folder the image's user cannot write is refused with the fix."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker

IMAGE_UID = 1000
STEPS = 30  # tiny CPU steps take ~0.2 s: the signal, sent after the first, lands well before the last
TRAIN = [
    "train", "grpo", "--cpu", "--model", "/w/tiny/model", "--dataset", "/w/tiny/dataset",
    "--output-dir", "/w/out", "--", "--max_steps", str(STEPS), "--save_steps", "1000",
]  # fmt: skip

# Run inside the container: start train in a session of its own (a terminal's foreground process group),
# wait for MARK in its output, send SIGNAL to TARGET ("group": every process, as Ctrl-C does; "train": train
# alone, as tini passes docker's SIGTERM on), then report its exit code and every process still there.
DRIVER = """
import json, os, signal, subprocess, sys, time
mark, target, signum, argv = sys.argv[1], sys.argv[2], getattr(signal, sys.argv[3]), sys.argv[4:]
log = open("/tmp/train.log", "w+")
train = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
deadline = time.monotonic() + 600
while mark not in open("/tmp/train.log").read() and train.poll() is None and time.monotonic() < deadline:
    time.sleep(0.05)
os.killpg(train.pid, signum) if target == "group" else train.send_signal(signum)
code = train.wait(timeout=600)
time.sleep(1)  # let tini reap what train left, if anything
left = [
    open(f"/proc/{pid}/cmdline").read().replace(chr(0), " ")
    for pid in os.listdir("/proc")
    if pid.isdigit() and int(pid) not in (1, os.getpid())
]
print(open("/tmp/train.log").read())
print("RESULT", json.dumps({"code": code, "left": left}))
"""


def docker_run(
    folder: Path, image: str, *argv: str, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    command = ["docker", "run", "--rm", "--network", "none", "-e", "HF_HUB_OFFLINE=1", "-v", f"{folder}:/w"]
    return subprocess.run([*command, image, *argv], capture_output=True, text=True, timeout=timeout)


def stop(
    folder: Path, image: str, mark: str, target: str, signum: str, out: str = "/w/out"
) -> tuple[dict, str]:
    argv = [out if word == "/w/out" else word for word in TRAIN]
    done = docker_run(folder, image, "python", "-c", DRIVER, mark, target, signum, *argv)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    log, _, result = done.stdout.rpartition("RESULT ")
    return json.loads(result), log


def trained_steps(checkpoint: Path) -> list[int]:
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    return [entry["step"] for entry in state["log_history"] if "loss" in entry]


@pytest.fixture(scope="module")
def workdir(trlstack_image: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder the image's user writes, with the tiny offline assets in tiny/."""
    folder = tmp_path_factory.mktemp("stop")
    if os.geteuid() == 0:
        os.chown(folder, IMAGE_UID, IMAGE_UID)
    else:
        folder.chmod(0o777)
    done = docker_run(folder, trlstack_image, "trlstack", "tiny", "/w/tiny", timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return folder


def test_ctrl_c_saves_the_step_reached_exits_130_and_the_next_run_resumes_after_it(workdir, trlstack_image):
    result, log = stop(workdir, trlstack_image, "'loss'", "group", "SIGINT")
    assert result["code"] == 130, log[-4000:]
    assert result["left"] == [], f"processes outlived train: {result['left']}"
    assert "Traceback" not in log and "KeyboardInterrupt" not in log, log[-4000:]
    (step,) = re.findall(r"train: SIGINT: step (\d+) done; saving checkpoint-\1, then stopping", log)
    step = int(step)
    assert 1 <= step < STEPS, f"stopped at step {step} of {STEPS}: raise STEPS"
    checkpoints = sorted((workdir / "out").glob("checkpoint-*"))
    assert checkpoints == [workdir / "out" / f"checkpoint-{step}"]  # the stop's, not a periodic one
    assert trained_steps(checkpoints[0]) == list(range(1, step + 1))
    assert not (workdir / "out" / "model.safetensors").exists()  # no final model for a run not done

    done = docker_run(workdir, trlstack_image, *TRAIN)
    assert done.returncode == 0, done.stderr[-4000:]
    assert f"train: resuming from /w/out/checkpoint-{step}" in done.stderr
    assert trained_steps(workdir / "out" / f"checkpoint-{STEPS}") == list(range(1, STEPS + 1))
    print(f"\nCtrl-C after step {step}: checkpoint-{step}, exit 130; run again: steps {step + 1}-{STEPS}")


def test_sigterm_while_starting_stops_at_once_with_nothing_to_save(workdir, trlstack_image):
    # Sent two moments after train hands over to accelerate: the training process is still importing. A
    # folder of its own: the run in /w/out is finished, and train starts nothing for a finished run.
    result, log = stop(workdir, trlstack_image, "train: wrote", "train", "SIGTERM", out="/w/starting")
    assert result["code"] == 143, log[-4000:]
    assert result["left"] == [], f"processes outlived train: {result['left']}"
    assert "train: SIGTERM before training started: stopping; there is nothing to save yet" in log, log[
        -4000:
    ]
    assert "Traceback" not in log, log[-4000:]


def test_an_output_folder_the_image_user_cannot_write_is_refused_with_the_fix(trlstack_image, tmp_path):
    # As `outputs/` is when Docker or root made it: owned by root, mode 755 (not root here: read-only).
    tmp_path.chmod(0o755 if os.geteuid() == 0 else 0o555)
    try:
        done = docker_run(tmp_path, trlstack_image, "train", "grpo", "--cpu", "--output-dir", "/w/grpo")
    finally:
        tmp_path.chmod(0o755)
    assert done.returncode == 1, done.stderr[-3000:]
    owner, mode = tmp_path.stat().st_uid, "drwxr-xr-x" if os.geteuid() == 0 else "dr-xr-xr-x"
    assert (
        f"train: error: cannot write the output folder /w/grpo: /w belongs to uid {owner} (mode {mode}) "
        f"and train runs as uid {IMAGE_UID}. Make it writable for uid {IMAGE_UID} "
        f"(`sudo chown -R {IMAGE_UID}:{IMAGE_UID} FOLDER`; under compose FOLDER is the host folder "
        "TRLSTACK_OUTPUTS, ./outputs by default)"
    ) in done.stderr
    assert "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []
