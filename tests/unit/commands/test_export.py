"""trlstack export: the exact conversion commands for sif and sqsh, and requests refused before anything runs.
The conversion itself runs for real (Apptainer on the test cluster) in tests/slurm/test_apptainer.py; enroot
is not packaged anywhere this project can install from, so sqsh is checked as rendered commands only."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from trlstack.cli import main
from trlstack.commands.export import ExportRequest, add_arguments, default_output, export_steps
from trlstack.errors import Parser, UsageError
from trlstack.options import settings_from


def test_sif_from_an_image_saves_it_then_builds_beside_the_output():
    plan = export_steps("sif", "trlstack:0.1.0", Path("/scratch/trlstack.sif"))
    assert [step.argv for step in plan.steps] == [
        ["docker", "save", "--output", "/scratch/.trlstack.sif.scratch/image.tar", "trlstack:0.1.0"],
        [
            "apptainer", "build", "--disable-cache", "/scratch/.trlstack.sif.partial",
            "docker-archive:///scratch/.trlstack.sif.scratch/image.tar",
        ],
    ]  # fmt: skip
    assert plan.steps[1].env == {"APPTAINER_TMPDIR": "/scratch/.trlstack.sif.scratch"}
    assert (plan.partial, plan.scratch) == (
        Path("/scratch/.trlstack.sif.partial"),
        Path("/scratch/.trlstack.sif.scratch"),
    )


def test_sif_from_an_archive_with_zstd():
    plan = export_steps("sif", "/data/trlstack.tar", Path("/data/t.sif"), compression="zstd")
    (build,) = plan.steps
    assert build.argv == [
        "apptainer", "build", "--disable-cache", "--mksquashfs-args", "-comp zstd -Xcompression-level 3",
        "/data/.t.sif.partial", "docker-archive:///data/trlstack.tar",
    ]  # fmt: skip


def test_sqsh_is_imported_from_the_docker_daemon_by_enroot():
    plan = export_steps("sqsh", "trlstack:latest", Path("/scratch/trlstack.sqsh"), compression="gzip")
    (step,) = plan.steps
    assert step.argv == [
        "enroot",
        "import",
        "--output",
        "/scratch/.trlstack.sqsh.partial",
        "dockerd://trlstack:latest",
    ]
    assert step.env == {"ENROOT_SQUASH_OPTIONS": "-comp gzip"}


@pytest.mark.parametrize(
    ("image", "fmt", "expected"),
    [
        ("trlstack:0.1.0-torch2.11-vllm0.25-cu13", "sif", "trlstack_0.1.0-torch2.11-vllm0.25-cu13.sif"),
        ("registry.example.org/team/trlstack:latest", "sqsh", "trlstack_latest.sqsh"),
        ("/data/trlstack.tar", "sif", "trlstack.sif"),
    ],
)
def test_the_default_output_is_named_after_the_image(image, fmt, expected):
    assert default_output(image, fmt) == Path(expected)


def test_print_command_shows_the_steps_and_runs_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["export", "--format", "sqsh", "trlstack:1", "--print-command"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"enroot import --output {tmp_path}/.trlstack_1.sqsh.partial dockerd://trlstack:1",
        f"mv {tmp_path}/.trlstack_1.sqsh.partial {tmp_path}/trlstack_1.sqsh",
    ]
    assert list(tmp_path.iterdir()) == []


def request(argv):
    parser = Parser(prog="trlstack export")
    add_arguments(parser)
    return settings_from(ExportRequest, parser.parse_args(argv))


def test_the_request_is_read_from_its_flags_output_as_o_or_output():
    assert request(["--format", "sif", "trlstack:1"]) == ExportRequest("trlstack:1", "sif")
    for given in (["-o", "t.sqsh"], ["--output", "t.sqsh"], ["--output=t.sqsh"]):
        argv = ["--format", "sqsh", *given, "--compression", "zstd", "--print-command", "trlstack:1"]
        assert request(argv) == ExportRequest("trlstack:1", "sqsh", "t.sqsh", "zstd", print_command=True)


def test_format_and_image_are_required_and_the_help_shows_each_flag_as_declared():
    with pytest.raises(UsageError, match=r"the following arguments are required: --format \(see"):
        request(["trlstack:1"])
    with pytest.raises(UsageError, match="the following arguments are required: IMAGE"):
        request(["--format", "sif"])
    parser = Parser(prog="trlstack export")
    add_arguments(parser)
    usage = " ".join(parser.format_usage().split())
    assert usage == (
        "usage: trlstack export [-h] --format {sif,sqsh} [-o FILE] [--compression {gzip,zstd}] "
        "[--print-command] IMAGE"
    )
    help = " ".join(parser.format_help().split())
    assert "-o FILE, --output FILE the file to make [default: NAME_TAG.FORMAT]" in help
    assert "--print-command print the commands, run nothing" in help


@pytest.mark.parametrize(
    ("argv", "tools", "message"),
    [
        (["--format", "sqsh", "trlstack:1"], [], "`enroot` is not on PATH: install enroot"),
        (["--format", "sif", "made.tar"], [], "`apptainer` is not on PATH: install Apptainer"),
        (
            ["--format", "sif", "trlstack:1"],
            ["apptainer"],
            "`docker` is not on PATH: run this on the machine",
        ),
        (
            ["--format", "sqsh", "x.tar"],
            ["enroot"],
            "enroot imports from the Docker daemon (dockerd://IMAGE)",
        ),
        (
            ["--format", "sif", "absent.tar"],
            ["apptainer"],
            "absent.tar does not exist; make it with `docker save",
        ),
        (["--format", "sif", "made.tar", "-o", "exists.sif"], ["apptainer"], "exists.sif exists; remove it"),
        (["--format", "sif", "made.tar", "-o", "."], ["apptainer"], "exists; remove it or choose another"),
        (
            ["--format", "sif", "made.tar", "-o", "/proc/x.sif"],
            ["apptainer"],
            "nothing can be made in /proc (",
        ),
        (["--format", "tar", "trlstack:1"], [], "invalid choice: 'tar'"),
        (["--format", "sif", "trlstack:1", "--compression", "xz"], [], "invalid choice: 'xz'"),
    ],
)
def test_bad_requests_exit_1_and_make_nothing(tmp_path, monkeypatch, capsys, argv, tools, message):
    monkeypatch.chdir(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in tools:  # stand-ins that are never run: the request is refused first
        (bin_dir / tool).write_text("#!/bin/sh\nexit 99\n")
        (bin_dir / tool).chmod(0o755)
    (tmp_path / "made.tar").write_bytes(b"")
    (tmp_path / "exists.sif").write_bytes(b"keep")
    monkeypatch.setenv("PATH", str(bin_dir))
    before = sorted(os.listdir(tmp_path))
    assert main(["export", *argv]) == 1
    assert message in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == before
    assert (tmp_path / "exists.sif").read_bytes() == b"keep"
