"""trlstack slurm's command line: --dry-run, the roles' settings as the roles declare them, and bad input
refused with the fix (the run folder on the submit host: test_run_folder.py; the script written and
submitted: test_delivery.py)."""

from __future__ import annotations

import os

import pytest
from trlstack.cli import main

from .harness import SIF, flat, make_stubs, script


def test_dry_run_prints_the_script_and_writes_nothing(shared_tmp, capsys):
    tmp_path = shared_tmp  # under /tmp, which a dry run refuses as writing does
    out = tmp_path / "runs"
    argv = ["slurm", "grpo", "--nodes", "4", "--gpus-per-node", "8", "--image", SIF, "--output-dir", str(out)]
    assert main([*argv, "--dry-run", "--", "--max_steps", "5"]) == 0
    text = capsys.readouterr().out
    assert text == script(nodes=4, output_dir=str(out), train_args=("--max_steps", "5"))
    assert not out.exists()


def test_the_model_defaults_to_the_config_one_for_both_roles(shared_tmp, capsys):
    tmp_path = shared_tmp  # under /tmp, which a dry run refuses as writing does
    config = tmp_path / "mine.yaml"
    config.write_text("model_name_or_path: org/other\ndataset_name: d\nreward_funcs: [accuracy_reward]\n")
    argv = ["slurm", "grpo", "--nodes", "2", "--gpus-per-node", "4", "--image", SIF, "--config", str(config)]
    assert main([*argv, "--output-dir", str(tmp_path), "--dry-run"]) == 0
    text = flat(capsys.readouterr().out)
    assert "serve-vllm --model org/other" in text
    assert f"train grpo --config {config} --model org/other" in text


def test_the_roles_settings_are_taken_as_the_roles_declare_them(shared_tmp, capsys, monkeypatch):
    tmp_path = shared_tmp  # under /tmp, which a dry run refuses as writing does
    # serve-vllm's and train's flags and variables, and the ports as `trlstack plan` and `train` take them.
    monkeypatch.setenv("TRLSTACK_VLLM_PORT", "8100")
    monkeypatch.setenv("TRLSTACK_MAIN_PROCESS_PORT", "29600")
    monkeypatch.setenv("TRLSTACK_MODEL", "org/from-env")
    argv = ["slurm", "grpo", "--nodes", "2", "--gpus-per-node", "8", "--image", SIF]
    argv += ["--output-dir", str(tmp_path), "--gpu-memory-utilization", "0.8", "--max-model-len", "4096"]
    assert main([*argv, "--dtype", "bfloat16", "--allow-public-bind", "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "VLLM_PORT=8100\nGROUP_PORT=51216\nMAIN_PORT=29600\n" in text
    assert (
        'serve-vllm --model org/from-env --host "$SERVER_ADDR" --port "$VLLM_PORT" --tensor-parallel-size 1 '
        "--data-parallel-size 8 --gpu-memory-utilization 0.8 --max-model-len 4096 --dtype bfloat16 "
        "--allow-public-bind 2>&1" in flat(text)
    )
    assert "train grpo --model org/from-env" in flat(text)


DRY_REFUSED = [
    (["--output-dir", "/tmp/runs"], "--output-dir /tmp/runs is not shared between nodes (/tmp is local"),
    (["--output-dir", "/dev/shm/r"], "/dev/shm is local to each node"),
    (["--cache-dir", "/run/cache"], "--cache-dir /run/cache is not shared between nodes"),
    (["-o", "."], "--output . is a directory; name a file such as"),
]


@pytest.mark.parametrize(("argv", "message"), DRY_REFUSED, ids=[message[:30] for _, message in DRY_REFUSED])
@pytest.mark.parametrize("mode", ["--dry-run", "--submit"])
def test_a_dry_run_refuses_the_folders_that_writing_refuses(submit_host, capsys, argv, message, mode):
    tmp_path, base = submit_host
    argv = [*base, "--output-dir", str(tmp_path / "runs"), *argv, mode]
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert message in captured.err and not captured.out
    assert not (tmp_path / "sbatch.jsonl").exists()


BAD = [
    (["--nodes", "1", "--gpus-per-node", "8"], "--nodes 1: a Slurm run spans at least 2 nodes"),
    (
        ["--nodes", "2", "--serve-nodes", "2", "--gpus-per-node", "8"],
        "--serve-nodes 2 with --nodes 2 leaves no",
    ),
    (["--nodes", "4", "--serve-nodes", "2", "--gpus-per-node", "8"], "one vLLM server node is supported"),
    (
        ["--nodes", "2", "--gpus-per-node", "8", "--tensor-parallel-size", "3"],
        "does not divide the 8 serving",
    ),
    (
        ["--nodes", "2", "--gpus-per-node", "8", "--tensor-parallel-size", "4", "--num-heads", "14"],
        "does not divide the model's 14 attention heads; choose one of 1, 2",
    ),
    (["--nodes", "2"], "name the GPUs of each node: --gpus-per-node G"),
    (["--nodes", "2", "--cpu", "--gpus-per-node", "8"], "--cpu requests no GPUs"),
    (["--nodes", "2", "--gpus-per-node", "0"], "0 is not a positive whole number"),
    (["--nodes", "2", "--gpus-per-node", "8", "--runtime", "pyxis"], "--runtime pyxis needs --image"),
    (["--nodes", "2", "--gpus-per-node", "8", "--image", "x.sqsh"], "--runtime apptainer runs a .sif file"),
    (["--nodes", "2", "--gpus-per-node", "8", "--runtime", "docker"], "invalid choice: 'docker'"),
    (["--nodes", "2", "--gpus-per-node", "8", "--port", "29500"], "--port and --main-process-port are both"),
    (["--nodes", "2", "--gpus-per-node", "8", "--network-interface", "eth0;rm"], "is not an interface name"),
    (["--nodes", "2", "--gpus-per-node", "8", "--stop-grace", "5"], "at least 30 s to write a checkpoint"),
    # What sbatch itself would refuse at submit, refused before anything is written, naming the forms.
    (
        ["--nodes", "2", "--gpus-per-node", "8", "--time", "25h"],
        "argument --time: '25h' is not a Slurm time limit; give minutes (90), MM:SS, HH:MM:SS (24:00:00), "
        "D-HH, D-HH:MM, D-HH:MM:SS (1-12:00:00) or UNLIMITED",
    ),
    (["--nodes", "2", "--gpus-per-node", "8", "--time", "4"], "--time 4 is 240 s, no more than --stop-grace"),
    (["--nodes", "2", "--gpus-per-node", "8", "--partition", "gpu debug"], "is not a Slurm partition"),
    (["--nodes", "2", "--gpus-per-node", "8", "--account", "a,b"], "'a,b' is not a Slurm account"),
    (["--nodes", "2", "--gpus-per-node", "8", "--job-name", "../x"], "'../x' is not a Slurm job name; give"),
    (["--nodes", "2", "--gpus-per-node", "8", "--job-name", "r%j"], "'r%j' is not a Slurm job name"),
    (["--nodes", "2", "--gpus-per-node", "8", "--", "--output_dir", "/x"], "--output_dir after `--`"),
    (["--nodes", "2", "--gpus-per-node", "8", "--", "--machine_rank", "1"], "no option --machine_rank"),
    # The guards of train and serve-vllm by meaning, before anything is queued: any spelling TRL's and
    # vLLM's parsers accept.
    (["--nodes", "2", "--gpus-per-node", "8", "--", "--output-d=/x"], "reads it as --output-dir"),
    (["--nodes", "2", "--gpus-per-node", "8", "--", "--vllm_mod", "colocate"], "use --serve-nodes 0"),
    (["--nodes", "2", "--gpus-per-node", "8", "--", "--vllm-server-base", "x"], "points every trainer"),
    (["--nodes", "2", "--gpus-per-node", "8", "--", "--learnig_rate", "1"], "did you mean --learning_rate"),
    (["--nodes", "2", "--gpus-per-node", "8", "--vllm-args", "--host 0.0.0.0"], "--host in --vllm-args"),
    (["--nodes", "2", "--gpus-per-node", "8", "--vllm-args=--host=::"], "binds the server node's"),
    (["--nodes", "2", "--gpus-per-node", "8", "--vllm-args", "--ho ::ffff:0.0.0.0"], "reads it as --host"),
    (["--nodes", "2", "--gpus-per-node", "8", "--vllm-args=--port=9"], "use trlstack slurm's --port"),
    (
        ["--nodes", "2", "--gpus-per-node", "8", "--vllm-args=--weight_transfer_config.backend=gloo"],
        "TRL needs the value serve-vllm sets",
    ),
    (["--nodes", "2", "--gpus-per-node", "8", "--vllm-args", "--max_model_len 9"], "--max-model-len"),
    (["--nodes", "2", "--serve-nodes", "0", "--gpus-per-node", "8", "--vllm-args=-O3"], "there is none"),
    (["--nodes", "2", "--gpus-per-node", "8", "--gpu-memory-utilization", "2"], "not a fraction"),
    (["--nodes", "2", "--gpus-per-node", "8", "--vllm-args", "'unclosed"], "No closing quotation"),
    (["--nodes", "2", "--gpus-per-node", "8", "--config", "absent.yaml"], "absent.yaml does not exist"),
    (["--nodes", "2", "--gpus-per-node", "8", "--dry-run", "--submit"], "not allowed with argument"),
    (["--nodes", "2", "--gpus-per-node", "8", "--resume", "--fresh"], "choose one"),
    (
        ["--nodes", "2", "--gpus-per-node", "8", "--image", "/nowhere/x.sif"],
        "--image /nowhere/x.sif does not exist",
    ),
    (["--nodes", "2", "--gpus-per-node", "8", "--output-dir", "/tmp/runs"], "is not shared between nodes"),
    (["--nodes", "2", "--gpus-per-node", "8", "-o", "."], "--output . is a directory; name a file such as"),
    (
        ["--nodes", "2", "--gpus-per-node", "8", "--output-dir", "/dev/shm/r"],
        "/dev/shm is local to each node",
    ),
]


@pytest.mark.parametrize(("argv", "message"), BAD, ids=[message[:40] for _, message in BAD])
def test_bad_input_exits_1_with_the_fix_and_submits_nothing(shared_tmp, monkeypatch, capsys, argv, message):
    tmp_path = shared_tmp
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"{make_stubs(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("STUB_DIR", str(tmp_path))
    (tmp_path / "bin" / "apptainer").write_text("#!/bin/sh\nexit 0\n")
    (tmp_path / "bin" / "apptainer").chmod(0o755)
    own, extra = (argv[: argv.index("--")], argv[argv.index("--") :]) if "--" in argv else (argv, [])
    if "--output-dir" not in own:
        own = [*own, "--output-dir", str(tmp_path / "runs")]
    if "--image" not in own and "--runtime" not in own:
        sif = tmp_path / "trlstack.sif"
        sif.write_bytes(b"")
        own = [*own, "--image", str(sif)]
    if "--dry-run" not in own:
        own = [*own, "--submit"]
    argv = [*own, *extra]
    assert main(["slurm", "grpo", *argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith("trlstack: error: "), err
    assert message in err
    assert not (tmp_path / "sbatch.jsonl").exists()
    assert not (tmp_path / "runs").exists()
