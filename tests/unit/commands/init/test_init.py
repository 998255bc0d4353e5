"""`trlstack init DIR --recipe R`: a task that trains as it is, written only into a new or empty folder."""

from __future__ import annotations

import pytest
from cli_runs import run
from trlstack.commands import init
from trlstack.recipes import RECIPES


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_init_writes_a_task_for_the_recipe_that_check_task_passes(tmp_path, capsys, recipe):
    folder = tmp_path / "new" / "task"
    code, out, err = run(capsys, "init", str(folder), "--recipe", recipe)
    assert (code, err) == (0, "")
    assert sorted(path.name for path in folder.iterdir()) == [
        "README.md",
        "config.yaml",
        "data.jsonl",
        "rewards.py",
    ]
    assert f"trlstack check-task {folder} --recipe {recipe}" in out
    readme = (folder / "README.md").read_text()
    assert f"TRLSTACK_TASK={folder} docker compose up {recipe}" in readme
    assert len(readme.splitlines()) <= 30  # a screen
    assert "  - rewards.correct_answer\n  - rewards.brevity\n" in (folder / "config.yaml").read_text()

    code, out, err = run(capsys, "check-task", str(folder), "--recipe", recipe)
    assert (code, err) == (0, "")
    assert out.startswith(f"task {folder} ({recipe}): passed in ")


def test_init_defaults_to_grpo_and_takes_an_empty_folder(tmp_path, capsys):
    (tmp_path / "t").mkdir()
    assert run(capsys, "init", str(tmp_path / "t"))[0] == 0
    assert "grpo recipe" in (tmp_path / "t" / "config.yaml").read_text()


def test_init_refuses_a_folder_that_holds_anything_and_touches_nothing(tmp_path, capsys):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "mine.txt").write_text("keep")
    code, out, err = run(capsys, "init", str(tmp_path / "t"))
    assert code == 1 and out == ""
    refusal = "is not empty; name a new or empty folder for the task (nothing in it was touched).\n"
    assert err == f"trlstack: error: {tmp_path / 't'} {refusal}"
    assert [path.name for path in (tmp_path / "t").iterdir()] == ["mine.txt"]
    (tmp_path / "f").write_text("")
    assert "is a file" in run(capsys, "init", str(tmp_path / "f"))[2]


def test_init_refuses_a_recipe_it_does_not_know(tmp_path, capsys):
    code, _, err = run(capsys, "init", str(tmp_path / "t"), "--recipe", "ppo")
    assert code == 1 and "invalid choice: 'ppo'" in err and not (tmp_path / "t").exists()


def test_init_refuses_a_folder_it_cannot_make_naming_why(tmp_path, capsys):
    (tmp_path / "f").write_text("mine")
    code, out, err = run(capsys, "init", str(tmp_path / "f" / "task"))
    assert code == 1 and out == ""
    assert f"cannot make {tmp_path / 'f' / 'task'} (Not a directory); name a folder you can write." in err
    assert (tmp_path / "f").read_text() == "mine"


def test_the_readme_names_the_folder_and_the_recipe_it_was_written_for(tmp_path):
    found = init.contents("rloo", tmp_path / "t")
    assert list(found) == init.contents_names() == ["config.yaml", "rewards.py", "data.jsonl", "README.md"]
    assert f"trlstack check-task {tmp_path / 't'} --recipe rloo" in found["README.md"]
    assert "{" not in found["README.md"]  # every placeholder filled
    assert found["config.yaml"].startswith("# This task's run for the rloo recipe")
