"""A full disk in the image, for real: the CPU smoke with its output folder on a small tmpfs. A save that
finds no room ends the run with the folder, the free and needed bytes, the checkpoint left incomplete, the one
a rerun resumes from and the fix, and exit 1, with no traceback (neither the rank's nor accelerate's); with
two processes both stop together. Before a run, a folder that cannot hold one checkpoint is refused."""

from __future__ import annotations

import re
import subprocess

import pytest

pytestmark = pytest.mark.docker

TINY = "--model /tmp/smoke/model --dataset /tmp/smoke/dataset --reward-model /tmp/smoke/reward_model"
# The tiny model's checkpoint takes 4.4 MB; 12 MB holds two and cuts the third short.
SAVE_EVERY_STEP = "-- --save_steps 1 --max_steps 30"


def in_container(image: str, tmpfs_size: str, script: str) -> subprocess.CompletedProcess[str]:
    """Run a bash script in a throwaway container, offline, its /out a tmpfs of `tmpfs_size` the image's user
    owns."""
    argv = ["docker", "run", "--rm", "--network", "none", "-e", "HF_HUB_OFFLINE=1"]
    argv += ["--tmpfs", f"/out:size={tmpfs_size},uid=1000,gid=1000", image, "bash", "-c", script]
    return subprocess.run(argv, capture_output=True, text=True, timeout=900)


@pytest.mark.parametrize("processes", [1, 2])
def test_a_save_the_disk_cannot_hold_ends_the_run_with_what_to_do(
    trlstack_image: str, processes: int
) -> None:
    script = (
        "trlstack tiny /tmp/smoke >/dev/null 2>&1 || exit 9; "
        f"train grpo --cpu --num-processes {processes} {TINY} --output-dir /out/grpo {SAVE_EVERY_STEP}; "
        "echo EXIT $?; "
        # The same run again: the disk still full, it is refused before anything starts.
        f"train grpo --cpu {TINY} --output-dir /out/grpo {SAVE_EVERY_STEP}; echo EXIT $?"
    )
    done = in_container(trlstack_image, "12m", script)
    output = done.stdout + done.stderr
    assert re.findall(r"^EXIT (\d+)$", done.stdout, re.M) == ["1", "1"], output[-6000:]
    cut = re.search(r"train: the disk is full: checkpoint-(\d+) could not be saved in /out/grpo \(", output)
    assert cut, output[-6000:]
    step = int(cut.group(1))
    assert re.search(r"train:   needed: 4\.\d MB for a checkpoint; free there: \d+ (bytes|kB)", output)
    assert f"train:   /out/grpo/checkpoint-{step} is incomplete: left in place" in output
    assert f"train:   a rerun resumes from /out/grpo/checkpoint-{step - 1} and goes on" in output
    assert "train:   Fix: free space on that disk" in output and "save_total_limit" in output
    assert (
        "Traceback" not in output and "CalledProcessError" not in output and "ChildFailedError" not in output
    )
    assert re.search(
        r"train: error: /out/grpo has \d+ (bytes|kB) free, and one checkpoint of this run takes at least "
        r"4\.3 MB",
        output,
    ), output[-3000:]


def test_a_folder_that_cannot_hold_one_checkpoint_is_refused_before_the_run(trlstack_image: str) -> None:
    script = (
        "trlstack tiny /tmp/smoke >/dev/null 2>&1 || exit 9; "
        f"train grpo --cpu {TINY} --output-dir /out/grpo; echo EXIT $?; ls -A /out"
    )
    done = in_container(trlstack_image, "3m", script)
    assert done.stdout.splitlines() == ["EXIT 1"], done.stdout + done.stderr[-3000:]  # nothing written
    assert (
        "train: error: /out/grpo has 3.1 MB free, and one checkpoint of this run takes at least 4.3 MB"
        in (done.stderr)
    )
    assert "SMOKE RUN" not in done.stderr  # refused before the run starts
