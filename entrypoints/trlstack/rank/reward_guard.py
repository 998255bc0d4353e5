"""A reward function that raises during training ends the run with a message that names the function, the
step and the row, after the checkpoint of the last finished step is saved, instead of a traceback from
inside TRL that leaves the step's work unsaved.

GRPO, RLOO and Online DPO (their trainers hold the functions in `reward_funcs`): each function is wrapped so
that a raise is recorded (the function, the line that raised, the step in progress, the row it fails on when
called for that row alone) and the batch scored 0, so that this process still reaches the collective calls
the other processes wait in; the trainer's reward calculation is wrapped so that, once every process has
scored its batch, all of them learn whether any failed (one all-gather of one number), then save
`checkpoint-N` of the last finished step together (the model is still that step's: the optimizer has not
stepped since) and end. Every process that failed prints its failure; the first says what was saved.

async-grpo scores in its rollout worker's process, to which the functions are sent pickled: `picklable`
wraps each one there, so that the worker's failure, which the trainer raises as its own, names it the same;
the trainer (one process) then saves the last finished step and ends.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trlstack.reward_calls import NONE_FIX, describe_row, failing_row, raise_site, source_file

EXIT_CODE = 1
# The trainers' methods that call every reward function of a batch, then gather what they returned.
CALCULATIONS = ("_calculate_rewards", "_calculate_rewards_from_functions")


@dataclass(frozen=True)
class Failure:
    name: str
    step: int  # the step in progress when it raised
    where: str  # FILE:LINE
    error: str
    row: str | None  # the row it fails on alone (None: it fails only on the whole batch)

    def text(self) -> str:
        on = f" on {self.row}" if self.row else " on this batch (on no row alone)"
        return f"reward {self.name} raised {self.error} ({self.where}) at step {self.step}{on}"


FAILURES: list[Failure] = []


def name_of(func: Any) -> str:
    """A reward's name as TRL logs it (rewards/NAME/mean): a function's own, a partial's function's, else the
    callable's class."""
    while isinstance(func, functools.partial):
        func = func.func
    return str(getattr(func, "__name__", type(func).__name__))


def failure(func: Callable[..., Any], error: Exception, kwargs: dict[str, Any], step: int) -> Failure:
    count = len(kwargs.get("completions") or [])
    index = failing_row(func, kwargs, count) if count > 1 else (0 if count else None)
    own = source_file(func)
    where = raise_site(error, func, own.parent if own else None)
    row = describe_row(kwargs, index) if index is not None else None
    return Failure(name_of(func), step, where, f"{type(error).__name__}: {error}", row)


def guarded(func: Callable[..., Any], step: Callable[[], int]) -> Callable[..., Any]:
    """`func`, recording a raise (and scoring the batch 0) instead of raising; async where it is async."""

    def record(error: Exception, kwargs: dict[str, Any]) -> list[float]:
        FAILURES.append(failure(func, error, kwargs, step()))
        return [0.0] * len(kwargs.get("completions") or [])

    if inspect.iscoroutinefunction(func):

        async def guarded_async(*args: Any, **kwargs: Any) -> Any:
            try:
                return await func(*args, **kwargs)
            except Exception as error:
                return record(error, kwargs)

        return functools.update_wrapper(guarded_async, func)

    def guarded_sync(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except Exception as error:
            return record(error, kwargs)

    return functools.update_wrapper(guarded_sync, func)


def any_failed(accelerator: Any) -> bool:
    """Whether a reward failed in any process; every process gets the same answer."""
    import torch

    mine = torch.tensor([1 if FAILURES else 0], device=accelerator.device)
    return bool(accelerator.gather(mine).max())


def save_last_step(trainer: Any) -> str | None:
    """checkpoint-N of the last finished step, saved by every process together where no complete one is
    there yet; its folder, or None before the first step."""
    step = trainer.state.global_step
    if step == 0:
        return None
    folder = os.path.join(trainer.args.output_dir, f"checkpoint-{step}")
    if not os.path.isfile(os.path.join(folder, "trainer_state.json")):
        trainer._save_checkpoint(trainer.model_wrapped, trial=None)
    return folder


def end(trainer: Any, failed: Failure | None, say: Callable[[str], None]) -> None:
    """Save the last finished step, say what failed and what was saved, and end this process."""
    saved = save_last_step(trainer)
    if failed is not None:
        rank = os.environ.get("RANK")
        who = f"process {rank}: " if rank not in (None, "0") else ""
        # On a line of its own: the progress bar leaves the cursor at the end of its line.
        print(f"\ntrain: {who}{failed.text()}", file=sys.stderr, flush=True)
    if saved is None:
        say(f"no step had finished, so there is no checkpoint; fix the reward (or {NONE_FIX}) and run again")
    else:
        say(
            f"{saved} (step {trainer.state.global_step}, the last finished) is saved; fix the reward (or "
            f"{NONE_FIX}) and run train again to resume from it"
        )
    ended()


def ended() -> None:
    """End this process once it has said what failed: through train (rank/space.py's report, exit 0, so no
    launcher adds a traceback of its own; train exits 1), or with EXIT_CODE outside train."""
    from trlstack.rank import space

    space.end_run({"kind": "reward", "rank": int(os.environ.get("RANK", "0"))}, lambda line: None, EXIT_CODE)


def agreeing(calculate: Callable[..., Any], trainer: Any, say: Callable[[str], None]) -> Callable[..., Any]:
    """The trainer's reward calculation, after which every process learns whether a reward failed in any,
    and all of them end together if one did."""

    @functools.wraps(calculate)
    def calculate_and_agree(*args: Any, **kwargs: Any) -> Any:
        result = calculate(*args, **kwargs)
        if any_failed(trainer.accelerator):
            end(trainer, FAILURES[0] if FAILURES else None, say)
        return result

    return calculate_and_agree


def install(trainer: Any, say: Callable[[str], None]) -> None:
    """Guard the reward functions of `trainer` (GRPO, RLOO, Online DPO); nothing for a trainer without a
    reward calculation of its own (async-grpo's are guarded in its rollout worker: `picklable`)."""
    import torch

    calculation = next((name for name in CALCULATIONS if hasattr(trainer, name)), None)
    funcs = getattr(trainer, "reward_funcs", None)
    if calculation is None or not isinstance(funcs, list):
        return
    step = lambda: int(trainer.state.global_step) + 1  # noqa: E731 - the step in progress
    for index, func in enumerate(funcs):
        if callable(func) and not isinstance(func, torch.nn.Module):
            funcs[index] = guarded(func, step)
    setattr(trainer, calculation, agreeing(getattr(trainer, calculation), trainer, say))


class RewardFailed(Exception):
    """A reward that raised in async-grpo's rollout worker, told as Failure.text() (pickles by its text)."""


class Picklable:
    """A reward function for async-grpo's rollout worker: called as the function, raising RewardFailed
    that names it, the line and the row where it raises. Pickles by reference to the function, as the
    function itself does; TRL logs it by the function's name."""

    def __init__(self, func: Callable[..., Any]):
        self.func = func
        self.__name__ = name_of(func)

    def __call__(self, **kwargs: Any) -> Any:
        try:
            return self.func(**kwargs)
        except Exception as error:
            raise RewardFailed(
                failure(self.func, error, kwargs, 0).text().replace(" at step 0", "")
            ) from None


def picklable(funcs: list[Any]) -> list[Any]:
    """async-grpo's reward functions, each raising RewardFailed that names it (async ones left as they are:
    TRL awaits them, and a wrapper would hide that they are coroutines)."""
    return [func if inspect.iscoroutinefunction(func) else Picklable(func) for func in funcs]


def reward_failed(error: BaseException) -> str | None:
    """The RewardFailed text in `error`'s chain (the trainer raises the worker's failure as text), or None."""
    seen = 0
    current: BaseException | None = error
    while current is not None and seen < 10:
        text = str(current)
        marker = f"{RewardFailed.__name__}: "
        if isinstance(current, RewardFailed):
            return text
        if marker in text:
            return text.split(marker, 1)[1].split("\n", 1)[0]
        current, seen = current.__cause__ or current.__context__, seen + 1
    return None


def after_worker_failure(trainer: Any, error: BaseException, say: Callable[[str], None]) -> None:
    """Where train() raised for a reward that failed in async-grpo's rollout worker: say so, save the last
    finished step where this is the only process (with two, the other waits for this one's next batch in a
    collective, so none is saved), and end; any other error is left to raise."""
    text = reward_failed(error)
    if text is None:
        return
    step = int(trainer.state.global_step) + 1
    print(f"\ntrain: {text}, generating for step {step}", file=sys.stderr, flush=True)
    if trainer.accelerator.num_processes > 1:
        say(
            f"nothing saved (the other process waits for this one): the newest checkpoint stays; fix the "
            f"reward (or {NONE_FIX}) and run train again to resume from it"
        )
        ended()
    end(trainer, None, say)
