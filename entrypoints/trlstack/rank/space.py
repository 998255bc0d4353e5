"""A save the disk has no room for ends the run in every rank together, without a traceback, and tells
train why (rank/run.py installs this on the trainer; roles/train/reports.py says it to the user).

transformers writes a checkpoint with torch.save and safetensors, and a full disk surfaces in many forms:
an OSError with ENOSPC from a JSON file, safetensors' "No space left on device", or torch's zip writer's
"basic_ios::clear: iostream error" and then "[enforce fail at inline_container.cc:672] . unexpected pos N
vs M", which name no cause at all. So a failed save counts as the disk's when the error says so, or when
the disk holds less free than the checkpoint needs (its tensors counted here: what the save would write).

The rank that failed writes a report (JSON) into the folder train names in TRLSTACK_RUN_REPORTS and exits
0, so that no launcher adds a traceback of its own (accelerate's CalledProcessError, torch elastic's
ChildFailedError); train reads the report and exits 1. With several ranks, every rank learns of the failure
at the same point (one all-gather of one number after each save, as rank/run.py agrees on a stop signal),
so none waits for a rank that left; each writes a report, which lets the train of every machine tell. The
checkpoint cut short is left in place: without trainer_state.json, which transformers writes last (one
written while another rank failed is set aside as trainer_state.json.incomplete), resume passes over it.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from trlstack.defaults import Env

NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
NO_SPACE_WORDS = ("No space left on device", "Disk quota exceeded", "StorageFull")
# transformers' TRAINER_STATE_NAME: written last, it marks a whole checkpoint (run/checkpoints.py)
STATE_NAME = "trainer_state.json"
CHECKPOINT_PREFIX = "checkpoint"  # transformers' PREFIX_CHECKPOINT_DIR: checkpoint-STEP
SET_ASIDE = ".incomplete"


def chain(error: BaseException) -> Iterator[BaseException]:
    """`error` and the errors it was raised from or during, innermost last."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def out_of_space(error: BaseException, free: int, need: int) -> bool:
    """Whether a save that raised `error` failed for room: the error says so, or the disk holds less than the
    `need` bytes of one checkpoint (torch's writer reports a short write without its errno)."""
    for cause in chain(error):
        if isinstance(cause, OSError) and cause.errno in NO_SPACE_ERRNOS:
            return True
        if any(words in str(cause) for words in NO_SPACE_WORDS):
            return True
    return isinstance(error, OSError | RuntimeError) and free < need


def tensor_bytes(trainer: Any, weights_only: bool) -> int:
    """What a save of `trainer` writes, counted from its tensors: the trained weights (an adapter's alone),
    and unless `weights_only`, the optimizer's states. Sharded tensors count whole."""
    import torch

    model = trainer.model
    adapter = hasattr(model, "peft_config")
    weights = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad or not adapter)
    if weights_only or trainer.optimizer is None:
        return int(weights)
    states = trainer.optimizer.state.values()
    moments = sum(
        t.numel() * t.element_size() for state in states for t in state.values() if torch.is_tensor(t)
    )
    return int(weights + moments)


def free_bytes(folder: str) -> int:
    """The bytes this process may still write on the disk of `folder` (or its nearest existing parent)."""
    path = Path(folder)
    while not path.exists() and path != path.parent:
        path = path.parent
    return shutil.disk_usage(path).free


def first_line(error: BaseException) -> str:
    """The error's type and first line, for the report."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".strip()


def report_path(environ: Mapping[str, str], rank: int) -> Path | None:
    """Where rank `rank` leaves its report for train (TRLSTACK_RUN_REPORTS); None outside train."""
    folder = environ.get(Env.RUN_REPORTS)
    return Path(folder) / f"rank-{rank}.json" if folder else None


def read_reports(folder: Path) -> list[dict[str, Any]]:
    """The reports ranks left in `folder` (train's side), by rank."""
    found = []
    for path in sorted(folder.glob("rank-*.json")):
        try:
            found.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return sorted(found, key=lambda report: report.get("rank", 0))


def agreed_failure(accelerator: Any, failed: bool) -> int:
    """1 + the highest rank whose save failed for room (0: none); every rank gets the same answer."""
    if accelerator.num_processes == 1:
        return 1 if failed else 0
    import torch

    mine = torch.tensor([accelerator.process_index + 1 if failed else 0], device=accelerator.device)
    return int(accelerator.gather(mine).max())


def set_aside_state(where: str) -> None:
    """Make a checkpoint another rank could not finish read as incomplete: its trainer_state.json set aside
    (renamed: a full disk needs no room for that)."""
    state = Path(where) / STATE_NAME
    if state.is_file():
        state.rename(state.with_name(STATE_NAME + SET_ASIDE))


def end_run(report: dict[str, Any], say: Callable[[str], None]) -> None:
    """Hand `report` to train and end this rank without a traceback: exit 0 once train has it (it exits 1),
    else, where nothing can be written for it, say why here and exit 1."""
    path = report_path(os.environ, report["rank"])
    try:
        if path is None:
            raise OSError("no report folder: this rank runs outside train")
        path.write_text(json.dumps(report))
    except OSError:
        if report["kind"] == "no-space":
            say(
                f"the disk is full: {report['checkpoint']} could not be saved ({report['free']} bytes free, "
                f"{report['need']} needed); free space or set save_total_limit, then run again"
            )
        raise SystemExit(1) from None
    raise SystemExit(0)


def guarded(
    trainer: Any, save: Callable[[], Any], where: str, weights_only: bool, say: Callable[[str], None]
) -> Any:
    """Run `save` (of `trainer`, into `where`); where it failed for room, in any rank, end the run in all."""
    rank, output_dir = trainer.accelerator.process_index, trainer.args.output_dir
    final = os.path.abspath(where) == os.path.abspath(output_dir)  # the script's save_model, no checkpoint
    report: dict[str, Any] | None = None
    result = None
    try:
        result = save()
    except Exception as error:
        need, free = tensor_bytes(trainer, weights_only), free_bytes(where)
        if not out_of_space(error, free, need):
            raise
        report = dict(kind="no-space", rank=rank, folder=output_dir, checkpoint=where, final=final)
        report.update(free=free, need=need, error=first_line(error))
    failed = agreed_failure(trainer.accelerator, report is not None)
    if not failed:
        return result
    if trainer.args.should_save and not final:
        set_aside_state(where)
    end_run(report or dict(kind="peer", rank=rank, failed_rank=failed - 1, checkpoint=where), say)


def guard_saves(trainer: Any, say: Callable[[str], None]) -> None:
    """Guard `trainer`'s checkpoints and the script's final save_model, as instance attributes, so the
    trainer's own subclass (GRPOTrainer's model card before the checkpoint) is inside the guard."""
    save_checkpoint, save_model = trainer._save_checkpoint, trainer.save_model

    @functools.wraps(save_checkpoint)
    def checkpoint(model: Any, trial: Any, *args: Any, **kwargs: Any) -> Any:
        folder = f"{CHECKPOINT_PREFIX}-{trainer.state.global_step}"
        where = os.path.join(trainer._get_output_dir(trial=trial), folder)
        save = functools.partial(save_checkpoint, model, trial, *args, **kwargs)
        return guarded(trainer, save, where, bool(trainer.args.save_only_model), say)

    @functools.wraps(save_model)
    def final(output_dir: str | None = None, _internal_call: bool = False, **kwargs: Any) -> Any:
        save = functools.partial(save_model, output_dir, _internal_call, **kwargs)
        if _internal_call:  # inside a checkpoint, which `checkpoint` guards
            return save()
        return guarded(trainer, save, output_dir or trainer.args.output_dir, True, say)

    trainer._save_checkpoint, trainer.save_model = checkpoint, final
