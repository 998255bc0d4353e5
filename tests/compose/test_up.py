"""scripts/up.sh, README's main-job command, stops before the long image build where the build or the stack
could not end well: no GPU to give the containers, or a base image this machine cannot have. Each refusal
names the fix, exits 1 and leaves the checkout as it was (no .env written, nothing built)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from stacks import REPO, clean_environ

pytestmark = pytest.mark.docker

UP = REPO / "scripts" / "up.sh"


def fake_program(folder: Path, name: str, output: str) -> None:
    """A stand-in for a host program of the NVIDIA driver or toolkit (this machine has no GPU)."""
    path = folder / name
    path.write_text(f"#!/bin/sh\nprintf '%s\\n' '{output}'\n")
    path.chmod(0o755)


def up(*argv: str, path_first: Path | None = None, **settings: str) -> subprocess.CompletedProcess[str]:
    env = clean_environ(**settings)
    if path_first is not None:
        env["PATH"] = f"{path_first}{os.pathsep}{env['PATH']}"
    before = (REPO / ".env").exists()
    done = subprocess.run(["bash", str(UP), *argv], capture_output=True, text=True, env=env, timeout=120)
    assert (REPO / ".env").exists() == before, "up.sh wrote .env although it stopped"
    return done


def test_an_unknown_method_is_refused():
    done = up("dpo")
    assert (
        done.returncode == 1
        and "unknown method 'dpo'; use grpo, rloo, online-dpo or async-grpo" in done.stderr
    )


def test_help_says_what_up_does_and_starts_nothing():
    done = up("--help")
    assert done.returncode == 0 and done.stdout.startswith("usage: scripts/up.sh [METHOD]\n")
    assert "grpo (the default), rloo, online-dpo or async-grpo" in done.stdout
    assert "TRLSTACK_IMAGE" in done.stdout and "compose/smoke.yaml up grpo" in done.stdout
    assert up("-h").stdout == done.stdout


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--cpu",), "unknown option '--cpu'; scripts/up.sh takes one METHOD (see scripts/up.sh --help)"),
        (("grpo", "-d"), "unexpected argument '-d': scripts/up.sh takes one METHOD; give compose's options"),
        (("grpo", "rloo"), "unexpected argument 'rloo'"),
    ],
)
def test_arguments_it_does_not_take_are_refused_before_anything_starts(argv, message):
    done = up(*argv)
    assert done.returncode == 1 and message in done.stderr, done.stderr
    assert "building" not in done.stderr and "no NVIDIA GPU" not in done.stderr


@pytest.mark.parametrize(("method", "smoke"), [("grpo", "grpo"), ("rloo", "rloo"), ("async-grpo", "grpo")])
def test_without_a_gpu_up_stops_before_building_and_names_the_cpu_smoke(tmp_path, method, smoke):
    empty = tmp_path / "bin"
    empty.mkdir()
    fake_program(empty, "nvidia-smi", "No devices were found")  # a driver that sees no GPU
    done = up(method, path_first=empty)
    assert done.returncode == 1, done.stderr
    assert "no NVIDIA GPU is visible here" in done.stderr
    # A command that works from this checkout (compose/README.md shows it, a compose test runs it); the
    # roles' own --cpu needs the GPU stack, which a light install lacks.
    smoke_up = f"docker compose -f compose.yaml -f compose/smoke.yaml up {smoke}"
    hint = f"`bash docker/build.sh && mkdir -p outputs && {smoke_up}`"
    assert hint in done.stderr
    assert "building" not in done.stderr


def test_without_the_container_toolkit_up_names_it(docker_engine, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_program(bin_dir, "nvidia-smi", "GPU 0: NVIDIA H200 (UUID: GPU-0000)")
    done = up("grpo", path_first=bin_dir)
    if "Docker cannot give containers the GPU" not in done.stderr:
        pytest.skip("this machine has the NVIDIA Container Toolkit")
    assert done.returncode == 1 and "nvidia-ctk runtime configure --runtime=docker" in done.stderr


def test_a_base_image_that_cannot_be_had_is_named_with_the_fix(docker_engine, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_program(bin_dir, "nvidia-smi", "GPU 0: NVIDIA H200 (UUID: GPU-0000)")
    fake_program(bin_dir, "nvidia-ctk", "NVIDIA Container Toolkit CLI version 1.17.0")
    done = up(
        "grpo",
        path_first=bin_dir,
        TRLSTACK_IMAGE="trlstack:never-built-by-tests",
        BASE_IMAGE="trlstack-no-such-base:none",
    )
    assert done.returncode == 1, done.stderr
    assert "the base image trlstack-no-such-base:none is neither on this machine nor reachable" in done.stderr
    assert "BASE_IMAGE" in done.stderr and "docker/README.md" in done.stderr
    assert "building" not in done.stderr
