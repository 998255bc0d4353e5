"""What follows `--`, read as vLLM's and TRL's parsers read it: every spelling of an imposed setting is
refused, unknown and ambiguous options are named at once, and vLLM's --config file is held to the same rule.
Where vLLM and TRL are installed (the image), the table is checked against them and the resolution against
their parsers.
"""

from __future__ import annotations

import argparse
import importlib.util

import pytest
from hypothesis import given
from hypothesis import strategies as st
from trlstack.errors import UsageError
from trlstack.recipes import RECIPES
from trlstack.roles.serve import settings as serve
from trlstack.run import trl_config
from trlstack.run.passthrough import (
    VLLM,
    accepted_keys,
    candidates,
    check_passthrough,
    option_words,
    passed_values,
    receiver,
    table_from_installed,
)

HAS_STACK = all(importlib.util.find_spec(name) is not None for name in ("vllm", "trl"))
needs_stack = pytest.mark.skipif(not HAS_STACK, reason="vLLM and TRL are not installed (light install)")


def resolved(words: list[str], key: str) -> list[set[str]]:
    """The dests each option word of `words` could be, as the receiving parser reads it."""
    where = receiver(key)
    return [
        {where.options[known] for known in candidates(word.option, where.options)}
        for _, word in option_words(words, where.vllm)
    ]


@pytest.mark.parametrize(
    ("word", "dest"),
    [
        ("--tensor-parallel-size", "tensor_parallel_size"),
        ("--tensor_parallel_size", "tensor_parallel_size"),  # vLLM reads _ as -
        ("--tensor_parallel=2", "tensor_parallel_size"),  # and a unique abbreviation, also with =
        ("-tp", "tensor_parallel_size"),
        ("-tp=2", "tensor_parallel_size"),
        ("-t", "tensor_parallel_size"),  # the only short option starting -t
        ("--host=::", "host"),
        ("--ho", "host"),
        ("--weight_transfer_config.backend=gloo", "weight_transfer_config"),  # a JSON field of the option
        ("--weight-transfer.backend", "weight_transfer_config"),
        ("--compilation-config.pass_config.fuse+", "compilation_config"),
        ("-O3", "optimization_level"),
        ("-O=2", "optimization_level"),
        ("--data-parallel-size-local", "data_parallel_size_local"),  # an exact option beats a prefix
    ],
)
def test_vllm_spellings_resolve_to_the_option_vllm_picks(word, dest):
    assert resolved([word], VLLM) == [{dest}]


@pytest.mark.parametrize(
    ("word", "dests"),
    [
        ("--output_dir", {"output_dir"}),
        ("--output-dir", {"output_dir"}),
        ("--output_d", {"output_dir"}),  # TRL registers both spellings, so each abbreviates on its own
        ("--outp", {"output_dir"}),  # both spellings match: argparse calls it ambiguous
        ("--vllm_mod", {"vllm_mode", "vllm_model_impl"}),
        ("--vllm-server_base_url", set()),  # mixed spellings are no option of TRL's
        ("--no_gradient_checkpointing", {"gradient_checkpointing"}),
        ("--learning_rate=1e-6", {"learning_rate"}),
    ],
)
def test_trl_spellings_resolve_to_what_trls_parser_picks(word, dests):
    assert resolved([word], "grpo") == [dests]


def test_values_and_numbers_are_not_options():
    words = ["--seed", "-1", "--learning_rate", "-1e-06", "--stop", "-", "--", "--x"]
    written = [word.written for _, word in option_words(words, vllm=False)]
    assert written == ["--seed", "--learning_rate", "--stop", "--x"]


def test_vllm_config_file_keys_are_held_to_the_same_rule(tmp_path):
    config = tmp_path / "vllm.yaml"
    config.write_text("max-num-seqs: 8\nenforce_eager: true\n")
    check_passthrough(["--config", str(config)], receiver(VLLM), serve.TAKEN, "serve-vllm")
    config.write_text("max-num-seqs: 8\ngpu_memory_utilization: 0.5\n")
    with pytest.raises(UsageError, match=r"`gpu_memory_utilization` in --config .*vllm.yaml would override"):
        check_passthrough(["--config", str(config)], receiver(VLLM), serve.TAKEN, "serve-vllm")


def test_options_the_roles_do_not_set_pass():
    extra = ["--enforce-eager", "--max-num-seqs=8", "-O3", "--seed", "-1", "--kv-cache-dtype", "fp8"]
    check_passthrough(extra, receiver(VLLM), serve.TAKEN, "serve-vllm")
    extra = ["--learning_rate", "1e-6", "--max-steps=5", "--seed", "-1", "--no_gradient_checkpointing"]
    check_passthrough(extra, receiver("grpo"), trl_config.TAKEN, "train")


def _spellings(option: str, vllm: bool) -> st.SearchStrategy[str]:
    """Ways a parser of that kind reads as `option`: itself, `=VALUE`, `_` for `-` (vLLM), a dotted field."""
    forms = [option, option + "=1"]
    if option.startswith("--") and vllm:
        forms += [option.replace("-", "_").replace("__", "--", 1), option + ".key=1", option + ".a.b"]
    return st.sampled_from(forms)


def _taken_options(key: str, taken: dict[str, str]) -> list[str]:
    where = receiver(key)
    return sorted(option for option, dest in where.options.items() if dest in taken)


@given(data=st.data())
def test_every_spelling_of_an_imposed_vllm_setting_is_refused(data):
    option = data.draw(st.sampled_from(_taken_options(VLLM, serve.TAKEN)))
    word = data.draw(_spellings(option, vllm=True))
    with pytest.raises(UsageError, match="would override serve-vllm's setting"):
        check_passthrough(["--enforce-eager", word, "1"], receiver(VLLM), serve.TAKEN, "serve-vllm")


@given(data=st.data())
def test_every_spelling_of_an_imposed_trl_setting_is_refused(data):
    recipe = data.draw(st.sampled_from(sorted(RECIPES)))
    option = data.draw(st.sampled_from(_taken_options(recipe, trl_config.TAKEN)))
    word = data.draw(_spellings(option, vllm=False))
    with pytest.raises(UsageError, match="would override train's setting"):
        check_passthrough(["--seed", "1", word, "1"], receiver(recipe), trl_config.TAKEN, "train")


@given(prefix_length=st.integers(min_value=3, max_value=40))
def test_any_abbreviation_of_an_imposed_setting_is_refused(prefix_length):
    for key, taken, role in [(VLLM, serve.TAKEN, "serve-vllm"), ("grpo", trl_config.TAKEN, "train")]:
        for option in _taken_options(key, taken):
            if option.startswith("--") and prefix_length < len(option):
                with pytest.raises(UsageError, match=f"would override {role}'s setting"):
                    check_passthrough([option[:prefix_length]], receiver(key), taken, role)


# Against the installed parsers (the image) ------------------------------------------------------------------


@needs_stack
def test_the_table_is_the_installed_parsers():
    assert table_from_installed() == {key: dict(receiver(key).options) for key in (VLLM, *RECIPES)}


def agrees(words: list[str], key: str, parse) -> None:
    """The real parser (`parse(words)`: the dests it changed, None when it refuses the words) changes
    exactly what the resolution names, and refuses what the resolution finds ambiguous or unknown."""
    where = receiver(key)
    found = [candidates(word.option, where.options) for _, word in option_words(words, where.vllm)]
    changed = parse(words)
    if all(len(options) == 1 for options in found):
        assert changed == set().union(*resolved(words, key))
    else:
        assert changed is None, f"{words} resolve to {found}, but the parser took them"


VLLM_SPELLINGS = [
    ["--ho", "0.0.0.0"],
    ["--host=::"],
    ["-t", "2"],
    ["-tp=2"],
    ["--tensor_parallel", "2"],
    ["--weight_transfer_config.backend=gloo"],
    ["--weight-transfer.backend", "gloo"],
    ["--gpu_memory_util=0.5"],
    ["--max-model", "99"],
    ["-O3"],
    ["--max-num-seqs=3"],
    ["--enforce_eager"],
    ["--enable", "x"],
    ["--enforce-eagre"],
    ["-d", "2"],
]


@needs_stack
@pytest.mark.parametrize("words", VLLM_SPELLINGS, ids=" ".join)
def test_vllm_changes_exactly_the_settings_the_resolution_names(words):
    from trlstack.run.passthrough import vllm_options
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    vllm_options()  # puts the CPU platform in for a machine without a GPU
    parser = FlexibleArgumentParser(prog="vllm", exit_on_error=False)
    ServeSubcommand().subparser_init(parser.add_subparsers())
    base = ["serve", "m", "--port", "8000"]
    before = vars(parser.parse_args(base))

    def parse(words):
        try:
            after = vars(parser.parse_args(base + words))
        except (SystemExit, argparse.ArgumentError):
            return None
        return {dest for dest in after if after[dest] != before.get(dest)}

    agrees(words, VLLM, parse)


TRL_SPELLINGS = [
    ["--output-dir", "x"],
    ["--output_d=x"],
    ["--outp", "x"],
    ["--vllm-server-base-url", "http://h:1"],
    ["--use_vllm", "true"],
    ["--bf16=false"],
    ["--learning-rate", "0.5"],
    ["--no_gradient_checkpointing"],
    ["--num_gen", "4"],
    ["--vllm-server_base_url", "x"],
    ["--learnig_rate", "0.5"],
]


@needs_stack
@pytest.mark.parametrize("words", TRL_SPELLINGS, ids=" ".join)
def test_trl_changes_exactly_the_settings_the_resolution_names(words):
    import importlib

    parser = importlib.import_module(RECIPES["grpo"].module).make_parser()
    before = vars(parser.parse_known_args([])[0])

    def parse(words):
        try:
            namespace, unknown = parser.parse_known_args(words)
        except SystemExit:
            return None
        after = vars(namespace)
        return None if unknown else {dest for dest in after if after[dest] != before[dest]}

    agrees(words, "grpo", parse)


def test_accepted_keys_of_every_recipe_hold_the_trainer_basics():
    for name in RECIPES:
        keys = accepted_keys(name)
        assert {"model_name_or_path", "dataset_name", "learning_rate", "output_dir"} <= keys
        assert {"vllm_server_base_url", "bf16", "fp16", "model_init_kwargs"} <= keys
        # a server-only recipe (async-grpo) names its server alone: TRL chooses the weight-transfer port
        if not RECIPES[name].server_only:
            assert {"use_vllm", "vllm_mode", "vllm_group_port"} <= keys
        assert "resume_from_checkpoint" in keys and "env" in keys
    assert "num_generations" in accepted_keys("grpo") and "num_generations" not in accepted_keys("online-dpo")
    assert "reward_model_path" in accepted_keys("online-dpo")


# The values given after `--`, by the option they set: what train weighs memory on (trl_config.with_passed).
PASSED = [
    (["--vllm_gpu_memory_utilization", "0.6"], {"vllm_gpu_memory_utilization": "0.6"}),
    (["--vllm-gpu-memory-utilization=0.2"], {"vllm_gpu_memory_utilization": "0.2"}),
    (
        ["--vllm_gpu_mem", "0.2", "--learning_rate", "1e-3", "--vllm_gpu_memory_utilization", "0.4"],
        {"vllm_gpu_memory_utilization": "0.4", "learning_rate": "1e-3"},
    ),
    (["--use_peft", "--learning_rate", "-1"], {"use_peft": "true", "learning_rate": "-1"}),  # a bare switch
    (["--no_gradient_checkpointing"], {"gradient_checkpointing": "false"}),
    (["--no-gradient-check", "--gradient_checkpointing"], {"gradient_checkpointing": "true"}),
    (["--model_init_kwargs", '{"dtype": "bfloat16"}'], {"model_init_kwargs": '{"dtype": "bfloat16"}'}),
    (  # a list field takes every word up to the next option
        ["--reward_funcs", "rewards.a", "rewards.b", "--max_steps", "3"],
        {"reward_funcs": ["rewards.a", "rewards.b"], "max_steps": "3"},
    ),
    (["--learnig_rate", "3", "--vllm", "0.5"], {}),  # unknown, ambiguous: refused by check_passthrough
]


@pytest.mark.parametrize(("words", "values"), PASSED, ids=[" ".join(words) for words, _ in PASSED])
def test_the_values_given_are_read_by_the_option_they_set(words, values):
    assert passed_values(words, receiver("grpo")) == values


@needs_stack
@pytest.mark.parametrize(("words", "values"), PASSED[:-1], ids=[" ".join(words) for words, _ in PASSED[:-1]])
def test_trls_parser_takes_the_same_values(words, values):
    import importlib

    parser = importlib.import_module(RECIPES["grpo"].module).make_parser()
    # The configs the script trains with (their __post_init__ reads a JSON mapping); on the CPU here.
    *configs, unknown = parser.parse_args_into_dataclasses(
        ["--use_cpu", "true", *words], return_remaining_strings=True
    )
    assert not unknown
    taken = {dest: getattr(config, dest) for config in configs for dest in values if hasattr(config, dest)}
    seen = trl_config.with_passed({}, words, RECIPES["grpo"])  # as train weighs memory on them
    assert seen.keys() == values.keys() == taken.keys()
    assert seen == taken
