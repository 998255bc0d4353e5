"""train --task DIR (TRLSTACK_TASK): the task's config is the run's, its paths reach the training processes
absolute and the folder is first on their PYTHONPATH; a broken task is refused before the server is waited
for, naming the fix, and nothing starts."""

from __future__ import annotations

import pytest
import yaml
from launch_harness import gpus
from trlstack.commands import init
from trlstack.roles import train


@pytest.fixture
def scaffold(tmp_path):
    folder = tmp_path / "task"
    folder.mkdir()
    for name, text in init.contents("grpo", folder).items():
        (folder / name).write_text(text)
    return folder


def test_the_task_s_config_rewards_and_data_reach_the_training_processes(
    run_dir, clean_env, machine, installed, exec_calls, vllm_server, scaffold, capsys
):
    machine(gpus(2))
    installed("accelerate")
    clean_env.setenv("TRLSTACK_VLLM_URL", vllm_server.url)
    clean_env.setenv("TRLSTACK_TASK", str(scaffold))
    clean_env.setenv("PYTHONPATH", "/opt/mine")
    with pytest.raises(exec_calls.Execd):
        train.main(["grpo", "--health-timeout", "30"])
    [(_, _, child_env)] = exec_calls
    assert child_env["PYTHONPATH"] == f"{scaffold}:/opt/mine"
    merged = yaml.safe_load((run_dir / "outputs/grpo/trlstack-grpo.yaml").read_text())
    assert merged["reward_funcs"] == ["rewards.correct_answer", "rewards.brevity"]
    assert merged.get("dataset_name") is None  # the task's data named by `datasets:` alone
    assert merged["datasets"] == [
        {"path": "json", "data_files": {"train": str(scaffold / "data.jsonl")}, "split": "train"}
    ]
    err = capsys.readouterr().err
    assert "train: task check: passed in " in err and "rewards rewards.correct_answer, rewards.brevity" in err
    assert err.index("task check: passed") < err.index("is healthy")


def test_a_broken_task_is_refused_before_the_server_is_waited_for(
    run_dir, clean_env, machine, installed, no_exec, vllm_server, scaffold, capsys
):
    machine(gpus(2))
    installed("accelerate")
    (scaffold / "rewards.py").write_text("def brevity(**kwargs):\n    return 1 / 0\n")
    clean_env.setenv("TRLSTACK_VLLM_URL", vllm_server.url)
    code = train.main(["grpo", "--task", str(scaffold)])
    err = capsys.readouterr().err
    assert code == 1
    assert "train: error: task check: 2 problem(s), nothing was started:" in err
    assert "rewards.py: reward rewards.correct_answer: rewards has no function correct_answer" in err
    assert "rewards.py:2: reward rewards.brevity raised ZeroDivisionError: division by zero" in err
    assert vllm_server.requests == []  # not waited for
    assert not (run_dir / "outputs").exists()


def test_trlstack_config_wins_over_the_task_s_own(
    run_dir, clean_env, machine, installed, exec_calls, scaffold, capsys
):
    mine = run_dir / "mine.yaml"
    mine.write_text(
        (scaffold / "config.yaml").read_text().replace("learning_rate: 1.0e-6", "learning_rate: 0.5")
    )
    installed("accelerate")
    clean_env.setenv("TRLSTACK_CONFIG", str(mine))
    with pytest.raises(exec_calls.Execd):
        train.main(["grpo", "--task", str(scaffold), "--cpu", "--model", "m"])
    merged = yaml.safe_load((run_dir / "outputs/grpo/trlstack-grpo.yaml").read_text())
    assert merged["learning_rate"] == 0.5
    assert merged["datasets"][0]["data_files"] == {"train": str(scaffold / "data.jsonl")}  # the task's paths
