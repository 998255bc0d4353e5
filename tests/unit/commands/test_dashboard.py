"""`trlstack dashboard`: refuses to serve beyond loopback unless asked, names the fix for a wrong folder or a
taken port, and links the runs of a folder of runs as they appear. (Serving for real, with trackio, is
tested in the image and the compose smoke with a headless browser.)"""

from __future__ import annotations

import os
import socket

import cli_runs
import pytest
import tracked
from trlstack.commands import dashboard
from trlstack.errors import UsageError
from trlstack.ports import free_port


@pytest.fixture
def dashboard_env(clean_env, monkeypatch):
    for name in (
        "TRLSTACK_DASHBOARD_HOST",
        "TRLSTACK_DASHBOARD_PORT",
        "TRLSTACK_DASHBOARD_ALLOW_PUBLIC_BIND",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.5", "192.168.1.7"])
def test_anything_beyond_loopback_is_refused_without_the_flag(dashboard_env, capsys, no_exec, tmp_path, host):
    code, out, err = cli_runs.run(capsys, "dashboard", str(tmp_path), "--host", host)
    assert code == 1 and out == ""
    assert "no authentication" in err and "--allow-public-bind" in err and "ssh -N -L" in err


def test_the_variable_asks_as_the_flag_does(dashboard_env, monkeypatch):
    monkeypatch.setenv("TRLSTACK_DASHBOARD_HOST", "0.0.0.0")
    with pytest.raises(UsageError, match="every interface"):
        dashboard.check_bind(os.environ["TRLSTACK_DASHBOARD_HOST"], allow_public=False)
    dashboard.check_bind("0.0.0.0", allow_public=True)


def test_a_folder_that_does_not_exist_is_named(dashboard_env, capsys, tmp_path):
    code, _, err = cli_runs.run(capsys, "dashboard", str(tmp_path / "missing"))
    assert code == 1 and "is not a folder" in err and "output folder" in err


def test_a_taken_port_is_named_with_the_setting(dashboard_env, capsys, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, _, err = cli_runs.run(capsys, "dashboard", str(tmp_path), "--port", str(port))
    assert code == 1 and f"127.0.0.1:{port}" in err and "TRLSTACK_DASHBOARD_PORT" in err


def test_without_trackio_the_fix_is_named(dashboard_env, capsys, tmp_path):
    try:
        import trackio  # noqa: F401
    except ModuleNotFoundError:
        pass
    else:
        pytest.skip("trackio is installed here")
    tracked.database(tmp_path / "grpo")
    port = str(free_port())
    code, _, err = cli_runs.run(capsys, "dashboard", str(tmp_path / "grpo"), "--port", port)
    assert code == 1 and "uv run --extra dashboard trlstack dashboard" in err


def test_a_folder_of_runs_is_linked_run_by_run_as_they_appear(tmp_path):
    view = tmp_path / "view"
    view.mkdir()
    tracked.database(tmp_path / "outputs" / "grpo")
    (tmp_path / "outputs" / "rloo" / "trackio").mkdir(parents=True)  # started, nothing logged yet
    assert dashboard.link_runs(tmp_path / "outputs", view) == ["grpo"]
    assert dashboard.link_runs(tmp_path / "outputs", view) == []
    tracked.database(tmp_path / "outputs" / "grpo.20260101-120000")  # a run moved aside by --fresh
    tracked.database(tmp_path / "outputs" / "rloo", project="rloo")
    assert dashboard.link_runs(tmp_path / "outputs", view) == ["grpo.20260101-120000", "rloo"]
    names = sorted(path.name for path in view.iterdir())
    assert names == [
        "grpo-20260101-120000.db",
        "grpo-20260101-120000.lock",
        "grpo.db",
        "grpo.lock",
        "rloo.db",
        "rloo.lock",
    ]
    assert (view / "rloo.db").resolve() == (tmp_path / "outputs" / "rloo" / "trackio" / "rloo.db").resolve()
    assert (view / "grpo.lock").readlink() == (
        tmp_path / "outputs" / "grpo" / "trackio" / "grpo.lock"
    ).resolve()
