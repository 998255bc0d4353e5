"""What train checks just before the run starts, once the settings hold: the other run in the output folder
(resume it, move it aside, or refuse showing the difference) and the model the server serves."""

from __future__ import annotations

import datetime
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from trlstack import outputs
from trlstack.defaults import Env
from trlstack.errors import UsageError
from trlstack.recipes import Recipe
from trlstack.roles.train.settings import TrainSettings


def previous_run_to_move(
    settings: TrainSettings,
    output_dir: Path,
    recipe: Recipe,
    config: Mapping[str, Any],
    tell: Callable[[str], None] | None = None,
    layout: tuple[str, int] | None = None,
) -> Path | None:
    """Where to move the other run in the output folder (--fresh), or None to resume what is there (the same
    run, or another one with --resume); UsageError showing the difference when neither was chosen. `tell`
    (default: train's log line) says which; trlstack slurm decides this on the submit host.

    `layout` (the sharding and the processes over all machines) is checked against the newest checkpoint,
    which records its own: one that this run cannot load is refused even with --resume, and --fresh moves it
    aside."""
    tell = tell or say
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
    from trlstack.checkpoints import newest_checkpoint, sharded_over
    from trlstack.sharding import resume_problem

    checkpoint, _ = newest_checkpoint(output_dir)
    if checkpoint is None:
        return None
    return resume_problem(checkpoint.name, sharded_over(checkpoint), sharding, processes)


def check_served_model(
    settings: TrainSettings, served: str, trained: str, environ: Mapping[str, str]
) -> None:
    """UsageError, before anything starts, when the server serves another model than the one trained: TRL
    sends every parameter into the served model by name and shape."""
    from trlstack import models

    same, how = models.same_model(served, trained, lambda reference: models.read_config(reference, environ))
    if same:
        if served != trained:
            say(f"the server serves {served} and this run trains {trained}: one model ({how})")
        return
    flag = f"--allow-other-served-model ({Env.ALLOW_OTHER_SERVED_MODEL}=1)"
    if settings.allow_other_served_model:
        say(f"the server serves {served} and this run trains {trained}: allowed by {flag} ({how})")
        return
    raise UsageError(
        f"the vLLM server at {settings.vllm_url} serves {served}, but this run trains {trained}, and they "
        f"are not recognised as one model ({how}): TRL's first weight sync would fail. Serve and train the "
        f"same model (--model, or {Env.MODEL} in .env for both), or pass {flag} if they are one model under "
        "two names."
    )


def say(message: str) -> None:
    print(f"train: {message}", file=sys.stderr, flush=True)
