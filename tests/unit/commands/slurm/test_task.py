"""trlstack slurm --task DIR: the folder bound read-only on every node at its own path, named to every
trainer, its model folder served by the server node; checked on the submit host before anything is queued."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from trlstack.cli import main
from trlstack.commands import init

from .harness import SIF, flat, make_stubs


def scaffold(folder):
    folder.mkdir(parents=True)
    for name, text in init.contents("grpo", folder).items():
        (folder / name).write_text(text)
    return folder


def dry_run(capsys, folder, *more: str) -> str:
    argv = ["slurm", "grpo", "--nodes", "2", "--gpus-per-node", "8", "--image", SIF, "--task", str(folder)]
    assert main([*argv, "--output-dir", str(folder.parent / "runs"), *more, "--dry-run"]) == 0
    return flat(capsys.readouterr().out)


def test_the_task_is_bound_read_only_and_named_to_every_trainer(shared_tmp, tmp_path, capsys):
    folder = scaffold(tmp_path / "task")
    text = dry_run(capsys, folder)
    assert text.count(f"--bind {folder}:{folder}:ro") == 2  # the server's srun and the trainers'
    assert f"train grpo --task {folder} --model Qwen/Qwen2.5-0.5B-Instruct" in text
    assert "serve-vllm --model Qwen/Qwen2.5-0.5B-Instruct" in text
    pyxis = dry_run(capsys, folder, "--runtime", "pyxis", "--image", "trlstack:latest")
    assert (
        f"--container-mounts={folder.parent}/runs,{folder.parent}/runs/cache:/cache,{folder}:{folder}:ro"
        in pyxis
    )


def test_a_task_s_model_folder_is_what_both_roles_load(shared_tmp, tmp_path, capsys):
    folder = scaffold(tmp_path / "task")
    (folder / "model").mkdir()
    for name in ("config.json", "tokenizer.json", "model.safetensors"):
        (folder / "model" / name).write_text("{}")
    config = folder / "config.yaml"
    config.write_text(config.read_text().replace("Qwen/Qwen2.5-0.5B-Instruct  #", "model  #"))
    text = dry_run(capsys, folder)
    assert f"serve-vllm --model {folder}/model" in text
    assert f"train grpo --task {folder} --model {folder}/model" in text


def test_a_broken_task_is_refused_on_the_submit_host_before_sbatch(shared_tmp, capsys, monkeypatch):
    folder = scaffold(shared_tmp / "task")
    (folder / "data.jsonl").write_text('{"question": "2 + 3?", "answer": 5}\n')
    monkeypatch.setenv("PATH", f"{make_stubs(shared_tmp)}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("STUB_DIR", str(shared_tmp))
    argv = ["slurm", "grpo", "--cpu", "--nodes", "2", "--runtime", "none", "--task", str(folder)]
    assert main([*argv, "--output-dir", str(shared_tmp / "runs"), "--submit"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("trlstack: error: task check: 1 problem(s), nothing was started:\n")
    assert "data.jsonl: no column prompt, which the grpo trainer reads" in err
    assert not (shared_tmp / "sbatch.jsonl").exists() and not (shared_tmp / "runs").exists()


def test_a_task_on_node_local_storage_is_refused(shared_tmp, capsys, monkeypatch):
    monkeypatch.setenv("PATH", f"{make_stubs(shared_tmp)}{os.pathsep}{os.environ['PATH']}")
    with tempfile.TemporaryDirectory(dir="/dev/shm") as local:
        folder = scaffold(Path(local) / "task")
        argv = ["slurm", "grpo", "--cpu", "--nodes", "2", "--runtime", "none", "--task", str(folder)]
        assert main([*argv, "--output-dir", str(shared_tmp / "runs"), "--submit"]) == 1
    assert f"--task {folder} is not shared between nodes (/dev/shm is local to each node)" in (
        capsys.readouterr().err
    )
