"""Whether a run continues what its output folder holds, pure but for reading that folder: the same run
resumes, another one is resumed (--resume), moved aside (--fresh) or refused showing the difference, and a
checkpoint this run's layout cannot load is refused even with --resume. train decides this at start, trlstack
slurm once on the submit host."""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from trlstack.errors import UsageError
from trlstack.recipes import Recipe
from trlstack.run import outputs
from trlstack.run.checkpoints import newest_checkpoint, sharded_over
from trlstack.run.settings import TrainSettings
from trlstack.run.sharding import resume_problem


def previous_run_to_move(
    settings: TrainSettings,
    output_dir: Path,
    recipe: Recipe,
    config: Mapping[str, Any],
    tell: Callable[[str], None],
    layout: tuple[str, int] | None = None,
) -> Path | None:
    """Where to move the other run in the output folder (--fresh), or None to resume what is there (the same
    run, or another one with --resume); UsageError showing the difference when neither was chosen. `tell`
    says which; trlstack slurm decides this on the submit host.

    `layout` (the sharding and the processes over all machines) is checked against the newest checkpoint,
    which records its own: one that this run cannot load is refused even with --resume, and --fresh moves it
    aside."""
    previous = outputs.previous_run(output_dir, recipe.name)
    found = outputs.differences(previous, recipe.name, config) if previous else []
    blocking = layout_problem(output_dir, *layout) if layout else None
    if blocking is not None and not settings.fresh:
        raise UsageError(f"cannot resume the run in {output_dir}: {blocking}.")
    if blocking is None and (previous is None or not found):
        return None
    aside = outputs.aside_name(output_dir, datetime.datetime.now())
    if blocking is None and settings.resume:
        tell(f"continuing the run in {output_dir} although it differs (--resume): {'; '.join(found)}")
        return None
    if not settings.fresh and previous is not None:
        raise UsageError(outputs.refusal(output_dir, previous, found, aside))
    why = "; ".join(found + ([blocking] if blocking else []))
    tell(f"the other run in {output_dir} differs ({why}); --fresh moves it aside to {aside}")
    return aside


def layout_problem(output_dir: Path, sharding: str, processes: int) -> str | None:
    """Why the newest checkpoint in `output_dir` cannot be resumed with `sharding` over `processes`."""
    checkpoint, _ = newest_checkpoint(output_dir)
    if checkpoint is None:
        return None
    return resume_problem(checkpoint.name, sharded_over(checkpoint), sharding, processes)
