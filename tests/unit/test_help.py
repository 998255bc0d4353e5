"""--help of every command (train, serve-vllm, each `trlstack X`): a setting with a fixed set of values shows
them in the usage line, train's settings stand in their groups, and each default is stated once, by
options.help_text."""

from __future__ import annotations

import re

import pytest
from trlstack.cli import MODULE_COMMANDS, _import_command
from trlstack.errors import Parser
from trlstack.roles.command_line import role_parser
from trlstack.roles.serve.command import ROLE as SERVE
from trlstack.roles.serve.settings import ServeSettings
from trlstack.roles.train.main import ROLE as TRAIN
from trlstack.run.settings import TrainSettings


def parsers() -> dict[str, Parser]:
    found = {
        "train": role_parser(TRAIN, TrainSettings, {}),
        "serve-vllm": role_parser(SERVE, ServeSettings, {}),
    }
    for name, (module, _) in MODULE_COMMANDS.items():
        parser = Parser(prog=f"trlstack {name}")
        _import_command(name, module).add_arguments(parser)
        found[f"trlstack {name}"] = parser
    return found


PARSERS = parsers()
ACTIONS = [
    (command, action)
    for command, parser in PARSERS.items()
    for action in parser._actions
    if action.help is not None and action.dest != "help"
]


def flat(text: str) -> str:
    return " ".join(text.split())


def test_every_setting_with_a_fixed_set_of_values_shows_them_in_the_usage_line():
    shown = set()
    for command, action in ACTIONS:
        if action.choices is None:
            continue
        values = "{" + ",".join(map(str, action.choices)) + "}"
        assert values in flat(PARSERS[command].format_usage()), f"{command} {action.option_strings}"
        shown.add((command, (action.option_strings or [action.dest])[-1]))
    # The ones that hid them once, among all the others.
    assert {
        ("train", "--sharding"),
        ("train", "--vllm-mode"),
        ("train", "recipe"),
        ("trlstack bundle", "--format"),
        ("trlstack slurm", "recipe"),
        ("trlstack slurm", "--sharding"),
        ("trlstack verify", "--only"),
        ("serve-vllm", "--dtype"),
    } <= shown


def test_a_setting_that_lists_its_values_in_words_declares_them():
    # "one of a, b" or "a, b or c" in a help text means a fixed set that the usage line would not show.
    for command, action in ACTIONS:
        listed = re.search(r"\bone of\b", action.help or "")
        assert not listed or action.choices is not None, f"{command} {action.option_strings}: {action.help}"


def test_train_groups_its_settings():
    groups = {group.title: group._group_actions for group in PARSERS["train"]._action_groups}
    expected = ["the run", "vLLM", "the layout", "multi-node", "async-grpo", "preview"]
    assert [title for title in groups if title in expected] == expected
    assert [action.dest for action in groups["options"]] == ["help"]  # every setting in a group
    assert not groups["positional arguments"]  # the recipe stands with the run
    help = PARSERS["train"].format_help()
    assert all(f"\n{title}:\n" in help for title in expected)


@pytest.mark.parametrize("command", sorted(PARSERS))
def test_no_help_text_states_a_default_twice(command):
    for name, action in ACTIONS:
        if name != command:
            continue
        text = flat(action.help or "")
        assert len(re.findall(r"\bdefault", text, flags=re.IGNORECASE)) <= 1, text
        written = re.sub(r" \[(env [^\]]*|default: [^\]]*)\]$", "", text)  # the help as declared
        assert not re.search(r"\(default|\[default|default:|default \d", written), text
