"""trlstack.rank.space: a save that finds the disk full ends the run in every rank, with a report for train
and no traceback; the checkpoint cut short is left, read as incomplete. The trainer here is a stand-in with
the attributes the guard reads (transformers' own runs in tests/image/test_full_disk.py)."""

from __future__ import annotations

import errno
import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from trlstack.rank import space

TORCH_ZIP_ERROR = "[enforce fail at inline_container.cc:672] . unexpected pos 2216832 vs 2216720"


def raised_during(outer: BaseException, inner: BaseException) -> BaseException:
    try:
        try:
            raise inner
        except BaseException:
            raise outer  # noqa: B904 - the chain as torch's writer leaves it (During handling ...)
    except BaseException as error:
        return error


@pytest.mark.parametrize(
    ("error", "free", "expected"),
    [
        (OSError(errno.ENOSPC, "No space left on device"), 10**9, True),
        (OSError(errno.EDQUOT, "Disk quota exceeded"), 10**9, True),
        (raised_during(RuntimeError(TORCH_ZIP_ERROR), OSError(errno.ENOSPC, "full")), 10**9, True),
        (Exception("Error while serializing: I/O error: No space left on device (os error 28)"), 10**9, True),
        (RuntimeError(TORCH_ZIP_ERROR), 0, True),  # torch names no cause: the disk holds less than a save
        (RuntimeError(TORCH_ZIP_ERROR), 10**9, False),  # room enough: not the disk's
        (ValueError("not a tensor"), 0, False),  # a bug, whatever the disk holds
        (OSError(errno.EACCES, "Permission denied"), 10**9, False),
    ],
)
def test_a_failed_save_is_the_disks_when_the_error_or_the_free_space_says_so(error, free, expected):
    assert space.out_of_space(error, free, need=4_305_408) is expected


class Trainer:
    """What the guard reads of transformers' Trainer: one process, its output folder, its saves."""

    def __init__(self, output_dir: Path, fail: BaseException | None = None, should_save: bool = True):
        self.args = SimpleNamespace(
            output_dir=str(output_dir), should_save=should_save, save_only_model=False
        )
        self.accelerator = SimpleNamespace(num_processes=1, process_index=0)
        self.state = SimpleNamespace(global_step=3)
        self.fail = fail
        self.saved: list[str] = []

    def _get_output_dir(self, trial):
        return self.args.output_dir

    def _save_checkpoint(self, model, trial):
        where = Path(self.args.output_dir) / f"checkpoint-{self.state.global_step}"
        where.mkdir(parents=True)
        (where / "model.safetensors").write_bytes(b"w" * 100)
        self.save_model(str(where), _internal_call=True)
        if self.fail is not None:
            raise self.fail
        (where / "trainer_state.json").write_text("{}")

    def save_model(self, output_dir=None, _internal_call=False):
        self.saved.append(output_dir or self.args.output_dir)
        if self.fail is not None and not _internal_call:
            raise self.fail


@pytest.fixture
def guarded(tmp_path, monkeypatch):
    """A trainer stand-in with its saves guarded, reports going to a folder as train names it, the disk as
    full as the test says, and the tensors of a save counted as 4,305,408 bytes (torch is not needed)."""
    reports = tmp_path / "reports"
    reports.mkdir()
    monkeypatch.setenv("TRLSTACK_RUN_REPORTS", str(reports))
    monkeypatch.setattr(
        space, "tensor_bytes", lambda trainer, weights_only: 1_435_136 if weights_only else 4_305_408
    )
    monkeypatch.setattr(space, "free_bytes", lambda folder: 0)
    said: list[str] = []

    def make(fail=None, **kwargs):
        trainer = Trainer(tmp_path / "out", fail, **kwargs)
        space.guard_saves(trainer, said.append)
        return trainer

    make.reports = reports
    make.said = said
    return make


def test_a_checkpoint_the_disk_cannot_hold_ends_the_run_with_a_report_and_exit_0(guarded):
    trainer = guarded(RuntimeError(TORCH_ZIP_ERROR))
    with pytest.raises(SystemExit) as exit:
        trainer._save_checkpoint(None, None)
    assert exit.value.code == 0  # no launcher prints a traceback; train exits 1 with the report
    report = json.loads((guarded.reports / "rank-0.json").read_text())
    assert report == {
        "kind": "no-space",
        "rank": 0,
        "folder": trainer.args.output_dir,
        "checkpoint": f"{trainer.args.output_dir}/checkpoint-3",
        "final": False,
        "free": 0,
        "need": 4_305_408,
        "error": f"RuntimeError: {TORCH_ZIP_ERROR}",
    }
    assert (Path(trainer.args.output_dir) / "checkpoint-3" / "model.safetensors").exists()  # left in place


def test_the_final_save_is_guarded_and_counts_the_weights_alone(guarded):
    trainer = guarded(OSError(errno.ENOSPC, "No space left on device"))
    with pytest.raises(SystemExit):
        trainer.save_model()
    report = json.loads((guarded.reports / "rank-0.json").read_text())
    assert report["final"] is True and report["need"] == 1_435_136
    assert report["checkpoint"] == trainer.args.output_dir


def test_other_errors_and_whole_saves_pass_through(guarded):
    trainer = guarded(ValueError("a bug"))
    with pytest.raises(ValueError, match="a bug"):
        trainer._save_checkpoint(None, None)
    whole = guarded()
    whole.state.global_step = 4
    whole._save_checkpoint(None, None)
    assert (Path(whole.args.output_dir) / "checkpoint-4" / "trainer_state.json").is_file()
    assert not list(guarded.reports.iterdir())


def test_a_checkpoint_another_rank_could_not_finish_is_read_as_incomplete(tmp_path):
    where = tmp_path / "checkpoint-3"
    where.mkdir()
    (where / "trainer_state.json").write_text("{}")
    space.set_aside_state(str(where))
    assert not (where / "trainer_state.json").exists()
    assert (where / "trainer_state.json.incomplete").read_text() == "{}"
    space.set_aside_state(str(where))  # nothing left to set aside


def test_without_a_report_folder_the_rank_says_why_itself_and_exits_1(monkeypatch):
    monkeypatch.delenv("TRLSTACK_RUN_REPORTS", raising=False)
    said: list[str] = []
    report = dict(kind="no-space", rank=0, checkpoint="out/checkpoint-3", free=0, need=10)
    with pytest.raises(SystemExit) as exit:
        space.end_run(report, said.append)
    assert exit.value.code == 1
    assert said == [
        "the disk is full: out/checkpoint-3 could not be saved (0 bytes free, 10 needed); free space or set "
        "save_total_limit, then run again"
    ]


def test_reports_are_read_by_rank_and_a_broken_one_is_skipped(tmp_path):
    (tmp_path / "rank-1.json").write_text(json.dumps({"kind": "peer", "rank": 1, "failed_rank": 0}))
    (tmp_path / "rank-0.json").write_text(json.dumps({"kind": "no-space", "rank": 0}))
    (tmp_path / "rank-2.json").write_text("{cut")
    assert [report["rank"] for report in space.read_reports(tmp_path)] == [0, 1]


@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="counts torch tensors; runs in the image"
)
def test_a_save_is_counted_from_the_weights_and_the_optimizers_states():
    import torch

    model = torch.nn.Linear(10, 5)  # 55 float32 parameters
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.ones(1, 10)).sum().backward()
    optimizer.step()
    trainer = SimpleNamespace(model=model, optimizer=optimizer)
    assert space.tensor_bytes(trainer, weights_only=True) == 55 * 4
    # AdamW's two moments per weight, and one step count per parameter tensor
    steps = sum(t.numel() * t.element_size() for s in optimizer.state.values() for t in [s["step"]])
    assert space.tensor_bytes(trainer, weights_only=False) == 55 * 4 * 3 + steps


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="transformers runs in the image")
def test_the_guard_names_files_as_transformers_does():
    from transformers.trainer import TRAINER_STATE_NAME
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

    assert (space.CHECKPOINT_PREFIX, space.STATE_NAME) == (PREFIX_CHECKPOINT_DIR, TRAINER_STATE_NAME)
