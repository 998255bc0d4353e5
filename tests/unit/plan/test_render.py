"""trlstack.plan.render: the plan as .env lines, JSON and a table; an existing .env merged, the user's lines
kept."""

from __future__ import annotations

import json

import pytest
from trlstack.errors import UsageError
from trlstack.gpus import Gpu
from trlstack.plan import ENV_KEYS, make_plan
from trlstack.plan.render import merge_env, render, render_env, render_json, render_table


def machine(n):
    return [Gpu(i) for i in range(n)]


def h200s(n):
    return [Gpu(i, f"GPU-{i:04d}-h200", "NVIDIA H200", (9, 0), "580.95.05") for i in range(n)]


def test_env_rendering_has_a_comment_header_then_the_keys():
    text = render_env(make_plan(machine(4)))
    lines = text.splitlines()
    assert lines[0].startswith("# GPU plan written by `trlstack plan`: vLLM serves on GPUs 0,1 ")
    assert lines[1:] == [
        "SERVE_GPUS=0,1",
        "TRAIN_GPUS=2,3",
        "TENSOR_PARALLEL_SIZE=1",
        "DATA_PARALLEL_SIZE=2",
        "NUM_PROCESSES=2",
        "VLLM_PORT=8000",
        "VLLM_GROUP_PORT=51216",
        "SHARE_GPUS=0",
        "GPU_MEMORY_UTILIZATION=0.9",
        "WEIGHT_TRANSFER=nccl",
    ]
    assert text.endswith("\n")


def test_json_rendering_holds_sizes_env_and_each_gpus_role():
    document = json.loads(render_json(make_plan(h200s(4), tensor_parallel_size=2)))
    assert document["serve_gpus"] == [0, 1] and document["train_gpus"] == [2, 3]
    assert (document["tensor_parallel_size"], document["data_parallel_size"], document["num_processes"]) == (
        2,
        1,
        2,
    )
    assert (document["vllm_port"], document["vllm_group_port"]) == (8000, 51216)
    assert list(document["env"]) == list(ENV_KEYS)
    assert document["gpus"][3] == {
        "index": 3,
        "role": "train",
        "uuid": "GPU-0003-h200",
        "name": "NVIDIA H200",
        "compute_capability": "9.0",
    }


def test_table_shows_both_roles_and_uuids_when_known():
    table = render_table(make_plan(h200s(2)))
    assert "serve  0" in table and "train  1" in table
    assert "GPU-0000-h200" in table and "GPU-0001-h200" in table
    assert "tensor-parallel 1 x data-parallel 1" in table and "1 process " in table


def test_table_leaves_out_the_gpu_list_when_nothing_is_known_of_them():
    table = render_table(make_plan(machine(8)))
    assert len(table.splitlines()) == 5 and "UUID" not in table
    assert table.splitlines()[-1] == (
        "layout: disjoint GPU sets: weights are pushed over NCCL (P2P/NVLink where the GPUs have it)"
    )


def test_render_refuses_an_unknown_format():
    with pytest.raises(UsageError, match="unknown plan format 'yaml'; choose one of table, env, json"):
        render(make_plan(machine(2)), "yaml")


def test_merge_env_replaces_the_plan_and_keeps_the_users_lines():
    plan = make_plan(machine(8))
    old = render_env(make_plan(machine(2)))
    existing = f"# my settings\nHF_TOKEN=secret\n{old}MODEL=Qwen/Qwen2.5-1.5B-Instruct\n"
    merged = merge_env(existing, plan)
    assert merged.startswith("# my settings\nHF_TOKEN=secret\nMODEL=Qwen/Qwen2.5-1.5B-Instruct\n\n")
    assert merged.endswith(render_env(plan))
    assert merged.count("SERVE_GPUS=") == 1
    assert merge_env(merged, plan) == merged


def test_merge_env_reads_the_file_as_compose_does():
    plan = make_plan(machine(2))
    existing = (
        "export SERVE_GPUS=5\n"  # the shell form compose also reads
        'NOTE="two\nlines SERVE_GPUS=9"\n'  # a quoted value over two lines is one entry
        "TRAIN_GPUS = 6\n"
        "  # indented comment\n"
    )
    merged = merge_env(existing, plan)
    assert merged == 'NOTE="two\nlines SERVE_GPUS=9"\n  # indented comment\n\n' + render_env(plan)


def test_merge_env_into_an_empty_file_is_the_rendering():
    plan = make_plan(machine(2))
    assert merge_env("", plan) == render_env(plan)


def test_one_gpu_renders_the_colocate_plan_with_its_reason_in_every_format():
    plan = make_plan(h200s(1))
    env = render_env(plan).splitlines()
    assert env[0].startswith(
        "# GPU plan written by `trlstack plan`: training on GPU 0 (1 process), no server; "
    )
    assert "1.10 s against 1.58 s for a shared-GPU server over NCCL sockets (one H200" in env[0]
    assert env[1:] == ["TRLSTACK_VARIANT=colocate", "TRAIN_GPUS=0", "NUM_PROCESSES=1"]
    document = json.loads(render_json(plan))
    assert document["vllm_mode"] == "colocate" and document["serve_gpus"] == []
    assert document["env"] == {"TRLSTACK_VARIANT": "colocate", "TRAIN_GPUS": "0", "NUM_PROCESSES": "1"}
    assert document["layout"].startswith("colocate, vLLM inside the trainer: measured faster on one GPU")
    assert [gpu["role"] for gpu in document["gpus"]] == ["train"]
    table = render_table(plan).splitlines()
    assert table[1].split() == ["serve", "-", "none:", "no", "vLLM", "server"]
    assert table[2].startswith("train  0 ") and "vLLM inside it (train --vllm-mode colocate)" in table[2]
    assert any(line.startswith("layout: colocate, vLLM inside the trainer: ") for line in table)
    assert json.loads(render_json(make_plan(machine(2))))["vllm_mode"] == "server"


def test_merge_env_writes_the_layout_a_plan_chose_and_keeps_the_one_the_user_chose():
    colocate, shared_gpu = make_plan(machine(1)), make_plan(machine(1), share_gpus=True)
    old_one_gpu = render_env(shared_gpu)  # an older plan's one-GPU .env: no TRLSTACK_VARIANT
    merged = merge_env(f"HF_TOKEN_FILE=./t\n{old_one_gpu}", colocate)
    assert merged == "HF_TOKEN_FILE=./t\n\n" + render_env(colocate)  # SHARE_GPUS=1 and the server keys gone
    back = merge_env(merged, shared_gpu)  # the server chosen again: the plan's colocate goes
    assert back == "HF_TOKEN_FILE=./t\n\n" + render_env(shared_gpu)
    isolated = f"TRLSTACK_VARIANT=isolated\n{render_env(make_plan(machine(4)))}"
    assert merge_env(isolated, make_plan(machine(8))).startswith("TRLSTACK_VARIANT=isolated\n\n")
    # One GPU under the user's server layout: kept with a server beside the trainer, or refused naming both
    # ways on; never dropped.
    assert merge_env(isolated, shared_gpu).startswith("TRLSTACK_VARIANT=isolated\n\n")
    for chosen in ("isolated", "shared"):
        with pytest.raises(UsageError) as error:
            merge_env(f"TRLSTACK_VARIANT={chosen}\n", colocate)
        assert f"TRLSTACK_VARIANT={chosen} in the .env runs compose's {chosen} layout" in str(error.value)
        nccl = " --weight-transfer nccl" if chosen == "isolated" else ""  # isolated pushes over NCCL
        assert f"`trlstack plan --share-gpus{nccl} --format env -o .env`" in str(error.value)
        assert "or remove the TRLSTACK_VARIANT line for colocate" in str(error.value)


def test_a_shared_gpu_plan_says_it_pushes_through_cuda_ipc_and_how_to_ask_for_nccl():
    plan = make_plan(h200s(2), share_gpus=True)
    table = render_table(plan)
    assert "weights are pushed through CUDA IPC" in table and "--weight-transfer nccl" in table
    assert "- (CUDA IPC: no port)" in table
    assert json.loads(render_json(plan))["weight_transfer"] == "ipc"
    nccl = render_table(make_plan(h200s(2), share_gpus=True, weight_transfer="nccl"))
    assert "weights are pushed over NCCL sockets, not P2P/NVLink" in nccl and "51216 (NCCL weight" in nccl
    assert json.loads(render_json(make_plan(h200s(1))))["weight_transfer"] is None  # colocate: no push
