"""trlstack.command: a role's command as data (`Command`), the one shell line it prints for it, the refusal
of a program that is not installed naming how to get it, and the exec that hands the process over."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest
from trlstack.command import Command, exec_command, require_program
from trlstack.errors import UsageError
from trlstack.stack import GET_GPU_STACK


def test_the_shell_line_sets_the_variables_first_in_name_order_every_word_quoted():
    command = Command(
        ["vllm", "serve", "org/model", "--weight-transfer-config", '{"backend": "nccl"}', "it's", "$HOME"],
        {"Z_LAST": "a b", "A_FIRST": "1"},
    )
    assert command.shell() == (
        "A_FIRST=1 Z_LAST='a b' vllm serve org/model --weight-transfer-config '{\"backend\": \"nccl\"}' "
        "'it'\"'\"'s' '$HOME'"
    )


def test_a_shell_runs_the_line_as_the_same_command_with_the_same_variables():
    argv = [sys.executable, "-c", "import os, sys; print(sys.argv[1:], os.environ['X'])", "a b", ""]
    command = Command(argv, {"X": "it's $1"})
    done = subprocess.run(["sh", "-c", command.shell()], capture_output=True, text=True, check=True)
    assert done.stdout == "['a b', ''] it's $1\n"
    assert shlex.split(command.shell())[1:] == command.argv  # the one assignment, then the argv


def test_a_program_not_on_path_is_refused_naming_how_to_get_the_stack(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UsageError) as error:
        require_program(Command(["vllm", "serve"]))
    assert str(error.value) == f"`vllm` is not on PATH: {GET_GPU_STACK}."
    assert "uv sync --extra gpu" in str(error.value) and "trlstack bundle" in str(error.value)


def test_a_module_run_with_dash_m_must_be_installed_for_that_python(on_path, installed):
    on_path("python3")
    with pytest.raises(UsageError) as error:
        require_program(Command(["python3", "-m", "no_such_package_here.sub", "--x"]))
    assert str(error.value) == f"`no_such_package_here` is not installed for python3: {GET_GPU_STACK}."
    installed("accelerate_stand_in")
    require_program(Command(["python3", "-m", "accelerate_stand_in.commands.launch"]))  # found, not imported
    require_program(Command(["python3", "script.py"]))  # no module to look for


def test_exec_hands_the_process_over_with_the_added_variables_and_its_exit_code():
    program = (
        "from trlstack.command import Command, exec_command\n"
        "script = 'echo \"$GIVEN $ADDED ${GONE:-unset}\"; exit 7'\n"
        "exec_command(Command(['sh', '-c', script], {'ADDED': 'added'}), {'GIVEN': 'given', 'PATH': PATH})\n"
    )
    environ = {**os.environ, "GONE": "inherited"}
    done = subprocess.run(
        [sys.executable, "-c", f"PATH = {os.environ['PATH']!r}\n{program}"],
        env=environ,
        capture_output=True,
        text=True,
    )
    assert (done.returncode, done.stdout, done.stderr) == (7, "given added unset\n", "")


def test_exec_refuses_before_anything_starts_when_the_program_is_missing(monkeypatch, tmp_path, no_exec):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UsageError, match="`accelerate` is not on PATH"):
        exec_command(Command(["accelerate", "launch"]), {})
