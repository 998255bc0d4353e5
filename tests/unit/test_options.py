"""Settings: flag > environment > default, with errors that name the variable."""

from __future__ import annotations

import argparse

import pytest
from trlstack.errors import UsageError
from trlstack.options import Parser, add_setting, add_switch, parse_bool, positive_int, split_extra

TRUE = ["1", "TRUE", " yes ", "on"]
FALSE = ["0", "false", "No", "off"]


@pytest.mark.parametrize(("raw", "value"), [(raw, True) for raw in TRUE] + [(raw, False) for raw in FALSE])
def test_parse_bool_reads_what_shells_and_compose_write(raw, value):
    assert parse_bool(raw) is value


def switch(environ, argv):
    parser = Parser(prog="t")
    add_switch(parser, "--cpu", "T_CPU", "help", environ=environ)
    return parser.parse_args(argv).cpu


def test_a_switch_is_on_from_the_flag_or_the_environment():
    assert switch({}, []) is False
    assert switch({}, ["--cpu"]) is True
    assert switch({"T_CPU": "1"}, []) is True
    assert switch({"T_CPU": "0"}, []) is False
    assert switch({"T_CPU": ""}, []) is False  # empty means unset, as compose passes it


def test_a_bad_switch_value_names_the_variable():
    with pytest.raises(UsageError, match=r"T_CPU='maybe' is not valid for --cpu: expected one of 1/0"):
        switch({"T_CPU": "maybe"}, [])


def test_flag_beats_environment_beats_default():
    def value(environ, argv):
        parser = Parser(prog="t")
        add_setting(parser, "--n", "T_N", "help", 3, positive_int, environ=environ)
        return parser.parse_args(argv).n

    assert value({}, []) == 3
    assert value({"T_N": "5"}, []) == 5
    assert value({"T_N": "5"}, ["--n", "7"]) == 7


def test_parser_errors_are_usage_errors_that_point_at_help():
    parser = Parser(prog="t")
    add_setting(parser, "--n", "T_N", "help", 3, positive_int, environ={})
    with pytest.raises(
        UsageError, match=r"argument --n: 0 is not a positive whole number \(see `t --help`\)"
    ):
        parser.parse_args(["--n", "0"])
    with pytest.raises(UsageError, match="'x' is not a whole number"):
        parser.parse_args(["--n", "x"])


def test_split_extra_keeps_everything_after_the_first_double_dash():
    assert split_extra(["a", "--", "--b", "--", "c"]) == (["a"], ["--b", "--", "c"])
    assert split_extra(["a"]) == (["a"], [])
    assert isinstance(Parser(prog="t"), argparse.ArgumentParser)
