"""One error type and the exit codes every trlstack command documents.

Exit codes: 0 success, 1 user error (bad input or an unmet precondition; the message names the fix),
130 interrupted (Ctrl-C). Once serve-vllm has exec'd vLLM, vLLM's exit code is the role's; train returns
accelerate's, or 128 + the signal that stopped the run (roles/train/stopping.py).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable
from typing import Any, NoReturn

EXIT_OK = 0
EXIT_USER_ERROR = 1
EXIT_INTERNAL_ERROR = 3
EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """Bad input or an unmet precondition; str(error) says what is wrong and what to do."""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are UsageErrors, so every bad input exits 1 through run_main."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`)")

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
        # Python 3.11 and 3.12's argparse take `--flag=--` as no value at all (an empty list, the type check
        # skipped), for a store and an append option alike; 3.13 reads it as the value '--'. Caught here,
        # where a value is given, so no option's default (an append option's [] included) is taken for it.
        values = super()._get_values(action, arg_strings)
        if action.nargs is None and action.option_strings and values == []:
            self.error(f"argument {'/'.join(action.option_strings)}: expected one value")
        return values


def run_main(name: str, body: Callable[[], int]) -> int:
    """Run a command's body, turning UsageError, Ctrl-C and any other error (a bug) into a message and a
    documented exit code."""
    try:
        return body()
    except UsageError as error:
        print(f"{name}: error: {error}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as error:  # what no check foresaw: a bug, reported as one rather than as bad input
        traceback.print_exc()
        print(
            f"{name}: internal error: {type(error).__name__}: {error}. This is a bug in trlstack, not in "
            "your input; please report it with the traceback above and the output of `trlstack doctor`.",
            file=sys.stderr,
        )
        return EXIT_INTERNAL_ERROR
