"""trlstack.plan: the split between the vLLM server and the trainer, its checks, and its three renderings."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from trlstack.errors import UsageError
from trlstack.gpus import Gpu
from trlstack.plan import make_plan


def machine(n):
    return [Gpu(i) for i in range(n)]


def h200s(n):
    return [Gpu(i, f"GPU-{i:04d}-h200", "NVIDIA H200", (9, 0), "580.95.05") for i in range(n)]


@pytest.mark.parametrize(
    ("n", "serve", "train"),
    [
        (2, "0", "1"),
        (3, "0", "1,2"),
        (4, "0,1", "2,3"),
        (5, "0,1", "2,3,4"),
        (8, "0,1,2,3", "4,5,6,7"),
    ],
)
def test_default_split_serves_on_the_first_half_rounded_down(n, serve, train):
    plan = make_plan(machine(n))
    env = plan.env()
    assert (env["SERVE_GPUS"], env["TRAIN_GPUS"]) == (serve, train)
    assert env["DATA_PARALLEL_SIZE"] == str(len(serve.split(",")))
    assert env["NUM_PROCESSES"] == str(len(train.split(",")))
    assert env["TENSOR_PARALLEL_SIZE"] == "1"


def test_env_keys_for_eight_gpus_are_exactly_what_compose_reads():
    assert make_plan(machine(8)).env() == {
        "SERVE_GPUS": "0,1,2,3",
        "TRAIN_GPUS": "4,5,6,7",
        "TENSOR_PARALLEL_SIZE": "1",
        "DATA_PARALLEL_SIZE": "4",
        "NUM_PROCESSES": "4",
        "VLLM_PORT": "8000",
        "VLLM_GROUP_PORT": "51216",
        "SHARE_GPUS": "0",
        "GPU_MEMORY_UTILIZATION": "0.9",
        "WEIGHT_TRANSFER": "nccl",
    }


def test_serve_count_takes_the_first_n():
    plan = make_plan(machine(8), serve_count=6)
    assert (plan.serve_indices, plan.train_indices) == ((0, 1, 2, 3, 4, 5), (6, 7))


def test_explicit_sets_are_kept_in_the_order_written():
    plan = make_plan(machine(8), serve_gpus=(6, 4), train_gpus=(0, 2, 1))
    assert (plan.serve_indices, plan.train_indices) == ((6, 4), (0, 2, 1))


def test_one_set_given_means_the_other_is_the_rest():
    assert make_plan(machine(4), serve_gpus=(3,)).train_indices == (0, 1, 2)
    assert make_plan(machine(4), train_gpus=(0,)).serve_indices == (1, 2, 3)


def test_a_partial_split_leaves_other_gpus_idle():
    plan = make_plan(machine(8), serve_gpus=(0,), train_gpus=(1, 2))
    assert (plan.num_processes, plan.data_parallel_size) == (2, 1)


def test_tensor_parallel_size_sets_the_replicas():
    plan = make_plan(machine(8), tensor_parallel_size=2, num_heads=14)
    assert (plan.tensor_parallel_size, plan.data_parallel_size) == (2, 2)


def test_plan_keeps_the_known_gpu_facts():
    plan = make_plan(h200s(2))
    assert plan.serve[0].uuid == "GPU-0000-h200" and plan.train[0].capability == "9.0"


def test_ports_can_be_chosen():
    plan = make_plan(machine(2), port=9000, group_port=52000)
    assert (plan.env()["VLLM_PORT"], plan.env()["VLLM_GROUP_PORT"]) == ("9000", "52000")


BAD = [
    # (gpus, arguments, words the message must hold)
    (0, {}, ["needs a GPU, and there is none", "--gpus N"]),
    (1, {"serve_gpus": (0,), "train_gpus": (0,)}, ["train --vllm-mode colocate", "--share-gpus"]),
    (4, {"serve_gpus": (0, 1), "train_gpus": (1, 2)}, ["GPU 1 is in both", "disjoint", "colocate"]),
    (4, {"serve_gpus": (0, 1), "train_gpus": (1, 2), "share_gpus": True}, ["the same GPUs", "differ"]),
    (4, {"serve_count": 1, "share_gpus": True}, ["--serve N splits the GPUs"]),
    (
        1,
        {"tensor_parallel_size": 2},
        ["--tensor-parallel-size 2 (TRLSTACK_TENSOR_PARALLEL_SIZE) needs that many GPUs", "runs none"],
    ),
    (
        1,
        {"gpu_memory_utilization": 0.5},
        ["runs no server", "add --share-gpus", "vllm_gpu_memory_utilization"],
    ),
    (4, {"share_gpus": True, "gpu_memory_utilization": 0.0}, ["must be a fraction above 0"]),
    (8, {"serve_gpus": (0, 1, 2, 3), "train_gpus": (2, 3, 4)}, ["GPU 2,3 is in both"]),
    (4, {"serve_gpus": (0, 9)}, ["--serve-gpus names GPU 9, which does not exist", "4 GPUs: 0-3"]),
    (4, {"train_gpus": (4,)}, ["--train-gpus names GPU 4, which does not exist"]),
    (4, {"serve_gpus": (0, 0)}, ["--serve-gpus names GPU 0 twice"]),
    (4, {"serve_gpus": ()}, ["--serve-gpus is empty"]),
    (4, {"serve_gpus": (0,), "train_gpus": ()}, ["--train-gpus is empty"]),
    (4, {"serve_gpus": (0, 1, 2, 3)}, ["leaves no GPU to train on"]),
    (2, {"train_gpus": (1, 0)}, ["leaves no GPU for the vLLM server"]),
    (4, {"serve_count": 4}, ["--serve 4 must leave at least one GPU on each side", "from 1 to 3"]),
    (4, {"serve_count": 0}, ["--serve 0 must leave"]),
    (4, {"serve_count": 2, "serve_gpus": (0,)}, ["either --serve N or --serve-gpus/--train-gpus"]),
    (
        8,
        {"tensor_parallel_size": 3},
        [
            "--tensor-parallel-size 3 (TRLSTACK_TENSOR_PARALLEL_SIZE) does not divide the 4 serving GPUs",
            "1, 2, 4",
        ],
    ),
    (8, {"tensor_parallel_size": 0}, ["--tensor-parallel-size 0 must be at least 1"]),
    (
        8,
        {"tensor_parallel_size": 4, "num_heads": 14},
        ["does not divide the model's 14 attention heads", "1, 2"],
    ),
    (8, {"num_heads": 0}, ["--num-heads 0 must be at least 1"]),
    (2, {"port": 0}, ["--port 0 is out of range", "1 to 65535"]),
    (2, {"port": 65536}, ["--port 65536 is out of range"]),
    (2, {"group_port": -1}, ["--group-port -1 is out of range"]),
    (2, {"port": 8000, "group_port": 8000}, ["--port and --group-port are both 8000"]),
]


def test_one_gpu_with_nothing_asked_is_colocate_the_measured_faster_no_server():
    plan = make_plan(machine(1))
    assert plan.colocate and not plan.share_gpus
    assert (plan.serve_indices, plan.train_indices, plan.num_processes) == ((), (0,), 1)
    assert plan.env() == {"TRLSTACK_VARIANT": "colocate", "TRAIN_GPUS": "0", "NUM_PROCESSES": "1"}
    assert plan.vllm_share_of_training_gpus == 0.3  # TRL's colocate default, inside the trainer
    assert "a GRPO step of 1.10 s" in plan.why and "H200" in plan.why and "--share-gpus" in plan.why


@pytest.mark.parametrize(
    "arguments",
    [
        {"share_gpus": True},
        {"serve_gpus": (0,)},
        {"train_gpus": (0,)},
        {"share_gpus": True, "train_gpus": (0,)},
    ],
)
def test_one_gpu_with_a_server_asked_for_is_a_shared_gpu_server_plan(arguments):
    if (
        "share_gpus" not in arguments
    ):  # a set named on one GPU leaves the other side empty: refused, naming it
        with pytest.raises(UsageError, match="--share-gpus"):
            make_plan(machine(1), **arguments)
        return
    plan = make_plan(machine(1), **arguments)
    assert not plan.colocate and plan.share_gpus
    assert plan.serve_indices == plan.train_indices == (0,)
    assert plan.env()["SHARE_GPUS"] == "1" and plan.env()["GPU_MEMORY_UTILIZATION"] == "0.3"
    assert "TRLSTACK_VARIANT" not in plan.env()  # the user's layout (shared by default) stays
    assert plan.weight_transfer == "ipc" and plan.env()["WEIGHT_TRANSFER"] == "ipc"  # auto: the GPU is shared
    assert not plan.why  # asked for, not chosen


def test_shared_gpus_push_through_cuda_ipc_unless_nccl_is_asked_and_disjoint_ones_over_nccl():
    assert make_plan(machine(4), share_gpus=True).weight_transfer == "ipc"
    assert make_plan(machine(4), share_gpus=True, weight_transfer="nccl").weight_transfer == "nccl"
    assert make_plan(machine(4)).weight_transfer == "nccl"
    assert make_plan(machine(4), weight_transfer="nccl").env()["WEIGHT_TRANSFER"] == "nccl"


@pytest.mark.parametrize(
    ("n", "arguments", "words"),
    [
        (4, {"weight_transfer": "ipc"}, ["--weight-transfer ipc", "add --share-gpus", "nccl for disjoint"]),
        (2, {"serve_gpus": (0,), "weight_transfer": "ipc"}, ["same GPUs"]),
        (1, {"weight_transfer": "nccl"}, ["runs none (vLLM inside the trainer, colocate)", "--share-gpus"]),
        (1, {"weight_transfer": "ipc"}, ["runs none", "add --share-gpus"]),
    ],
)
def test_a_weight_transfer_that_cannot_reach_the_server_is_refused(n, arguments, words):
    with pytest.raises(UsageError) as error:
        make_plan(machine(n), **arguments)
    assert all(word in str(error.value) for word in words), str(error.value)


def test_more_than_one_gpu_never_plans_colocate():
    assert not any(make_plan(machine(n)).colocate for n in range(2, 9))


@pytest.mark.parametrize(("n", "arguments", "words"), BAD)
def test_bad_requests_are_refused_with_the_fix(n, arguments, words):
    with pytest.raises(UsageError) as error:
        make_plan(machine(n), **arguments)
    for word in words:
        assert word in str(error.value)


def test_repeated_discovered_gpus_are_a_bug_not_a_user_error():
    with pytest.raises(ValueError):
        make_plan([Gpu(0), Gpu(0)])


# Properties: whatever the request, an accepted plan is disjoint, is exactly what was asked, and TP*DP fills
# the serving GPUs; a request that would break one of these is refused.


@st.composite
def requests(draw):
    n = draw(st.integers(1, 16))
    indices = st.integers(-1, n + 1)
    serve = draw(st.none() | st.lists(indices, max_size=n + 1))
    train = draw(st.none() | st.lists(indices, max_size=n + 1))
    tp = draw(st.none() | st.integers(0, 9))
    heads = draw(st.none() | st.integers(0, 64))
    return n, serve, train, tp, heads


@given(requests())
def test_any_accepted_explicit_split_is_disjoint_and_exactly_the_request(request):
    n, serve, train, tp, heads = request
    try:
        plan = make_plan(
            machine(n), serve_gpus=serve, train_gpus=train, tensor_parallel_size=tp, num_heads=heads
        )
    except UsageError:
        return
    if n == 1 and serve is None and train is None:  # one GPU, no split asked for: colocate, no server
        assert plan.colocate and not plan.serve and plan.train_indices == (0,)
        return
    assert plan.serve and plan.train
    assert not plan.share_gpus and not plan.colocate
    assert not set(plan.serve_indices) & set(plan.train_indices)
    assert set(plan.serve_indices) | set(plan.train_indices) <= set(range(n))
    if serve is not None:
        assert plan.serve_indices == tuple(serve)
    if train is not None:
        assert plan.train_indices == tuple(train)
    if serve is None or train is None:
        assert sorted(plan.serve_indices + plan.train_indices) == list(range(n))
    assert plan.tensor_parallel_size * plan.data_parallel_size == len(plan.serve)
    assert plan.num_processes == len(plan.train)
    if heads is not None:
        assert heads % plan.tensor_parallel_size == 0


@given(st.integers(2, 64), st.data())
def test_valid_explicit_splits_are_accepted(n, data):
    order = data.draw(st.permutations(range(n)))
    cut = data.draw(st.integers(1, n - 1))
    end = data.draw(st.integers(cut + 1, n))
    serve, train = order[:cut], order[cut:end]
    plan = make_plan(machine(n), serve_gpus=serve, train_gpus=train)
    assert (plan.serve_indices, plan.train_indices) == (tuple(serve), tuple(train))


@given(st.integers(2, 64), st.data())
def test_serve_count_splits_everything(n, data):
    count = data.draw(st.integers(1, n - 1))
    tp = data.draw(st.sampled_from([d for d in range(1, count + 1) if count % d == 0]))
    plan = make_plan(machine(n), serve_count=count, tensor_parallel_size=tp)
    assert plan.serve_indices + plan.train_indices == tuple(range(n))
    assert len(plan.serve) == count and plan.tensor_parallel_size * plan.data_parallel_size == count


@given(st.integers(2, 64))
def test_default_split_covers_the_machine_with_the_bigger_half_training(n):
    plan = make_plan(machine(n))
    assert plan.serve_indices + plan.train_indices == tuple(range(n))
    assert 1 <= len(plan.serve) <= len(plan.train)
