"""Every command a README shows is exercised (tests/readme_commands.py says how); the ones with a dry mode run
here, for real, so that no example is one the product's own guards refuse."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from readme_commands import EXERCISED, REPO, Dry, Elsewhere, InImage, commands_in, shown

SHOWN = shown()
DRY = sorted(
    {command.key: command for command in SHOWN if isinstance(EXERCISED.get(command.key), Dry)}.items()
)


def test_every_command_a_readme_shows_is_exercised():
    uncovered = [str(command) for command in SHOWN if command.key not in EXERCISED]
    assert not uncovered, "say how a test runs these (tests/readme_commands.py, EXERCISED):\n" + "\n".join(
        uncovered
    )


def test_every_entry_is_a_command_a_readme_still_shows():
    keys = {command.key for command in SHOWN}
    assert not [key for key in EXERCISED if key not in keys]


def test_the_readmes_shown_are_every_readme():
    folders = {Path(command.path).parent.name or "." for command in SHOWN}
    assert {".", "compose", "docker", "slurm", "bench", "nix"} <= folders


@pytest.mark.parametrize("key", sorted(key for key, how in EXERCISED.items() if isinstance(how, Elsewhere)))
def test_a_command_done_elsewhere_names_a_test_that_exists(key):
    how = EXERCISED[key]
    assert isinstance(how, Elsewhere)
    path, _, name = how.test.partition("::")
    assert name, f"{how.test}: name the test function"
    source = (REPO / path).read_text()
    assert re.search(rf"^(async )?def {re.escape(name)}\(", source, re.MULTILINE), (
        f"{how.test} does not exist"
    )


def test_commands_are_read_as_the_shell_reads_them(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "text `not a block`\n```bash\nfirst --a \\\n    --b   # a comment\n# only a comment\n"
        "echo '# kept' \"a#b\"\n```\n```\nplain block, no shell\n```\n"
    )
    found = [(command.line, command.text) for command in commands_in(page, root=tmp_path)]
    assert found == [(3, "first --a --b"), (6, "echo '# kept' \"a#b\"")]


def dry_environment() -> dict[str, str]:
    """This interpreter's console scripts first on PATH; no trlstack, CUDA or Hub setting from the machine."""
    kept = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("TRLSTACK_", "CUDA_", "HF_", "NCCL_", "VLLM_"))
    }
    return {**kept, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{kept.get('PATH', '')}"}


@pytest.mark.parametrize(("key", "command"), DRY, ids=[key for key, _ in DRY])
def test_a_command_with_a_dry_mode_runs(key, command, tmp_path):
    how = EXERCISED[key]
    assert isinstance(how, Dry)
    if how.needs_uv and shutil.which("uv") is None:
        pytest.skip("needs uv on PATH (scripts/test.sh installs it)")
    line = how.command(command.text)
    cwd = REPO if how.cwd == "repo" else tmp_path
    done = subprocess.run(
        ["bash", "-c", line], cwd=cwd, env=dry_environment(), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, (
        f"{command}\nran `{line}` in {cwd}: exit {done.returncode}\n{done.stderr[-3000:]}"
    )


ROLES = ("serve-vllm", "train")


def role_part(text: str) -> list[str]:
    """The role's command line in a `docker run ... IMAGE ROLE ARGS` a README shows."""
    words = shlex.split(text)
    start = next(index for index, word in enumerate(words) if word in ROLES)
    return words[start:]


IN_IMAGE_ROLES = sorted(
    {
        c.key: c
        for c in SHOWN
        if isinstance(EXERCISED.get(c.key), InImage) and set(ROLES) & set(c.text.split())
    }.items()
)


@pytest.mark.parametrize(("key", "command"), IN_IMAGE_ROLES, ids=[key for key, _ in IN_IMAGE_ROLES])
def test_the_role_a_docker_command_starts_runs_here_in_its_dry_mode(key, command, tmp_path):
    # The role's own guards (the bind, the GPU sets) judge the example here too, without the engine.
    how = EXERCISED[key]
    assert isinstance(how, InImage)
    env = dry_environment()
    words = shlex.split(command.text)
    env.update(words[index + 1].split("=", 1) for index, word in enumerate(words) if word == "-e")
    argv = [*role_part(command.text), *shlex.split(how.role_append)]
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{command}\nran {shlex.join(argv)}: {done.stderr[-3000:]}"


def test_ci_runs_the_test_command_readme_gives():
    assert "\nbash scripts/test.sh\n" in (REPO / ".ci" / "run").read_text()


STAND_IN_DOCKER = """#!/bin/sh
# docker, as up.sh meets it on a GPU machine that has the image: every call recorded, `run` of the plan
# answered by this checkout's plan for $GPUS GPUs, everything else a success.
printf '%s\\n' "$*" >> "$CALLS"
case "$*" in
  *"plan --check"*)
    for word in "$@"; do case $word in TRLSTACK_VARIANT=*) export "$word" ;; esac; done
    exec trlstack plan --check ;;
  *"trlstack plan"*) exec trlstack plan --gpus "$GPUS" --format env ;;
  info*) echo '{"Runtimes":{"nvidia":{},"runc":{}}}' ;;
esac
exit 0
"""


STAND_IN_NVIDIA_SMI = """#!/bin/sh
# nvidia-smi -L of a machine of two GPUs.
echo "GPU 0: NVIDIA H200 (UUID: GPU-00000000-0000-0000-0000-000000000000)"
echo "GPU 1: NVIDIA H200 (UUID: GPU-11111111-1111-1111-1111-111111111111)"
"""


@pytest.mark.parametrize(
    ("gpus", "plan"),
    [
        (2, "SERVE_GPUS=0\nTRAIN_GPUS=1\n"),
        # One GPU: the colocate layout, the trainer alone with vLLM inside it (README.md, "One GPU").
        (1, "TRLSTACK_VARIANT=colocate\nTRAIN_GPUS=0\nNUM_PROCESSES=1\n"),
    ],
)
def test_up_sh_hands_over_to_compose_with_a_plan(tmp_path, gpus, plan):
    # A copy of the scripts and the image's files, so .env and outputs/ land in the test's folder.
    checkout = tmp_path / "checkout"
    for folder in ("scripts", "docker"):
        shutil.copytree(REPO / folder, checkout / folder)
    stand_ins = tmp_path / "bin"
    stand_ins.mkdir()
    (stand_ins / "docker").write_text(STAND_IN_DOCKER)
    (stand_ins / "nvidia-smi").write_text(STAND_IN_NVIDIA_SMI)
    for stand_in in stand_ins.iterdir():
        stand_in.chmod(0o755)
    env = {**dry_environment(), "CALLS": str(tmp_path / "calls"), "GPUS": str(gpus)}
    env["PATH"] = f"{stand_ins}{os.pathsep}{env['PATH']}"
    done = subprocess.run(
        ["bash", "scripts/up.sh", "grpo"], cwd=checkout, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[-1] == "compose up grpo"
    assert plan in (checkout / ".env").read_text()
    assert (checkout / "outputs").is_dir()
    refused = subprocess.run(
        ["bash", "scripts/up.sh", "ppo"], cwd=checkout, env=env, capture_output=True, text=True
    )
    assert refused.returncode == 1 and "unknown method 'ppo'" in refused.stderr
    # A layout misspelled in .env: the plan check's message, as compose's own check would give, not compose's
    # "no such file"; compose is not called.
    with (checkout / ".env").open("a") as env_file:
        env_file.write('TRLSTACK_VARIANT="isolatd"  # mine\n')
    before = len((tmp_path / "calls").read_text().splitlines())
    misspelled = subprocess.run(
        ["bash", "scripts/up.sh", "grpo"], cwd=checkout, env=env, capture_output=True, text=True
    )
    assert misspelled.returncode == 1, misspelled.stderr
    assert "TRLSTACK_VARIANT='isolatd'" in misspelled.stderr
    assert "shared, isolated, colocate" in misspelled.stderr
    assert not any("compose" in call for call in (tmp_path / "calls").read_text().splitlines()[before:])


def test_the_which_path_table_shows_only_commands_that_run_as_written():
    # Each command the table shows whole is one a README shows in a block, which a test runs (above); a row
    # that names a command only in part says so with "..." and links where it is shown whole.
    section = (REPO / "README.md").read_text().split("## Which path", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line][1:]
    shown = [code for row in rows for code in re.findall(r"`([^`]+)`", row.split(" | ")[1])]
    assert shown, "the table shows no command"
    blocks = {command.key for command in SHOWN}
    for code in shown:
        assert code.endswith("...") or code in blocks, f"{code!r}: not a README command a test runs"
