"""FSDP2 really run: 2 processes over gloo on the CPU shard a tiny Qwen2 decoder with torch's fully_shard,
train 2 steps, save sharded (one .distcp per process), stop, and resume for a third step that matches an
unbroken run.

Not through accelerate: accelerate turns FSDP on only for accelerators (AcceleratorState sets
DistributedType.FSDP in its GPU-like branch alone; on the CPU its processes form a MULTI_CPU gloo group that
is never sharded, and with use_cpu its launcher starts one process), so the furthest real thing on a CPU is
torch's own FSDP2, which accelerate's plugin calls. The counted parameters (plan/memory.py) are checked
against the real model's here too. Needs the gpu extra (torch, transformers): it runs in the image
(tests/image/test_image_smoke.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

WHY = "needs the gpu extra (torch, transformers); runs in the image"
torch = pytest.importorskip("torch", reason=WHY)
pytest.importorskip("transformers", reason=WHY)

from trlstack.plan.memory import count_parameters  # noqa: E402
from trlstack.ports import free_port  # noqa: E402

WORKER = Path(__file__).parents[1] / "fsdp_worker.py"  # beside the other helpers of tests/unit


def run(folder: Path, start: int, steps: int) -> list[dict]:
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port"]
    argv += [str(free_port()), str(WORKER), str(folder), str(start), str(steps)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return sorted(rows, key=lambda row: row["rank"])


def test_two_cpu_processes_shard_train_save_and_resume(tmp_path):
    unbroken = run(tmp_path / "unbroken", 0, 3)
    first = run(tmp_path / "resumed", 0, 2)
    shards = sorted(path.name for path in (tmp_path / "resumed" / "checkpoint").glob("*.distcp"))
    assert shards == ["__0_0.distcp", "__1_0.distcp"]  # one per process, as checkpoints.sharded_over counts
    second = run(tmp_path / "resumed", 2, 1)
    assert first[0]["losses"] == pytest.approx(unbroken[0]["losses"][:2])
    assert second[0]["losses"] == pytest.approx(unbroken[0]["losses"][2:], rel=1e-5)

    whole = unbroken[0]["parameters"]
    assert count_parameters({"model_type": "qwen2", **unbroken[0]["config"]})[0] == whole
    assert sum(row["local"] for row in unbroken) == whole  # each process holds its share, none twice
    assert all(row["local"] < whole for row in unbroken)
