"""A task folder in the image, offline, on the CPU: `trlstack init`, `trlstack check-task`, then
`train --task` trains on it (each reward's mean in the log every step); a reward that raises ends the run
naming it, the step and the row, with the last finished step saved; every data format a task may hold is
checked and loaded; and what the check assumes of TRL (its built-in rewards' columns, what each trainer
passes a reward) is held to the installed TRL."""

from __future__ import annotations

import re
import subprocess

import pytest

pytestmark = pytest.mark.docker

TINY = "trlstack tiny /tmp/tiny >/dev/null 2>&1"
TRAIN = "train grpo --cpu --task /tmp/task --model /tmp/tiny/model --output-dir /tmp/out"
MEANS = re.compile(r"'rewards/(\w+)/mean': '([-0-9.e]+)'")


def in_image(
    image: str, script: str, timeout: float = 900, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`bash -c script` in a throwaway container of `image`, offline; `stdin` fed to it."""
    argv = ["docker", "run", "--rm", "-i", "--network", "none", "-e", "HF_HUB_OFFLINE=1", image]
    return subprocess.run(
        [*argv, "bash", "-c", script], capture_output=True, text=True, timeout=timeout, input=stdin
    )


def test_init_check_and_a_cpu_run_train_the_scaffold_with_each_reward_s_mean_per_step(trlstack_image):
    done = in_image(
        trlstack_image,
        f"set -e; {TINY}; trlstack init /tmp/task; trlstack check-task /tmp/task; "
        f"{TRAIN} -- --max_steps 3; ls /tmp/out",
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    assert "task /tmp/task (grpo): passed in " in output
    assert "train: task check: passed in " in output
    means = MEANS.findall(output)
    assert [name for name, _ in means] == ["correct_answer", "brevity"] * 3, means
    assert re.search(r"^checkpoint-3$", done.stdout, re.M), done.stdout[-2000:]


# Raises from step 3 on, in the last process only: with two, the other process scores its batch and waits in
# the collective that follows, so both must learn of it and save together.
RAISES_AT_STEP_3 = """
cat >> /tmp/task/rewards.py <<'EOF'


def late(completions, answer, trainer_state, **kwargs):
    import os

    last = int(os.environ.get("RANK", "0")) == int(os.environ.get("WORLD_SIZE", "1")) - 1
    if trainer_state.global_step >= 2 and last:
        raise ValueError(f"cannot score {answer[0]}")
    return [0.0] * len(completions)
EOF
sed -i 's/  - rewards.brevity/  - rewards.brevity\\n  - rewards.late/' /tmp/task/config.yaml
"""


@pytest.mark.parametrize("processes", [1, 2])
def test_a_reward_that_raises_ends_the_run_naming_it_after_the_last_finished_step_is_saved(
    trlstack_image, processes
):
    done = in_image(
        trlstack_image,
        f"{TINY}; trlstack init /tmp/task >/dev/null; {RAISES_AT_STEP_3}"
        "echo raise_line=$(grep -n 'raise ValueError' /tmp/task/rewards.py | cut -d: -f1); "
        f"{TRAIN} --num-processes {processes} -- --max_steps 5 --save_steps 100; echo exit=$?; "
        "grep -o '\"global_step\": [0-9]*' /tmp/out/checkpoint-2/trainer_state.json; ls /tmp/out",
    )
    output = done.stdout + done.stderr
    assert "exit=1" in done.stdout, output[-6000:]
    who = "process 1: " if processes == 2 else ""  # told by the process it raised in, once
    said = (
        rf"^train: {who}reward late raised ValueError: cannot score (-?\d+) \(rewards\.py:(\d+)\) at step 3 "
    )
    line = re.search(said + r"on prompt '[^']*', answer=(-?\d+), completion .*$", output, re.M)
    assert line, output[-6000:]
    assert line.group(1) == line.group(3)  # the row named is the row it raised on
    assert f"raise_line={line.group(2)}\n" in done.stdout, "the line of the raise in rewards.py"
    assert output.count("reward late raised") == 1
    assert "train: /tmp/out/checkpoint-2 (step 2, the last finished) is saved; fix the reward" in output
    assert '"global_step": 2' in done.stdout  # complete: trainer_state.json is written last
    assert "checkpoint-3" not in done.stdout
    assert "trl/trainer" not in output, "a traceback from inside TRL"


DATA_FORMATS = """
import datasets, json, os, shutil
rows = [json.loads(line) for line in open("/tmp/task/data.jsonl")]
flat = [{"prompt": row["prompt"][0]["content"], "answer": row["answer"]} for row in rows]
folder = "/tmp/task"
datasets.Dataset.from_list(rows).to_parquet(f"{folder}/data.parquet")
datasets.Dataset.from_list(flat).to_csv(f"{folder}/data.csv", index=False)
json.dump(rows, open(f"{folder}/data.json", "w"), indent=1)
datasets.Dataset.from_list(rows).save_to_disk(f"{folder}/saved")
datasets.DatasetDict({"mine": datasets.Dataset.from_list(rows)}).save_to_disk(f"{folder}/saved_dict")
"""


def test_every_data_format_a_task_may_hold_is_checked_and_trained_on(trlstack_image):
    checks = [
        f"sed -i 's#^dataset_name: .*#dataset_name: {name}#' /tmp/task/config.yaml && "
        f"echo '# {name}' && trlstack check-task /tmp/task"
        for name in ("data.parquet", "data.csv", "data.json", "saved")
    ]
    done = in_image(
        trlstack_image,
        f"set -e; {TINY}; trlstack init /tmp/task >/dev/null; python -c '{DATA_FORMATS}' >/dev/null 2>&1; "
        + "; ".join(checks)
        + "; sed -i 's#^dataset_name: .*#dataset_name: saved_dict\\ndataset_train_split: mine#' "
        "/tmp/task/config.yaml; trlstack check-task /tmp/task; "
        f"{TRAIN} -- --max_steps 1; ls /tmp/out",
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    for shown in ("data.parquet", "data.csv", "data.json", "saved/data-00000-of-00001.arrow"):
        assert f"data {shown} (columns answer, prompt)" in output, output[-4000:]
    assert "data saved_dict/mine/data-00000-of-00001.arrow (columns answer, prompt)" in output
    assert "train: data saved_dict (arrow, 1 file(s))" in output
    assert re.search(r"^checkpoint-1$", done.stdout, re.M), output[-4000:]


HELD_TO_TRL = """
import inspect
import trl.rewards
from trl import GRPOTrainer, RLOOTrainer
from trl.experimental.async_grpo import async_rollout_worker
from trl.experimental.online_dpo import OnlineDPOTrainer
from trlstack.recipes import RECIPES
from trlstack.run.reward_check import BUILT_IN

passed = {"prompts", "completions", "completion_ids", "log_extra"}
for name, columns in BUILT_IN.items():
    func = getattr(trl.rewards, name)
    if name == "get_soft_overlong_punishment":
        func = func(max_completion_len=16, soft_punish_cache=4)
    required = {
        p.name for p in inspect.signature(func).parameters.values()
        if p.default is p.empty and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    }
    assert required - passed == set(columns), (name, required)

sources = {
    "grpo": inspect.getsource(GRPOTrainer._calculate_rewards),
    "rloo": inspect.getsource(RLOOTrainer._calculate_rewards),
    "online-dpo": inspect.getsource(OnlineDPOTrainer._calculate_rewards_from_functions),
    "async-grpo": inspect.getsource(async_rollout_worker._AsyncRolloutLoop._score_group),
}
for recipe, source in sources.items():
    for key in ("trainer_state", "log_extra", "log_metric"):
        assert (key in RECIPES[recipe].reward_kwargs) == (f'reward_kwargs["{key}"]' in source), (recipe, key)
print("held")
"""


def test_what_the_check_assumes_of_trl_is_what_the_installed_trl_does(trlstack_image):
    done = in_image(trlstack_image, "TRL_EXPERIMENTAL_SILENCE=1 python -", timeout=300, stdin=HELD_TO_TRL)
    assert done.stdout.strip().endswith("held"), done.stdout[-2000:] + done.stderr[-4000:]
