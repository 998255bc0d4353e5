"""Making the bundle: decide from the lock, then fill `DIR.partial` and rename it to DIR when complete."""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
import tempfile
from pathlib import Path

from trlstack.bundle.contents import (
    OPTIONAL,
    Plan,
    check_without,
    parse_freeze,
    plan_bundle,
    render_env,
    render_report,
    render_requirements,
)
from trlstack.bundle.script import render_install_script
from trlstack.bundle.target import marker_environment
from trlstack.bundle.tools import build_project_wheel, call, export, install_site, pack, pip, target_flags
from trlstack.errors import UsageError


def make_bundle(args: argparse.Namespace) -> Path:
    project = Path(args.project).resolve()
    if not (project / "uv.lock").is_file():
        raise UsageError(f"no uv.lock in {project}: run in the trlstack checkout or pass --project DIR")
    out = Path(args.dir).resolve()
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"{out} exists and is not empty: give a new folder (nothing there was changed)")
    environment = marker_environment(args.python_version, args.platform)
    if args.piece_size and args.format != "site":
        raise UsageError("--piece-size splits the packed site folder: add --format site")

    locked = export(project, args.extra, [])
    without = check_without(
        list(args.without) + (list(OPTIONAL) if args.slim else []), {p.name for p in locked}
    )
    kept = export(project, args.extra, without) if without else locked
    present = parse_freeze(Path(args.exclude_present).read_text()) if args.exclude_present else {}
    if args.keep_target_versions and not args.exclude_present:
        raise UsageError("--keep-target-versions needs --exclude-present FILE (the target's pip freeze)")
    plan = plan_bundle(locked, kept, environment, present, without, args.keep_target_versions)
    print(
        f"bundle: {len(plan.included)} packages for CPython {args.python_version} on {args.platform}; "
        f"{len(plan.present)} already on the target, {len(plan.pruned)} left out with --without",
        file=sys.stderr,
    )
    if args.dry_run:
        print(render_requirements(plan.included), end="")
        print(render_report(plan), end="", file=sys.stderr)
        return out

    stage = out.with_name(out.name + ".partial")
    shutil.rmtree(stage, ignore_errors=True)
    try:
        write_bundle(args, project, plan, stage)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)  # nothing half-made is left behind
        raise
    if out.exists():
        out.rmdir()
    stage.rename(out)
    return out


def write_bundle(args: argparse.Namespace, project: Path, plan: Plan, stage: Path) -> None:
    """Fill `stage`: wheels or the packed site folder, requirements.txt, bundle.env, install.sh."""
    wheels = stage / "wheels"
    wheels.mkdir(parents=True)
    pins = list(plan.included)
    requirements = stage / "requirements.txt"
    requirements.write_text(render_requirements(pins))
    if pins and args.format == "wheelhouse":
        call(
            pip(args.pip)
            + ["download", "--no-deps", "--require-hashes", "--dest", str(wheels), "-r", str(requirements)]
            + target_flags(args.python_version, args.platform),
            "pip download (for a package with no wheel for this target: raise --platform's glibc if the "
            "target allows, or leave the package out with --without)",
        )
    if args.with_project:
        with tempfile.TemporaryDirectory() as built:
            pin = build_project_wheel(project, Path(built))
            for wheel in Path(built).glob("*.whl"):
                shutil.move(wheel, wheels / wheel.name)
        pins.append(pin)
        requirements.write_text(render_requirements(pins))
    (stage / "bundle.env").write_text(render_env(plan.env))
    (stage / "left-out.txt").write_text(render_report(plan))
    if args.format == "site":
        site = stage / "site"
        install_site(site, requirements, wheels, args.python_version, args.platform)
        pieces = pack(site, stage / "site.tar.xz", args.piece_size)
        digest = hashlib.sha256()
        for piece in pieces:
            with piece.open("rb") as data:
                while chunk := data.read(1 << 20):
                    digest.update(chunk)
        (stage / "site.sha256").write_text(digest.hexdigest() + "\n")
        shutil.rmtree(site)
        shutil.rmtree(wheels)
    script = stage / "install.sh"
    script.write_text(render_install_script(args.format, args.python_version, args.platform))
    script.chmod(0o755)
