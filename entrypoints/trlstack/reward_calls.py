"""How one call of a reward function is judged and told, the same in `trlstack check-task` (run/task_check.py)
and inside a training process (rank/reward_guard.py): where it raised, whether what it returned is what the
trainer takes (one finite number or None per completion), and which row it was given."""

from __future__ import annotations

import inspect
import math
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

# What a reward function returns for the completions it cannot score; the trainer leaves them out.
NONE_FIX = "return None for a completion the function cannot score"


def source_file(func: Callable[..., Any]) -> Path | None:
    """The file a function is defined in (a wrapped or partial function's own), or None (a builtin)."""
    target = inspect.unwrap(getattr(func, "func", func))
    try:
        found = inspect.getsourcefile(target)
    except TypeError:
        return None
    return Path(found).resolve() if found else None


def shown_path(path: Path, root: Path | None) -> str:
    """`path` relative to `root` where it is inside it, else as it is."""
    if root is not None and path.is_relative_to(root):
        return str(path.relative_to(root))
    return str(path)


def raise_site(error: BaseException, func: Callable[..., Any], root: Path | None = None) -> str:
    """`FILE:LINE` of the line that raised: the deepest frame in the reward's own folder (its module and
    the helpers beside it), else the deepest of all; FILE relative to `root` (the task folder)."""
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return "?"
    own = source_file(func)
    folder = own.parent if own else None
    mine = [f for f in frames if folder is not None and Path(f.filename).resolve().is_relative_to(folder)]
    frame = (mine or frames)[-1]
    return f"{shown_path(Path(frame.filename).resolve(), root)}:{frame.lineno}"


def scores_problem(result: Any, expected: int) -> str | None:
    """What is wrong with a reward function's return value for `expected` completions, or None: the
    trainers take a list of one number or None per completion."""
    if isinstance(result, (str, bytes, Mapping)) or not hasattr(result, "__len__"):
        return f"returned {_kind(result)}, not a list of one float (or None) per completion"
    if len(result) != expected:
        return f"returned {len(result)} values for {expected} completions: give one per completion"
    for index, value in enumerate(result):
        if value is None:
            continue
        if isinstance(value, (str, bytes)):
            return f"returned {value!r} (text) for completion {index}: give a float"
        try:
            number = float(value)
        except (TypeError, ValueError):
            return f"returned {_kind(value)} for completion {index}: give a float"
        if not math.isfinite(number):
            return f"returned {number} for completion {index}: {NONE_FIX}, not NaN or infinity"
    return None


def _kind(value: Any) -> str:
    return "None" if value is None else f"a {type(value).__name__}"


def text(value: Any) -> str:
    """A prompt or completion as text: a conversation's last message, or the value itself."""
    if isinstance(value, list) and value and isinstance(value[-1], Mapping):
        return str(value[-1].get("content", ""))
    return str(value)


def short(value: Any, width: int = 60) -> str:
    """`value` as Python writes it (a conversation: its last message's text), cut to `width` characters."""
    if isinstance(value, (str, list)):
        value = text(value)
    shown = repr(value)
    return shown if len(shown) <= width else shown[: width - 3] + "..."


def describe_row(kwargs: Mapping[str, Any], index: int, skip: Sequence[str] = ()) -> str:
    """The row `index` of a reward call, as a user finds it in their data: its prompt, its other columns
    (the call's lists of one value per completion) and the completion."""
    columns = [
        f"{key}={short(value[index], 30)}"
        for key, value in kwargs.items()
        if key not in ("prompts", "completions", "completion_ids", *skip)
        and isinstance(value, list)
        and len(value) > index
    ]
    prompts, completions = kwargs.get("prompts") or [], kwargs.get("completions") or []
    parts = [f"prompt {short(prompts[index])}"] if len(prompts) > index else []
    parts += columns
    parts += [f"completion {short(completions[index])}"] if len(completions) > index else []
    return ", ".join(parts)


def resolved(value: Any) -> Any:
    """A reward's result, awaited where the function is async (in a thread of its own, so this works from
    inside a running event loop too, as TRL's is when it calls async rewards)."""
    if not inspect.isawaitable(value):
        return value
    import asyncio  # here: 30 ms of imports a check of plain functions does not pay
    from concurrent.futures import ThreadPoolExecutor

    async def awaited() -> Any:
        return await value

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, awaited()).result()


def one_row(kwargs: Mapping[str, Any], index: int, count: int) -> dict[str, Any]:
    """The keywords of a call for row `index` alone: each list of one value per completion cut to it."""
    return {
        key: [value[index]] if isinstance(value, list) and len(value) == count else value
        for key, value in kwargs.items()
    }


def failing_row(func: Callable[..., Any], kwargs: Mapping[str, Any], count: int) -> int | None:
    """The first row on which `func` raises when called for that row alone (None: none does; it fails only
    on the batch)."""
    for index in range(count):
        try:
            resolved(func(**one_row(kwargs, index, count)))
        except Exception:
            return index
    return None
