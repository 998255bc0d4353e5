"""`trlstack check-task DIR [--recipe R]`: exit 0 with what was checked, or 1 naming every problem."""

from __future__ import annotations

from cli_runs import run


def test_a_broken_task_exits_1_naming_each_problem(tmp_path, capsys):
    folder = tmp_path / "t"
    assert run(capsys, "init", str(folder))[0] == 0
    capsys.readouterr()
    (folder / "rewards.py").write_text(
        (folder / "rewards.py").read_text().replace("def brevity", "def brevity_score")
    )
    code, out, err = run(capsys, "check-task", str(folder))
    assert code == 1 and out == ""
    assert err.startswith(f"trlstack: error: task {folder} (grpo): 1 problem(s), nothing was started:\n")
    assert "  - rewards.py: reward rewards.brevity: rewards has no function brevity; did you mean " in err
    assert "rewards.brevity_score? name one of its functions (brevity_score, correct_answer, text)." in err


def test_the_recipe_decides_the_keys_a_config_may_hold(tmp_path, capsys):
    folder = tmp_path / "t"
    run(capsys, "init", str(folder), "--recipe", "online-dpo")
    code, _, err = run(capsys, "check-task", str(folder), "--recipe", "grpo")
    assert code == 1 and "keys the grpo script does not accept: max_length" in err


def test_a_folder_that_is_not_a_task_is_named_with_the_fix(tmp_path, capsys):
    code, _, err = run(capsys, "check-task", str(tmp_path / "nowhere"))
    assert code == 1 and "does not exist" in err and "trlstack init" in err
    assert "DIR must name a folder" in err and "--task" not in err  # check-task takes the folder as DIR
    (tmp_path / "empty").mkdir()
    code, _, err = run(capsys, "check-task", str(tmp_path / "empty"))
    assert code == 1 and "has no config.yaml" in err
