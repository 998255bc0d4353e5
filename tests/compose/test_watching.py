"""Watching a run through the stacks: in every layout a dashboard service starts with any trainer and serves
every run under outputs/ on the host's 127.0.0.1 only, its port a setting; the CPU smoke stack records the
run's metrics and says where to watch it, and a real headless browser sees the reward curve there."""

from __future__ import annotations

import time
import urllib.request

import browser
import pytest
from stacks import COMPOSE_FILE, METHODS, SMOKE_FILE, Compose
from test_smoke import outputs_folder, smoke_stack
from trlstack.metrics import find_stores, read_runs

pytestmark = pytest.mark.docker


@pytest.mark.parametrize("variant", ["shared", "isolated", "colocate"])
def test_every_layout_serves_the_dashboard_on_the_hosts_loopback_only(docker_engine, plan_env, variant):
    gpus = 1 if variant == "colocate" else 2
    settings = {"TRLSTACK_VARIANT": variant, "TRLSTACK_DASHBOARD_PORT": "7999"}
    model = Compose(env_file=plan_env(gpus), settings=settings).config(profiles=["*"])
    dashboard = model["services"]["dashboard"]
    assert dashboard["command"] == ["trlstack", "dashboard", "/outputs"]
    # The host's network namespace and no published port: trlstack dashboard binds its default, 127.0.0.1,
    # which is then the host's loopback; neither the address nor the public-bind switch is set.
    assert dashboard["network_mode"] == "host" and "ports" not in dashboard
    assert dashboard["environment"] == {"TRLSTACK_DASHBOARD_PORT": "7999"}
    assert dashboard["volumes"][0]["target"] == "/outputs" and dashboard["user"] == "1000:1000"
    for method in METHODS:
        if method in model["services"] and not (variant == "colocate" and method == "async-grpo"):
            assert model["services"][method]["depends_on"]["dashboard"]["condition"] == "service_started"


def test_the_port_defaults_to_the_commands(docker_engine, plan_env):
    from trlstack.defaults import DEFAULT_DASHBOARD_PORT

    dashboard = Compose(env_file=plan_env(2)).config()["services"]["dashboard"]
    assert dashboard["environment"]["TRLSTACK_DASHBOARD_PORT"] == str(DEFAULT_DASHBOARD_PORT)


def test_the_smoke_stack_records_the_run_and_the_dashboard_shows_it(project, trlstack_image, tmp_path):
    chromium = browser.chromium()
    outputs = outputs_folder(tmp_path)
    compose = smoke_stack(project, trlstack_image, outputs, SMOKE_STEPS="4")
    port = compose.settings["TRLSTACK_DASHBOARD_PORT"]
    compose.run("up", "grpo", timeout=900)
    log = compose.run("logs", "--no-log-prefix", "dashboard", "grpo").stdout
    assert f"trlstack dashboard: the runs in /outputs (0 so far) at http://127.0.0.1:{port}/" in log
    assert "trlstack dashboard: run grpo added (project grpo)" in log
    assert "train: step 4 of 4 (100.0%)" in log and "trlstack dashboard /outputs/grpo" in log

    (run,) = read_runs(find_stores(outputs / "grpo")[0])
    assert [step for step, _ in run.series("loss")] == [1.0, 2.0, 3.0, 4.0]
    assert run.series("time/generation_s") and run.series("throughput/tokens_per_s")

    page = f"http://127.0.0.1:{port}/?project=grpo&x_axis=train/global_step"
    deadline = time.monotonic() + 60
    while True:  # the dashboard outlives the trainer; it may still be starting on a loaded machine
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/version", timeout=2).read()
            break
        except OSError:
            assert time.monotonic() < deadline, compose.run("logs", "dashboard").stdout[-3000:]
            time.sleep(1)
    shown = browser.dom(chromium, page)
    assert 'data-metric="train/reward"' in shown and ">grpo<" in shown
    only = page + "&sidebar=hidden&navbar=hidden&metric_filter=%5Etrain/reward%24"
    curve = browser.coloured_columns(browser.screenshot(chromium, only, tmp_path / "reward.png"))
    assert curve and max(curve) - min(curve) > 200, "no line drawn across the reward plot"


def test_the_smoke_override_keeps_the_dashboard(docker_engine, plan_env):
    model = Compose(env_file=plan_env(2), files=(COMPOSE_FILE, SMOKE_FILE)).config("grpo")
    assert set(model["services"]) == {"plan-check", "tiny", "dashboard", "grpo"}
