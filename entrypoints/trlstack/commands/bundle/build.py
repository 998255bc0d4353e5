"""Making the bundle: decide from the lock, then fill `DIR.partial` and rename it to DIR when complete."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from trlstack.commands.bundle.contents import (
    OPTIONAL,
    Plan,
    check_without,
    parse_freeze,
    plan_bundle,
    render_env,
    render_report,
    render_requirements,
)
from trlstack.commands.bundle.script import render_install_script
from trlstack.commands.bundle.settings import BundleSettings
from trlstack.commands.bundle.target import marker_environment
from trlstack.commands.bundle.tools import (
    build_project_wheel,
    call,
    export,
    install_site,
    pack,
    pip,
    sha256,
    target_flags,
)
from trlstack.errors import UsageError


def make_bundle(settings: BundleSettings) -> Path:
    """Make the bundle `settings` describe (with dry_run: print what it would hold); returns its folder."""
    project = Path(settings.project).resolve()
    if not (project / "uv.lock").is_file():
        raise UsageError(f"no uv.lock in {project}: run in the trlstack checkout or pass --project DIR")
    out = Path(settings.dir).resolve()
    check_new_folder(out)
    environment = marker_environment(settings.python_version, settings.platform)
    if settings.piece_size and settings.format != "site":
        raise UsageError("--piece-size splits the packed site folder: add --format site")

    locked = export(project, settings.extra, [])
    asked = list(settings.without) + (list(OPTIONAL) if settings.slim else [])
    without = check_without(asked, {p.name for p in locked})
    kept = export(project, settings.extra, without) if without else locked
    present = read_freeze(Path(settings.exclude_present)) if settings.exclude_present else {}
    if settings.keep_target_versions and not settings.exclude_present:
        raise UsageError("--keep-target-versions needs --exclude-present FILE (the target's pip freeze)")
    plan = plan_bundle(locked, kept, environment, present, without, settings.keep_target_versions)
    print(
        f"bundle: {len(plan.included)} packages for CPython {settings.python_version} on "
        f"{settings.platform}; "
        f"{len(plan.present)} already on the target, {len(plan.pruned)} left out with --without",
        file=sys.stderr,
    )
    if settings.dry_run:
        print(render_requirements(plan.included), end="")
        print(render_report(plan), end="", file=sys.stderr)
        return out

    stage = out.with_name(out.name + ".partial")
    shutil.rmtree(stage, ignore_errors=True)
    try:
        write_bundle(settings, project, plan, stage)
        if out.exists():
            out.rmdir()
        stage.rename(out)
    except BaseException as error:
        shutil.rmtree(stage, ignore_errors=True)  # nothing half-made is left behind
        if isinstance(error, OSError):
            raise UsageError(
                f"could not write the bundle into {out} ({error.strerror or error}): give a folder you can "
                "write, on a disk with room"
            ) from None
        raise
    return out


def check_new_folder(out: Path) -> None:
    """Refuse a DIR that holds anything (or is no folder): nothing a user has is ever replaced."""
    try:
        taken = out.exists() and (not out.is_dir() or any(out.iterdir()))
    except OSError as error:
        raise UsageError(f"{out} cannot be read ({error.strerror}): give a new folder") from None
    if taken and not out.is_dir():
        raise UsageError(f"{out} exists and is not a folder: give a new folder (nothing there was changed)")
    if taken:
        raise UsageError(f"{out} exists and is not empty: give a new folder (nothing there was changed)")


def read_freeze(path: Path) -> dict[str, str]:
    """The target's packages from its `pip list --format=freeze` file (--exclude-present)."""
    try:
        return parse_freeze(path.read_text())
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not text"
        raise UsageError(
            f"--exclude-present {path}: cannot be read ({reason}); give the file the target's "
            "`pip list --format=freeze` wrote"
        ) from None


def write_bundle(settings: BundleSettings, project: Path, plan: Plan, stage: Path) -> None:
    """Fill `stage`: wheels or the packed site folder, requirements.txt, bundle.env, install.sh."""
    wheels = stage / "wheels"
    wheels.mkdir(parents=True)
    pins = list(plan.included)
    requirements = stage / "requirements.txt"
    requirements.write_text(render_requirements(pins))
    if pins and settings.format == "wheelhouse":
        call(
            pip(settings.pip)
            + ["download", "--no-deps", "--require-hashes", "--dest", str(wheels), "-r", str(requirements)]
            + target_flags(settings.python_version, settings.platform),
            "pip download (for a package with no wheel for this target: raise --platform's glibc if the "
            "target allows, or leave the package out with --without)",
        )
    if settings.with_project:
        with tempfile.TemporaryDirectory() as built:
            pin = build_project_wheel(project, Path(built))
            for wheel in Path(built).glob("*.whl"):
                shutil.move(wheel, wheels / wheel.name)
        pins.append(pin)
        requirements.write_text(render_requirements(pins))
    (stage / "bundle.env").write_text(render_env(plan.env))
    (stage / "left-out.txt").write_text(render_report(plan))
    if settings.format == "site":
        site = stage / "site"
        install_site(site, requirements, wheels, settings.python_version, settings.platform)
        pieces = pack(site, stage / "site.tar.xz", settings.piece_size)
        (stage / "site.sha256").write_text(sha256(pieces) + "\n")
        shutil.rmtree(site)
        shutil.rmtree(wheels)
    script = stage / "install.sh"
    script.write_text(render_install_script(settings.format, settings.python_version, settings.platform))
    script.chmod(0o755)
