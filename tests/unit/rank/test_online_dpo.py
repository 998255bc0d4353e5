"""rank/online_dpo.py, our Online DPO script, up to the trainer: its judge of completions (a reward model,
reward functions, or both; neither refused), its YAML's fields parsed by TRL's parser, a run without data
refused before any model loads, and each process's one full copy of the model. Its training runs on a GPU:
tests/gpu/test_server_mode.py and tests/gpu/test_ipc.py."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

pytest.importorskip("trl", reason="needs the gpu extra (TRL); runs in the image")

from trl import rewards as trl_rewards  # noqa: E402
from trlstack.rank import online_dpo  # noqa: E402
from trlstack.recipes import RECIPES  # noqa: E402


def test_the_reward_model_judges_first_then_the_named_functions(tmp_path, monkeypatch):
    (tmp_path / "dpo_judges_here.py").write_text("def score(completions, **kwargs):\n    return [1.0]\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    script = SimpleNamespace(reward_funcs=["think_format_reward", "dpo_judges_here.score"])
    training = SimpleNamespace(reward_model_path="org/judge", max_new_tokens=64)
    judges = online_dpo.load_reward_funcs(script, training)
    assert judges[:2] == ["org/judge", trl_rewards.think_format_reward]
    assert judges[2].__module__ == "dpo_judges_here"
    alone = online_dpo.load_reward_funcs(SimpleNamespace(reward_funcs=None), training)
    assert alone == ["org/judge"]


def test_a_run_without_a_judge_of_completions_is_refused_naming_both_keys():
    with pytest.raises(ValueError) as error:
        online_dpo.load_reward_funcs(
            SimpleNamespace(reward_funcs=[]), SimpleNamespace(reward_model_path=None, max_new_tokens=64)
        )
    assert str(error.value) == (
        "Online DPO needs a judge of completions: set `reward_model_path` and/or `reward_funcs`."
    )


def test_trls_parser_takes_the_reward_functions_beside_the_bundled_config(tmp_path):
    parser = online_dpo.make_parser()
    argv = [
        "--config",
        str(RECIPES["online-dpo"].bundled_config),
        "--output_dir",
        str(tmp_path),
        "--use_cpu",
        "true",
    ]
    argv += ["--reward_funcs", "think_format_reward", "rewards.correct_answer"]
    script, training, model, _ = parser.parse_args_and_config(argv, fail_with_unknown_args=True)
    assert script.reward_funcs == ["think_format_reward", "rewards.correct_answer"]
    assert training.reward_model_path and model.model_name_or_path


def test_a_run_without_data_is_refused_before_any_model_loads_with_one_full_copy_per_process():
    script = SimpleNamespace(dataset_name=None)
    training = SimpleNamespace(trust_remote_code=False, model_init_kwargs={"low_cpu_mem_usage": True})
    model = SimpleNamespace(model_revision="main", attn_implementation="sdpa", dtype="bfloat16")
    with pytest.raises(ValueError, match="Either `datasets` or `dataset_name` must be provided."):
        online_dpo.main(script, training, model, SimpleNamespace(datasets=[]))
    assert training.model_init_kwargs == {
        "revision": "main",
        "trust_remote_code": False,
        "attn_implementation": "sdpa",
        "dtype": "bfloat16",
        "device_map": None,  # not "auto", which would spread one copy over every visible GPU
        "low_cpu_mem_usage": True,
    }
