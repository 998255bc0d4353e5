"""`trlstack bundle`'s command line: the settings as flags, then the bundle made from them."""

from __future__ import annotations

import argparse
import os
import sys

from trlstack.commands.bundle.build import make_bundle
from trlstack.commands.bundle.settings import BundleSettings
from trlstack.options import add_settings, settings_from


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Make an offline install of the locked GPU stack (uv.lock) for a machine without a package index: "
        "a wheelhouse, or a packed site folder, plus install.sh for the target."
    )
    add_settings(parser, BundleSettings, os.environ)


def run(args: argparse.Namespace) -> int:
    settings = settings_from(BundleSettings, args)
    out = make_bundle(settings)
    if not settings.dry_run:
        print(
            f"bundle: wrote {out}; on the target run: sh {os.path.join(out.name, 'install.sh')}",
            file=sys.stderr,
        )
    return 0
