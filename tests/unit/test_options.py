"""Settings declared once: the parser, the environment, --help and the settings object come from the fields;
flag > environment > default, errors that name the variable, and what follows `--`."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from trlstack.defaults import Env
from trlstack.errors import Parser, UsageError
from trlstack.option_types import one_of, positive_int
from trlstack.options import (
    Setting,
    add_setting,
    add_settings,
    flag,
    help_text,
    repeated,
    setting,
    settings_from,
    switch,
)
from trlstack.run.passthrough import split_extra


@dataclass(frozen=True)
class Example:
    recipe: str | None = setting(Env.RECIPE, "what to run", positional=True)
    num_processes: int = setting(Env.NUM_PROCESSES, "how many", 3, positive_int)
    vllm_mode: str | None = setting(Env.VLLM_MODE, "which", type=one_of("server", "colocate"))
    cpu: bool = switch(Env.CPU, "on the CPU")
    extra: list[str] = field(default_factory=list)


def parse(environ, argv):
    parser = Parser(prog="t")
    add_settings(parser, Example, environ)
    own, extra = split_extra(argv)
    return settings_from(Example, parser.parse_args(own), extra=extra)


def test_the_declaration_gives_the_flags_and_the_settings_object():
    argv = ["grpo", "--num-processes", "2", "--vllm-mode", "colocate", "--cpu", "--", "--seed", "1"]
    assert parse({}, argv) == Example("grpo", 2, "colocate", True, ["--seed", "1"])
    assert parse({}, []) == Example()


def test_flag_beats_environment_beats_default():
    assert parse({}, []).num_processes == 3
    assert parse({"TRLSTACK_NUM_PROCESSES": "5"}, []).num_processes == 5
    assert parse({"TRLSTACK_NUM_PROCESSES": "5"}, ["--num-processes", "7"]).num_processes == 7
    assert parse({"TRLSTACK_RECIPE": "rloo"}, []).recipe == "rloo"
    assert parse({"TRLSTACK_RECIPE": "rloo"}, ["grpo"]).recipe == "grpo"


def test_a_switch_is_on_from_the_flag_or_the_environment():
    assert parse({}, []).cpu is False
    assert parse({}, ["--cpu"]).cpu is True
    assert parse({"TRLSTACK_CPU": "1"}, []).cpu is True
    assert parse({"TRLSTACK_CPU": "0"}, []).cpu is False
    assert parse({"TRLSTACK_CPU": ""}, []).cpu is False  # empty means unset, as compose passes it


def test_bad_environment_values_name_the_variable_and_the_flag():
    with pytest.raises(UsageError, match=r"TRLSTACK_CPU='maybe' is not valid for --cpu: expected one of 1/0"):
        parse({"TRLSTACK_CPU": "maybe"}, [])
    with pytest.raises(
        UsageError, match=r"TRLSTACK_VLLM_MODE='remote' is not valid for --vllm-mode: 'remote'"
    ):
        parse({"TRLSTACK_VLLM_MODE": "remote"}, [])


def test_help_names_each_variable_and_the_default_in_force(capsys):
    parser = Parser(prog="t")
    add_settings(parser, Example, {"TRLSTACK_NUM_PROCESSES": "4"})
    text = " ".join(parser.format_help().split())
    assert "what to run [env TRLSTACK_RECIPE]" in text
    assert "how many [env TRLSTACK_NUM_PROCESSES; default: 4]" in text
    assert "which [env TRLSTACK_VLLM_MODE; default: unset]" in text
    assert "on the CPU [env TRLSTACK_CPU; default: False]" in text


def test_parser_errors_are_usage_errors_that_point_at_help():
    with pytest.raises(
        UsageError, match=r"argument --num-processes: 0 is not a positive whole number \(see `t --help`\)"
    ):
        parse({}, ["--num-processes", "0"])
    with pytest.raises(UsageError, match="'x' is not a whole number"):
        parse({}, ["--num-processes", "x"])


@dataclass(frozen=True)
class Parts:
    only: tuple[str, ...] = repeated(Env.DATASET, "which parts", one_of("a", "b", "c"))


def parts(environ, argv):
    parser = Parser(prog="t")
    add_settings(parser, Parts, environ)
    return settings_from(Parts, parser.parse_args(argv)).only


def test_a_repeated_setting_collects_its_flags_or_splits_its_variable():
    assert parts({}, []) == ()
    assert parts({}, ["--only", "a", "--only", "c", "--only", "a"]) == ("a", "c", "a")
    assert parts({"TRLSTACK_DATASET": "b, c"}, []) == ("b", "c")
    assert parts({"TRLSTACK_DATASET": "b,c"}, ["--only", "a"]) == ("a",)  # the flags replace the list
    assert parts({"TRLSTACK_DATASET": ""}, []) == ()
    with pytest.raises(UsageError, match=r"argument --only: 'd' is not one of a, b, c"):
        parts({}, ["--only", "d"])
    with pytest.raises(UsageError, match=r"TRLSTACK_DATASET='a,d' is not valid for --only: 'd' is not"):
        parts({"TRLSTACK_DATASET": "a,d"}, [])
    parser = Parser(prog="t")
    add_settings(parser, Parts, {"TRLSTACK_DATASET": "a,b"})
    assert "which parts [env TRLSTACK_DATASET, comma-separated; default: a,b]" in " ".join(
        parser.format_help().split()
    )


@dataclass(frozen=True)
class Lists:
    dataset: tuple[str, ...] = repeated(Env.DATASET, "datasets", default=("a",))
    num_processes: tuple[int, ...] = repeated(Env.NUM_PROCESSES, "counts", positive_int)


def lists(environ, argv):
    parser = Parser(prog="t")
    add_settings(parser, Lists, environ)
    return settings_from(Lists, parser.parse_args(argv))


def test_a_repeated_setting_gathers_its_flags_in_order():
    assert lists({}, []) == Lists(("a",), ())
    assert lists({}, ["--dataset", "b", "--dataset=c", "--num-processes", "2"]) == Lists(("b", "c"), (2,))


def test_a_repeated_settings_flags_replace_its_variable_which_replaces_the_default():
    environ = {"TRLSTACK_DATASET": "x, y", "TRLSTACK_NUM_PROCESSES": "1,3"}
    assert lists(environ, []) == Lists(("x", "y"), (1, 3))
    assert lists(environ, ["--dataset", "z"]).dataset == ("z",)
    with pytest.raises(UsageError, match=r"TRLSTACK_NUM_PROCESSES='1,0' is not valid for --num-processes"):
        lists({"TRLSTACK_NUM_PROCESSES": "1,0"}, [])
    with pytest.raises(UsageError, match="argument --num-processes: 'x' is not a whole number"):
        lists({}, ["--num-processes", "x"])


def test_help_shows_a_repeated_settings_default_and_how_to_list_it():
    parser = Parser(prog="t")
    add_settings(parser, Lists, {})
    text = " ".join(parser.format_help().split())
    assert "datasets [env TRLSTACK_DATASET, comma-separated; default: a]" in text
    assert "counts [env TRLSTACK_NUM_PROCESSES, comma-separated; default: none]" in text


@dataclass(frozen=True)
class Flags:
    """Settings only a command reads: no variable; the default stated by help_text."""

    name: str = flag("what to run", positional=True, choices=["a", "b"])
    nodes: int = flag("how many nodes", type=positive_int, metavar="N")
    model: str = flag("which model", "tiny")
    bind: tuple[str, ...] = flag("a folder (repeatable)", repeated=True)
    num_processes: int = setting(Env.NUM_PROCESSES, "how many", 3, positive_int)


def parse_flags(environ, argv, only=None):
    parser = Parser(prog="t")
    add_settings(parser, Flags, environ)
    return settings_from(Flags, parser.parse_args(argv), only=only)


def test_a_flag_reads_no_variable_is_required_without_a_default_and_repeats_into_a_tuple():
    environ = {"TRLSTACK_NUM_PROCESSES": "5", "TRLSTACK_MODEL": "org/env"}
    assert parse_flags(environ, ["a", "--nodes", "2"]) == Flags("a", 2, "tiny", (), 5)
    argv = ["b", "--nodes", "2", "--model", "org/m", "--bind", "/x", "--bind", "/y"]
    assert parse_flags({}, argv) == Flags("b", 2, "org/m", ("/x", "/y"), 3)
    with pytest.raises(UsageError, match="the following arguments are required: --nodes"):
        parse_flags({}, ["a"])
    with pytest.raises(UsageError, match="argument name: invalid choice: 'c'"):
        parse_flags({}, ["c", "--nodes", "2"])


def test_only_the_settings_named_are_read_the_others_keep_their_defaults():
    settings = parse_flags({}, ["a", "--nodes", "2", "--model", "org/m"], only=("name", "nodes"))
    assert settings == Flags("a", 2, "tiny", (), 3)


def test_a_flag_shows_its_help_and_its_default_and_its_choices_in_the_usage(capsys):
    parser = Parser(prog="t")
    add_settings(parser, Flags, {})
    help = " ".join(parser.format_help().split())
    assert "--nodes N how many nodes --model MODEL which model [default: tiny] --bind BIND a folder" in help
    assert "{a,b} what to run" in help
    assert parser.format_usage().split()[-1] == "{a,b}"


@dataclass(frozen=True)
class Named:
    """A flag with a short name, a required flag with choices, and switches with and without a variable."""

    format: str = flag("which format", choices=["x", "y"])
    output: str | None = flag("where", None, metavar="FILE", aliases=("-o",), shown="here")
    dry_run: bool = switch(None, "print, do nothing")
    cpu: bool = switch(Env.CPU, "on the CPU")


def parse_named(environ, argv):
    parser = Parser(prog="t")
    add_settings(parser, Named, environ)
    return settings_from(Named, parser.parse_args(argv))


def test_a_flag_answers_to_its_aliases_and_a_required_one_to_its_choices_only():
    assert parse_named({}, ["--format", "x"]) == Named("x")
    assert parse_named({}, ["--format", "y", "-o", "f"]).output == "f"
    assert parse_named({}, ["--format", "y", "--output=f"]).output == "f"
    with pytest.raises(
        UsageError, match=r"the following arguments are required: --format \(see `t --help`\)"
    ):
        parse_named({}, ["-o", "f"])
    with pytest.raises(UsageError, match="argument --format: invalid choice: 'z'"):
        parse_named({}, ["--format", "z"])
    with pytest.raises(UsageError, match="argument -o/--output: expected one argument"):
        parse_named({}, ["--format", "x", "-o"])


def test_a_switch_without_a_variable_is_its_flag_only():
    assert parse_named({"TRLSTACK_CPU": "1"}, ["--format", "x"]) == Named("x", cpu=True)
    assert parse_named({}, ["--format", "x", "--dry-run"]).dry_run is True
    assert parse_named({}, ["--format", "x"]).dry_run is False


def test_help_shows_the_aliases_first_and_a_switch_without_a_variable_as_written():
    parser = Parser(prog="t")
    add_settings(parser, Named, {})
    usage = " ".join(parser.format_usage().split())
    assert usage == "usage: t [-h] --format {x,y} [-o FILE] [--dry-run] [--cpu]"
    help = " ".join(parser.format_help().split())
    assert "-o FILE, --output FILE where [default: here]" in help
    assert "--dry-run print, do nothing --cpu on the CPU [env TRLSTACK_CPU; default: False]" in help


def test_an_alias_names_the_setting_in_the_environment_too():
    spec = Setting(Env.OUTPUT_DIR, "where", aliases=("-d",))
    parser = Parser(prog="t")
    add_setting(parser, "output_dir", spec, "out", {"TRLSTACK_OUTPUT_DIR": "env"})
    assert parser.parse_args([]).output_dir == "env"
    assert parser.parse_args(["-d", "flag"]).output_dir == "flag"
    assert "-d OUTPUT_DIR, --output-dir OUTPUT_DIR where [env TRLSTACK_OUTPUT_DIR; default: env]" in " ".join(
        parser.format_help().split()
    )


@dataclass(frozen=True)
class Grouped:
    """Settings that name their --help group, one that states its default in words, and one with none."""

    sharding: str = setting(Env.SHARDING, "how", "auto", one_of("auto", "none"), group="the layout")
    num_processes: int | None = setting(
        Env.NUM_PROCESSES, "how many", type=positive_int, shown="the visible GPUs", group="the layout"
    )
    model: str | None = setting(Env.MODEL, "which model", group="the run")
    cpu: bool = switch(Env.CPU, "on the CPU")


def test_a_type_that_names_its_values_shows_them_in_the_usage_line_and_checks_them():
    parser = Parser(prog="t")
    add_settings(parser, Example, {})
    add_settings(parser, Parts, {})
    usage = " ".join(parser.format_usage().split())
    assert "[--vllm-mode {server,colocate}]" in usage and "[--only {a,b,c}]" in usage
    with pytest.raises(UsageError, match=r"argument --vllm-mode: 'remote' is not one of server, colocate"):
        parser.parse_args(["--vllm-mode", "remote"])


def test_help_states_a_default_in_words_where_the_value_is_decided_later():
    parser = Parser(prog="t")
    add_settings(parser, Grouped, {})
    text = " ".join(parser.format_help().split())
    assert "how many [env TRLSTACK_NUM_PROCESSES; default: the visible GPUs]" in text
    assert "which model [env TRLSTACK_MODEL; default: unset]" in text
    assert parser.parse_args([]).num_processes is None  # the words are for --help only


def test_each_setting_goes_to_its_declared_group_unless_the_caller_chose_one():
    parser = Parser(prog="t")
    add_settings(parser, Grouped, {})
    titles = {group.title: [a.dest for a in group._group_actions] for group in parser._action_groups}
    assert titles["the layout"] == ["sharding", "num_processes"] and titles["the run"] == ["model"]
    assert "cpu" in titles["options"]
    chosen = Parser(prog="t")
    add_settings(chosen.add_argument_group("mine"), Grouped, {})
    assert [group.title for group in chosen._action_groups] == ["positional arguments", "options", "mine"]


@pytest.mark.parametrize(
    ("spec", "default", "text"),
    [
        (Setting(Env.MODEL, "m"), None, "m [env TRLSTACK_MODEL; default: unset]"),
        (
            Setting(Env.MODEL, "m", shown="the config's"),
            None,
            "m [env TRLSTACK_MODEL; default: the config's]",
        ),
        (Setting(Env.RECIPE, "r", kind="positional"), None, "r [env TRLSTACK_RECIPE]"),
        (Setting(Env.CPU, "c", kind="switch"), False, "c [env TRLSTACK_CPU; default: False]"),
        (Setting(None, "d", kind="switch"), False, "d"),
        (Setting(None, "f"), "table", "f [default: table]"),
        (Setting(None, "f"), None, "f"),
        (Setting(None, "f"), (), "f"),
        (Setting(None, "f", shown="the rest"), None, "f [default: the rest]"),
        (
            Setting(Env.DATASET, "l", kind="repeated"),
            (),
            "l [env TRLSTACK_DATASET, comma-separated; default: none]",
        ),
        (Setting(None, "b", kind="repeated"), (), "b"),
    ],
)
def test_help_text_states_the_variable_and_the_default_once(spec, default, text):
    assert help_text(spec, default) == text
