"""`trlstack report`'s command line (report/command.py): a run's summary in the terminal from the output
folder alone; what it cannot do is refused before anything is printed or written, with the fix."""

from __future__ import annotations

from pathlib import Path

import cli_runs
import pytest
import tracked

from .recorded import recorded_run


def test_the_summary_says_how_far_the_run_got_and_where_its_time_went(tmp_path, capsys, clean_env):
    folder = recorded_run(tmp_path / "grpo")
    code, out, err = cli_runs.run(capsys, "report", str(folder), "--text")
    assert code == 0, err
    assert out.splitlines()[0].startswith("run grpo (")
    assert "Qwen/Qwen2.5-0.5B-Instruct, step 4 of 10" in out
    assert "generation 6 s (60%), weight push 0.5 s (5%), forward + backward 2.5 s (25%)" in out
    assert "rank 0 20.5 GiB, rank 1 19 GiB" in out and "kv_cache_usage 0.4" in out
    assert "KL not logged" in out
    assert not list(Path.cwd().glob("grpo-report.png"))


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda tmp: tmp / "missing", "is not a folder"),
        (lambda tmp: tmp, "holds no recorded metrics"),
        (lambda tmp: tracked.database(tmp).parent.parent, "holds no logged step yet"),
    ],
)
def test_a_folder_without_a_recorded_run_is_refused(tmp_path, capsys, clean_env, make, words):
    code, out, err = cli_runs.run(capsys, "report", str(make(tmp_path)), "--text")
    assert code == 1 and out == "" and words in err


def test_without_matplotlib_the_fix_is_named_before_anything_is_printed(tmp_path, capsys, clean_env):
    try:
        import matplotlib  # noqa: F401
    except ModuleNotFoundError:
        pass
    else:
        pytest.skip("matplotlib is installed here")
    code, out, err = cli_runs.run(capsys, "report", str(recorded_run(tmp_path / "grpo")), "-o", "x.png")
    assert code == 1 and out == ""
    assert "uv run --extra report trlstack report" in err and "--text" in err


def test_the_latest_run_is_reported_unless_run_names_another(tmp_path, capsys, clean_env):
    folder = recorded_run(tmp_path / "grpo")  # the run `grpo`
    tracked.log(folder / "trackio" / "grpo.db", "later", 1, tracked.train_row(1, loss=0.5))
    assert cli_runs.run(capsys, "report", str(folder), "--text")[1].startswith("run later (")
    assert cli_runs.run(capsys, "report", str(folder), "--text", "--run", "grpo")[1].startswith("run grpo (")
    code, out, err = cli_runs.run(capsys, "report", str(folder), "--text", "--run", "gone")
    assert code == 1 and out == ""
    assert f"--run gone: {folder / 'trackio'} holds the runs grpo, later." in err


def test_a_store_that_is_not_trackios_is_refused_naming_it(tmp_path, capsys, clean_env):
    (tmp_path / "trackio").mkdir()
    (tmp_path / "trackio" / "grpo.db").write_text("not a database")
    code, out, err = cli_runs.run(capsys, "report", str(tmp_path), "--text")
    assert code == 1 and out == ""
    assert f"cannot read the metrics in {tmp_path / 'trackio'}: " in err
