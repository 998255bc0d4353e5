"""trlstack.models: the served model and the trained one are recognised as one model by name, Hub repo or
config.json, and told apart otherwise, with how it was decided."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from trlstack.models import hub_id, read_config, same_model

QWEN = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_size": 896,
    "num_hidden_layers": 24,
}
QWEN |= {
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "tie_word_embeddings": True,
}


def folder(root: Path, name: str, config: dict) -> str:
    path = root / name
    path.mkdir(parents=True)
    (path / "config.json").write_text(
        json.dumps({**config, "_name_or_path": name, "transformers_version": "5"})
    )
    return str(path)


def hub_cache(root: Path, repo: str, config: dict) -> Path:
    """A Hub cache as huggingface_hub lays it out, holding `repo` at one revision."""
    repo_folder = root / "hub" / ("models--" + repo.replace("/", "--"))
    (repo_folder / "refs").mkdir(parents=True)
    (repo_folder / "refs" / "main").write_text("0123abcd")
    folder(repo_folder / "snapshots", "0123abcd", config)
    return repo_folder / "snapshots" / "0123abcd"


@pytest.mark.parametrize(
    ("reference", "repo"),
    [
        ("Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct"),
        (
            "/cache/huggingface/hub/models--Qwen--Qwen2.5-0.5B-Instruct/snapshots/0123abcd",
            "Qwen/Qwen2.5-0.5B-Instruct",
        ),
        ("/models/qwen", None),
        ("qwen", None),
    ],
)
def test_hub_ids_from_ids_and_cache_snapshots(reference, repo):
    assert hub_id(reference) == repo


def test_the_same_name_or_hub_repo_is_the_same_model(tmp_path):
    unreadable = lambda reference: None  # noqa: E731 - nothing to read: the names must decide
    assert same_model("org/m", "org/m", unreadable) == (True, "the same name")
    assert same_model("/models/m/", "/models/m", unreadable)[0]
    snapshot = "/cache/hub/models--org--m/snapshots/abc"
    assert same_model(snapshot, "org/m", unreadable) == (True, "both are the Hub model org/m")


def test_a_local_copy_with_the_same_config_is_the_same_model(tmp_path):
    cache = hub_cache(tmp_path, "Qwen/Qwen2.5-0.5B-Instruct", QWEN)
    copy = folder(tmp_path, "copy", {**QWEN, "torch_dtype": "float32"})  # other keys may differ
    environ = {"HF_HOME": str(tmp_path)}
    read = lambda reference: read_config(reference, environ)  # noqa: E731
    assert read("Qwen/Qwen2.5-0.5B-Instruct")["hidden_size"] == 896
    assert read(str(cache))["hidden_size"] == 896
    assert same_model("Qwen/Qwen2.5-0.5B-Instruct", copy, read) == (
        True,
        "their config.json files agree on the architecture and every size",
    )


def test_other_sizes_or_nothing_to_compare_are_other_models(tmp_path):
    environ = {"HF_HOME": str(tmp_path)}
    read = lambda reference: read_config(reference, environ)  # noqa: E731
    small = folder(tmp_path, "small", QWEN)
    big = folder(tmp_path, "big", {**QWEN, "hidden_size": 1536, "num_hidden_layers": 28})
    assert same_model(small, big, read) == (
        False,
        "their config.json files differ: hidden_size 896 vs 1536, num_hidden_layers 24 vs 28",
    )
    assert same_model("org/uncached", small, read) == (
        False,
        "the names differ and the config.json of org/uncached is not readable here to compare",
    )
