"""Checks of the submit host before a script is written or submitted: the job's folders on storage every node
shares (a dry run checks them too: it prints the script that writing would write), and the image and the
tools to run it (sbatch, the runtime), which a dry run, a preview that may be made on another machine, leaves
to writing."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from trlstack.commands.slurm.settings import SlurmSettings
from trlstack.errors import UsageError

# Where a job's files would stay on one node: other nodes (and the next attempt elsewhere) never see them.
NODE_LOCAL_PREFIXES = ("/tmp", "/var/tmp", "/dev/shm", "/run")
NODE_LOCAL_FILESYSTEMS = frozenset({"tmpfs", "ramfs", "devtmpfs", "overlay"})


def node_local(path: str, mounts: str | None = None) -> str | None:
    """Why `path` lives on one node only (a node-local folder or a memory filesystem), or None."""
    for prefix in NODE_LOCAL_PREFIXES:
        if path == prefix or path.startswith(prefix + "/"):
            return f"{prefix} is local to each node"
    if mounts is None:
        try:
            mounts = Path("/proc/self/mounts").read_text()
        except OSError:
            return None
    best, fstype = "", ""
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, fstype = point, fields[2]
    if fstype in NODE_LOCAL_FILESYSTEMS:
        return f"it is on {best} ({fstype}), a filesystem of this machine only"
    return None


def check_host(settings: SlurmSettings, script: Path, dry_run: bool, submit: bool) -> None:
    """Every check of the submit host: the job's folders (a dry run's too), then, unless a dry run, the image
    and the tools to write and submit the script; UsageError naming the fix."""
    folder_checks(settings, script)
    if not dry_run:
        host_checks(settings, submit=submit)


def folder_checks(settings: SlurmSettings, script: Path, mounts: str | None = None) -> None:
    """The job's folders, for a dry run and a write alike: the output and cache folders shared between nodes,
    the script a file; UsageError naming the fix."""
    folders = [("--output-dir", settings.output_dir), ("--cache-dir", settings.cache)]
    folders += [("--task", settings.train.task)] if settings.train.task else []
    for flag, path in folders:
        why = node_local(path, mounts)
        if why:
            raise UsageError(
                f"{flag} {path} is not shared between nodes ({why}); choose a folder on shared storage "
                "(home, project or scratch filesystem) that every node mounts at the same path."
            )
    if script.is_dir():
        raise UsageError(
            f"--output {script} is a directory; name a file such as {script}/{settings.name}.sbatch."
        )


def host_checks(
    settings: SlurmSettings,
    submit: bool,
    which: Callable[[str], str | None] = shutil.which,
    mounts: str | None = None,
) -> None:
    """Checks of the submit host before a script is written or submitted, after folder_checks: the image and
    the tools; UsageError naming the fix."""
    if submit and which("sbatch") is None:
        raise UsageError("`sbatch` is not on PATH: submit from a Slurm login node, or use --dry-run.")
    image = settings.image
    if settings.runtime == "apptainer":
        if which("apptainer") is None:
            raise UsageError(
                "--runtime apptainer: `apptainer` is not on PATH on this host; load it (e.g. `module load "
                "apptainer`), or choose --runtime pyxis or none."
            )
        _check_image_file(image, "a .sif made by `trlstack export --format sif IMAGE`", mounts)
    elif settings.runtime == "pyxis":
        if not _pyxis_installed(which):
            raise UsageError(
                "--runtime pyxis: this cluster's srun has no --container-image (the Pyxis plugin is not "
                "installed); choose --runtime apptainer or none."
            )
        if image and (image.endswith(".sqsh") or image.startswith(("/", "./"))):
            _check_image_file(image, "a .sqsh made by `trlstack export --format sqsh IMAGE`", mounts)
    elif image:
        folder = Path(image)
        if not ((folder / "activate").is_file() or (folder / "bin" / "activate").is_file()):
            raise UsageError(
                f"--image {image}: --runtime none takes an environment with an `activate` script (made by "
                "`trlstack bundle ... --format site` and its install.sh, or a virtualenv)."
            )


def _check_image_file(image: str | None, what: str, mounts: str | None) -> None:
    path = os.path.abspath(str(image))
    if not os.path.isfile(path):
        raise UsageError(f"--image {image} does not exist; give {what}.")
    why = node_local(path, mounts)
    if why:
        raise UsageError(f"--image {image} is not shared between nodes ({why}); move it to shared storage.")


def _pyxis_installed(which: Callable[[str], str | None]) -> bool:
    srun = which("srun")
    if srun is None:
        return False
    done = subprocess.run([srun, "--help"], capture_output=True, text=True)
    return "--container-image" in done.stdout
