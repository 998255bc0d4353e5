"""`trlstack version`: trlstack's version and the pinned GPU stack beside what is installed here."""

from __future__ import annotations

import argparse
import sys

from trlstack import __version__
from trlstack.stack import installed_version, pinned_stack


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = "Print trlstack's version and the pinned GPU stack with what is installed here."


def run(args: argparse.Namespace) -> int:
    print(f"trlstack {__version__}")
    print(f"python {sys.version.split()[0]}")
    pins = pinned_stack()
    if not pins:
        print("pinned stack: unknown (trlstack is not installed as a package)")
        return 0
    width = max(map(len, pins))
    for name, pinned in pins.items():
        installed = installed_version(name) or "not installed"
        print(f"{name.ljust(width)}  {pinned.ljust(8)}  installed: {installed}")
    return 0
