"""`docker compose up vllm` on a machine without GPUs: it stops with a message that says why, and nothing
keeps running."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from stacks import COMPOSE_FILE, SMOKE_FILE

pytestmark = pytest.mark.docker


def containers(compose) -> list[dict]:
    listed = compose.run("ps", "--all", "--format", "json").stdout
    # Compose 2.26 prints one JSON object per line.
    return [json.loads(line) for line in listed.splitlines() if line.strip()]


def engine_has_nvidia_gpus() -> bool:
    """Whether the engine can satisfy NVIDIA device requests (a registered runtime or the toolkit's hooks)."""
    runtimes = subprocess.run(
        ["docker", "info", "--format", "{{json .Runtimes}}"], capture_output=True, text=True
    )
    hooks = ("nvidia-container-runtime-hook", "nvidia-cdi-hook", "nvidia-container-runtime")
    return "nvidia" in runtimes.stdout or any(shutil.which(hook) for hook in hooks)


def inspect(container: str) -> dict:
    done = subprocess.run(["docker", "inspect", container], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)[0]


@pytest.mark.parametrize("variant", ["shared", "isolated"])
def test_plain_stack_refuses_without_the_nvidia_runtime(project, trlstack_image, variant):
    # The GPU reservation reaches the engine, which has no NVIDIA device driver here: it refuses to start the
    # server and names the missing driver (README: install nvidia-container-toolkit).
    if engine_has_nvidia_gpus():
        pytest.skip("this engine has the NVIDIA Container Toolkit: `up vllm` would start a real server")
    compose = project(TRLSTACK_IMAGE=trlstack_image, TRLSTACK_VARIANT=variant)
    done = compose.run("up", "vllm", check=False, timeout=300)
    assert done.returncode != 0
    assert 'could not select device driver "nvidia" with capabilities: [[gpu]]' in done.stderr, done.stderr
    check, server = sorted(containers(compose), key=lambda found: found["Service"] != "plan-check")
    assert check["Service"] == "plan-check" and check["State"] == "exited", check  # the plan is fine
    assert server["Service"] == "vllm" and server["State"] == "created", server  # made, never started


def test_server_without_a_gpu_exits_with_serve_vllms_message(project, trlstack_image):
    # Without the reservation the container starts, and serve-vllm itself finds no GPU: exit 1 and the fix.
    # --no-deps: the plan check finishing would count as a container exit for --abort-on-container-exit.
    compose = project(files=(COMPOSE_FILE, SMOKE_FILE), TRLSTACK_IMAGE=trlstack_image)
    done = compose.run(
        "up",
        "--no-deps",
        "vllm",
        "--abort-on-container-exit",
        "--exit-code-from",
        "vllm",
        check=False,
        timeout=300,
    )
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    logs = compose.run(
        "logs", "--no-log-prefix", "vllm"
    ).stdout  # the container may exit before `up` attaches
    assert "serve-vllm: error: serve-vllm needs a CUDA GPU and none is visible" in logs, logs[-3000:]
    state = inspect(f"{compose.project}-vllm-1")["State"]
    assert (state["Running"], state["ExitCode"]) == (False, 1), state
