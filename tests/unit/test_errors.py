"""The one error type: parser errors become UsageErrors, and an option given no value is refused by name."""

from __future__ import annotations

import sys

import pytest
from trlstack.errors import (
    EXIT_INTERNAL_ERROR,
    EXIT_INTERRUPTED,
    EXIT_USER_ERROR,
    Parser,
    UsageError,
    run_main,
)


def parser():
    parser = Parser(prog="t")
    parser.add_argument("--count", type=int)
    parser.add_argument("--names", action="append", default=[])
    parser.add_argument("--listed", default=[])
    return parser


def test_defaults_are_not_mistaken_for_values_given_empty():
    args = parser().parse_args([])
    assert (args.count, args.names, args.listed) == (None, [], [])
    assert parser().parse_args(["--names", "a", "--names=b"]).names == ["a", "b"]


@pytest.mark.parametrize("flag", ["--names", "--listed"])
@pytest.mark.skipif(sys.version_info >= (3, 13), reason="3.13's argparse reads `--flag=--` as the value '--'")
def test_a_flag_given_no_value_is_refused_by_name(flag):
    with pytest.raises(UsageError, match=f"argument {flag}: expected one value \\(see `t --help`\\)"):
        parser().parse_args([f"{flag}=--"])


def test_a_typed_flag_given_no_value_is_refused_on_every_python():
    with pytest.raises(UsageError, match="argument --count: "):
        parser().parse_args(["--count=--"])


def test_each_kind_of_failure_has_its_own_exit_code(capsys):
    def raising(error: BaseException):
        def body() -> int:
            raise error

        return body

    assert run_main("t", raising(UsageError("bad input; do this"))) == EXIT_USER_ERROR == 1
    assert capsys.readouterr().err == "t: error: bad input; do this\n"
    assert run_main("t", raising(KeyboardInterrupt())) == EXIT_INTERRUPTED == 130
    assert capsys.readouterr().err == "t: interrupted\n"
    assert run_main("t", raising(ZeroDivisionError("division by zero"))) == EXIT_INTERNAL_ERROR == 3
    err = capsys.readouterr().err
    assert "Traceback" in err and "ZeroDivisionError" in err
    assert err.rstrip().endswith("output of `trlstack doctor`.")
    assert "t: internal error: ZeroDivisionError: division by zero. This is a bug in trlstack" in err
