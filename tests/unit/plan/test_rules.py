"""trlstack.plan.rules: each rule of a layout, and the entries that call it (the plan, the plan in .env,
serve-vllm, trlstack slurm, train) agreeing on every layout, each naming the settings as its user spells
them."""

from __future__ import annotations

import itertools

import pytest
from trlstack.errors import UsageError
from trlstack.gpus import Gpu
from trlstack.plan import make_plan
from trlstack.plan.env_check import check_env
from trlstack.plan.memory import DEFAULT_MODEL_CONFIG, count_parameters, estimate
from trlstack.plan.rules import (
    ENV_FILE,
    FLAGS,
    ROLES,
    attention_heads,
    check_ports,
    check_processes,
    check_sets,
    check_trainer_room,
    vllm_fraction,
    vllm_sizes,
)
from trlstack.roles.serve.command import parallel_sizes
from trlstack.roles.serve.settings import ServeSettings


def verdict(call):
    try:
        return call()
    except UsageError:
        return "refused"


# vLLM on 1-8 GPUs, with every tensor- and data-parallel size asked or left unset.
LAYOUTS = list(itertools.product([1, 2, 3, 4, 8], [None, 1, 2, 3, 4], [None, 1, 2, 4]))


@pytest.mark.parametrize(("gpus", "tp", "dp"), LAYOUTS)
def test_the_env_check_and_serve_vllm_agree_on_every_vllm_layout(gpus, tp, dp):
    serve = ",".join(map(str, range(gpus)))
    env = {
        "SERVE_GPUS": serve,
        "TRAIN_GPUS": "9",
        "TENSOR_PARALLEL_SIZE": str(tp or ""),
        "DATA_PARALLEL_SIZE": str(dp or ""),
    }
    by_env = verdict(lambda: check_env(env))
    settings = ServeSettings(tensor_parallel_size=tp, data_parallel_size=dp)
    by_role = verdict(lambda: parallel_sizes(settings, [Gpu(i) for i in range(gpus)]))
    by_rule = verdict(lambda: vllm_sizes(gpus, tp, dp, None, ROLES, "here"))
    assert (by_env == "refused") == (by_role == "refused") == (by_rule == "refused")
    if by_rule != "refused":
        assert by_rule[0] * by_rule[1] == gpus  # every GPU it is given, none idle
        assert (by_role.tensor_parallel_size, by_role.data_parallel_size) == by_rule
        assert f"(tensor-parallel {by_rule[0]} x data-parallel {by_rule[1]})" in by_env


@pytest.mark.parametrize(("machine", "tp"), list(itertools.product([2, 4, 8], [1, 2, 3, 4])))
def test_the_plan_accepts_what_it_writes_and_refuses_what_the_check_refuses(machine, tp):
    plan = verdict(lambda: make_plan([Gpu(i) for i in range(machine)], tensor_parallel_size=tp))
    if plan == "refused":
        serve = ",".join(map(str, range(max(1, machine // 2))))
        assert (
            verdict(
                lambda: check_env({"SERVE_GPUS": serve, "TRAIN_GPUS": "9", "TENSOR_PARALLEL_SIZE": str(tp)})
            )
            == "refused"
        )
    else:
        assert "are disjoint" in check_env(plan.env())


def test_a_layout_that_leaves_gpus_idle_is_refused_with_the_size_that_fills_them():
    with pytest.raises(UsageError) as error:
        vllm_sizes(4, 1, 1, None, ENV_FILE, "SERVE_GPUS=0,1,2,3")
    assert str(error.value).startswith(
        "TENSOR_PARALLEL_SIZE=1 x DATA_PARALLEL_SIZE=1 uses 1 of the 4 GPUs SERVE_GPUS=0,1,2,3 gives vLLM, "
        "leaving 3 idle; set DATA_PARALLEL_SIZE=4 or leave it unset"
    )
    with pytest.raises(UsageError, match="or give vLLM 2 GPUs"):  # no data-parallel size fills 3 GPUs by 2
        vllm_sizes(3, 2, 1, None, FLAGS, "--serve-gpus 0,1,2")


def test_the_heads_of_a_config_json_bound_the_tensor_parallel_size():
    assert attention_heads(DEFAULT_MODEL_CONFIG) == 14
    assert attention_heads({"text_config": {"num_attention_heads": 32}}) == 32  # a multimodal model's
    assert attention_heads({"num_attention_heads": True}) is None and attention_heads(None) is None
    with pytest.raises(
        UsageError, match="does not divide the model's 14 attention heads; choose one of 1, 2"
    ):
        vllm_sizes(8, 4, None, 14, FLAGS, "--serve-gpus 0-7")
    assert vllm_sizes(8, 2, None, 14, FLAGS, "--serve-gpus 0-7") == (2, 4)


def test_the_sets_are_disjoint_or_one_set_on_purpose():
    check_sets((0, 1), (2, 3), False, ENV_FILE)
    check_sets((0, 1), (1, 0), True, ENV_FILE)
    with pytest.raises(
        UsageError, match="GPU 1 is in both SERVE_GPUS=0,1 and TRAIN_GPUS=1,2: .*SHARE_GPUS=1"
    ):
        check_sets((0, 1), (1, 2), False, ENV_FILE)
    with pytest.raises(UsageError, match="--share-gpus runs the server and the trainer on the same GPUs"):
        check_sets((0,), (1,), True, FLAGS)


def test_ports_are_tcp_ports_no_two_alike_and_the_message_names_one_to_change():
    check_ports({"--port": 8000, "--group-port": 51216, "--main-process-port": 29500})
    with pytest.raises(
        UsageError, match="--port and --main-process-port are both 8000; .*give --main-process-port"
    ):
        check_ports({"--port": 8000, "--group-port": 51216, "--main-process-port": 8000})
    with pytest.raises(UsageError, match="--port 0 is out of range"):
        check_ports({"--port": 0})


def test_processes_fit_their_gpus_with_several_ranks_on_each():
    assert check_processes(None, 4, 1, ROLES, "x") == 4 and check_processes(None, 2, 3, ROLES, "x") == 6
    with pytest.raises(UsageError, match="NUM_PROCESSES=5 needs a GPU for every 2, but TRAIN_GPUS=0,1 has 2"):
        check_processes(5, 2, 2, ENV_FILE, "TRAIN_GPUS=0,1")


def test_the_memory_share_is_decided_once_and_must_leave_the_trainer_its_estimate():
    assert (vllm_fraction(True), vllm_fraction(False), vllm_fraction(True, 0.5)) == (0.3, 0.9, 0.5)
    found, _ = estimate(DEFAULT_MODEL_CONFIG, "grpo", {})
    assert count_parameters(DEFAULT_MODEL_CONFIG)[0] == 494_032_768  # Qwen2.5-0.5B-Instruct's
    gpu = 80 << 30
    check_trainer_room(found, gpu, 0.3, 1, "--gpu-memory-utilization")
    check_trainer_room(found, None, 0.99, 1, "x")  # an unknown GPU size: nothing to weigh
    with pytest.raises(UsageError) as error:
        check_trainer_room(found, gpu, 0.95, 1, "--gpu-memory-utilization")
    message = str(error.value)
    assert (
        "--gpu-memory-utilization 0.95 gives vLLM 76.0 GiB of each 80.0 GiB GPU and leaves the trainer "
        "4.0 GiB" in message
    )
    assert "but training needs 10.1 GiB per process (one process" in message and "to 0.87 or less" in message
