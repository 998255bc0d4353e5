"""The one-GPU stack: the .env `trlstack plan` writes on one GPU selects compose/colocate.yaml, where
`docker compose up grpo` (rloo, online-dpo) runs the trainer alone with vLLM inside it; no server, nothing
published. What needs a server there (async-grpo, `up vllm`) stops before anything starts, naming the fix;
the CPU smoke override runs in this layout too."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from stacks import CACHES, COMPOSE_FILE, REPO, SECRET, SMOKE_FILE, Compose, read_env
from trlstack.defaults import IMAGE

pytestmark = pytest.mark.docker

TRAINERS = ("grpo", "rloo", "online-dpo")
FIX = "`trlstack plan --share-gpus --format env -o .env`"


def states(compose: Compose) -> dict[str, str]:
    listed = compose.run("ps", "--all", "--format", "json").stdout
    return {found["Service"]: found["State"] for found in map(json.loads, listed.splitlines()) if found}


@pytest.fixture(scope="module")
def one_gpu(docker_engine: str, plan_env: Callable[[int], Path]) -> Path:
    """The .env `trlstack plan --gpus 1 --format env` writes."""
    assert read_env(plan_env(1)) == {"TRLSTACK_VARIANT": "colocate", "TRAIN_GPUS": "0", "NUM_PROCESSES": "1"}
    return plan_env(1)


@pytest.mark.parametrize("method", TRAINERS)
def test_one_gpu_runs_only_the_trainer_with_vllm_inside_it(one_gpu, method):
    compose = Compose(env_file=one_gpu, project="trlstack")
    model = compose.config(method)
    assert set(model["services"]) == {"plan-check", "dashboard", method}  # no server
    assert set(compose.config(profiles=[method])["services"]) == {"plan-check", "dashboard", method}
    assert set(compose.config()["services"]) == {"plan-check", "dashboard"}
    trainer = model["services"][method]
    env = trainer["environment"]
    assert trainer["command"] == ["train", method] and trainer["image"] == IMAGE
    assert trainer["profiles"] == [method]
    assert env["TRLSTACK_VLLM_MODE"] == "colocate"
    assert env["CUDA_VISIBLE_DEVICES"] == "0" and env["TRLSTACK_NUM_PROCESSES"] == "1"
    assert env["TRLSTACK_OUTPUT_DIR"] == f"/outputs/{method}"
    assert not env["TRLSTACK_SHARE_GPUS"]  # nothing to share the GPU with
    assert "TRLSTACK_VLLM_URL" not in env and "TRLSTACK_SERVE_GPUS" not in env
    (device,) = trainer["deploy"]["resources"]["reservations"]["devices"]
    assert (device["driver"], device["count"], device["capabilities"]) == ("nvidia", -1, ["gpu"])
    assert trainer["depends_on"] == {
        "plan-check": {"condition": "service_completed_successfully", "required": True},
        "dashboard": {"condition": "service_started", "required": True},
    }
    # Nothing published, no host namespaces: no weights travel between containers.
    for key in ("ports", "expose", "network_mode", "ipc", "pid"):
        assert key not in trainer, key
    mounted = {v["source"]: v["target"] for v in trainer["volumes"] if v["type"] == "volume"}
    assert mounted == CACHES and set(model["volumes"]) == set(CACHES)
    outputs, task = [v for v in trainer["volumes"] if v["type"] == "bind"]
    assert (outputs["source"], outputs["target"]) == (str(REPO / "outputs"), "/outputs")
    # no task folder in this .env: /dev/null stands in, read-only, and train is told none
    assert (task["source"], task["target"], task["read_only"]) == ("/dev/null", "/task", True)
    assert not env.get("TRLSTACK_TASK")
    assert trainer["secrets"] == [{"source": "hf_token", "target": SECRET}]
    assert trainer["restart"].startswith("on-failure") and trainer["stop_grace_period"] == "5m0s"
    check = model["services"]["plan-check"]
    assert check["command"] == ["trlstack", "plan", "--check"]
    assert check["environment"]["TRLSTACK_VARIANT"] == "colocate"
    assert check["environment"]["TRAIN_GPUS"] == "0" and check["network_mode"] == "none"


def test_async_grpo_and_vllm_wait_for_a_check_that_refuses(one_gpu):
    compose = Compose(env_file=one_gpu, project="trlstack")
    model = compose.config("async-grpo")
    assert set(model["services"]) == {"async-grpo-check", "async-grpo"}
    assert model["services"]["async-grpo"]["depends_on"] == {
        "async-grpo-check": {"condition": "service_completed_successfully", "required": True}
    }
    assert model["services"]["async-grpo"]["environment"]["TRLSTACK_VLLM_MODE"] == "colocate"
    (vllm,) = compose.config("vllm")["services"].values()  # `up vllm`: the check, no server
    for check, service in ((model["services"]["async-grpo-check"], "async-grpo"), (vllm, "vllm")):
        assert check["command"] == ["trlstack", "plan", "--check", "--service", service]
        assert check["environment"]["TRLSTACK_VARIANT"] == "colocate"
        assert check["network_mode"] == "none" and check["restart"] == "no"
        assert "deploy" not in check
        # at most the task folder, read-only, which `up vllm` mounts in every layout; no cache, no outputs
        assert all(v["target"] == "/task" and v["read_only"] for v in check.get("volumes", []))


def test_env_lines_for_two_colocated_ranks_on_the_gpu_reach_the_trainer(one_gpu, tmp_path):
    # Hand-written beside the plan's lines: two ranks, each engine with a fixed KV cache (train refuses the
    # first without the second, naming it; tests/unit/roles/train/test_main.py).
    written = tmp_path / ".env"
    written.write_text(one_gpu.read_text() + "TRLSTACK_RANKS_PER_GPU=2\nTRLSTACK_VLLM_KV_CACHE_GIB=1.5\n")
    env = Compose(env_file=written, project="trlstack").config("grpo")["services"]["grpo"]["environment"]
    assert (env["TRLSTACK_RANKS_PER_GPU"], env["TRLSTACK_VLLM_KV_CACHE_GIB"]) == ("2", "1.5")
    assert env["TRLSTACK_VLLM_MODE"] == "colocate"


def test_the_cpu_smoke_runs_in_the_colocate_layout_without_vllm(one_gpu):
    # --cpu replaces vLLM altogether: the smoke override clears the layout's colocate mode, which train --cpu
    # would refuse, and drops the GPU reservation.
    model = Compose(env_file=one_gpu, files=(COMPOSE_FILE, SMOKE_FILE)).config("grpo")
    assert set(model["services"]) == {"plan-check", "tiny", "dashboard", "grpo"}
    trainer = model["services"]["grpo"]
    assert trainer["environment"]["TRLSTACK_CPU"] == "1"
    assert trainer["environment"]["TRLSTACK_VLLM_MODE"] == ""
    assert not trainer.get("deploy", {}).get("resources")


@pytest.fixture
def colocate_stack(project, trlstack_image: str, tmp_path: Path) -> Callable[..., Compose]:
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    outputs.chmod(0o777)

    def make(*files: Path, **settings: str) -> Compose:
        return project(
            1,
            files=(COMPOSE_FILE, *files),
            TRLSTACK_IMAGE=trlstack_image,
            TRLSTACK_OUTPUTS=str(outputs),
            **settings,
        )

    return make


def test_async_grpo_stops_before_anything_starts_naming_the_fix(colocate_stack):
    compose = colocate_stack()
    done = compose.run("up", "async-grpo", check=False, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode != 0, output[-3000:]
    assert 'service "async-grpo-check" didn\'t complete successfully: exit 1' in output, output[-3000:]
    logs = compose.run("logs", "--no-log-prefix", "async-grpo-check").stdout
    assert (
        "trlstack: error: async-grpo generates only through a vLLM server (it has no colocate mode)" in logs
    ), logs
    assert f"{FIX} writes the shared-GPU server layout (TRLSTACK_VARIANT=shared, SHARE_GPUS=1)" in logs
    assert "Traceback" not in logs
    found = states(compose)
    assert found.pop("async-grpo", "created") == "created", found  # made at most, never started
    assert found == {"async-grpo-check": "exited"}  # no server either


def test_up_vllm_prints_why_there_is_no_server_and_the_fix(colocate_stack):
    compose = colocate_stack()
    compose.run("up", "vllm", check=False, timeout=300)
    logs = compose.run("logs", "--no-log-prefix", "vllm").stdout
    assert "trlstack: error: the vllm service is a vLLM server, but TRLSTACK_VARIANT=colocate" in logs, logs
    assert FIX in logs and "Traceback" not in logs
    assert states(compose) == {"vllm": "exited"}


def test_a_share_gpus_left_in_a_colocate_env_stops_the_trainer_before_it_starts(colocate_stack):
    compose = colocate_stack(SHARE_GPUS="1")
    done = compose.run("up", "grpo", check=False, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode != 0, output[-3000:]
    assert 'service "plan-check" didn\'t complete successfully: exit 1' in output, output[-3000:]
    logs = compose.run("logs", "--no-log-prefix", "plan-check").stdout
    assert "SHARE_GPUS=1 runs a vLLM server beside the trainer, but TRLSTACK_VARIANT=colocate" in logs, logs
    assert states(compose).get("grpo", "created") == "created"


def test_the_cpu_smoke_trains_in_the_colocate_layout(colocate_stack, tmp_path):
    compose = colocate_stack(SMOKE_FILE, SMOKE_STEPS="1")
    compose.run("up", "grpo", timeout=600)
    logs = compose.run("logs", "--no-log-prefix", "grpo").stdout
    assert (tmp_path / "outputs" / "grpo" / "checkpoint-1" / "trainer_state.json").is_file(), logs[-3000:]
    assert states(compose)["grpo"] == "exited" and "vllm" not in states(compose)
