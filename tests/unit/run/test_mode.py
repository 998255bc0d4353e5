"""trlstack.run.mode: where vLLM generates when the run names no mode, by the plan's one-GPU rule; on one GPU
with no server named, train trains colocate at once and says why, never waiting for a server nobody
started."""

from __future__ import annotations

import pytest
from launch_harness import gpus
from trlstack.errors import UsageError
from trlstack.plan import make_plan, one_gpu_colocate
from trlstack.recipes import RECIPES
from trlstack.roles import train
from trlstack.run.launch import LAUNCHER
from trlstack.run.mode import choose_mode
from trlstack.run.settings import TrainSettings

GRPO = RECIPES["grpo"]


def test_the_plan_and_train_decide_one_gpu_by_one_rule():
    for count in (1, 2, 8):
        plan = make_plan(gpus(count))
        # on the machine the plan makes colocate, a run that sees its GPUs and names no server is colocate
        chosen, _ = choose_mode(TrainSettings(recipe="grpo"), GRPO, count)
        assert plan.colocate == one_gpu_colocate(count, False)[0] == (chosen.vllm_mode == "colocate")


@pytest.mark.parametrize(
    ("settings", "count", "mode"),
    [
        (TrainSettings(recipe="grpo"), 1, "colocate"),
        (TrainSettings(recipe="grpo"), 2, "server"),  # more GPUs: the trainer's part of a server plan
        (TrainSettings(recipe="grpo", vllm_url="http://127.0.0.1:8000"), 1, "server"),  # compose's shared
        (TrainSettings(recipe="grpo", share_gpus=True), 1, "server"),  # a server beside it, on purpose
        (TrainSettings(recipe="grpo", serve_gpus=(0,)), 1, "server"),
        (TrainSettings(recipe="grpo", vllm_mode="server"), 1, "server"),  # asked for: kept
        (TrainSettings(recipe="grpo", vllm_mode="colocate"), 4, "colocate"),
        (TrainSettings(recipe="grpo", cpu=True), 1, None),  # no vLLM at all
    ],
)
def test_the_mode_is_the_one_asked_a_server_named_or_the_one_gpu_rule(settings, count, mode):
    chosen, notes = choose_mode(settings, GRPO, count)
    assert chosen.vllm_mode == mode
    said = settings.vllm_mode is None and mode == "colocate"
    assert bool(notes) == said  # the choice made for the run is said, an asked one is not repeated
    if said:
        assert notes[0].startswith("vLLM mode colocate: one GPU and no server named (--vllm-url, TRLSTACK_")
        assert "--vllm-mode server trains against a server instead" in notes[0]


def test_a_preview_for_one_gpu_is_the_colocate_run_and_says_why(run_dir, capsys, no_exec):
    assert train.main(["grpo", "--gpus", "1", "--print-command"]) == 0
    captured = capsys.readouterr()
    assert "#   vllm_mode: colocate" in captured.out and "vllm_server_base_url" not in captured.out
    assert "train: vLLM mode colocate: one GPU and no server named" in captured.err


def test_one_visible_gpu_and_no_server_named_trains_at_once_without_waiting(
    run_dir, machine, installed, exec_calls, capsys
):
    machine(gpus(1))
    installed("accelerate")
    with pytest.raises(exec_calls.Execd):  # exec'd at once: a wait for a server would fail the health check
        train.main(["grpo", "--health-timeout", "1"])
    assert exec_calls[0][1][:5] == [*LAUNCHER, "--num_processes", "1"]
    assert "vLLM mode colocate: one GPU and no server named" in capsys.readouterr().err


def test_where_the_one_gpu_rule_wants_a_server_train_refuses_naming_both_ways(monkeypatch):
    # a model size at which a server beside the trainer is measured faster: the plan plans it, and a run that
    # names none is refused at once, naming how to start one and how to stay colocate
    from trlstack.plan import one_gpu

    monkeypatch.setattr(one_gpu, "one_gpu_choice", lambda parameters: (True, "measured faster"))
    assert make_plan(gpus(1)).share_gpus
    with pytest.raises(UsageError) as error:
        choose_mode(TrainSettings(recipe="grpo"), GRPO, 1)
    message = str(error.value)
    assert "grpo runs best beside one (measured faster), and on this one GPU none is named" in message
    assert "`serve-vllm --share-gpus` then `train grpo --share-gpus --vllm-url" in message
    assert message.endswith("or --vllm-mode colocate for vLLM inside the trainer.")
    assert (
        choose_mode(TrainSettings(recipe="grpo", vllm_url="http://127.0.0.1:8000"), GRPO, 1)[0].mode
        == "server"
    )
