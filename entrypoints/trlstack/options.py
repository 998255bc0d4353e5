"""One declaration per setting: the flag, its environment variable and its help text together.

Precedence is flag > environment > default, the same for every role, so compose files and users can set
any setting either way.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping
from typing import Any

from trlstack.errors import UsageError


def add_setting(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    flag: str,
    env: str,
    help: str,
    default: Any = None,
    type: Callable[[str], Any] = str,
    environ: Mapping[str, str] | None = None,
    **kwargs: Any,
) -> None:
    """Add `flag` whose default comes from `env` when that variable is set."""
    environ = os.environ if environ is None else environ
    if env in environ and environ[env] != "":
        raw = environ[env]
        try:
            default = type(raw)
        except (ValueError, argparse.ArgumentTypeError) as error:
            raise UsageError(f"{env}={raw!r} is not valid for {flag}: {error}. Fix or unset {env}.") from None
    shown = "unset" if default is None else default
    parser.add_argument(flag, default=default, type=type, help=f"{help} [env {env}; default: {shown}]", **kwargs)
