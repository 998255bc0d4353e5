"""`trlstack report`: a run's summary in the terminal and its picture, from the output folder alone; what it
cannot do is refused before anything is printed or written, with the fix."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import cli_runs
import pytest
import tracked
from trlstack.commands.report import panels
from trlstack.metrics import find_stores, read_runs

REPO = Path(__file__).resolve().parents[3]
SPLIT = {"time/generation_s": 6.0, "time/weight_push_s": 0.5, "time/forward_backward_s": 2.5}
SPLIT |= {"time/optimizer_s": 0.25, "time/wait_s": 0.0, "time/checkpoint_s": 0.0, "time/other_s": 0.75}


def recorded_run(output_dir: Path, steps: int = 4) -> Path:
    """A GRPO run's metrics as train records them: TRL's, the step split, throughput, memory, the server's."""
    path = tracked.database(output_dir)
    tracked.config(path, "grpo", {"model_name_or_path": "Qwen/Qwen2.5-0.5B-Instruct", "max_steps": 10})
    for step in range(1, steps + 1):
        values = {"loss": 0.1 / step, "reward": step / 10, "rewards/accuracy_reward/mean": step / 10}
        values |= {"rewards/format_reward/mean": 0.5, "rewards/format_reward/std": 0.1}
        values |= {"completions/mean_length": 100.0 + step, "time/step_s": 10.0, **SPLIT}
        values |= {"throughput/tokens_per_s": 1000.0, "throughput/completions_per_s": 3.2}
        values |= {"memory/peak_gib/rank0": 20.5, "memory/peak_gib/rank1": 19.0, "server/kv_cache_usage": 0.4}
        tracked.log(path, "grpo", step, tracked.train_row(step, **values))
    return output_dir


def test_the_panels_hold_every_reward_function_and_the_split(tmp_path):
    (run,) = read_runs(find_stores(recorded_run(tmp_path / "grpo"))[0])
    reward, loss, kl, length, split, throughput = panels.panels(run)
    assert list(reward.lines) == ["total", "accuracy_reward", "format_reward"]
    assert loss.lines["loss"][-1] == (4.0, 0.025)
    assert kl.lines == {} and "beta > 0" in kl.note
    assert length.lines["completions/mean_length"][0] == (1.0, 101.0)
    assert list(split.lines) == ["generation", "weight push", "forward + backward", "optimizer", "other"]
    assert split.stacked and throughput.right == "completions/s"


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


def png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", header[16:24])
    return width, height


def test_the_picture_is_drawn_with_the_report_extra(tmp_path):
    """As README says, from a checkout: `uv run --extra report trlstack report OUTPUT_DIR -o PNG` (isolated,
    so this checkout's environment stays as it is)."""
    folder = recorded_run(tmp_path / "grpo", steps=12)
    picture = tmp_path / "grpo.png"
    argv = ["uv", "run", "--frozen", "--isolated", "--extra", "report", "trlstack", "report", str(folder)]
    done = subprocess.run([*argv, "-o", str(picture)], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"picture: {picture}" in done.stdout
    assert png_size(picture) == (1650, 935)  # 15 x 8.5 inches at 110 dpi: a laptop screen's width
