"""trlstack.roles.train.preflight, through train's main: the served model checked against the trained one,
and another run in the output folder refused, continued (--resume) or moved aside (--fresh)."""

from __future__ import annotations

import pytest
import yaml
from launch_harness import gpus
from trlstack.roles import train


def serving(vllm_server, model):
    import json

    config = {"weight_transfer_config": {"backend": "nccl"}, "model_config": {"model": model}}
    vllm_server.server_info = (200, json.dumps({"vllm_config": config}).encode())


def test_a_different_served_model_is_refused_before_training_starts(
    run_dir, clean_env, machine, installed, no_exec, vllm_server, capsys
):
    machine(gpus(2))
    installed("accelerate")
    serving(vllm_server, "org/other")
    clean_env.setenv("TRLSTACK_VLLM_URL", vllm_server.url)
    assert train.main(["grpo", "--model", "org/mine"]) == 1
    err = capsys.readouterr().err
    assert (
        f"train: error: the vLLM server at {vllm_server.url} serves org/other, but this run trains org/mine"
        in err
    )
    assert "TRL's first weight sync would fail" in err and "--allow-other-served-model" in err
    assert not (run_dir / "outputs").exists()


@pytest.mark.parametrize("allow", [["--allow-other-served-model"], ["--allow-other"]])
def test_the_flag_or_its_variable_lets_an_intended_other_name_through(
    run_dir, clean_env, machine, installed, exec_calls, vllm_server, capsys, allow
):
    machine(gpus(2))
    installed("accelerate")
    serving(vllm_server, "/models/my-copy")
    clean_env.setenv("TRLSTACK_VLLM_URL", vllm_server.url)
    with pytest.raises(exec_calls.Execd):
        train.main(["grpo", "--model", "org/mine", *allow])
    assert "serves /models/my-copy and this run trains org/mine: allowed by --allow-other-served-model" in (
        capsys.readouterr().err
    )
    clean_env.setenv("TRLSTACK_ALLOW_OTHER_SERVED_MODEL", "1")
    with pytest.raises(exec_calls.Execd):
        train.main(["grpo", "--model", "org/mine"])


def test_a_local_copy_of_the_trained_model_is_recognised(
    run_dir, clean_env, machine, installed, exec_calls, vllm_server, capsys
):
    import json

    for name in ("served", "trained"):
        (run_dir / name).mkdir()
        (run_dir / name / "config.json").write_text(json.dumps({"model_type": "qwen2", "hidden_size": 8}))
        for part in ("tokenizer.json", "model.safetensors"):  # what train's task check looks for
            (run_dir / name / part).write_text("{}")
    machine(gpus(2))
    installed("accelerate")
    serving(vllm_server, str(run_dir / "served"))
    clean_env.setenv("TRLSTACK_VLLM_URL", vllm_server.url)
    with pytest.raises(exec_calls.Execd):
        train.main(["grpo", "--model", str(run_dir / "trained")])
    assert "their config.json files agree on the architecture and every size" in capsys.readouterr().err


def previous_cpu_run(run_dir, capsys, installed, exec_calls, *argv):
    """outputs/grpo as a --cpu run on model m and data d left it: its merged config and checkpoint-3."""
    installed("accelerate")
    with pytest.raises(exec_calls.Execd):
        train.main(["grpo", "--cpu", "--model", "m", "--dataset", "d", *argv])
    output = run_dir / "outputs/grpo"
    (output / "checkpoint-3").mkdir()
    (output / "checkpoint-3" / "trainer_state.json").write_text("{}")
    exec_calls.clear()
    capsys.readouterr()
    return output


def test_another_run_in_the_output_folder_is_refused_with_the_difference(
    run_dir, installed, exec_calls, capsys
):
    output = previous_cpu_run(run_dir, capsys, installed, exec_calls)
    merged = (output / "trlstack-grpo.yaml").read_text()
    assert train.main(["grpo", "--cpu", "--model", "m", "--dataset", "other"]) == 1
    err = capsys.readouterr().err
    assert "train: error: outputs/grpo holds another run than this one" in err
    assert "    dataset_name: d -> other\n" in err
    assert "--fresh (TRLSTACK_FRESH=1): move it aside to outputs/grpo." in err
    assert "--resume (TRLSTACK_RESUME=1): continue it anyway" in err
    assert not exec_calls and (output / "trlstack-grpo.yaml").read_text() == merged


def test_the_same_run_with_more_steps_resumes_without_asking(run_dir, installed, exec_calls, capsys):
    previous_cpu_run(run_dir, capsys, installed, exec_calls)
    with pytest.raises(exec_calls.Execd):
        train.main(["grpo", "--cpu", "--model", "m", "--dataset", "d", "--", "--max_steps", "9"])
    assert "resuming from outputs/grpo/checkpoint-3" in capsys.readouterr().err


def test_resume_continues_another_run_when_asked(run_dir, clean_env, installed, exec_calls, capsys):
    previous_cpu_run(run_dir, capsys, installed, exec_calls)
    clean_env.setenv("TRLSTACK_RESUME", "1")  # as compose passes it from .env
    with pytest.raises(exec_calls.Execd):
        train.main(["grpo", "--cpu", "--model", "m", "--dataset", "other"])
    err = capsys.readouterr().err
    assert (
        "continuing the run in outputs/grpo although it differs (--resume): dataset_name: d -> other" in err
    )
    assert "resuming from outputs/grpo/checkpoint-3" in err


def test_fresh_moves_another_run_aside_and_starts_anew(run_dir, installed, exec_calls, capsys):
    previous_cpu_run(run_dir, capsys, installed, exec_calls)
    with pytest.raises(exec_calls.Execd):
        train.main(["grpo", "--cpu", "--model", "m", "--dataset", "other", "--fresh"])
    err = capsys.readouterr().err
    (aside,) = (run_dir / "outputs").glob("grpo.*")
    assert f"moved outputs/grpo to outputs/{aside.name}; nothing in it was changed or deleted" in err
    assert (aside / "checkpoint-3" / "trainer_state.json").is_file()
    assert yaml.safe_load((aside / "trlstack-grpo.yaml").read_text())["dataset_name"] == "d"
    merged = yaml.safe_load((run_dir / "outputs/grpo/trlstack-grpo.yaml").read_text())
    assert merged["dataset_name"] == "other" and "resume_from_checkpoint" not in merged
    assert "resuming" not in err
    # Left set (in .env, say), --fresh does nothing more once the folder holds this run: restarts resume.
    (run_dir / "outputs/grpo/checkpoint-1").mkdir()
    (run_dir / "outputs/grpo/checkpoint-1/trainer_state.json").write_text("{}")
    with pytest.raises(exec_calls.Execd):
        train.main(["grpo", "--cpu", "--model", "m", "--dataset", "other", "--fresh"])
    assert "resuming from outputs/grpo/checkpoint-1" in capsys.readouterr().err
    assert len(list((run_dir / "outputs").glob("grpo.*"))) == 1
