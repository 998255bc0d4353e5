"""What each role runs on its node: its runtime, its command, its GPUs and network, for 2 x 8 and 4 x 8 GPUs
(the script run with the stand-ins)."""

from __future__ import annotations

import pytest

from .harness import MODEL, SIF, Run, flat, script


def test_cpu_runs_request_no_gpu_and_train_with_cpu():
    text = script(cpu=True, gpus_per_node=None, serve_nodes=0, runtime="none", image=None)
    assert "--gpus-per-node" not in text
    assert "--nv" not in text and "CUDA_VISIBLE_DEVICES" not in text
    assert 'train grpo --model Qwen/Qwen2.5-0.5B-Instruct --output-dir "$RUN_DIR" --cpu' in flat(text)
    assert "started the vLLM server" not in text and "serve-vllm --" not in flat(text)


def test_pyxis_runs_the_image_through_srun_without_the_home_folder():
    text = script(runtime="pyxis", image="nvcr.io#org/trlstack:1", bind=("/shared/models",))
    assert '--container-image="$IMAGE"' in text
    assert "--container-mounts=/shared/runs,/shared/runs/cache:/cache,/shared/models" in text
    assert "--no-container-mount-home" in text
    assert "apptainer" not in text


def test_an_environment_is_activated_on_each_node_for_runtime_none():
    text = script(runtime="none", image="/shared/envs/trlstack")
    assert 'ACTIVATE="$IMAGE/activate"; [ -f "$ACTIVATE" ] || ACTIVATE="$IMAGE/bin/activate"' in text
    assert 'bash -c \'source "$1" && shift && exec "$@"\' trlstack-env "$ACTIVATE"' in text


def after_image(argv: list[str]) -> list[str]:
    """The role's own command: what follows the image in `apptainer exec ... IMAGE CMD`."""
    return argv[argv.index(SIF) + 1 :] if SIF in argv else argv


@pytest.mark.parametrize(("nodes", "tp"), [(2, 1), (4, 1), (4, 2)])
def test_the_first_node_serves_the_others_train_each_with_its_gpus_and_addresses(tmp_path, nodes, tp):
    run = Run(tmp_path, script(nodes=nodes, tensor_parallel_size=tp), nodes)
    done = run()
    assert done.returncode == 0, done.stdout + done.stderr
    roles = run.roles()
    assert list(roles) == run.nodes or sorted(roles) == run.nodes  # one role per node, every node
    server, *trainers = run.nodes
    server_addr, *trainer_addrs = run.addrs
    shared = str(tmp_path / "shared")

    serve = roles[server]
    assert serve["options"]["--gpus-per-node"] == "8" and serve["options"]["--kill-on-bad-exit"] == "1"
    assert serve["options"]["--job-name"] == "serve-vllm"
    assert serve["argv"][:3] == ["apptainer", "exec", "--nv"]
    assert after_image(serve["argv"]) == [
        "serve-vllm", "--model", MODEL, "--host", server_addr, "--port", "8000",
        "--tensor-parallel-size", str(tp), "--data-parallel-size", str(8 // tp),
    ]  # fmt: skip
    assert serve["env"] == {
        "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "VLLM_HOST_IP": server_addr,
        "NCCL_SOCKET_IFNAME": "ib0",
        "GLOO_SOCKET_IFNAME": "ib0",
    }
    for rank, node in enumerate(trainers):
        train = roles[node]
        assert train["options"]["--job-name"] == "train"
        # Each trainer sets VLLM_HOST_IP itself, to its address on the route to the server
        # (trlstack.addresses); one from the submitting shell is cleared.
        assert after_image(train["argv"]) == [
            "train", "grpo", "--model", MODEL, "--output-dir", f"{shared}/grpo",
            "--vllm-url", f"http://{server_addr}:8000", "--group-port", "51216",
            "--num-machines", str(nodes - 1), "--machine-rank", str(rank),
            "--main-process-ip", trainer_addrs[0], "--main-process-port", "29500",
        ]  # fmt: skip
        assert train["env"] == {
            "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7",
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
            "VLLM_HOST_IP": "",
            "NCCL_SOCKET_IFNAME": "ib0",
            "GLOO_SOCKET_IFNAME": "ib0",
        }
    # Training finished: the server's step is stopped with SIGTERM and the job succeeds.
    assert run.calls("scancel") == [{"argv": ["--signal=TERM", run.step_ids("serve-vllm")[0]]}]
    assert "the trainers have ended; stopping the vLLM server" in done.stdout
    assert f"done: checkpoints and the final model are in {shared}/grpo" in done.stdout


def test_trl_and_vllm_arguments_reach_their_roles(tmp_path):
    text = script(vllm_args=("--enforce-eager",), train_args=("--max_steps", "10"))
    run = Run(tmp_path, text, 2)
    assert run().returncode == 0
    roles = run.roles()
    assert roles["gpu-a"]["argv"][-2:] == ["--", "--enforce-eager"]
    assert roles["gpu-b"]["argv"][-3:] == ["--", "--max_steps", "10"]
