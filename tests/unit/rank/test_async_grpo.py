"""trlstack.rank.async_grpo: the script's parser table entry (written from TRL 1.16's dataclasses without
importing TRL) is the installed TRL's, option for option, and the bundled config parses with it. Where TRL
is not installed (the light install) the script's own fields are checked against the entry."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest
from trlstack.recipes import RECIPES
from trlstack.run.passthrough import accepted_keys, receiver

HAS_TRL = importlib.util.find_spec("trl") is not None
needs_trl = pytest.mark.skipif(not HAS_TRL, reason="TRL is not installed (light install); the image has it")
RECIPE = RECIPES["async-grpo"]


def own_fields() -> set[str]:
    source = importlib.util.find_spec(RECIPE.module).origin
    tree = ast.parse(Path(source).read_text())
    (cls,) = [node for node in tree.body if isinstance(node, ast.ClassDef)]
    return {item.target.id for item in cls.body if isinstance(item, ast.AnnAssign)}


def test_the_scripts_own_fields_are_config_keys():
    assert own_fields() == {
        "model_name_or_path",
        "reward_funcs",
        "tree_attention_kernel",
        "server_lost_after_s",
    }
    assert own_fields() <= accepted_keys("async-grpo")


def test_the_async_pipeline_keys_are_accepted_and_the_sync_generators_are_not():
    keys = accepted_keys("async-grpo")
    assert {"max_staleness", "weight_sync_steps", "weight_sync_timeout", "heartbeat_stale_after_s"} <= keys
    assert not {"use_vllm", "vllm_mode", "vllm_group_port", "attn_implementation"} & keys


@needs_trl
def test_the_table_entry_is_the_installed_parsers_option_for_option():
    from trlstack.run.passthrough import trl_options

    assert trl_options("async-grpo") == dict(receiver("async-grpo").options)


@needs_trl
def test_the_bundled_config_parses_with_trls_own_parser(tmp_path):
    import importlib

    parser = importlib.import_module(RECIPE.module).make_parser()
    script_args, training_args, _ = parser.parse_args_and_config(
        ["--config", str(RECIPE.bundled_config), "--output_dir", str(tmp_path), "--use_cpu", "true"],
        fail_with_unknown_args=True,
    )
    assert script_args.reward_funcs == ["accuracy_reward"]
    assert (training_args.max_staleness, training_args.token_budget) == (4, 0)


@needs_trl
def test_a_chat_template_trl_cannot_parse_responses_of_is_refused_before_anything_starts(tmp_path):
    import importlib

    from trlstack.commands import tiny

    script = importlib.import_module(RECIPE.module)
    known = tiny.make_tokenizer(["a few words to learn from"])  # Qwen2.5's template, from TRL
    known.save_pretrained(tmp_path / "known")
    script.check_response_parsing(str(tmp_path / "known"), trust_remote_code=False)

    known.chat_template = tiny.CHAT_TEMPLATE  # plain ChatML: not one TRL's rollout worker knows
    known.save_pretrained(tmp_path / "unknown")
    with pytest.raises(SystemExit, match="is not one whose responses TRL's AsyncGRPOTrainer can parse"):
        script.check_response_parsing(str(tmp_path / "unknown"), trust_remote_code=False)


@needs_trl
def test_the_rewards_reach_the_rollout_worker_picklable_named_and_naming_a_raise(tmp_path, monkeypatch):
    import importlib
    import pickle
    from types import SimpleNamespace

    from trlstack.rank.reward_guard import RewardFailed

    (tmp_path / "task_rewards.py").write_text(
        "def strict(completions, **kwargs):\n    return [1 / len(c) for c in completions]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    script = importlib.import_module(RECIPE.module)
    names = SimpleNamespace(reward_funcs=["accuracy_reward", "task_rewards.strict"])
    funcs = script.load_reward_funcs(names, SimpleNamespace(max_completion_length=16))
    assert [func.__name__ for func in funcs] == ["accuracy_reward", "strict"]  # TRL logs them by these
    strict = pickle.loads(pickle.dumps(funcs[1]))  # as TRL spawns the rollout worker
    assert strict(completions=["ab"], prompts=["p"]) == [0.5]
    with pytest.raises(
        RewardFailed, match=r"reward strict raised ZeroDivisionError: .* on prompt 'p', completion ''"
    ):
        strict(completions=[""], prompts=["p"])
