"""What train tells when a rank ended the run early and said why (rank/space.py: a save the disk had no room
for): the folder, its free bytes and what a checkpoint needs, the checkpoint left incomplete, the one a rerun
resumes from, and the fix. The ranks exit 0 so that no launcher prints a traceback; train exits 1."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from trlstack.defaults import Env


@contextlib.contextmanager
def report_folder() -> Iterator[tuple[dict[str, str], Path | None]]:
    """A folder of train's own (not the output folder, whose disk may be the full one) where the ranks leave
    their reports, and the variable that names it to them; removed afterwards. Where none can be made (a
    full or read-only temporary folder), none: a rank then says why itself and exits 1."""
    try:
        folder = tempfile.mkdtemp(prefix="trlstack-train-reports-")
    except OSError:
        yield {}, None
        return
    try:
        yield {Env.RUN_REPORTS: folder}, Path(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def folder_bytes(folder: Path) -> int:
    """The bytes the files under `folder` hold."""
    total = 0
    for root, _, names in os.walk(folder):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def no_space(report: Mapping[str, Any]) -> list[str]:
    """The lines for a save the disk had no room for, with what the output folder holds now."""
    from trlstack.run.checkpoints import newest_checkpoint
    from trlstack.run.space import size

    folder, where, final = Path(report["folder"]), Path(report["checkpoint"]), bool(report["final"])
    resume, incomplete = newest_checkpoint(folder)
    # A whole checkpoint on disk is what the next one takes; the ranks counted the tensors alone.
    need = report["need"] if final or resume is None else max(report["need"], folder_bytes(resume))
    cut = [path for path in incomplete if path.exists()]
    held = sum(folder_bytes(path) for path in cut)
    what = "the final model" if final else where.name
    lines = [
        f"the disk is full: {what} could not be saved in {folder} ({report['error']}).",
        f"  needed: {size(need)} for {'the model' if final else 'a checkpoint'}; free there: "
        f"{size(report['free'])}"
        + (f" ({size(report['free'] + held)} once the incomplete checkpoints are removed)" if held else ""),
    ]
    lines += [f"  {path} is incomplete: left in place, a rerun passes over it" for path in cut]
    if resume is None:
        lines.append(f"  a rerun starts anew: {folder} holds no complete checkpoint")
    else:
        then = "saves the final model" if final else "goes on"
        lines.append(f"  a rerun resumes from {resume} and {then}")
    can_go = " (the incomplete checkpoints can go)" if cut else ""
    lines.append(
        f"  Fix: free space on that disk{can_go}, keep fewer checkpoints (save_total_limit: N in the config, "
        "or `-- --save_total_limit N`: the N newest stay, and the next is saved beside them), or give "
        f"--output-dir ({Env.OUTPUT_DIR}) a disk with room; then run train again."
    )
    return lines


def explain(folder: Path | None) -> list[str] | None:
    """What the ranks' reports in `folder` say, as lines for train to print; None when no rank reported."""
    from trlstack.rank.space import read_reports  # after the run: train starts without it

    reports = read_reports(folder) if folder is not None else []
    if not reports:
        return None
    told = [report for report in reports if report.get("kind") == "no-space"]
    if not told:  # the rank that failed runs on another machine: its train says the rest
        failed = reports[0].get("failed_rank")
        return [
            f"rank {failed} could not save {reports[0].get('checkpoint')} for lack of room on its disk, so "
            "every rank stopped; the log of its machine's train says what to do."
        ]
    return no_space(told[0])
