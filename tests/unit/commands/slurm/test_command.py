"""trlstack slurm's command line: --dry-run, --submit, the roles' settings as the roles declare them, the
run folder decided on the submit host, and bad input refused with the fix."""

from __future__ import annotations

import json
import os
from pathlib import Path

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


def test_submit_writes_the_script_beside_the_outputs_and_prints_the_job_id(shared_tmp, capsys, monkeypatch):
    tmp_path = shared_tmp
    monkeypatch.setenv("PATH", f"{make_stubs(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("STUB_DIR", str(tmp_path))
    monkeypatch.setenv("STUB_NODES", "")
    monkeypatch.setenv("STUB_ADDRS", "")
    out = tmp_path / "runs"
    argv = ["slurm", "grpo", "--cpu", "--nodes", "2", "--runtime", "none", "--output-dir", str(out)]
    assert main([*argv, "--submit"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "4242\n"
    assert f"watch: squeue -j 4242; tail -f {out}/trlstack-grpo-4242.out" in captured.err
    script = out / "trlstack-grpo.sbatch"
    assert json.loads((tmp_path / "sbatch.jsonl").read_text()) == {"argv": ["--parsable", str(script)]}
    assert script.read_text().startswith("#!/bin/bash\n# trlstack slurm grpo")


def previous_run(run_dir: Path, model: str) -> None:
    """A run train left: its merged config and a checkpoint."""
    (run_dir / "checkpoint-3").mkdir(parents=True)
    config = {"model_name_or_path": model, "dataset_name": "d", "reward_funcs": ["accuracy_reward"]}
    (run_dir / "trlstack-grpo.yaml").write_text(json.dumps(config))


@pytest.fixture
def submit_host(shared_tmp, monkeypatch):
    """`sbatch` stand-in on PATH, the test's folder as shared storage."""
    monkeypatch.setenv("PATH", f"{make_stubs(shared_tmp)}{os.pathsep}{os.environ['PATH']}")
    for name, value in (("STUB_DIR", str(shared_tmp)), ("STUB_NODES", ""), ("STUB_ADDRS", "")):
        monkeypatch.setenv(name, value)
    config = shared_tmp / "mine.yaml"
    config.write_text("model_name_or_path: org/new\ndataset_name: d\nreward_funcs: [accuracy_reward]\n")
    return shared_tmp, ["slurm", "grpo", "--nodes", "2", "--gpus-per-node", "8", "--runtime", "none"]


def test_another_run_in_the_run_folder_is_refused_before_submitting(submit_host, capsys):
    tmp_path, argv = submit_host
    previous_run(tmp_path / "runs" / "grpo", "org/old")
    argv += ["--config", str(tmp_path / "mine.yaml"), "--output-dir", str(tmp_path / "runs"), "--submit"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path}/runs/grpo holds another run than this one" in err
    assert "model_name_or_path: org/old -> org/new" in err
    assert "--fresh (TRLSTACK_FRESH=1): move it aside" in err and "--resume (TRLSTACK_RESUME=1)" in err
    assert not (tmp_path / "sbatch.jsonl").exists()


@pytest.mark.parametrize("choice", [[], ["--fresh"]])
def test_a_dry_run_refuses_another_run_as_writing_does_and_moves_nothing(submit_host, capsys, choice):
    tmp_path, argv = submit_host
    previous_run(tmp_path / "runs" / "grpo", "org/old")
    argv += ["--config", str(tmp_path / "mine.yaml"), "--output-dir", str(tmp_path / "runs"), "--dry-run"]
    assert main([*argv, *choice]) == (0 if choice else 1)
    captured = capsys.readouterr()
    if choice:
        assert captured.out.startswith("#!/bin/bash") and "stays where it is" in captured.err
    else:
        assert "holds another run than this one" in captured.err and not captured.out
    assert (tmp_path / "runs" / "grpo" / "checkpoint-3").is_dir()  # nothing moved
    assert sorted(path.name for path in (tmp_path / "runs").iterdir()) == ["grpo"]


def test_shared_storage_without_room_for_one_checkpoint_is_refused_before_queueing(
    submit_host, capsys, monkeypatch
):
    from trlstack.run import space

    tmp_path, argv = submit_host
    model = tmp_path / "tiny"
    model.mkdir()
    tiny = {"model_type": "qwen2", "vocab_size": 490, "hidden_size": 128, "intermediate_size": 256}
    tiny |= {"num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1}
    (model / "config.json").write_text(json.dumps({**tiny, "tie_word_embeddings": True}))
    monkeypatch.setattr(space, "free_space", lambda folder: 3_100_000)  # the disk is the boundary here
    argv += ["--model", str(model), "--output-dir", str(tmp_path / "runs"), "--submit"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert (
        f"{tmp_path}/runs/grpo has 3.1 MB free, and one checkpoint of this run takes at least 4.3 MB" in err
    )
    assert "choose another --output-dir on a disk with room" in err
    assert not (tmp_path / "sbatch.jsonl").exists() and not (tmp_path / "runs").exists()
    # A model this host has not cached: said, and queued (each trainer checks again before it starts).
    argv[argv.index("--model") + 1] = "org/not-cached-here"
    assert main(argv) == 0
    assert "cannot tell how much room a checkpoint needs" in capsys.readouterr().err


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


def test_fresh_moves_the_other_run_aside_once_on_the_submit_host(submit_host, capsys):
    tmp_path, argv = submit_host
    previous_run(tmp_path / "runs" / "grpo", "org/old")
    argv += ["--config", str(tmp_path / "mine.yaml"), "--output-dir", str(tmp_path / "runs"), "--submit"]
    assert main([*argv, "--fresh"]) == 0
    aside = [path for path in (tmp_path / "runs").iterdir() if path.name.startswith("grpo.")]
    assert len(aside) == 1 and (aside[0] / "checkpoint-3").is_dir()
    assert not (tmp_path / "runs" / "grpo").exists()
    assert f"moved {tmp_path}/runs/grpo to {aside[0]}; nothing in it was changed or deleted" in (
        capsys.readouterr().err
    )
    # The trainers never move it again, whatever the submitting shell exported.
    script = (tmp_path / "runs" / "trlstack-grpo.sbatch").read_text()
    assert "TRLSTACK_FRESH= " in script and " --resume" not in script


def test_resume_lets_the_trainers_continue_the_other_run(submit_host, capsys):
    tmp_path, argv = submit_host
    previous_run(tmp_path / "runs" / "grpo", "org/old")
    argv += ["--config", str(tmp_path / "mine.yaml"), "--output-dir", str(tmp_path / "runs"), "--submit"]
    assert main([*argv, "--resume"]) == 0
    assert "continuing the run in" in capsys.readouterr().err
    assert (tmp_path / "runs" / "grpo" / "checkpoint-3").is_dir()
    script = flat((tmp_path / "runs" / "trlstack-grpo.sbatch").read_text())
    assert '--output-dir "$RUN_DIR" --resume --vllm-url' in script


def test_the_same_run_is_resumed_without_a_word(submit_host, capsys):
    tmp_path, argv = submit_host
    previous_run(tmp_path / "runs" / "grpo", "org/new")
    argv += ["--config", str(tmp_path / "mine.yaml"), "--output-dir", str(tmp_path / "runs"), "--submit"]
    assert main(argv) == 0
    assert (tmp_path / "runs" / "grpo" / "checkpoint-3").is_dir()


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
