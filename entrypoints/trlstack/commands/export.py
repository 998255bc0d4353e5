"""`trlstack export --format sif|sqsh IMAGE`: the built image as one file that HPC container runtimes run.

- `sif` (Apptainer, `trlstack slurm --runtime apptainer`): `apptainer build OUT docker-archive://TAR`, TAR
  made by `docker save IMAGE` (or given as IMAGE), unpacked in a scratch folder beside OUT rather than in
  /tmp, which on login nodes is often small.
- `sqsh` (enroot, what Pyxis runs): `enroot import --output OUT dockerd://IMAGE`.

The file is written under a temporary name and renamed when complete, never over an existing file; its sha256
is printed (`sha256sum -c` format) and kept beside it as OUT.sha256. The request's flags are declared once
(ExportRequest); `export_steps` is a pure function of the request; `run` carries the steps out.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from trlstack.command import Command
from trlstack.errors import UsageError
from trlstack.files import cannot_create_in
from trlstack.options import add_settings, flag, settings_from, switch

FORMATS = ("sif", "sqsh")
# squashfs compression of the image file. gzip is what every kernel and squashfuse read; zstd at level 3
# builds several times faster for a slightly larger file, and needs Linux >= 4.14 or a squashfuse with zstd.
COMPRESSION = {"gzip": "-comp gzip", "zstd": "-comp zstd -Xcompression-level 3"}


@dataclass(frozen=True)
class Export:
    """The commands that make `output`, written first at `partial`, with `scratch` removed afterwards."""

    steps: list[Command]
    output: Path
    partial: Path
    scratch: Path


def is_archive(image: str) -> bool:
    """A `docker save` archive given as a file, rather than an image reference."""
    return image.endswith(".tar")


def default_output(image: str, fmt: str) -> Path:
    """`trlstack:0.1.0` -> trlstack_0.1.0.sif in this folder; an archive keeps its name."""
    if is_archive(image):
        return Path(Path(image).name[: -len(".tar")] + f".{fmt}")
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", image.split("@")[0].rsplit("/", 1)[-1])
    return Path(f"{name}.{fmt}")


def export_steps(fmt: str, image: str, output: Path, compression: str | None = None) -> Export:
    """The commands that turn `image` into `output` in `fmt`; UsageError for a request that cannot work."""
    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}.")
    if compression is not None and compression not in COMPRESSION:
        raise UsageError(f"--compression {compression!r}: choose one of {', '.join(COMPRESSION)}.")
    partial = output.with_name(f".{output.name}.partial")
    scratch = output.with_name(f".{output.name}.scratch")
    if fmt == "sqsh":
        if is_archive(image):
            raise UsageError(
                f"{image}: enroot imports from the Docker daemon (dockerd://IMAGE), not from an archive; "
                "give the image's name, e.g. trlstack:latest, where `docker image ls` shows it."
            )
        env = {"ENROOT_SQUASH_OPTIONS": COMPRESSION[compression]} if compression else {}
        argv = ["enroot", "import", "--output", str(partial), f"dockerd://{image}"]
        return Export([Command(argv, env)], output, partial, scratch)
    steps = []
    archive = Path(image)
    if not is_archive(image):
        archive = scratch / "image.tar"
        steps.append(Command(["docker", "save", "--output", str(archive), image]))
    # No layer cache (a one-off conversion would keep a second copy of the image in ~/.apptainer).
    build = ["apptainer", "build", "--disable-cache"]
    if compression:
        build += ["--mksquashfs-args", COMPRESSION[compression]]
    env = {"APPTAINER_TMPDIR": str(scratch)}
    steps.append(Command([*build, str(partial), f"docker-archive://{archive}"], env))
    return Export(steps, output, partial, scratch)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


# ----------------------------------------------------------------------------------------------- the CLI


@dataclass(frozen=True)
class ExportRequest:
    """What `trlstack export` makes: from which image, in which format, where; or only the commands."""

    image: str = flag("image reference, or a .tar made by `docker save`", positional=True, metavar="IMAGE")
    format: str = flag("sif (Apptainer) or sqsh (enroot)", choices=FORMATS)
    output: str | None = flag(
        "the file to make", None, metavar="FILE", aliases=("-o",), shown="NAME_TAG.FORMAT"
    )
    compression: str | None = flag(
        "squashfs compression; zstd builds several times faster",
        None,
        shown="the tool's own, gzip",
        choices=list(COMPRESSION),
    )
    print_command: bool = switch(None, "print the commands, run nothing")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Turn the built image into an Apptainer .sif or an enroot .sqsh (for Pyxis), printing its sha256. "
        "IMAGE is an image the local Docker engine has (e.g. trlstack:latest) or, for sif, a `docker save` "
        "archive (.tar)."
    )
    add_settings(parser, ExportRequest, os.environ)


def _check_request(plan: Export, image: str) -> None:
    if plan.output.exists():
        raise UsageError(f"{plan.output} exists; remove it or choose another --output.")
    folder = plan.output.parent.resolve()
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        raise UsageError(f"cannot write in {folder}; choose --output in a writable folder.")
    problem = cannot_create_in(folder)
    if problem is not None:
        raise UsageError(
            f"nothing can be made in {folder} ({problem}; a read-only or pseudo file system such as /proc?); "
            "choose --output in a writable folder."
        )
    for step in plan.steps:
        program = step.argv[0]
        if shutil.which(program) is None:
            fixes = {
                "apptainer": "install Apptainer (Debian/Ubuntu package `apptainer`) or run this where it is",
                "enroot": "install enroot (NVIDIA's releases; Debian does not package it) or run this "
                "where it is; Apptainer runs the .sif on the same clusters",
                "docker": "run this on the machine that built the image, or give a `docker save` archive",
            }
            raise UsageError(f"`{program}` is not on PATH: {fixes[program]}.")
    if is_archive(image) and not Path(image).is_file():
        raise UsageError(f"{image} does not exist; make it with `docker save --output {image} IMAGE`.")
    if not is_archive(image) and shutil.which("docker"):
        done = subprocess.run(["docker", "image", "inspect", image], capture_output=True, text=True)
        if done.returncode != 0:
            raise UsageError(
                f"the Docker engine has no image {image!r}; build it (`docker buildx bake -f "
                "docker/docker-bake.hcl`) or name one that `docker image ls` shows."
            )


def run(args: argparse.Namespace) -> int:
    request = settings_from(ExportRequest, args)
    output = Path(request.output) if request.output else default_output(request.image, request.format)
    image = os.path.abspath(request.image) if is_archive(request.image) else request.image
    plan = export_steps(request.format, image, Path(os.path.abspath(output)), request.compression)
    if request.print_command:
        for step in plan.steps:
            print(step.shell())
        print(f"mv {shlex.quote(str(plan.partial))} {shlex.quote(str(plan.output))}")
        return 0
    _check_request(plan, image)
    try:
        plan.scratch.mkdir(exist_ok=True)
        for step in plan.steps:
            print(f"trlstack export: {step.shell()}", file=sys.stderr, flush=True)
            done = subprocess.run(step.argv, env={**os.environ, **step.env})
            if done.returncode != 0:
                failed = f"`{step.argv[0]}` failed (exit {done.returncode})"
                print(f"trlstack export: {failed}; {output} was not made", file=sys.stderr)
                return done.returncode
        plan.partial.replace(plan.output)
    finally:
        shutil.rmtree(plan.scratch, ignore_errors=True)
        plan.partial.unlink(missing_ok=True)
    line = f"{sha256(plan.output)}  {plan.output}"
    plan.output.with_name(plan.output.name + ".sha256").write_text(line + "\n")
    print(line)
    return 0
