"""rank/watch.py in one training process, with a real transformers Trainer on a toy model: every logging step
carries the step split (its parts adding up to the step), the throughput, and the log says step N of M with
the time left. (A real GRPO run's metrics: the image's CPU smoke and tests/gpu/test_watched_grpo.py.)"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="needs the gpu extra (torch, transformers); runs in the image")
transformers = pytest.importorskip("transformers", reason="needs the gpu extra; runs in the image")

from trlstack.metrics import STEP_PARTS, STEP_S  # noqa: E402
from trlstack.rank import run, watch  # noqa: E402


class Toy(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(2, 1)

    def forward(self, x, labels):
        return {"loss": ((self.linear(x).squeeze(-1) - labels) ** 2).mean()}


@pytest.fixture
def installed(monkeypatch):
    """watch.install() for this test only: Trainer.log and TRL's profiling points as they were after."""
    from trl.extras import profiling

    monkeypatch.setattr(transformers.Trainer, "log", transformers.Trainer.log)
    monkeypatch.setattr(profiling, "ProfilingContext", profiling.ProfilingContext)
    monkeypatch.delenv("RANK", raising=False)
    watch.install()


def toy_trainer(output_dir, steps=6, accumulation=2):
    args = transformers.TrainingArguments(
        output_dir=str(output_dir),
        max_steps=steps,
        per_device_train_batch_size=2,
        gradient_accumulation_steps=accumulation,
        save_strategy="steps",
        save_steps=3,
        logging_steps=2,
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
    )
    data = [{"x": torch.randn(2), "labels": torch.tensor(1.0)} for _ in range(64)]
    return transformers.Trainer(model=Toy(), args=args, train_dataset=data)


def test_every_logging_step_carries_the_split_and_the_throughput(installed, tmp_path, capsys):
    trainer = toy_trainer(tmp_path)
    run.until_stopped(transformers.Trainer.train)(trainer)
    logged = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert [entry["step"] for entry in logged] == [2, 4, 6]
    for entry in logged:
        parts = sum(entry[key] for key, _ in STEP_PARTS)
        assert parts == pytest.approx(entry[STEP_S], rel=1e-6)
        assert entry["time/forward_backward_s"] > 0 and entry["time/optimizer_s"] > 0
        # 2 examples a micro-batch x 2 micro-batches a step, one process
        assert entry["throughput/completions_per_s"] == pytest.approx(4 / entry[STEP_S])
    # checkpoint-3 was saved after step 3: its time is in the interval of steps 3 and 4
    assert logged[1]["time/checkpoint_s"] > 0 and logged[0]["time/checkpoint_s"] == 0
    assert not any(key.startswith("memory/") for key in logged[0])  # no GPU: no memory peaks
    err = capsys.readouterr().err
    progress = [line for line in err.splitlines() if line.startswith("train: step ")]
    assert len(progress) == 3 and progress[-1].startswith("train: step 6 of 6 (100.0%), elapsed 0:00:")
    assert "ETA 0:00:00" in progress[-1]


def test_the_end_of_training_summary_is_left_alone(installed, tmp_path):
    trainer = toy_trainer(tmp_path, steps=2)
    run.until_stopped(transformers.Trainer.train)(trainer)
    summary = trainer.state.log_history[-1]
    assert "train_runtime" in summary and STEP_S not in summary


def test_trls_profiling_points_count_to_their_part(installed, tmp_path):
    from trl.extras.profiling import profiling_context

    trainer = toy_trainer(tmp_path)
    watch.attach(trainer, print)
    split = trainer._trlstack_watch.split
    with profiling_context(trainer, "transformers.generate"):
        pass
    with profiling_context(trainer, "_calculate_rewards"):  # not a part: left to `other`
        pass
    assert set(split.current) == {"time/generation_s"}


def test_trl_still_has_every_name_the_watch_times(monkeypatch):
    """The watch times TRL's methods and profiling points by name: a TRL that renamed one would leave a part
    silently at zero."""
    import inspect

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    from trl import GRPOTrainer, RLOOTrainer
    from trl.experimental.async_grpo import AsyncGRPOTrainer
    from trl.experimental.online_dpo import OnlineDPOTrainer
    from trl.generation.vllm_generation import VLLMGeneration
    from trl.trainer import grpo_trainer

    for owner, names in (
        (VLLMGeneration, ("generate", "sync_weights")),
        (OnlineDPOTrainer, ("_generate_vllm", "_move_model_to_vllm")),
        (AsyncGRPOTrainer, ("_sync_weight", "compute_loss", "get_batch_samples", "_save_checkpoint")),
        (GRPOTrainer, ("compute_loss", "get_batch_samples", "_save_checkpoint")),
        (RLOOTrainer, ("compute_loss",)),
    ):
        for name in names:
            assert callable(getattr(owner, name, None)), f"{owner.__name__}.{name}"
    source = inspect.getsource(grpo_trainer)
    for point in ("vLLM.generate", "transformers.generate", "sync_weights"):
        assert f'profiling_context(self, "{point}")' in source, point
