"""The roles' guards hold through compose as from a shell: `docker compose run` of the CPU smoke stack (no GPU
reservations) with the bad input as arguments or as variables, each refused at once with its message."""

from __future__ import annotations

import time

import pytest
from stacks import COMPOSE_FILE, SMOKE_FILE

pytestmark = pytest.mark.docker

HUB_ASSETS = {
    "TRLSTACK_MODEL": "Qwen/Qwen2.5-0.5B-Instruct",
    "TRLSTACK_DATASET": "trl-lib/DeepMath-103K",
    "TRLSTACK_REWARD_MODEL": "",
}
CASES = [
    # (service, variables, command, message)
    (
        "vllm",
        {},
        ["serve-vllm", "--", "--ho", "0.0.0.0"],
        "--ho after `--` would override serve-vllm's setting",
    ),
    ("vllm", {"TRLSTACK_VLLM_HOST": "::ffff:0.0.0.0"}, [], "binds the server on every interface"),
    ("vllm", {}, ["serve-vllm", "--", "--config", "/dev/null"], "reads only .yaml or .yml config files"),
    ("grpo", {}, ["train", "grpo", "--", "--learnig_rate", "1"], "did you mean --learning_rate?"),
    ("grpo", {}, ["train", "grpo", "--", "--output-dir=/tmp"], "would override train's setting"),
    (
        "grpo",
        {
            "TRLSTACK_CPU": "0",
            "VLLM_HOST_IP": "127.0.0.1",
            "TRLSTACK_VLLM_URL": "http://10.9.8.7:8000",
            # Hub ids in place of the smoke's tiny assets, which --no-deps never makes: a path that does not
            # exist would be refused first
            **HUB_ASSETS,
        },
        ["train", "grpo", "--gpus", "1", "--print-command"],  # a GPU to train on: the address is what fails
        "this machine's loopback, but the vLLM server at http://10.9.8.7:8000 is on 10.9.8.7",
    ),
    (
        "grpo",
        {"TRLSTACK_CPU": "0", "CUDA_DEVICE_ORDER": "FASTEST_FIRST"},
        [],
        "CUDA_DEVICE_ORDER=FASTEST_FIRST",
    ),
]


@pytest.mark.parametrize(
    ("service", "variables", "command", "message"), CASES, ids=[c[3][:40] for c in CASES]
)
def test_bad_input_through_compose_is_refused_at_once(
    project, trlstack_image, tmp_path, service, variables, command, message
):
    outputs = tmp_path / "outputs"  # the trainer's bind mount, writable by the image's user
    outputs.mkdir()
    outputs.chmod(0o777)
    compose = project(
        files=(COMPOSE_FILE, SMOKE_FILE), TRLSTACK_IMAGE=trlstack_image, TRLSTACK_OUTPUTS=str(outputs)
    )
    settings = [arg for name, value in variables.items() for arg in ("-e", f"{name}={value}")]
    started = time.monotonic()
    done = compose.run("run", "--rm", "--no-deps", *settings, service, *command, check=False, timeout=300)
    elapsed = time.monotonic() - started
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert message in done.stderr, done.stderr[-3000:]
    assert elapsed < 120, f"refused only after {elapsed:.0f} s"
