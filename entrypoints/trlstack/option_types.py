"""argparse types of the settings' values: each turns the text a flag or a variable holds into the value, or
raises ArgumentTypeError (ValueError for parse_bool) saying what was expected; options.py names the flag or
the variable in the message."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Mapping
from typing import TypeVar

from trlstack.defaults import FALSE_VALUES, TRUE_VALUES

T = TypeVar("T")


def parse_bool(raw: str) -> bool:
    """Read a yes/no value the way compose files and shells write it."""
    value = raw.strip().lower()
    if value in TRUE_VALUES:
        return True
    if value in FALSE_VALUES:
        return False
    raise ValueError("expected one of 1/0, true/false, yes/no, on/off")


def _number(kind: Callable[[str], T], raw: str, what: str) -> T:
    # int() and float() also read other scripts' digits (٣) and full-width ones; what a flag or variable
    # holds is handed on to programs that read only 0-9, so those are refused here.
    if not raw.isascii():
        raise argparse.ArgumentTypeError(f"{raw!r} is not {what} (write it with the digits 0-9)")
    try:
        return kind(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not {what}") from None


def positive_int(raw: str) -> int:
    """argparse type: an integer >= 1."""
    value = _number(int, raw, "a whole number")
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive whole number")
    return value


def rank_number(raw: str) -> int:
    """argparse type: a rank, a whole number from 0."""
    value = _number(int, raw, "a whole number")
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is not a rank (0 or more)")
    return value


def whole_number(raw: str) -> int:
    """argparse type: a count, a whole number from 0."""
    value = _number(int, raw, "a whole number")
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is not a whole number (0 or more)")
    return value


def port_number(raw: str) -> int:
    """argparse type: a TCP port."""
    value = _number(int, raw, "a TCP port (1-65535)")
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a TCP port (1-65535)")
    return value


def positive_float(raw: str) -> float:
    """argparse type: a finite number > 0."""
    value = _number(float, raw, "a number")
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{raw!r} is not a finite number")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{value} is not a positive number")
    return value


WEEK_S = 7 * 24 * 3600


def wait_seconds(raw: str) -> float:
    """argparse type: how long to wait, in seconds: more than 0, at most a week."""
    value = positive_float(raw)
    if value > WEEK_S:
        raise argparse.ArgumentTypeError(
            f"{value:g} s is longer than any wait; give at most {WEEK_S} s (a week)"
        )
    return value


def fraction(raw: str) -> float:
    """argparse type: a number in (0, 1]."""
    value = positive_float(raw)
    if value > 1:
        raise argparse.ArgumentTypeError(f"{value} is not a fraction in (0, 1]")
    return value


class Choice:
    """argparse type: one of `choices`, exactly as written (`fold_case`: in any case, read as lower case);
    `refused` values are refused with their own reason. Its `choices` are what --help shows in the usage
    line (options.choices_of)."""

    def __init__(self, *choices: str, fold_case: bool = False, refused: Mapping[str, str] | None = None):
        self.choices = choices
        self.fold_case = fold_case
        self.refused = dict(refused or {})

    def __call__(self, raw: str) -> str:
        value = raw.strip().lower() if self.fold_case else raw
        if value in self.refused:
            raise argparse.ArgumentTypeError(self.refused[value])
        if value not in self.choices:
            raise argparse.ArgumentTypeError(f"{raw!r} is not one of {', '.join(self.choices)}")
        return value


def one_of(*choices: str, fold_case: bool = False, refused: Mapping[str, str] | None = None) -> Choice:
    """argparse type: one of `choices`, exactly as written (Choice says the rest)."""
    return Choice(*choices, fold_case=fold_case, refused=refused)


def seconds_or_never(raw: str) -> float:
    """argparse type: how long to wait, in seconds (as wait_seconds), or 0 for never."""
    return 0.0 if _number(float, raw, "a number") == 0 else wait_seconds(raw)


def handed_number(environ: Mapping[str, str], variable: str, what: str, flag: str) -> float | None:
    """A number above 0 that train hands every rank in `variable` (None: unset); SystemExit naming the
    variable and the flag train sets it from, for a value that is none."""
    raw = environ.get(variable, "")
    if not raw:
        return None
    try:
        return positive_float(raw)
    except argparse.ArgumentTypeError:
        raise SystemExit(f"{variable}={raw!r} is not {what} above 0; train sets it from {flag}.") from None
