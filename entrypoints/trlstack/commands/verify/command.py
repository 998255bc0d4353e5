"""`trlstack verify`'s command line: where the image is (this container, an unpacked file system, a local
image, an archive), which parts to check, and the label values to check against; each setting declared once
(flag, environment variable, help)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trlstack.commands.verify.areas import AREAS, verify_tree
from trlstack.commands.verify.layout import KERNELS, LOCK_LABEL, PROVENANCE, SBOM_LABEL, VENV
from trlstack.commands.verify.report import print_report
from trlstack.commands.verify.trees import DirTree, TarTree, Tree
from trlstack.defaults import Env
from trlstack.errors import Parser, UsageError, run_main
from trlstack.option_types import one_of
from trlstack.options import add_settings, repeated, setting, settings_from

DESCRIPTION = (
    "Check that an image holds exactly what its commit locks: every installed Python file against "
    "uv.lock's wheels and the SBOM, the Debian packages against the SBOM, the Kernels Hub cache against "
    "kernels.lock. Prints each difference; exit 1 if there is any. Without an option it checks the "
    "container it runs in."
)


@dataclass(frozen=True)
class VerifySettings:
    """Where the image is (at most one of root, image and tarball; none: the container verify runs in), which
    parts to check (none named: all), and the sha256s the image's labels give."""

    root: str | None = setting(Env.VERIFY_ROOT, "an unpacked image file system (e.g. an unpacked .sif)")
    image: str | None = setting(Env.VERIFY_IMAGE, "a local Docker image, checked in a throwaway container")
    tarball: str | None = setting(Env.VERIFY_TARBALL, "a `docker save` or OCI archive of the image")
    only: tuple[str, ...] = repeated(
        Env.VERIFY_ONLY,
        "check only this part (repeatable; without it, every part)",
        one_of(*AREAS),
    )
    expect_lock_sha256: str | None = setting(
        Env.VERIFY_EXPECT_LOCK_SHA256, "the uv.lock sha256 the image's label gives"
    )
    expect_sbom_sha256: str | None = setting(
        Env.VERIFY_EXPECT_SBOM_SHA256, "the SBOM sha256 the image's label gives"
    )


# Said where verify, given no place, runs on a machine that is no trlstack image (a host, a checkout's venv).
NOT_AN_IMAGE = (
    f"this machine is not a trlstack image (it has no /{os.path.dirname(PROVENANCE)}): verify checks an "
    "image's files against what its commit locks (uv.lock, the SBOM, kernels.lock), so it runs in the "
    "image, `docker run --rm IMAGE trlstack verify` (a .sif: `apptainer exec IMAGE.sif trlstack verify`), "
    "or checks one from here: `trlstack verify --image IMAGE` (a local image, in a throwaway container), "
    "`--tarball FILE` (a `docker save` archive) or `--root DIR` (an unpacked file system)."
)


def is_image(root: str) -> bool:
    """Whether the file system at `root` is a trlstack image, or one being built: its venv, kernel cache or
    provenance is there."""
    return any(os.path.exists(os.path.join(root, part)) for part in (PROVENANCE, VENV, KERNELS))


WHERE = ("root", "image", "tarball")  # the settings that say where the image is: one at most
WHAT = ("only", "expect_lock_sha256", "expect_sbom_sha256")


def add_arguments(parser: argparse.ArgumentParser, environ: Mapping[str, str] = os.environ) -> None:
    parser.description = DESCRIPTION
    add_settings(parser.add_mutually_exclusive_group(), VerifySettings, environ, only=WHERE)
    add_settings(parser, VerifySettings, environ, only=WHAT)


def where_given(settings: VerifySettings) -> list[str]:
    """The places given, as flags; argparse refuses two flags, but a variable and a flag can still meet."""
    return ["--" + name for name in WHERE if getattr(settings, name)]


def image_labels(image: str) -> dict[str, str]:
    done = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{json .Config.Labels}}", image],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise LookupError(
            f"no local image {image!r} ({done.stderr.strip()}); build it or `docker load` it first"
        )
    return json.loads(done.stdout) or {}


def verify_image(image: str, areas: Sequence[str]) -> int:
    """Run verify inside a throwaway container of the image, with the image's labels to check against."""
    labels = image_labels(image)
    argv = ["docker", "run", "--rm", "--network", "none", "--entrypoint", "trlstack", image, "verify"]
    for label, option in ((LOCK_LABEL, "--expect-lock-sha256"), (SBOM_LABEL, "--expect-sbom-sha256")):
        if labels.get(label):
            argv += [option, labels[label]]
    for area in areas:
        argv += ["--only", area]
    return subprocess.run(argv).returncode


def verify(settings: VerifySettings) -> int:
    """Check the image where `settings` say it is and print the report; the exit code."""
    given = where_given(settings)
    if len(given) > 1:
        raise UsageError(
            f"{' and '.join(given)} are both set (by flag or by {Env.VERIFY_ROOT}, {Env.VERIFY_IMAGE}, "
            f"{Env.VERIFY_TARBALL}); give one place to check"
        )
    try:
        if settings.image:
            return verify_image(settings.image, settings.only)
        expect: dict[str, str] = {}
        tree: Tree
        if settings.tarball:
            if not os.path.isfile(settings.tarball):
                raise LookupError(f"--tarball {settings.tarball}: no such file")
            tree = TarTree.load(settings.tarball)
            expect = {k: v for k, v in tree.labels.items() if k in (LOCK_LABEL, SBOM_LABEL)}
            where = settings.tarball
        else:
            root = settings.root or "/"
            if not os.path.isdir(root):
                raise LookupError(f"--root {root}: no such folder")
            if settings.root is None and not is_image(root):
                raise UsageError(NOT_AN_IMAGE)
            tree, where = DirTree(root), root
        if settings.expect_lock_sha256:
            expect[LOCK_LABEL] = settings.expect_lock_sha256
        if settings.expect_sbom_sha256:
            expect[SBOM_LABEL] = settings.expect_sbom_sha256
        return print_report(verify_tree(tree, settings.only or AREAS, expect), where)
    except LookupError as error:
        raise UsageError(str(error)) from None


def run(args: argparse.Namespace) -> int:
    return verify(settings_from(VerifySettings, args))


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m trlstack.commands.verify`: the image build's check of its own file system, made before the
    trlstack command is installed (docker/Dockerfile, stage `kernels`); the same settings, a file system
    only."""

    def body() -> int:
        parser = Parser(prog="python -m trlstack.commands.verify")
        add_arguments(parser)
        settings = settings_from(VerifySettings, parser.parse_args(argv))
        if settings.image or settings.tarball:
            parser.error("standalone, verify checks a file system: use --root")
        return verify(settings)

    return run_main("trlstack verify", body)
