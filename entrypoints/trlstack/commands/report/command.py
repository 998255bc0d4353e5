"""report's command line: read the run's metrics from its folder, print the summary, draw the picture."""

from __future__ import annotations

import argparse
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from trlstack.commands.report import panels, picture
from trlstack.errors import UsageError
from trlstack.files import cannot_create_in
from trlstack.metrics import Run, Store, find_stores, metrics_dir, read_runs
from trlstack.options import add_settings, flag, settings_from, switch

NEEDS_MATPLOTLIB = (
    "the picture needs matplotlib, which this installation lacks: from a checkout run `uv run --extra report "
    "trlstack report ...`, or `pip install matplotlib`; --text prints the summary alone"
)


@dataclass(frozen=True)
class ReportSettings:
    output_dir: str = flag(
        "a run's output folder (it holds trackio/, which train writes)", positional=True, metavar="OUTPUT_DIR"
    )
    output: str | None = flag(
        "where to write the picture (PNG)",
        None,
        aliases=("-o",),
        metavar="PATH",
        shown="RUN-report.png in the current folder, RUN the output folder's name",
    )
    run: str | None = flag("the run to report, where the folder holds several", None, shown="the latest")
    text: bool = switch(None, "print the summary only, draw no picture (needs no matplotlib)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_settings(parser, ReportSettings, os.environ)


def the_store(folder: Path) -> Store:
    """The run's store in `folder`; UsageError naming the fix where there is none."""
    if not folder.is_dir():
        raise UsageError(f"{folder} is not a folder; give a run's output folder (train's --output-dir).")
    stores = [store for store in find_stores(folder) if store.folder == metrics_dir(folder)]
    if not stores:
        raise UsageError(
            f"{folder} holds no recorded metrics ({metrics_dir(folder)} is missing): give the output folder "
            "of a run that train recorded (report_to: trackio, the recipes' default), e.g. outputs/grpo."
        )
    return stores[0]


def the_run(store: Store, name: str | None) -> Run:
    try:
        runs = read_runs(store)
    except (sqlite3.Error, OSError, ValueError) as error:
        raise UsageError(f"cannot read the metrics in {store.folder}: {error}.") from None
    if not runs:
        raise UsageError(
            f"{store.folder} holds no logged step yet; report again once the run has logged one."
        )
    if name is None:
        return runs[-1]
    for run in runs:
        if run.name == name:
            return run
    raise UsageError(f"--run {name}: {store.folder} holds the runs {', '.join(r.name for r in runs)}.")


def run(args: argparse.Namespace) -> int:
    settings = settings_from(ReportSettings, args)
    folder = Path(settings.output_dir)
    store = the_store(folder)
    recorded = the_run(store, settings.run)
    output = Path(settings.output or f"{folder.resolve().name}-report.png")
    if not settings.text:
        try:
            import matplotlib  # noqa: F401  # checked before anything is printed or written
        except ModuleNotFoundError:
            raise UsageError(NEEDS_MATPLOTLIB) from None
        problem = cannot_create_in(output.parent if str(output.parent) else Path("."))
        if problem:
            raise UsageError(f"cannot write {output}: {problem}; pass -o PATH elsewhere.")
    lines = panels.summary(recorded, str(folder))
    print("\n".join(lines))
    if not settings.text:
        picture.draw(lines[0], panels.panels(recorded), output)
        print(f"picture: {output}")
    return 0
