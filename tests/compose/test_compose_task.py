"""`docker compose up grpo` with TRLSTACK_TASK: the CPU smoke stack trains on a task folder `trlstack init`
wrote (its config, its rewards, its data; the tiny model in place of the Hub's), mounted read-only at /task;
a broken task is refused by the task check before anything heavy starts, naming the fix."""

from __future__ import annotations

import yaml
from test_smoke import complete_checkpoints, container, outputs_folder, smoke_stack
from trlstack.cli import main as trlstack_main


def task_stack(project, image, tmp_path):
    folder = tmp_path / "task"
    assert trlstack_main(["init", str(folder)]) == 0
    outputs = outputs_folder(tmp_path)
    # The task's data and rewards, not the smoke's own (SMOKE_DATASET, SMOKE_REWARD_MODEL set empty).
    compose = smoke_stack(
        project, image, outputs, SMOKE_STEPS="2", TRLSTACK_TASK=str(folder), SMOKE_DATASET="",
        SMOKE_REWARD_MODEL="",
    )  # fmt: skip
    return compose, folder, outputs / "grpo"


def test_compose_up_trains_on_the_task_folder(project, trlstack_image, tmp_path):
    compose, folder, run = task_stack(project, trlstack_image, tmp_path)
    before = {path.name: path.read_bytes() for path in folder.iterdir()}
    compose.run("up", "grpo", timeout=900)
    logs = compose.run("logs", "--no-log-prefix", "grpo").stdout
    assert container(f"{compose.project}-grpo-1")["State"]["ExitCode"] == 0, logs[-4000:]
    assert "train: task /task: rewards imported from it" in logs
    assert "train: task check: passed in " in logs
    assert logs.count("'rewards/correct_answer/mean'") == 2 and logs.count("'rewards/brevity/mean'") == 2
    merged = yaml.safe_load((run / "trlstack-grpo.yaml").read_text())
    assert merged["datasets"][0]["data_files"] == {"train": "/task/data.jsonl"}
    assert merged["reward_funcs"] == ["rewards.correct_answer", "rewards.brevity"]
    assert sorted(complete_checkpoints(run)) == [1, 2]
    assert {path.name: path.read_bytes() for path in folder.iterdir()} == before  # read-only, untouched


def test_a_broken_task_is_refused_before_training_naming_the_fix(project, trlstack_image, tmp_path):
    compose, folder, run = task_stack(project, trlstack_image, tmp_path)
    rewards = folder / "rewards.py"
    rewards.write_text(
        rewards.read_text().replace("def brevity(completions", "def brevity(completions, rubric")
    )
    done = compose.run("up", "grpo", timeout=900, check=False)
    logs = compose.run("logs", "--no-log-prefix", "grpo").stdout
    assert container(f"{compose.project}-grpo-1")["State"]["ExitCode"] == 1, done.stderr[-3000:]
    assert "train: error: task check: 1 problem(s), nothing was started:" in logs
    assert "reward rewards.brevity needs the column rubric, which the data lacks" in logs
    assert "Traceback" not in logs and not run.exists()
