"""The task check's model step: each local model folder the config names (the model, a reward model) holds
what loading it needs, its config, a tokenizer and the weights; a name that is no path is left to the Hub."""

from __future__ import annotations

from pathlib import Path

from trlstack.reward_calls import shown_path
from trlstack.run.task import FOLDER_KEYS
from trlstack.run.task_report import Problem, Report, Task

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin", "*.safetensors.index.json")


def check_models(found: Task, report: Report) -> None:
    """A local model folder (model, reward model) holds what loading it needs."""
    for key in FOLDER_KEYS:
        named = found.config.get(key)
        if not isinstance(named, str) or not named:
            continue
        path = Path(named).expanduser()
        path = path if path.is_absolute() else found.root / path
        if not path.exists():
            if named.startswith(("/", "./", "../", "~")):
                fix = "fix the path (relative to the task folder), or name a model on the Hub"
                report.problems.append(
                    Problem(f"{found.where}: {key}", f"model folder {named} does not exist", fix)
                )
            else:
                report.checked.append(f"{key} {named} is not local: loaded when the run starts")
            continue
        report.problems += _model_folder(path, key, shown_path(path.resolve(), found.root))
        report.checked.append(f"{key} {named} (config, tokenizer, weights)")


def _model_folder(path: Path, key: str, shown: str) -> list[Problem]:
    if not path.is_dir():
        return [Problem(shown, f"{key} names a file", "name the model's folder (save_pretrained's)")]
    found = []
    if not (path / "config.json").is_file():
        found.append(Problem(shown, "no config.json", "save the model with model.save_pretrained(FOLDER)"))
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        what = f"no tokenizer ({' or '.join(TOKENIZER_FILES)})"
        found.append(Problem(shown, what, "save it beside the model: tokenizer.save_pretrained(FOLDER)"))
    if not any(any(path.glob(pattern)) for pattern in WEIGHT_PATTERNS):
        what = "no weights (*.safetensors or pytorch_model*.bin)"
        found.append(Problem(shown, what, "save the model with model.save_pretrained(FOLDER)"))
    return found
