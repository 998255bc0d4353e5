"""trlstack.cli: `trlstack plan`, `version`, the command registry, and the bad inputs each command refuses."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap

import pytest
from cli_runs import PLAN_VARIABLES, assert_refused, run
from trlstack import __version__, cli
from trlstack.cli import main


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for name in (*PLAN_VARIABLES, "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)


# The catalogue: each bad input gets exit 1, a message naming the cause and the fix, no output, no exec.
# (gpus the machine reports or None for no driver, argv, environment, words the message must hold)
NO_DRIVER = None
BAD = [
    ([], ("deploy",), {}, ["invalid choice: 'deploy'"]),
    ([], (), {}, ["choose a command", "trlstack --help"]),
    ([], ("version", "--all"), {}, ["unrecognized arguments: --all"]),
    ([], ("doctor", "--port", "-5"), {}, ["argument --port"]),
    ([], ("doctor",), {"TRLSTACK_VLLM_PORT": "x"}, ["TRLSTACK_VLLM_PORT='x' is not valid for --port"]),
]


@pytest.mark.parametrize(("found", "argv", "environ", "words"), BAD, ids=[" ".join(case[1]) for case in BAD])
def test_bad_input_exits_1_with_the_fix_and_starts_nothing(
    found, argv, environ, words, capsys, monkeypatch, machine, no_exec
):
    assert_refused(capsys, monkeypatch, machine, found, argv, environ, words)


def test_help_lists_every_command(capsys):
    with pytest.raises(SystemExit) as exit:
        main(["--help"])
    out = capsys.readouterr().out
    assert exit.value.code == 0
    for name in ("plan", "doctor", "version", "bundle", "tiny"):
        assert f"\n    {name} " in out


def test_version_flag(capsys):
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out == f"trlstack {__version__}\n"


@pytest.fixture
def command_module(tmp_path, monkeypatch):
    """Write a command module on sys.path and register it as `trlstack extra`."""

    def write(source):
        (tmp_path / "extra_command.py").write_text(textwrap.dedent(source))
        monkeypatch.syspath_prepend(str(tmp_path))
        monkeypatch.setitem(cli.MODULE_COMMANDS, "extra", ("extra_command", "an extra command"))
        monkeypatch.delitem(sys.modules, "extra_command", raising=False)

    return write


def test_module_commands_get_their_own_arguments_and_exit_code(capsys, command_module):
    command_module(
        """
        def add_arguments(parser):
            parser.add_argument("--times", type=int, default=1)

        def run(args):
            print("ran", args.times)
            return 3
        """
    )
    code, out, _ = run(capsys, "extra", "--times", "2")
    assert (code, out) == (3, "ran 2\n")


def test_module_commands_are_imported_only_when_run(capsys, command_module):
    command_module("raise RuntimeError('imported')\n")
    assert run(capsys, "plan", "--gpus", "2")[0] == 0
    with pytest.raises(SystemExit):
        main(["--help"])
    assert main(["extra"]) == 3  # the module ran: its error is reported as a bug (errors.run_main)
    assert "internal error: RuntimeError: imported" in capsys.readouterr().err


def test_a_missing_command_module_is_a_clear_error(capsys, monkeypatch, no_exec):
    monkeypatch.setitem(cli.MODULE_COMMANDS, "extra", ("trlstack.not_shipped", "an extra command"))
    code, out, err = run(capsys, "extra")
    assert (
        code == 1
        and "`trlstack extra` is not part of this installation (trlstack.not_shipped is missing)" in err
    )


def test_a_command_needing_an_absent_dependency_names_it(capsys, command_module, no_exec):
    command_module("import surely_not_installed_anywhere\n")
    code, _, err = run(capsys, "extra")
    assert code == 1
    assert "needs the Python module 'surely_not_installed_anywhere'" in err and "uv sync --extra gpu" in err


@pytest.mark.parametrize("name", sorted(cli.MODULE_COMMANDS))
def test_every_registered_command_has_its_module_and_help(name, capsys):
    module = importlib.import_module(cli.MODULE_COMMANDS[name][0])
    assert callable(module.add_arguments) and callable(module.run)
    with pytest.raises(SystemExit) as exit:
        main([name, "--help"])
    assert exit.value.code == 0 and capsys.readouterr().out.startswith(f"usage: trlstack {name} ")


def test_ctrl_c_exits_130(capsys, monkeypatch):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr("trlstack.commands.plan.run", interrupted)
    code, _, err = run(capsys, "plan")
    assert code == 130 and "interrupted" in err


def test_start_up_imports_neither_torch_nor_the_heavy_commands():
    code = (
        "import sys, trlstack.cli\n"
        "sys.argv = ['trlstack', 'plan', '--gpus', '8', '--format', 'env']\n"
        "assert trlstack.cli.main() == 0\n"
        "heavy = {'torch', 'vllm', 'trl', 'transformers',"
        " 'trlstack.commands.bundle', 'trlstack.commands.tiny'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_python_dash_m_trlstack_is_the_cli():
    result = subprocess.run(
        [sys.executable, "-m", "trlstack", "plan", "--gpus", "2", "--format", "env"],
        capture_output=True,
        text=True,
        env={**os.environ, "TRLSTACK_VLLM_PORT": ""},
    )
    assert result.returncode == 0 and "SERVE_GPUS=0\n" in result.stdout
    result = subprocess.run(
        [sys.executable, "-m", "trlstack", "plan", "--gpus", "2", "--serve-gpus", "0-1"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1 and "--share-gpus" in result.stderr
