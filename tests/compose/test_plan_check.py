"""A GPU plan written by hand in .env is checked before either role starts, in both layouts: ranges, overlaps
and sizes that do not fit stop `docker compose up` at once with a message naming the key as written, and
the server is never started (no 30-minute health wait, no restarts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from stacks import VARIANTS, Compose

pytestmark = pytest.mark.docker

PLAN = "SERVE_GPUS=0,1\nTRAIN_GPUS=2,3\nTENSOR_PARALLEL_SIZE=1\nDATA_PARALLEL_SIZE=2\nNUM_PROCESSES=2\n"

BAD_LINES = [
    ("SERVE_GPUS=0-1", "SERVE_GPUS='0-1' in .env: compose hands it unchanged to CUDA_VISIBLE_DEVICES"),
    ("TRAIN_GPUS=1,2", "GPU 1 is in both SERVE_GPUS=0,1 and TRAIN_GPUS=1,2"),
    ("NUM_PROCESSES=-1", "NUM_PROCESSES='-1' in .env is not a positive whole number"),
    ("SHARE_GPUS=maybe", "SHARE_GPUS='maybe' in .env is not 1 or 0"),
    # vLLM given 2 GPUs and a layout that uses 1 of them
    (
        "DATA_PARALLEL_SIZE=1",
        "TENSOR_PARALLEL_SIZE=1 x DATA_PARALLEL_SIZE=1 uses 1 of the 2 GPUs SERVE_GPUS=0,1",
    ),
    # a plan key under the role's name, which compose would pass on to no one, or let win unseen
    (
        "TRLSTACK_GPU_MEMORY_UTILIZATION=0.5",
        "TRLSTACK_GPU_MEMORY_UTILIZATION=0.5 in .env (or compose's environment) is the role's name for "
        "GPU_MEMORY_UTILIZATION",
    ),
    ("TRLSTACK_VLLM_PORT=9000", "TRLSTACK_VLLM_PORT=9000 in .env (or compose's environment) is the role's"),
]


def states(compose: Compose) -> dict[str, str]:
    listed = compose.run("ps", "--all", "--format", "json").stdout
    return {found["Service"]: found["State"] for found in map(json.loads, listed.splitlines()) if found}


@pytest.fixture
def hand_written(trlstack_image: str, tmp_path: Path):
    """hand_written(line, variant): a project whose .env is the plan with `line` written over it."""
    made: list[Compose] = []

    def make(line: str, variant: str) -> Compose:
        key = line.split("=", 1)[0]
        kept = [row for row in PLAN.splitlines() if not row.startswith(f"{key}=")]
        env_file = tmp_path / f"{variant}-{len(made)}.env"
        env_file.write_text("\n".join([*kept, line]) + "\n")
        outputs = tmp_path / "outputs"
        outputs.mkdir(exist_ok=True)
        settings = {
            "TRLSTACK_IMAGE": trlstack_image,
            "TRLSTACK_VARIANT": variant,
            "TRLSTACK_OUTPUTS": str(outputs),
        }
        made.append(Compose(env_file=env_file, settings=settings))
        return made[-1]

    yield make
    for compose in made:
        compose.down()


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize(("line", "message"), BAD_LINES, ids=[line for line, _ in BAD_LINES])
def test_a_bad_plan_stops_up_before_the_server_starts(hand_written, variant, line, message):
    compose = hand_written(line, variant)
    done = compose.run("up", "grpo", check=False, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode != 0, output[-3000:]
    assert 'service "plan-check" didn\'t complete successfully: exit 1' in output, output[-3000:]
    logs = compose.run("logs", "--no-log-prefix", "plan-check").stdout
    assert f"trlstack: error: {message}" in logs, logs
    found = states(compose)
    assert found.get("vllm", "created") == "created", found  # made at most, never started
    assert found.get("grpo", "created") == "created", found
