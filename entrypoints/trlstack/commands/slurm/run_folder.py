"""The job's run folder on the submit host, made ready before anything is queued, as each trainer would find
it once the job starts: room on its shared disk for one checkpoint, and a different run already in it
refused, moved aside once here (--fresh) or continued (--resume). A dry run refuses what writing would refuse
and moves nothing."""

from __future__ import annotations

from pathlib import Path

from trlstack.commands.slurm.checks import Job
from trlstack.commands.slurm.delivery import say
from trlstack.run import outputs, space
from trlstack.run.resume import previous_run_to_move


def ready_run_folder(job: Job, dry_run: bool) -> None:
    """Refuse a run folder whose disk cannot hold one checkpoint (not for a dry run, a preview that may be
    made on another machine), then settle the other run in it: moved aside (--fresh; a dry run only says
    so), continued (--resume), or refused."""
    run_dir = Path(job.settings.run_dir)
    if not dry_run:
        need, how = space.checkpoint_bytes(job.config, job.model_config)
        warning = space.room_for_checkpoint(run_dir, space.free_space(run_dir), need, how, "--output-dir")
        if warning:  # a model this host has not cached: its size is unknown here
            say(f"{warning}; each trainer checks again before it starts")
    aside = previous_run_to_move(job.settings.train, run_dir, job.recipe, job.config, say)
    if aside is not None and not dry_run:
        outputs.move_aside(run_dir, aside)
        say(f"moved {run_dir} to {aside}; nothing in it was changed or deleted")
    elif aside is not None:
        say(f"a dry run: {run_dir} stays where it is")
