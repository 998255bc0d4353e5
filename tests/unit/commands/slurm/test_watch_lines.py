"""The job's log says how to watch the run: the dashboard on the login node through the job's runtime, and
the SSH tunnel to it, with the job's own folders and host filled in by bash when the job runs."""

from __future__ import annotations

import subprocess

import pytest

from .harness import script

JOB = {
    "OUTPUT_DIR": "/shared/runs",
    "IMAGE": "/shared/images/trlstack.sif",
    "RUN_DIR": "/shared/runs/grpo",
    "ACTIVATE": "/shared/env/bin/activate",
    "SLURM_SUBMIT_HOST": "login1",
    "USER": "ana",
}


def said(**changes) -> list[str]:
    """What the script's watch lines print, run by bash with the job's variables."""
    lines = [line for line in script(**changes).splitlines() if line.startswith(('log "watch', 'log "then'))]
    program = "log() { printf '%s\\n' \"$*\"; }\n" + "\n".join(lines)
    done = subprocess.run(["bash", "-c", program], env=JOB, capture_output=True, text=True, check=True)
    return done.stdout.splitlines()


RUN = 'trlstack dashboard "/shared/runs/grpo"'
APPTAINER = 'apptainer exec --bind "/shared/runs" "/shared/images/trlstack.sif"'


@pytest.mark.parametrize(
    ("changes", "command"),
    [
        ({}, f"{APPTAINER} {RUN}"),
        ({"runtime": "none", "image": "/shared/env"}, f'source "/shared/env/bin/activate" && {RUN}'),
        ({"runtime": "none", "image": None}, RUN),
        ({"runtime": "pyxis", "image": "trlstack.sqsh"}, f"uv run --extra dashboard {RUN}"),
    ],
)  # fmt: skip
def test_the_log_says_where_to_start_the_dashboard_and_how_to_reach_it(changes, command):
    start, tunnel = said(**changes)
    assert start.startswith(f"watch the run: on login1 run: {command}")
    assert tunnel.startswith("then on your machine: ssh -N -L 7860:127.0.0.1:7860 ana@login1 and open")
    assert 'trlstack report "/shared/runs/grpo"' in tunnel
