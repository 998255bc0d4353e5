"""The stacks as compose renders them, for every method x GPU layout x machine size: what starts, which GPUs
each role gets, the namespaces and addresses NCCL needs, and that nothing unsafe is published."""

from __future__ import annotations

import ipaddress
import itertools
import subprocess
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from stacks import CACHES, GPU_COUNTS, METHODS, REPO, SECRET, VARIANTS, Compose, clean_environ, read_env
from trlstack.defaults import IMAGE
from trlstack.errors import UsageError
from trlstack.plan import ROLE_VARIABLES
from trlstack.plan.env_check import check_env
from trlstack.roles.serve.command import check_bind

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def render(docker_engine: str, plan_env: Callable[[int], Path]) -> Callable[..., dict[str, Any]]:
    """render(variant, gpus, *services, profiles=()): the parsed model, each rendered once per module."""

    @cache
    def rendered(
        variant: str, gpus: int, services: tuple[str, ...], profiles: tuple[str, ...]
    ) -> dict[str, Any]:
        compose = Compose(env_file=plan_env(gpus), project="trlstack", settings={"TRLSTACK_VARIANT": variant})
        return compose.config(*services, profiles=profiles)

    return lambda variant, gpus, *services, profiles=(): rendered(variant, gpus, services, tuple(profiles))


def gpu_set(text: str) -> set[int]:
    return {int(index) for index in text.split(",")}


def gpu_reservation(service: dict[str, Any]) -> dict[str, Any]:
    (device,) = service["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
    return device


LAYOUTS = list(itertools.product(METHODS, VARIANTS, GPU_COUNTS))
LAYOUT_IDS = [f"{method}-{variant}-{gpus}gpu" for method, variant, gpus in LAYOUTS]


@pytest.mark.parametrize(("method", "variant", "gpus"), LAYOUTS, ids=LAYOUT_IDS)
def test_only_the_server_and_the_chosen_trainer_start(render, method, variant, gpus):
    # `docker compose up METHOD` names the trainer; its profile keeps the other trainers out. The plan check
    # runs once before both.
    stack = {"plan-check", "vllm", "dashboard"}
    assert set(render(variant, gpus, method)["services"]) == {*stack, method}
    assert set(render(variant, gpus, profiles=[method])["services"]) == {*stack, method}
    assert set(render(variant, gpus)["services"]) == stack
    everything = render(variant, gpus, profiles=["*"])["services"]
    assert set(everything) == {*stack, *METHODS}
    assert all(everything[name]["profiles"] == [name] for name in METHODS)


@pytest.mark.parametrize(("method", "variant", "gpus"), LAYOUTS, ids=LAYOUT_IDS)
def test_roles_are_wired_for_training(render, plan_env, method, variant, gpus):
    model = render(variant, gpus, method)
    server, trainer = model["services"]["vllm"], model["services"][method]
    plan = read_env(plan_env(gpus))

    # The trainer starts only once the plan is checked and the server answers /health, and restarts (resuming)
    # after a crash; the server starts only once the plan is checked.
    checked = {"plan-check": {"condition": "service_completed_successfully", "required": True}}
    watched = {"dashboard": {"condition": "service_started", "required": True}}
    assert trainer["depends_on"] == {
        **checked,
        **watched,
        "vllm": {"condition": "service_healthy", "required": True},
    }
    assert server["depends_on"] == checked
    assert trainer["command"] == ["train", method]
    assert trainer["environment"]["TRLSTACK_OUTPUT_DIR"] == f"/outputs/{method}"
    assert server["command"] == ["serve-vllm"]
    for service in (server, trainer):
        assert service["image"] == IMAGE
        assert service["restart"].startswith("on-failure")
        assert service["user"] == "1000:1000"
        assert service["environment"]["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"

    # The plan's sizes reach the roles.
    assert server["environment"]["TRLSTACK_TENSOR_PARALLEL_SIZE"] == plan["TENSOR_PARALLEL_SIZE"]
    assert server["environment"]["TRLSTACK_DATA_PARALLEL_SIZE"] == plan["DATA_PARALLEL_SIZE"]
    assert trainer["environment"]["TRLSTACK_NUM_PROCESSES"] == plan["NUM_PROCESSES"]
    assert server["environment"]["TRLSTACK_VLLM_PORT"] == plan["VLLM_PORT"]
    assert trainer["environment"]["TRLSTACK_VLLM_GROUP_PORT"] == plan["VLLM_GROUP_PORT"]
    assert trainer["environment"]["TRLSTACK_VLLM_URL"].endswith(f":{plan['VLLM_PORT']}")


@pytest.mark.parametrize(("method", "variant", "gpus"), LAYOUTS, ids=LAYOUT_IDS)
def test_gpu_partitions_are_the_plans_and_disjoint(render, plan_env, method, variant, gpus):
    model = render(variant, gpus, method)
    server, trainer = model["services"]["vllm"], model["services"][method]
    plan = read_env(plan_env(gpus))
    serve, train = gpu_set(plan["SERVE_GPUS"]), gpu_set(plan["TRAIN_GPUS"])
    assert serve.isdisjoint(train) and serve | train == set(range(gpus))

    if variant == "shared":
        # Both see every GPU (for NVLink); CUDA_VISIBLE_DEVICES makes the split.
        assert gpu_reservation(server)["count"] == gpu_reservation(trainer)["count"] == -1
        assert gpu_set(server["environment"]["CUDA_VISIBLE_DEVICES"]) == serve
        assert gpu_set(trainer["environment"]["CUDA_VISIBLE_DEVICES"]) == train
        assert gpu_set(trainer["environment"]["TRLSTACK_SERVE_GPUS"]) == serve  # the trainer's UUID check
    else:
        # Each container is given only its GPUs and numbers them from 0 itself.
        (served,) = gpu_reservation(server)["device_ids"]
        (trained,) = gpu_reservation(trainer)["device_ids"]
        assert (gpu_set(served), gpu_set(trained)) == (serve, train)
        for service in (server, trainer):
            assert "count" not in gpu_reservation(service)
            assert "CUDA_VISIBLE_DEVICES" not in service["environment"]
        assert "TRLSTACK_SERVE_GPUS" not in trainer["environment"]


@pytest.fixture(scope="module")
def shared_gpu_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The .env `trlstack plan --gpus 1 --share-gpus --format env` writes: the server chosen on one GPU."""
    from trlstack.cli import main

    path = tmp_path_factory.mktemp("shared-gpu") / ".env"
    assert main(["plan", "--gpus", "1", "--share-gpus", "--format", "env", "-o", str(path)]) == 0
    return path


@pytest.mark.parametrize("variant", VARIANTS)
def test_one_gpu_shared_on_purpose_and_each_role_knows_it(docker_engine, shared_gpu_env, variant):
    # --share-gpus on one GPU: vLLM takes the plan's share of its memory, and both roles are told (each then
    # names itself a host of its own to NCCL, which refuses two ranks on one GPU of one host). Such a .env, as
    # older plans wrote it for one GPU, names no layout: the server layouts run it as before.
    plan = read_env(shared_gpu_env)
    assert (plan["SERVE_GPUS"], plan["TRAIN_GPUS"], plan["SHARE_GPUS"]) == ("0", "0", "1")
    assert "TRLSTACK_VARIANT" not in plan
    model = Compose(env_file=shared_gpu_env, settings={"TRLSTACK_VARIANT": variant}).config("grpo")
    server, trainer = model["services"]["vllm"], model["services"]["grpo"]
    assert (
        server["environment"]["TRLSTACK_SHARE_GPUS"] == trainer["environment"]["TRLSTACK_SHARE_GPUS"] == "1"
    )
    assert server["environment"]["TRLSTACK_GPU_MEMORY_UTILIZATION"] == plan["GPU_MEMORY_UTILIZATION"] == "0.3"
    if variant == "shared":
        assert server["environment"]["CUDA_VISIBLE_DEVICES"] == trainer["environment"]["CUDA_VISIBLE_DEVICES"]
    else:
        assert gpu_reservation(server)["device_ids"] == gpu_reservation(trainer)["device_ids"] == ["0"]
    services = Compose(env_file=shared_gpu_env).config("grpo")["services"]
    assert set(services) == {"plan-check", "vllm", "dashboard", "grpo"}


@pytest.mark.parametrize("method", METHODS)
def test_shared_gpus_push_through_cuda_ipc_whose_server_no_layout_exposes_beyond_loopback(
    docker_engine, shared_gpu_env, method
):
    # The plan's WEIGHT_TRANSFER=ipc reaches both roles in the shared layout, whose server binds the host's
    # loopback (the one bind serve-vllm takes for IPC); the isolated layout, which cannot carry CUDA IPC
    # across its namespaces, pushes over NCCL whatever the plan says.
    assert read_env(shared_gpu_env)["WEIGHT_TRANSFER"] == "ipc"
    for variant in VARIANTS:
        model = Compose(env_file=shared_gpu_env, settings={"TRLSTACK_VARIANT": variant}).config(method)
        server, trainer = model["services"]["vllm"], model["services"][method]
        transfer = server["environment"]["TRLSTACK_WEIGHT_TRANSFER"]
        assert transfer == trainer["environment"]["TRLSTACK_WEIGHT_TRANSFER"]
        assert "ports" not in server and "expose" not in server
        if variant == "shared":
            assert transfer == "ipc" and server["environment"]["TRLSTACK_VLLM_HOST"] == "127.0.0.1"
            check_bind(server["environment"]["TRLSTACK_VLLM_HOST"], allow_public=False, transfer="ipc")
            assert (server["ipc"], server["pid"]) == (trainer["ipc"], trainer["pid"]) == ("host", "host")
        else:
            assert transfer == "nccl"
            with pytest.raises(UsageError, match="binds loopback only"):
                check_bind(server["environment"]["TRLSTACK_VLLM_HOST"], allow_public=False, transfer="ipc")


@pytest.mark.parametrize("gpus", GPU_COUNTS)
def test_split_plans_share_nothing_and_give_vllm_its_usual_memory(render, plan_env, gpus):
    model = render("shared", gpus, "grpo")
    server, trainer = model["services"]["vllm"], model["services"]["grpo"]
    assert (
        server["environment"]["TRLSTACK_SHARE_GPUS"] == trainer["environment"]["TRLSTACK_SHARE_GPUS"] == "0"
    )
    assert server["environment"]["TRLSTACK_GPU_MEMORY_UTILIZATION"] == "0.9"


def test_the_plans_memory_share_reaches_both_roles_under_one_name(docker_engine, shared_gpu_env, tmp_path):
    # The trainer weighs its memory in what the server leaves it: both get the plan's GPU_MEMORY_UTILIZATION.
    services = Compose(env_file=shared_gpu_env).config("grpo")["services"]
    shares = {
        name: services[name]["environment"]["TRLSTACK_GPU_MEMORY_UTILIZATION"] for name in ("vllm", "grpo")
    }
    assert shares == {"vllm": "0.3", "grpo": "0.3"}
    # The role's own name for it in .env no longer wins unseen: it reaches the plan check, which refuses it.
    env_file = tmp_path / ".env"
    env_file.write_text(shared_gpu_env.read_text() + "TRLSTACK_GPU_MEMORY_UTILIZATION=0.45\n")
    services = Compose(env_file=env_file).config("grpo")["services"]
    assert services["vllm"]["environment"]["TRLSTACK_GPU_MEMORY_UTILIZATION"] == "0.3"
    assert services["plan-check"]["environment"]["TRLSTACK_GPU_MEMORY_UTILIZATION"] == "0.45"
    with pytest.raises(UsageError, match="is the role's name for GPU_MEMORY_UTILIZATION"):
        check_env({key: value for key, value in services["plan-check"]["environment"].items() if value})


@pytest.mark.parametrize(("variant", "gpus"), list(itertools.product(VARIANTS, GPU_COUNTS)))
def test_the_plan_check_reads_the_plan_as_written_with_nothing_else(render, plan_env, variant, gpus):
    check = render(variant, gpus, "grpo")["services"]["plan-check"]
    assert check["command"] == ["trlstack", "plan", "--check"]
    written = {key: value for key, value in check["environment"].items() if value is not None}
    assert written == read_env(plan_env(gpus))  # the .env keys under their own names
    # and, where set, the roles' names for them (refused) and the trainer's ranks on each GPU
    assert {key for key, value in check["environment"].items() if value is None} == {
        *ROLE_VARIABLES.values(),
        "TRLSTACK_RANKS_PER_GPU",
    }
    assert check["network_mode"] == "none" and check["restart"] == "no"
    assert "deploy" not in check and "volumes" not in check  # no GPU, no cache, no outputs: it only reads


@pytest.mark.parametrize(("method", "gpus"), list(itertools.product(METHODS, GPU_COUNTS)))
def test_shared_mode_shares_host_namespaces_and_binds_loopback(render, method, gpus):
    model = render("shared", gpus, method)
    server, trainer = model["services"]["vllm"], model["services"][method]
    for service in (server, trainer):
        assert (service["ipc"], service["pid"], service["network_mode"]) == ("host", "host", "host")
        assert "ports" not in service and "expose" not in service and "networks" not in service
        assert service["environment"]["TINI_SUBREAPER"]  # tini is not PID 1 in the host's PID namespace
    assert server["environment"]["TRLSTACK_VLLM_HOST"] == "127.0.0.1"
    assert trainer["environment"]["VLLM_HOST_IP"] == "127.0.0.1"
    assert trainer["environment"]["TRLSTACK_VLLM_URL"].startswith("http://127.0.0.1:")


@pytest.mark.parametrize(("method", "gpus"), list(itertools.product(METHODS, GPU_COUNTS)))
def test_isolated_mode_talks_over_its_own_network_only(render, method, gpus):
    model = render("isolated", gpus, method)
    server, trainer = model["services"]["vllm"], model["services"][method]
    (network,) = model["networks"].values()
    subnet = ipaddress.ip_network(network["ipam"]["config"][0]["subnet"])
    assert subnet.is_private

    addresses = {}
    for name, service in (("vllm", server), ("trainer", trainer)):
        for key in ("ipc", "pid", "network_mode"):
            assert service.get(key, "private") != "host", f"{name} shares the host's {key}"
        assert "ports" not in service, f"{name} publishes {service.get('ports')}"
        (attachment,) = service["networks"].values()
        addresses[name] = ipaddress.ip_address(attachment["ipv4_address"])
        assert addresses[name] in subnet
        # NCCL goes over TCP on the container's only interface, the private network.
        env = service["environment"]
        assert env["NCCL_SOCKET_IFNAME"] == "eth0"
        assert env["NCCL_P2P_DISABLE"] == env["NCCL_SHM_DISABLE"] == "1"
    assert addresses["vllm"] != addresses["trainer"]

    # vLLM binds its private address, which serve-vllm accepts without --allow-public-bind; the trainer finds
    # it there, and vLLM's workers reach the trainer's NCCL rendezvous at the trainer's address.
    host = server["environment"]["TRLSTACK_VLLM_HOST"]
    assert host == str(addresses["vllm"])
    check_bind(host, allow_public=False)
    assert trainer["environment"]["TRLSTACK_VLLM_URL"].startswith(f"http://{host}:")
    assert trainer["environment"]["VLLM_HOST_IP"] == str(addresses["trainer"])
    assert "TRLSTACK_ALLOW_PUBLIC_BIND" not in server["environment"]


def test_serve_vllm_refuses_a_bind_the_stacks_never_use():
    # The guard the isolated stack relies on: binding every interface needs an explicit opt-in.
    with pytest.raises(UsageError, match="allow-public-bind"):
        check_bind("0.0.0.0", allow_public=False)


def test_private_network_can_be_cut_off_from_the_internet(docker_engine, plan_env):
    compose = Compose(
        env_file=plan_env(2), settings={"TRLSTACK_VARIANT": "isolated", "TRLSTACK_NETWORK_INTERNAL": "true"}
    )
    (network,) = compose.config("grpo")["networks"].values()
    assert network["internal"] is True


@pytest.mark.parametrize(("variant", "gpus"), list(itertools.product(VARIANTS, GPU_COUNTS)))
def test_server_health_gates_the_trainer(render, variant, gpus):
    server = render(variant, gpus, "grpo")["services"]["vllm"]
    check = server["healthcheck"]
    assert check["test"][0] == "CMD" and "/health" in " ".join(check["test"])
    # The probe reads the address and port the server binds from the server's own environment.
    assert {"TRLSTACK_VLLM_HOST", "TRLSTACK_VLLM_PORT"} <= set(server["environment"])
    minutes = check["start_period"]
    assert minutes.endswith("m0s") and int(minutes[: -len("m0s")]) >= 20, minutes  # download + load + graphs
    assert check["retries"] >= 1


@pytest.mark.parametrize(("method", "variant"), list(itertools.product(METHODS, VARIANTS)))
def test_caches_outputs_secret_and_limits(render, method, variant):
    model = render(variant, 8, method)
    server, trainer = model["services"]["vllm"], model["services"][method]

    # Both roles share the named caches; only the trainer writes outputs, to a host folder it must not create.
    for service in (server, trainer):
        mounted = {v["source"]: v["target"] for v in service["volumes"] if v["type"] == "volume"}
        assert mounted == CACHES
    assert set(model["volumes"]) == set(CACHES)
    (outputs,) = [v for v in trainer["volumes"] if v["type"] == "bind" and v["target"] != "/task"]
    assert outputs["target"] == "/outputs" and outputs["source"] == str(REPO / "outputs")
    assert not outputs.get("bind", {}).get("create_host_path", False)
    assert not [v for v in server["volumes"] if v["type"] == "bind" and v["target"] != "/task"]
    # No task folder: /dev/null stands in at /task, read-only, and nothing inside names it.
    for service in (server, trainer):
        (task,) = [v for v in service["volumes"] if v["target"] == "/task"]
        assert task["source"] == "/dev/null" and task["read_only"] is True
        assert service["environment"]["TRLSTACK_TASK"] == ""

    # The HF token is a secret file that huggingface_hub reads through HF_TOKEN_PATH; none in the environment.
    for service in (server, trainer):
        assert service["secrets"] == [{"source": "hf_token", "target": SECRET}]
        assert service["environment"]["HF_TOKEN_PATH"] == SECRET
        assert "HF_TOKEN" not in service["environment"]
        assert int(service["shm_size"]) >= 8 * 2**30
        # vLLM asks for 65535 open files; the engine's default may be lower (20000 on the test machine).
        assert service["ulimits"] == {"memlock": -1, "stack": 67108864, "nofile": 65535}
    assert model["secrets"]["hf_token"]["file"] == "/dev/null"  # no token: anonymous downloads

    # A stopped trainer finishes its step and saves a checkpoint before Docker's SIGKILL (README: how long).
    assert trainer["stop_grace_period"] == "5m0s"


def test_user_settings_reach_the_roles(docker_engine, plan_env, tmp_path):
    token = tmp_path / "hf_token"
    token.write_text("hf_example\n")
    compose = Compose(
        env_file=plan_env(4),
        settings={
            "TRLSTACK_MODEL": "org/model",
            "TRLSTACK_DATASET": "org/data",
            "TRLSTACK_FRESH": "1",
            "TRLSTACK_SHARDING": "fsdp2",
            "TRLSTACK_MAX_STALENESS": "2",
            "TRLSTACK_STOP_GRACE_PERIOD": "15m",
            "TRLSTACK_IMAGE": "registry.example/trlstack:1",
            "HF_TOKEN_FILE": str(token),
            "TRLSTACK_OUTPUTS": str(tmp_path),
            "UID": "1234",
            "GID": "1234",
        },
    )
    model = compose.config("grpo")
    server, trainer = model["services"]["vllm"], model["services"]["grpo"]
    assert trainer["environment"]["TRLSTACK_FRESH"] == "1"
    assert trainer["environment"]["TRLSTACK_SHARDING"] == "fsdp2"
    assert trainer["environment"]["TRLSTACK_MAX_STALENESS"] == "2"  # async-grpo's, passed to every trainer
    assert trainer["stop_grace_period"] == "15m0s"
    for service in (server, trainer):
        assert service["environment"]["TRLSTACK_MODEL"] == "org/model"  # the same model on both sides
        assert service["image"] == "registry.example/trlstack:1"
        assert service["user"] == "1234:1234"
    assert trainer["environment"]["TRLSTACK_DATASET"] == "org/data"
    assert model["secrets"]["hf_token"]["file"] == str(token)
    assert sorted(v["source"] for v in trainer["volumes"] if v["type"] == "bind") == [
        "/dev/null",
        str(tmp_path),
    ]


@pytest.mark.parametrize("variant", [*VARIANTS, "colocate"])
def test_a_task_folder_reaches_both_roles_read_only_at_task_in_every_layout(
    docker_engine, plan_env, tmp_path, variant
):
    gpus = 1 if variant == "colocate" else 2
    settings = {"TRLSTACK_TASK": str(tmp_path), "TRLSTACK_VARIANT": variant}
    model = Compose(env_file=plan_env(gpus), settings=settings).config("grpo")
    roles = [model["services"]["grpo"]] + ([model["services"]["vllm"]] if variant != "colocate" else [])
    for service in roles:
        (task,) = [v for v in service["volumes"] if v["target"] == "/task"]
        assert (task["type"], task["source"], task["read_only"]) == ("bind", str(tmp_path), True)
        assert service["environment"]["TRLSTACK_TASK"] == "/task"
        assert not service["environment"].get("TRLSTACK_CONFIG")  # train reads /task/config.yaml


def test_env_example_is_what_plan_writes_for_eight_gpus(tmp_path):
    example = REPO / ".env.example"
    written = tmp_path / ".env"
    written.write_text(example.read_text())
    from trlstack.cli import main

    assert main(["plan", "--gpus", "8", "--format", "env", "-o", str(written)]) == 0
    assert written.read_text() == example.read_text()
    assert read_env(example)["SERVE_GPUS"] == "0,1,2,3" and read_env(example)["TRAIN_GPUS"] == "4,5,6,7"


def test_without_a_plan_compose_names_the_fix(docker_engine, tmp_path):
    empty = tmp_path / "empty.env"
    empty.write_text("")
    done = subprocess.run(
        ["docker", "compose", "-f", str(REPO / "compose.yaml"), "--env-file", str(empty), "config"],
        capture_output=True,
        text=True,
        env=clean_environ(),
        timeout=60,
    )
    assert done.returncode != 0
    assert "is not set; write .env with `trlstack plan --format env -o .env`" in done.stderr, done.stderr


def test_an_unknown_variant_is_refused(docker_engine, plan_env):
    compose = Compose(env_file=plan_env(2), settings={"TRLSTACK_VARIANT": "fast"})
    done = compose.run("config", check=False)
    assert done.returncode != 0 and "compose/fast.yaml" in done.stderr, done.stderr
