"""A GRPO run's metrics on a GPU, with the shipped set: every logging step carries where the step's time went
(generation, the weight push, forward and backward, the optimizer), the throughput and each rank's GPU memory
peak; in server mode also the vLLM server's own metrics (its Prometheus /metrics). `trlstack report` then
draws the run, the step split among its panels.

Needs the gpu extra and, for the picture, the report extra (`uv sync --extra gpu --extra report`): the device
reaches no package index. About 4 minutes of device time on one H100 or H200 (two runs of 8 steps on the tiny
model, one engine start each, and one server start)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from gpu_env import (
    FIXED_KV_CACHE,
    VARIED_REWARD,
    free_port,
    missing,
    reward_env,
    start_server,
    stop,
    wait_healthy,
)
from trlstack.metrics import STEP_PARTS, STEP_S, find_stores, read_runs

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(bool(missing()), reason=str(missing()))]

STEPS = 8
TRL_ARGS = [
    "--max_steps", str(STEPS), "--save_steps", str(STEPS), "--logging_steps", "2",
    "--per_device_train_batch_size", "8", "--num_generations", "8", "--max_completion_length", "32",
    "--reward_funcs", VARIED_REWARD, "--learning_rate", "1e-3",
]  # fmt: skip


def train(tiny: Path, output: Path, log: Path, *mode: str) -> str:
    argv = ["train", "grpo", *mode, "--model", str(tiny / "model"), "--dataset", str(tiny / "dataset")]
    fixed = os.environ.get(FIXED_KV_CACHE)  # other GPU work beside: an engine that does not profile memory
    if fixed and "colocate" in mode:
        argv += ["--vllm-kv-cache-gib", f"{int(fixed) / 2**30:g}"]
    argv += ["--output-dir", str(output), "--", *TRL_ARGS]
    if "colocate" in mode:  # vLLM's share of the GPU, as tests/gpu/test_train_colocate.py runs it
        argv += ["--vllm_gpu_memory_utilization", "0.3"]
    with log.open("w") as sink:
        done = subprocess.run(argv, env=reward_env(), stdout=sink, stderr=subprocess.STDOUT, timeout=900)
    text = log.read_text()
    assert done.returncode == 0, text[-4000:]
    return text


def logged_rows(output: Path) -> list[dict]:
    (run,) = read_runs(find_stores(output)[0])
    rows = [row for row in run.rows if "train/loss" in row]
    assert [row["train/global_step"] for row in rows] == [2, 4, 6, 8]
    return rows


def check_split(rows: list[dict]) -> None:
    for row in rows:
        parts = {key: row[f"train/{key}"] for key, _ in STEP_PARTS}
        assert sum(parts.values()) == pytest.approx(row[f"train/{STEP_S}"], rel=1e-6), row
        for part in (
            "time/generation_s",
            "time/weight_push_s",
            "time/forward_backward_s",
            "time/optimizer_s",
        ):
            assert parts[part] > 0, (part, row)
        assert row["train/throughput/tokens_per_s"] > 0 and row["train/throughput/completions_per_s"] > 0
        assert 0 < row["train/memory/peak_gib/rank0"] < 200


def report(output: Path, picture: Path) -> str:
    pytest.importorskip("matplotlib", reason="the picture needs the report extra: uv sync --extra report")
    argv = [sys.executable, "-m", "trlstack", "report", str(output), "-o", str(picture)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return done.stdout


def test_a_colocated_grpo_run_logs_its_step_split_and_the_report_draws_it(tiny, tmp_path):
    output = tmp_path / "out"
    log = train(tiny, output, tmp_path / "train.log", "--vllm-mode", "colocate")
    assert "train: step 8 of 8 (100.0%)" in log
    check_split(logged_rows(output))
    summary = report(output, tmp_path / "colocate.png")
    print(summary)
    assert "generation " in summary and "weight push " in summary and "GPU memory peak" in summary


def test_a_server_mode_run_also_logs_the_servers_own_metrics(tiny, tmp_path):
    port = free_port()
    server_log = tmp_path / "server.log"
    server = start_server(tiny / "model", port, server_log, gpus="0", flags=["--share-gpus"])
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, server, server_log)
        output = tmp_path / "out"
        train(tiny, output, tmp_path / "train.log", "--share-gpus", "--vllm-url", url)
    finally:
        stop(server)
    rows = logged_rows(output)
    check_split(rows)
    later = rows[1:]  # the first logging step has no earlier scrape to take a rate against
    assert all(row["train/server/generation_tokens_per_s"] > 0 for row in later), later
    assert all("train/server/kv_cache_usage" in row for row in rows)
    summary = report(output, tmp_path / "server.png")
    print(summary)
    assert "vLLM server (last)" in summary
