"""Watching a run, in the trlstack image: the CPU smoke records its metrics in its output folder (the step
split and the throughput among them), a resumed run continues the same curves, `trlstack report` draws the
finished run from the folder alone, and `trlstack dashboard` serves it on loopback, where a real headless
browser sees the reward curve."""

from __future__ import annotations

import subprocess
import time
import urllib.request
from pathlib import Path

import browser
import pytest
from trlstack.metrics import STEP_PARTS, STEP_S, find_stores, read_runs
from trlstack.ports import free_port

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[2]
SMOKE = (
    "trlstack tiny /tmp/smoke >/dev/null; "
    "train grpo --cpu --model /tmp/smoke/model --dataset /tmp/smoke/dataset"
)


def in_image(image: str, outputs: Path, script: str, *options: str) -> subprocess.CompletedProcess[str]:
    argv = ["docker", "run", "--rm", *options, "-e", "HF_HUB_OFFLINE=1", "-v", f"{outputs}:/out", image]
    return subprocess.run(
        [*argv, "bash", "-c", f"set -e; {script}"], capture_output=True, text=True, timeout=900
    )


@pytest.fixture(scope="module")
def watched_run(trlstack_image: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A CPU GRPO run of 3 steps, then the same run resumed to 4: its output folder and both logs."""
    outputs = tmp_path_factory.mktemp("watched")
    outputs.chmod(0o777)  # the image's user writes here
    logs = ""
    for steps in (3, 4):
        done = in_image(trlstack_image, outputs, f"{SMOKE} --output-dir /out/grpo -- --max_steps {steps}",
                        "--network", "none")  # fmt: skip
        logs += done.stdout + done.stderr
        assert done.returncode == 0, logs[-6000:]
    return outputs / "grpo", logs


def test_the_smoke_records_every_step_with_its_split_in_the_output_folder(watched_run):
    folder, logs = watched_run
    assert (
        "metrics: trackio (report_to in " in logs and "in /out/grpo/trackio, project grpo, run grpo" in logs
    )
    (store,) = find_stores(folder)
    (run,) = read_runs(store)  # the resumed run continued the same one
    steps = [step for step, _ in run.series("loss")]
    assert steps == [1.0, 2.0, 3.0, 4.0], steps
    for row in (row for row in run.rows if "train/loss" in row):
        parts = sum(row[f"train/{key}"] for key, _ in STEP_PARTS)
        assert parts == pytest.approx(row[f"train/{STEP_S}"], rel=1e-6)
        assert row["train/time/generation_s"] > 0 and row["train/time/forward_backward_s"] > 0
        assert row["train/throughput/completions_per_s"] > 0 and row["train/throughput/tokens_per_s"] > 0
    assert run.series("rewards/accuracy_reward/mean") and run.series("completions/mean_length")


def test_the_log_says_step_of_steps_elapsed_eta_and_reward(watched_run):
    _, logs = watched_run
    assert "train: step 3 of 3 (100.0%), elapsed 0:00:" in logs
    assert "train: step 4 of 4 (100.0%), elapsed" in logs and ", reward " in logs and "ETA 0:00:0" in logs


def test_the_report_draws_the_finished_run_from_its_folder(watched_run, tmp_path):
    folder, _ = watched_run
    picture = tmp_path / "grpo.png"
    argv = ["uv", "run", "--frozen", "--isolated", "--extra", "report", "trlstack", "report", str(folder)]
    done = subprocess.run([*argv, "-o", str(picture)], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "step 4 of 4" in done.stdout and "generation " in done.stdout and "tokens/s" in done.stdout
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the six panels drew data: coloured lines and areas across the picture, not empty frames
    assert len(browser.coloured_columns(picture)) > 1000


def wait_for(url: str, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def test_the_dashboard_shows_the_reward_curve_in_a_real_browser(watched_run, trlstack_image, tmp_path):
    chromium = browser.chromium()
    folder, _ = watched_run
    port = free_port()
    name = f"trlstack-test-dashboard-{port}"
    argv = ["docker", "run", "-d", "--rm", "--name", name, "--network", "host"]
    argv += [
        "-v",
        f"{folder.parent}:/out",
        trlstack_image,
        "trlstack",
        "dashboard",
        "/out",
        "--port",
        str(port),
    ]
    subprocess.run(argv, check=True, capture_output=True)
    try:
        wait_for(f"http://127.0.0.1:{port}/version")
        logs = subprocess.run(["docker", "logs", name], capture_output=True, text=True).stdout
        assert f"the runs in /out (1 so far) at http://127.0.0.1:{port}/" in logs
        page = f"http://127.0.0.1:{port}/?project=grpo&x_axis=train/global_step"
        shown = browser.dom(chromium, page)
        assert 'data-metric="train/reward"' in shown and ">grpo<" in shown  # the plot and the run's name
        only = page + "&sidebar=hidden&navbar=hidden&metric_filter=%5Etrain/reward%24"
        curve = browser.coloured_columns(browser.screenshot(chromium, only, tmp_path / "reward.png"))
        assert curve and max(curve) - min(curve) > 200, "no line drawn across the reward plot"
        nothing = browser.coloured_columns(
            browser.screenshot(
                chromium,
                page + "&sidebar=hidden&navbar=hidden&metric_filter=%5Enone%24",
                tmp_path / "none.png",
            )  # fmt: skip
        )
        assert not nothing or max(nothing) - min(nothing) < 50  # the check sees no line where none is drawn
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)


def test_the_dashboard_refuses_every_interface_unless_asked(trlstack_image, tmp_path):
    done = in_image(trlstack_image, tmp_path, "trlstack dashboard /out --host 0.0.0.0", "--network", "none")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "every interface" in done.stderr and "--allow-public-bind" in done.stderr
