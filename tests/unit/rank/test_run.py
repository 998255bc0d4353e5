"""trlstack.rank.run in one training process, with a real transformers Trainer on a toy model: a stop
signal while training saves checkpoint-N at the end of the step in progress and ends the process instead of
the script's final save; while starting it ends the process at once; after the last step it changes nothing.
(The chain of processes is tested in tests/unit/roles/train/test_stopping.py, the image and the compose
smoke.)"""

from __future__ import annotations

import json
import os
import signal

import pytest

torch = pytest.importorskip("torch", reason="needs the gpu extra (torch, transformers); runs in the image")
transformers = pytest.importorskip("transformers", reason="needs the gpu extra; runs in the image")

from trlstack.rank import run  # noqa: E402


class Toy(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(2, 1)

    def forward(self, x, labels):
        return {"loss": ((self.linear(x).squeeze(-1) - labels) ** 2).mean()}


class SignalAt(transformers.TrainerCallback):
    """Sends this process `signum` at the end of step `step`, as `train` would at any moment."""

    def __init__(self, step: int, signum: int) -> None:
        self.step, self.signum = step, signum

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            os.kill(os.getpid(), self.signum)
        return control


@pytest.fixture(autouse=True)
def fresh_stop():
    """The module's stop state and this process's signal handlers, as they were."""
    handlers = {signum: signal.getsignal(signum) for signum in run.STOP_SIGNALS}
    run.STOP.signum, run.STOP.phase = 0, "starting"
    yield
    for signum, handler in handlers.items():
        signal.signal(signum, handler)


def trainer(output_dir, *callbacks, steps=8):
    args = transformers.TrainingArguments(
        output_dir=str(output_dir),
        max_steps=steps,
        per_device_train_batch_size=2,
        save_strategy="no",  # the only checkpoint is the stop's
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
    )
    data = [{"x": torch.randn(2), "labels": torch.tensor(1.0)} for _ in range(32)]
    return transformers.Trainer(model=Toy(), args=args, train_dataset=data, callbacks=list(callbacks))


def steps_in(checkpoint):
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    return state["global_step"], [entry["step"] for entry in state["log_history"] if "loss" in entry]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_while_training_saves_the_step_reached_and_ends_the_process(tmp_path, signum, capsys):
    train = run.until_stopped(transformers.Trainer.train)
    with pytest.raises(SystemExit) as ended:
        train(trainer(tmp_path, SignalAt(3, signum)))
    assert ended.value.code == 0  # launchers see success; train, the parent, exits 128 + signum
    assert [path.name for path in tmp_path.glob("checkpoint-*")] == ["checkpoint-3"]
    assert steps_in(tmp_path / "checkpoint-3") == (3, [1, 2, 3])
    err = capsys.readouterr().err
    name = signal.Signals(signum).name
    assert f"train: {name}: step 3 done; saving checkpoint-3, then stopping" in err
    assert f"train: stopped at step 3 of 8; {tmp_path}/checkpoint-3 saved; run again to resume" in err


def test_a_stop_in_the_last_step_lets_the_run_finish(tmp_path):
    train = run.until_stopped(transformers.Trainer.train)
    output = train(trainer(tmp_path, SignalAt(8, signal.SIGTERM)))  # returns: the script saves the model
    assert output.global_step == 8
    assert run.STOP.phase == "finishing"


def test_a_stop_while_starting_ends_the_process_at_once():
    run.handle_stop_signals()
    with pytest.raises(SystemExit) as ended:
        os.kill(os.getpid(), signal.SIGTERM)
    assert ended.value.code == 0


def test_the_trainers_own_handler_is_replaced_when_training_starts(tmp_path):
    # transformers' enable_jit_checkpoint (and others) install SIGTERM handlers while the trainer is set up.
    replaced = trainer(tmp_path, SignalAt(2, signal.SIGTERM))
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with pytest.raises(SystemExit):
        run.until_stopped(transformers.Trainer.train)(replaced)
    assert [path.name for path in tmp_path.glob("checkpoint-*")] == ["checkpoint-2"]


def test_storages_of_a_cpu_n_process_load(tmp_path):
    # transformers resumes each of several CPU processes with map_location cpu:N; torch alone refuses that.
    torch.save({"step": torch.tensor(3)}, tmp_path / "state.pt")
    run.load_cpu_n_locations()
    loaded = torch.load(tmp_path / "state.pt", map_location=torch.device("cpu", 1), weights_only=True)
    assert loaded["step"].item() == 3
