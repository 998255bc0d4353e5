"""FSDP2 on GPUs, in the layouts of gpu_env.LAYOUTS:

- two-gpu: `train grpo --vllm-mode colocate --sharding fsdp2` on 2 GPUs, one rank each: 2 steps saved as one
  shard per rank, resumed to step 4, the final model saved whole (safetensors) by the recipe runner; resuming
  with another process count is refused before anything starts.
- shared-gpu: 2 ranks on one GPU, which train does not offer (one process per GPU) and NCCL refuses within
  one host: each rank gets an NCCL_HOSTID of its own from rank_host_id.sh (accelerate cannot set one per
  rank), and FSDP2 trains a small decoder through torchrun (bench/gpu_fsdp_case.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from gpu_env import LAYOUTS, VARIED_REWARD, cuda_devices, free_port, missing, reward_env

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(bool(missing()), reason=str(missing()))]
HERE = Path(__file__).resolve().parent
BY_NAME = {layout.name: layout for layout in LAYOUTS}


def train(
    tiny: Path, output: Path, log: Path, gpus: str, *more: str, steps: int = 2
) -> subprocess.CompletedProcess:
    argv = [
        "train", "grpo", "--vllm-mode", "colocate", "--sharding", "fsdp2", "--model", str(tiny / "model"),
        "--dataset", str(tiny / "dataset"), "--output-dir", str(output), "--",
        "--max_steps", str(steps), "--save_steps", "2", "--logging_steps", "1",
        "--per_device_train_batch_size", "4", "--num_generations", "4", "--max_completion_length", "16",
        "--vllm_gpu_memory_utilization", "0.3", "--reward_funcs", VARIED_REWARD,
    ]  # fmt: skip
    with log.open("a") as sink:
        env = reward_env() | {"CUDA_VISIBLE_DEVICES": gpus}
        return subprocess.run(argv, env=env, stdout=sink, stderr=subprocess.STDOUT, timeout=900)


@pytest.mark.skipif(cuda_devices() < BY_NAME["two-gpu"].needs_gpus, reason="needs 2 GPUs")
def test_fsdp2_on_two_gpus_saves_shards_resumes_and_ends_with_a_whole_model(tiny, tmp_path):
    output, log = tmp_path / "out", tmp_path / "train.log"
    assert train(tiny, output, log, "0,1").returncode == 0, log.read_text()[-4000:]
    shards = sorted(path.name for path in (output / "checkpoint-2" / "pytorch_model_fsdp_0").glob("*.distcp"))
    assert shards == ["__0_0.distcp", "__1_0.distcp"]
    assert (output / "trlstack-accelerate.yaml").is_file()

    assert train(tiny, output, log, "0,1", steps=4).returncode == 0, log.read_text()[-4000:]
    text = log.read_text()
    assert "resuming from" in text and "checkpoint-2" in text
    state = json.loads((output / "checkpoint-4" / "trainer_state.json").read_text())
    assert state["global_step"] == 4
    assert list(output.glob("model*.safetensors")), "the final model was not saved whole"

    refused = train(tiny, output, log, "0", steps=6)
    assert refused.returncode == 1
    assert "holds FSDP2 shards of 2 processes and this run has 1" in log.read_text()


def test_two_ranks_share_one_gpu_with_a_host_id_each(tmp_path):
    layout = BY_NAME["shared-gpu"]
    shape = {
        "vocab_size": 1024, "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "tie_word_embeddings": True,
    }  # fmt: skip
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port"]
    argv += [str(free_port()), "--no-python", str(HERE / "rank_host_id.sh"), sys.executable]
    argv += [str(HERE.parents[1] / "bench" / "gpu_fsdp_case.py"), json.dumps(shape), "fsdp2", "3", "2", "64"]
    env = reward_env() | {"CUDA_VISIBLE_DEVICES": layout.train_gpus}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert sorted(row["rank"] for row in rows) == [0, 1]
