"""run/model_check.py: each local model folder a task's config names (the model, a reward model) holds what
loading it needs: its config, a tokenizer and the weights; a name that is no path is left to the Hub. Each
problem names the folder and how to save what it lacks."""

from __future__ import annotations

from pathlib import Path

from task_harness import edit_config, problems, scaffold
from trlstack.recipes import RECIPES
from trlstack.run.model_check import check_models
from trlstack.run.task_report import Report, Task


def test_a_model_folder_without_a_tokenizer_is_refused(tmp_path):
    root = scaffold(tmp_path / "t")
    (root / "model").mkdir()
    (root / "model" / "config.json").write_text("{}")
    (root / "model" / "model.safetensors").write_bytes(b"")
    edit_config(root, "model_name_or_path: Qwen/Qwen2.5-0.5B-Instruct", "model_name_or_path: model")
    (found,) = problems(root)
    assert found.startswith("model: no tokenizer (tokenizer.json or tokenizer_config.json); save it beside")


def checked(root: Path, **config: str) -> Report:
    report = Report()
    check_models(Task(config, RECIPES["grpo"], "config.yaml", root), report)
    return report


def model_folder(path: Path, *files: str) -> Path:
    path.mkdir(parents=True)
    for name in files:
        (path / name).write_text("{}")
    return path


def test_a_complete_folder_passes_and_a_hub_name_is_left_to_the_hub(tmp_path):
    model_folder(tmp_path / "model", "config.json", "tokenizer_config.json", "model-00001.safetensors")
    report = checked(tmp_path, model_name_or_path="model", reward_model_name_or_path="org/judge")
    assert report.problems == []
    assert report.checked == [
        "model_name_or_path model (config, tokenizer, weights)",
        "reward_model_name_or_path org/judge is not local: loaded when the run starts",
    ]


def test_a_path_that_does_not_exist_is_refused_with_the_fix(tmp_path):
    (problem,) = checked(tmp_path, model_name_or_path="./gone").problems
    assert str(problem) == (
        "config.yaml: model_name_or_path: model folder ./gone does not exist; fix the path (relative to the "
        "task folder), or name a model on the Hub."
    )


def test_a_folder_lacking_what_loading_needs_names_each_part_and_how_to_save_it(tmp_path):
    model_folder(tmp_path / "judge", "pytorch_model.bin.txt")
    found = [str(problem) for problem in checked(tmp_path, reward_model_path="judge").problems]
    assert found == [
        "judge: no config.json; save the model with model.save_pretrained(FOLDER).",
        "judge: no tokenizer (tokenizer.json or tokenizer_config.json); save it beside the model: "
        "tokenizer.save_pretrained(FOLDER).",
        "judge: no weights (*.safetensors or pytorch_model*.bin); save the model with "
        "model.save_pretrained(FOLDER).",
    ]
    elsewhere = checked(tmp_path / "task", reward_model_path=str(tmp_path / "judge"))  # outside the task
    assert [problem.where for problem in elsewhere.problems] == [str(tmp_path / "judge")] * 3


def test_a_file_where_a_model_folder_belongs_is_refused(tmp_path):
    (tmp_path / "model.safetensors").write_text("")
    (problem,) = checked(tmp_path, model_name_or_path="model.safetensors").problems
    assert str(problem) == (
        "model.safetensors: model_name_or_path names a file; name the model's folder (save_pretrained's)."
    )
