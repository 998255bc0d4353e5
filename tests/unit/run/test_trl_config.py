"""run/trl_config.py: the run's TRL config: the user's YAML read (each way it can be wrong named with the
fix), its keys held to the recipe's with the nearest names, train's overrides and the smoke run's keys
applied, what a run cannot do without named, and the config as the recipe's script will see it."""

from __future__ import annotations

import pytest
import yaml
from trlstack.errors import UsageError
from trlstack.recipes import RECIPES
from trlstack.run import trl_config
from trlstack.run.passthrough import accepted_keys, script_args
from trlstack.run.settings import TrainSettings

GRPO = RECIPES["grpo"]
EXAMPLE = "e.g. `learning_rate: 1.0e-6`"
NEEDED = {"model_name_or_path": "org/m", "dataset_name": "d", "reward_funcs": ["accuracy_reward"]}


def test_the_config_as_the_script_sees_it_takes_the_values_after_the_double_dash():
    config = {"learning_rate": 1e-6, "use_peft": False, "model_init_kwargs": {"dtype": "float32"}}
    extra = ["--use_peft", "true", "--model_init_kwargs", '{"dtype": "bfloat16"}', "--learning_r=2e-5"]
    extra += ["--run_name", "{unclosed"]
    seen = trl_config.with_passed(config, extra, RECIPES["grpo"])
    assert seen == {
        "learning_rate": 2e-5,
        "use_peft": True,
        "model_init_kwargs": {"dtype": "bfloat16"},
        "run_name": "{unclosed",  # not YAML: kept as written
    }
    assert config["use_peft"] is False  # the file's config is left as it was


def written(tmp_path, text: str):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("a: 1\nb: [1, 2\n", "is not valid YAML at line 3, column 1: expected ',' or ']'"),
        ("- learning_rate\n", f"must be a YAML mapping of TRL config keys ({EXAMPLE}), not a list."),
        ("", f"must be a YAML mapping of TRL config keys ({EXAMPLE}), not a NoneType."),
        ("1: x\n", "has non-text keys [1]; TRL config keys are field names."),
    ],
)
def test_a_config_file_that_is_not_a_mapping_of_keys_is_refused_naming_the_fix(tmp_path, text, words):
    path = written(tmp_path, text)
    with pytest.raises(UsageError) as error:
        trl_config.load_config(path)
    assert str(error.value).startswith(f"config file {path} ") and words in str(error.value)


def test_a_config_file_that_is_not_text_is_refused_naming_why(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(UsageError, match=f"^cannot read config file {path}: 'utf-8' codec can't decode"):
        trl_config.load_config(path)


def test_a_missing_config_or_a_folder_is_refused_naming_what_to_pass(tmp_path):
    with pytest.raises(UsageError, match="does not exist. Pass --config .TRLSTACK_CONFIG. a YAML file"):
        trl_config.load_config(tmp_path / "absent.yaml")
    with pytest.raises(UsageError, match="is not a file; pass --config the path of a YAML file"):
        trl_config.load_config(tmp_path)


def test_the_users_file_is_read_as_it_is(tmp_path):
    path = written(tmp_path, "learning_rate: 1.0e-6\nreward_funcs: [a.b]\n")
    assert trl_config.load_config(path) == {"learning_rate": 1e-6, "reward_funcs": ["a.b"]}
    assert path.read_text() == "learning_rate: 1.0e-6\nreward_funcs: [a.b]\n"


def test_unknown_keys_are_named_with_the_nearest_valid_one_where_there_is_one():
    accepted = accepted_keys("grpo")
    config = {"lerning_rate": 1, "learning_rate": 1, "zzz_not_close": 2}
    assert trl_config.unknown_keys(config, accepted) == [
        "lerning_rate (did you mean learning_rate?)",
        "zzz_not_close",
    ]
    with pytest.raises(UsageError) as error:
        trl_config.check_keys(config, GRPO, "mine.yaml", accepted)
    assert str(error.value).startswith(
        "mine.yaml has keys the grpo script does not accept: lerning_rate (did you mean learning_rate?), "
        "zzz_not_close. Use field names of "
    )
    assert str(error.value).endswith("(trl 1.16), or remove them.")


@pytest.mark.parametrize(
    ("recipe", "judges"),
    [
        (
            "grpo",
            "reward_funcs or reward_model_name_or_path (or pass --reward-model / TRLSTACK_REWARD_MODEL)",
        ),
        ("online-dpo", "reward_model_path or reward_funcs (or pass --reward-model / TRLSTACK_REWARD_MODEL)"),
        ("async-grpo", "reward_funcs (or pass --reward-model / TRLSTACK_REWARD_MODEL)"),
    ],
)
def test_what_a_run_cannot_do_without_is_named_with_the_flag_that_gives_it(recipe, judges):
    assert trl_config.missing_keys({}, RECIPES[recipe]) == [
        "model_name_or_path (or pass --model / TRLSTACK_MODEL)",
        "dataset_name or datasets (or pass --dataset / TRLSTACK_DATASET)",
        judges,
    ]
    assert trl_config.missing_keys({**NEEDED, "datasets": [{"path": "x"}], "dataset_name": None}, GRPO) == []
    with pytest.raises(UsageError, match=r"^c.yaml is missing required keys: model_name_or_path \(or pass"):
        trl_config.check_required({}, RECIPES[recipe], "c.yaml")


def config_for(settings: TrainSettings, user: dict, extra=()):
    recipe = RECIPES[settings.recipe]
    script = script_args(list(extra), recipe.name, trl_config.TAKEN, "train")
    return trl_config.run_config(settings, user, recipe, "c.yaml", script)


def test_trains_flags_override_the_file_and_the_dataset_flag_beats_a_datasets_list():
    user = {**NEEDED, "datasets": [{"path": "x"}], "learning_rate": 1e-6}
    settings = TrainSettings(recipe="grpo", model="org/flag", dataset="org/data", reward_model="org/rm")
    config, seen = config_for(settings, user)
    assert config == {
        "model_name_or_path": "org/flag",
        "dataset_name": "org/data",
        "reward_funcs": ["accuracy_reward"],
        "reward_model_name_or_path": "org/rm",
        "learning_rate": 1e-6,
        "output_dir": "outputs/grpo",
    }
    assert seen == config
    assert user["model_name_or_path"] == "org/m" and "datasets" in user  # the user's config is not changed


def test_the_output_folder_is_the_flags_else_the_configs_else_outputs_recipe():
    assert (
        config_for(TrainSettings(recipe="grpo", output_dir="o"), {**NEEDED, "output_dir": "c"})[0][
            "output_dir"
        ]
        == "o"
    )
    assert config_for(TrainSettings(recipe="grpo"), {**NEEDED, "output_dir": "c"})[0]["output_dir"] == "c"
    assert config_for(TrainSettings(recipe="rloo"), NEEDED)[0]["output_dir"] == "outputs/rloo"


def test_the_smoke_run_takes_its_keys_over_the_files_for_its_recipe():
    config, _ = config_for(TrainSettings(recipe="online-dpo", cpu=True), {**NEEDED, "max_steps": 500})
    assert {key: config[key] for key in trl_config.SMOKE} == trl_config.SMOKE
    assert (config["max_steps"], config["max_new_tokens"], config["use_vllm"]) == (2, 16, False)
    assert "num_generations" not in config  # grpo's smoke keys are grpo's only


def test_the_config_as_the_script_sees_it_is_returned_beside_the_one_written():
    config, seen = config_for(TrainSettings(recipe="grpo"), NEEDED, ["--learning_rate", "2e-5"])
    assert "learning_rate" not in config and seen["learning_rate"] == 2e-5


def test_an_unknown_key_or_a_missing_one_stops_the_run_config():
    with pytest.raises(UsageError, match="keys the grpo script does not accept: lr"):
        config_for(TrainSettings(recipe="grpo"), {**NEEDED, "lr": 1})
    with pytest.raises(UsageError, match="missing required keys: dataset_name or datasets"):
        config_for(TrainSettings(recipe="grpo"), {"model_name_or_path": "m", "reward_funcs": ["x.y"]})
    config_for(
        TrainSettings(recipe="grpo", dataset="org/data"), {"model_name_or_path": "m", "reward_funcs": ["x.y"]}
    )


def test_async_grpo_refuses_an_attention_implementation_naming_the_kernel_setting():
    user = {**NEEDED, "model_init_kwargs": {"attn_implementation": "sdpa"}}
    with pytest.raises(UsageError) as error:
        config_for(TrainSettings(recipe="async-grpo"), user)
    assert str(error.value).startswith(
        "c.yaml: model_init_kwargs.attn_implementation cannot be set for async-grpo"
    )
    assert "tree_attention_kernel (auto, hub, fa4, sdpa) chooses the kernel" in str(error.value)
    config_for(TrainSettings(recipe="grpo"), user)  # the other recipes take it


def test_model_init_kwargs_is_a_mapping_in_the_file_or_json_after_the_double_dash():
    assert trl_config.model_init_kwargs({}, "c") == {}
    assert trl_config.model_init_kwargs({"model_init_kwargs": {"dtype": "bfloat16"}}, "c") == {
        "dtype": "bfloat16"
    }
    assert trl_config.model_init_kwargs({"model_init_kwargs": '{"dtype": "float32"}'}, "c") == {
        "dtype": "float32"
    }
    for bad in ("dtype=bfloat16", ["dtype"], "[1]"):
        with pytest.raises(
            UsageError, match=r"^c: model_init_kwargs must be a mapping, e.g. \{dtype: bfloat16\}"
        ):
            trl_config.model_init_kwargs({"model_init_kwargs": bad}, "c")


def test_the_written_copy_says_where_it_came_from_and_keeps_the_order():
    text = trl_config.render({"b": 1, "a": [1, 2]}, "mine.yaml")
    assert (
        text.splitlines()[0]
        == "# Written by `train` from mine.yaml; edit that file (or pass flags), not this copy."
    )
    assert list(yaml.safe_load(text)) == ["b", "a"]


def test_a_local_path_the_run_names_must_exist_named_as_it_was_given(tmp_path):
    from_file = {**NEEDED, "model_name_or_path": "./no-model"}
    with pytest.raises(UsageError, match=r"^model_name_or_path in c.yaml ./no-model: no such file or folder"):
        trl_config.check_paths(from_file, TrainSettings(recipe="grpo"), GRPO, "c.yaml")
    absent = str(tmp_path / "absent")
    by_flag = TrainSettings(recipe="grpo", dataset=absent)
    with pytest.raises(
        UsageError, match=rf"^--dataset \(TRLSTACK_DATASET\) {absent}: no such file or folder"
    ):
        trl_config.check_paths({**NEEDED, "dataset_name": absent}, by_flag, GRPO, "c.yaml")
    trl_config.check_paths(NEEDED, TrainSettings(recipe="grpo"), GRPO, "c.yaml")  # Hub names are not paths
