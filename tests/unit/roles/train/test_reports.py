"""trlstack.roles.train.reports: what train tells when a rank ended the run for a full disk: the folder, the
free and the needed bytes, the checkpoint left incomplete, the one a rerun resumes from, and the fix."""

from __future__ import annotations

import json
from pathlib import Path

from trlstack.roles.train.reports import explain, report_folder


def checkpoint(folder: Path, step: int, size: int, complete: bool) -> Path:
    path = folder / f"checkpoint-{step}"
    path.mkdir(parents=True)
    (path / "optimizer.pt").write_bytes(b"x" * size)
    if complete:
        (path / "trainer_state.json").write_text("{}")
    return path


def report(reports: Path, rank: int = 0, **fields) -> None:
    (reports / f"rank-{rank}.json").write_text(json.dumps({"rank": rank, **fields}))


def no_space(folder: Path, where: Path, final: bool = False) -> dict:
    return dict(kind="no-space", folder=str(folder), checkpoint=str(where), final=final, free=0, need=4_000)


def test_a_checkpoint_cut_short_names_everything_and_the_fix(tmp_path):
    out, reports = tmp_path / "out", tmp_path / "reports"
    reports.mkdir()
    checkpoint(out, 2, 4_400, complete=True)
    cut = checkpoint(out, 3, 3_700, complete=False)
    report(reports, **no_space(out, cut), error="RuntimeError: unexpected pos 2216832 vs 2216720")
    lines = explain(reports)
    assert lines == [
        f"the disk is full: checkpoint-3 could not be saved in {out} (RuntimeError: unexpected pos 2216832 "
        "vs 2216720).",
        # The whole checkpoint on disk, more than the ranks' count of tensors; free with the cut one removed.
        "  needed: 4.4 kB for a checkpoint; free there: 0 bytes (3.7 kB once the incomplete checkpoints are "
        "removed)",
        f"  {cut} is incomplete: left in place, a rerun passes over it",
        f"  a rerun resumes from {out}/checkpoint-2 and goes on",
        "  Fix: free space on that disk (the incomplete checkpoints can go), keep fewer checkpoints "
        "(save_total_limit: N in the config, or `-- --save_total_limit N`: the N newest stay, and the next "
        "is saved beside them), or give --output-dir (TRLSTACK_OUTPUT_DIR) a disk with room; then run "
        "train again.",
    ]


def test_a_final_model_cut_short_resumes_from_the_last_checkpoint_to_save_it(tmp_path):
    out, reports = tmp_path / "out", tmp_path / "reports"
    reports.mkdir()
    checkpoint(out, 2, 4_400, complete=True)
    report(reports, **no_space(out, out, final=True), error="SafetensorError: No space left on device")
    lines = explain(reports)
    assert lines is not None
    assert (
        lines[0] == f"the disk is full: the final model could not be saved in {out} (SafetensorError: No "
        "space left on device)."
    )
    assert lines[1] == "  needed: 4.0 kB for the model; free there: 0 bytes"
    assert lines[2] == f"  a rerun resumes from {out}/checkpoint-2 and saves the final model"
    assert "(the incomplete checkpoints can go)" not in lines[3]


def test_a_first_checkpoint_cut_short_starts_anew(tmp_path):
    out, reports = tmp_path / "out", tmp_path / "reports"
    reports.mkdir()
    cut = checkpoint(out, 1, 100, complete=False)
    report(reports, **no_space(out, cut), error="OSError: [Errno 28] No space left on device")
    assert f"  a rerun starts anew: {out} holds no complete checkpoint" in (explain(reports) or [])


def test_a_machine_whose_ranks_saved_hears_of_the_one_that_could_not(tmp_path):
    report(tmp_path, rank=4, kind="peer", failed_rank=0, checkpoint="/shared/out/checkpoint-3")
    assert explain(tmp_path) == [
        "rank 0 could not save /shared/out/checkpoint-3 for lack of room on its disk, so every rank stopped; "
        "the log of its machine's train says what to do."
    ]


def test_no_report_is_no_explanation_and_the_folder_goes_afterwards():
    with report_folder() as (variables, folder):
        assert folder is not None and variables == {"TRLSTACK_RUN_REPORTS": str(folder)}
        assert explain(folder) is None
    assert not folder.exists()
    assert explain(None) is None
