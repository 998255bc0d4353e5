"""Where a run's metrics go, decided before launch (pure): trackio, in the run's output folder, unless the
config names its own trackers (`report_to`: a wandb user keeps wandb; `none` records nothing).

With trackio, the ranks get TRACKIO_DIR=OUTPUT_DIR/trackio, so the metrics travel with the checkpoints; the
project is the recipe and the run is named after the output folder, so a run that resumes (same folder)
continues the same curves (transformers' callback opens the run with resume="allow"). No account and no
network: no Space is named, and trackio's static Space on a Hub push is turned off unless the config names a
Space (trackio_space_id or trackio_static_space_id).
`trlstack dashboard OUTPUT_DIR` serves the metrics live, `trlstack report OUTPUT_DIR` draws them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

from trlstack.defaults import Env
from trlstack.metrics import metrics_dir
from trlstack.recipes import Recipe

TRACKER = "trackio"


def trackers(report_to: Any) -> list[str]:
    """TrainingArguments' report_to as a list of names (a string, a comma-separated string or a list)."""
    if report_to is None:
        return []
    names = report_to.split(",") if isinstance(report_to, str) else list(report_to)
    return [str(name).strip() for name in names if str(name).strip()]


def tracking(
    config: Mapping[str, Any], recipe: Recipe, source: str
) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """(config keys, env for the ranks, notes) that record the run's metrics. `config` is the run's config as
    the recipe's script will see it (the file, train's keys and the values given after `--`), with its
    output_dir; `source` names the config file for the notes."""
    output_dir = str(config["output_dir"])
    chosen = "report_to" in config
    names = trackers(config["report_to"]) if chosen else [TRACKER]
    if not names or names == ["none"]:
        note = (
            f"report_to: none in {source}: this run's metrics are not recorded, so `trlstack dashboard` and "
            f"`trlstack report` have nothing to show; set report_to: {TRACKER} there to record them"
        )
        return {}, {}, [note]
    if TRACKER not in names and "all" not in names:
        note = (
            f"metrics go to {', '.join(names)} (report_to in {source}); `trlstack dashboard` and `trlstack "
            f"report` read {TRACKER}'s only: add {TRACKER} to report_to to have them too"
        )
        return {}, {}, [note]
    keys: dict[str, Any] = {} if chosen else {"report_to": TRACKER}
    defaults: dict[str, Any] = {"project": recipe.name, "run_name": PurePath(output_dir).name or recipe.name}
    if "trackio_space_id" not in config:  # no Space asked for: nothing leaves the machine, not on a Hub push
        defaults["trackio_static_space_id"] = False
    keys.update({key: value for key, value in defaults.items() if key not in config})
    where = metrics_dir(output_dir)
    project = config.get("project", keys.get("project"))
    run = config.get("run_name", keys.get("run_name"))
    why = f"report_to in {source}" if chosen else "the default; report_to in the config changes it"
    notes = [
        f"metrics: {TRACKER} ({why}) in {where}, project {project}, run {run}: `trlstack dashboard "
        f"{output_dir}` serves them live, `trlstack report {output_dir}` draws them"
    ]
    return keys, {Env.TRACKIO_DIR: str(where)}, notes
