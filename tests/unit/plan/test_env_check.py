"""trlstack.plan.env_check: a plan as .env holds it, checked as the roles will read it; every hand-written
mistake named by its key as written."""

from __future__ import annotations

import pytest
from trlstack.errors import UsageError
from trlstack.gpus import Gpu
from trlstack.plan import make_plan
from trlstack.plan.env_check import check_env


def machine(n):
    return [Gpu(i) for i in range(n)]


EIGHT = {
    "SERVE_GPUS": "0,1,2,3",
    "TRAIN_GPUS": "4,5,6,7",
    "TENSOR_PARALLEL_SIZE": "1",
    "DATA_PARALLEL_SIZE": "4",
}
EIGHT |= {"NUM_PROCESSES": "4", "VLLM_PORT": "8000", "VLLM_GROUP_PORT": "51216"}


def test_a_plan_written_by_plan_passes_its_check():
    for n in (2, 4, 8, 64):
        assert "are disjoint" in check_env(make_plan(machine(n)).env())
    assert check_env({"SERVE_GPUS": "3", "TRAIN_GPUS": "0,1"}) == (
        "SERVE_GPUS=3 and TRAIN_GPUS=0,1 are disjoint; vLLM on 1 GPU (tensor-parallel 1 x data-parallel 1), "
        "training on 2"
    )
    for n in (1, 2, 8):
        assert "share their GPUs" in check_env(make_plan(machine(n), share_gpus=True).env())
    for yes in ("1", "true", "Yes", "on "):  # the spellings compose and shells write
        shared = {"SERVE_GPUS": "0", "TRAIN_GPUS": "0", "SHARE_GPUS": yes}
        assert (
            check_env(shared)
            == "SERVE_GPUS=0 and TRAIN_GPUS=0 share their GPUs; vLLM on 1 GPU (tensor-parallel 1 x "
            "data-parallel 1), training on 1"
        )


BAD_ENV = [
    ({"SERVE_GPUS": "٣"}, "SERVE_GPUS='٣' in .env is not a list of GPU indices"),
    ({"TRAIN_GPUS": "٤,٥"}, "TRAIN_GPUS='٤,٥' in .env is not a list of GPU indices"),
    ({"TENSOR_PARALLEL_SIZE": "²"}, "TENSOR_PARALLEL_SIZE='²' in .env is not a positive whole number"),
    ({"NUM_PROCESSES": "٤"}, "NUM_PROCESSES='٤' in .env is not a positive whole number"),
    ({"VLLM_PORT": "٨٠٠٠"}, "VLLM_PORT='٨٠٠٠' in .env is not a TCP port"),
    ({"SERVE_GPUS": "4", "SHARE_GPUS": "0"}, "share them on purpose with SHARE_GPUS=1"),
    ({"SERVE_GPUS": "4", "SHARE_GPUS": "off"}, "need disjoint GPUs"),
    ({"SHARE_GPUS": "1"}, "SHARE_GPUS=1 runs the server and the trainer on the same GPUs, but SERVE_GPUS="),
    ({"SHARE_GPUS": "maybe"}, "SHARE_GPUS='maybe' in .env is not 1 or 0"),
    ({"GPU_MEMORY_UTILIZATION": "1.2"}, "GPU_MEMORY_UTILIZATION='1.2' in .env is not a fraction"),
    ({"GPU_MEMORY_UTILIZATION": "lots"}, "GPU_MEMORY_UTILIZATION='lots' in .env is not a fraction"),
    (
        {"SERVE_GPUS": "0-3"},
        "SERVE_GPUS='0-3' in .env: compose hands it unchanged to CUDA_VISIBLE_DEVICES and "
        "Docker's device_ids, which take GPU indices separated by commas; write SERVE_GPUS=0,1,2,3",
    ),
    ({"TRAIN_GPUS": "4-7"}, "write TRAIN_GPUS=4,5,6,7"),
    ({"TRAIN_GPUS": " 4, 5"}, "write TRAIN_GPUS=4,5"),
    ({"SERVE_GPUS": "0;1"}, "SERVE_GPUS='0;1' in .env is not a list of GPU indices"),
    ({"SERVE_GPUS": "GPU-8a1b"}, "SERVE_GPUS='GPU-8a1b' in .env is not a list of GPU indices"),
    ({"SERVE_GPUS": ""}, "SERVE_GPUS is not set; write .env with `trlstack plan --format env -o .env`"),
    ({"TRAIN_GPUS": None}, "TRAIN_GPUS is not set"),
    ({"SERVE_GPUS": "0,0"}, "SERVE_GPUS '0,0' names GPU 0 twice"),
    ({"SERVE_GPUS": "0,1,2,3,4"}, "GPU 4 is in both SERVE_GPUS=0,1,2,3,4 and TRAIN_GPUS=4,5,6,7"),
    ({"TRAIN_GPUS": "0,1,2,3"}, "GPU 0-3 is in both SERVE_GPUS=0,1,2,3 and TRAIN_GPUS=0,1,2,3"),
    ({"SERVE_GPUS": "5000"}, "beyond any machine"),
    ({"TENSOR_PARALLEL_SIZE": "0"}, "TENSOR_PARALLEL_SIZE='0' in .env is not a positive whole number"),
    ({"NUM_PROCESSES": "-1"}, "NUM_PROCESSES='-1' in .env is not a positive whole number"),
    ({"DATA_PARALLEL_SIZE": "many"}, "DATA_PARALLEL_SIZE='many' in .env is not a positive whole number"),
    (
        {"TENSOR_PARALLEL_SIZE": "2"},
        "TENSOR_PARALLEL_SIZE=2 x DATA_PARALLEL_SIZE=4 needs 8 GPUs, but SERVE_GPUS=0,1,2,3 gives vLLM 4",
    ),
    ({"TENSOR_PARALLEL_SIZE": "8", "DATA_PARALLEL_SIZE": ""}, "TENSOR_PARALLEL_SIZE=8 needs 8 GPUs, but"),
    ({"NUM_PROCESSES": "5"}, "NUM_PROCESSES=5 needs a GPU each, but TRAIN_GPUS=4,5,6,7 has 4"),
    ({"VLLM_PORT": "80000"}, "VLLM_PORT='80000' in .env is not a TCP port (1-65535)"),
    ({"VLLM_GROUP_PORT": "8000"}, "VLLM_PORT and VLLM_GROUP_PORT are both 8000"),
    ({"WEIGHT_TRANSFER": "IPC"}, "WEIGHT_TRANSFER='IPC' in .env is not one of auto, nccl, ipc"),
    ({"WEIGHT_TRANSFER": "ipc"}, "WEIGHT_TRANSFER=ipc in .env hands the server CUDA-IPC handles"),
    ({"WEIGHT_TRANSFER": "ipc"}, "write WEIGHT_TRANSFER=nccl for disjoint GPUs"),
]


def test_the_weight_transfer_the_plan_writes_passes_and_an_older_env_without_it_too():
    assert check_env({**EIGHT, "WEIGHT_TRANSFER": "nccl"})
    assert check_env({"SERVE_GPUS": "0", "TRAIN_GPUS": "0", "SHARE_GPUS": "1", "WEIGHT_TRANSFER": "ipc"})
    assert check_env({"SERVE_GPUS": "0", "TRAIN_GPUS": "0", "SHARE_GPUS": "1", "WEIGHT_TRANSFER": "nccl"})
    assert check_env({**EIGHT, "WEIGHT_TRANSFER": ""})  # compose passes an unset key empty: auto


def test_a_colocate_plan_refuses_a_weight_transfer_it_has_no_server_for():
    colocate = {"TRLSTACK_VARIANT": "colocate", "TRAIN_GPUS": "0", "WEIGHT_TRANSFER": "ipc"}
    with pytest.raises(UsageError, match="WEIGHT_TRANSFER=ipc sets how weights reach a vLLM server, but"):
        check_env(colocate)
    assert check_env({**colocate, "WEIGHT_TRANSFER": ""})


def test_the_isolated_layout_refuses_cuda_ipc_it_cannot_carry():
    shared = {"SERVE_GPUS": "0", "TRAIN_GPUS": "0", "SHARE_GPUS": "1", "TRLSTACK_VARIANT": "isolated"}
    with pytest.raises(UsageError, match="TRLSTACK_VARIANT=isolated keeps them apart"):
        check_env({**shared, "WEIGHT_TRANSFER": "ipc"})
    assert check_env({**shared, "WEIGHT_TRANSFER": "nccl"})


@pytest.mark.parametrize(("change", "message"), BAD_ENV, ids=[str(case[0]) for case in BAD_ENV])
def test_a_hand_written_plan_is_refused_naming_the_variable_as_written(change, message):
    values = {key: value for key, value in {**EIGHT, **change}.items() if value is not None}
    with pytest.raises(UsageError) as error:
        check_env(values)
    assert message in str(error.value)


COLOCATE = {"TRLSTACK_VARIANT": "colocate", "TRAIN_GPUS": "0", "NUM_PROCESSES": "1"}


def test_a_colocate_plan_needs_only_the_trainers_keys():
    assert check_env(make_plan(machine(1)).env()) == (
        "TRLSTACK_VARIANT=colocate: training on TRAIN_GPUS=0 with vLLM inside the trainer, no server"
    )
    for service in (None, "grpo", "rloo", "online-dpo"):
        assert "no server" in check_env({**COLOCATE, "SERVE_GPUS": ""}, service)
    assert "no server" in check_env({"TRLSTACK_VARIANT": "colocate", "TRAIN_GPUS": "0,1"})


@pytest.mark.parametrize("service", ["async-grpo", "vllm"])
def test_a_service_that_needs_a_server_is_refused_in_the_colocate_layout_with_the_fix(service):
    with pytest.raises(UsageError) as error:
        check_env(COLOCATE, service)
    message = str(error.value)
    assert ", but TRLSTACK_VARIANT=colocate (the one-GPU plan) runs vLLM inside the trainer and no" in message
    assert "`trlstack plan --share-gpus --format env -o .env`" in message
    assert "(TRLSTACK_VARIANT=shared, SHARE_GPUS=1)" in message
    assert ("no colocate mode" in message) == (service == "async-grpo")
    assert "are disjoint" in check_env(EIGHT, service)  # a server layout serves both


BAD_COLOCATE = [
    ({"TRAIN_GPUS": None}, "TRAIN_GPUS is not set; write .env with `trlstack plan --format env -o .env`"),
    ({"TRAIN_GPUS": "0-1"}, "write TRAIN_GPUS=0,1"),
    ({"NUM_PROCESSES": "2"}, "NUM_PROCESSES=2 needs a GPU each, but TRAIN_GPUS=0 has 1"),
    (
        {"SHARE_GPUS": "1"},
        "SHARE_GPUS=1 runs a vLLM server beside the trainer, but TRLSTACK_VARIANT=colocate",
    ),
    ({"SHARE_GPUS": "yes"}, "SHARE_GPUS=yes runs a vLLM server beside the trainer"),  # any spelling of on
    ({"SHARE_GPUS": "true"}, "SHARE_GPUS=true runs a vLLM server beside the trainer"),
    ({"SHARE_GPUS": "perhaps"}, "SHARE_GPUS='perhaps' in .env is not 1 or 0"),
]


@pytest.mark.parametrize(("change", "message"), BAD_COLOCATE, ids=[str(case[0]) for case in BAD_COLOCATE])
def test_a_hand_written_colocate_plan_is_refused_naming_the_key_as_written(change, message):
    values = {key: value for key, value in {**COLOCATE, **change}.items() if value is not None}
    with pytest.raises(UsageError) as error:
        check_env(values)
    assert message in str(error.value)


@pytest.mark.parametrize("variant", ["Colocate", "colocated", "roles", "SHARED"])
def test_a_layout_compose_has_no_file_for_is_refused_naming_the_three(variant):
    with pytest.raises(UsageError) as error:
        check_env({**COLOCATE, "TRLSTACK_VARIANT": variant})
    assert f"TRLSTACK_VARIANT={variant!r} in .env names no compose layout" in str(error.value)
    assert "shared, isolated, colocate" in str(error.value)


# One name a setting: in .env each plan key is written under the plan's name; the role's variable for it
# (which compose would leave out, or let win unseen) is refused naming the key, alone or beside it.
ROLE_SPELLINGS = [
    ("TRLSTACK_GPU_MEMORY_UTILIZATION", "0.5", "GPU_MEMORY_UTILIZATION"),
    ("TRLSTACK_VLLM_PORT", "9000", "VLLM_PORT"),
    ("TRLSTACK_VLLM_GROUP_PORT", "51300", "VLLM_GROUP_PORT"),
    ("TRLSTACK_TENSOR_PARALLEL_SIZE", "2", "TENSOR_PARALLEL_SIZE"),
    ("TRLSTACK_SERVE_GPUS", "0,1", "SERVE_GPUS"),
    ("TRLSTACK_SHARE_GPUS", "1", "SHARE_GPUS"),
    ("TRLSTACK_NUM_PROCESSES", "2", "NUM_PROCESSES"),
    ("TRLSTACK_WEIGHT_TRANSFER", "nccl", "WEIGHT_TRANSFER"),
]


@pytest.mark.parametrize(("variable", "value", "key"), ROLE_SPELLINGS)
@pytest.mark.parametrize("plan", [EIGHT, COLOCATE], ids=["server", "colocate"])
def test_a_plan_key_under_the_roles_name_is_refused_naming_the_key(variable, value, key, plan):
    with pytest.raises(UsageError) as error:
        check_env({**plan, variable: value})
    message = str(error.value)
    assert f"{variable}={value} in .env (or compose's environment)" in message
    assert (
        f"is the role's name for {key}" in message and f"write {key}={value} and remove {variable}" in message
    )
    assert (f", beside {key}={plan.get(key)}," in message) == (key in plan)  # two spellings of one setting


def test_the_issues_plans_that_cannot_run_are_refused():
    # vLLM on 4 GPUs of which its layout uses 1: three would sit idle, the check said "vLLM on 4 GPUs"
    idle = {**EIGHT, "TENSOR_PARALLEL_SIZE": "1", "DATA_PARALLEL_SIZE": "1"}
    with pytest.raises(UsageError) as error:
        check_env(idle)
    assert (
        "TENSOR_PARALLEL_SIZE=1 x DATA_PARALLEL_SIZE=1 uses 1 of the 4 GPUs SERVE_GPUS=0,1,2,3 gives vLLM, "
        "leaving 3 idle; set DATA_PARALLEL_SIZE=4 or leave it unset, which fills them"
    ) in str(error.value)
    # a tensor-parallel size `trlstack plan` refuses, refused here too, with the same choices
    with pytest.raises(UsageError) as error:
        check_env({**EIGHT, "TENSOR_PARALLEL_SIZE": "3", "DATA_PARALLEL_SIZE": ""})
    assert (
        "TENSOR_PARALLEL_SIZE=3 does not divide the 4 serving GPUs (SERVE_GPUS=0,1,2,3); choose one of "
        "1, 2, 4" in str(error.value)
    )


def test_several_ranks_on_each_gpu_may_take_more_processes_than_gpus():
    # compose/README: with TRLSTACK_RANKS_PER_GPU=K, NUM_PROCESSES is the training GPUs times K
    assert "training on 4" in check_env({**EIGHT, "NUM_PROCESSES": "8", "TRLSTACK_RANKS_PER_GPU": "2"})
    with pytest.raises(
        UsageError, match="NUM_PROCESSES=9 needs a GPU for every 2, but TRAIN_GPUS=4,5,6,7 has 4"
    ):
        check_env({**EIGHT, "NUM_PROCESSES": "9", "TRLSTACK_RANKS_PER_GPU": "2"})
    assert "no server" in check_env({**COLOCATE, "NUM_PROCESSES": "2", "TRLSTACK_RANKS_PER_GPU": "2"})


@pytest.mark.parametrize(
    ("line", "words"),
    [
        (
            {"GPU_MEMORY_UTILIZATION": "0.5"},
            ["GPU_MEMORY_UTILIZATION=0.5 sets a vLLM server's share", "colocate"],
        ),
        ({"TENSOR_PARALLEL_SIZE": "2"}, ["TENSOR_PARALLEL_SIZE=2 needs that many GPUs", "runs none"]),
    ],
)
def test_a_colocate_plan_takes_no_server_setting_as_the_one_gpu_plan_refuses_it(line, words):
    with pytest.raises(UsageError) as error:
        check_env({**COLOCATE, **line})
    assert all(word in str(error.value) for word in words)
