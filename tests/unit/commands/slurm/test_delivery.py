"""What becomes of a checked job's script (slurm/delivery.py): printed (--dry-run), written beside the run's
outputs, or written and submitted with sbatch (--submit), which a stand-in on PATH answers; what cannot be
written, and what sbatch refuses, is named with the fix."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from trlstack.cli import main
from trlstack.commands.slurm.delivery import Delivery, deliver
from trlstack.errors import UsageError

from .harness import make_stubs, settings


def test_submit_writes_the_script_beside_the_outputs_and_prints_the_job_id(shared_tmp, capsys, monkeypatch):
    tmp_path = shared_tmp
    monkeypatch.setenv("PATH", f"{make_stubs(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("STUB_DIR", str(tmp_path))
    monkeypatch.setenv("STUB_NODES", "")
    monkeypatch.setenv("STUB_ADDRS", "")
    out = tmp_path / "runs"
    argv = ["slurm", "grpo", "--cpu", "--nodes", "2", "--runtime", "none", "--output-dir", str(out)]
    assert main([*argv, "--submit"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "4242\n"
    assert f"watch: squeue -j 4242; tail -f {out}/trlstack-grpo-4242.out" in captured.err
    script = out / "trlstack-grpo.sbatch"
    assert json.loads((tmp_path / "sbatch.jsonl").read_text()) == {"argv": ["--parsable", str(script)]}
    assert script.read_text().startswith("#!/bin/bash\n# trlstack slurm grpo")


def sbatch(folder: Path, script: str) -> Path:
    """An `sbatch` stand-in of its own on PATH (Slurm is the boundary here): `script` is its body."""
    bin_dir = folder / "sbatch-bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(f"#!/bin/sh\n{script}\n")
    (bin_dir / "sbatch").chmod(0o755)
    return bin_dir


def test_a_dry_run_prints_the_script_and_writes_nothing(tmp_path, capsys):
    job = settings(output_dir=str(tmp_path / "runs"))
    assert deliver(job, Delivery(dry_run=True), "#!/bin/bash\n") == 0
    assert capsys.readouterr().out == "#!/bin/bash\n"
    assert list(tmp_path.iterdir()) == []


def test_the_script_is_written_beside_the_outputs_and_the_submit_line_quoted(tmp_path, capsys):
    out = tmp_path / "my runs"
    job = settings(output_dir=str(out))
    assert deliver(job, Delivery(), "#!/bin/bash\n") == 0
    script = out / "trlstack-grpo.sbatch"
    assert script.read_text() == "#!/bin/bash\n"
    assert capsys.readouterr().out == f"trlstack slurm: wrote {script}; submit it with: sbatch '{script}'\n"


def test_output_names_the_script_and_the_output_folder_is_made_for_slurms_log(tmp_path, capsys):
    job = settings(output_dir=str(tmp_path / "runs"), job_name="mine")
    assert Delivery().script(job) == tmp_path / "runs" / "mine.sbatch"
    chosen = Delivery(output=str(tmp_path / "jobs" / "a.sbatch"))
    assert deliver(job, chosen, "text") == 0
    assert (tmp_path / "jobs" / "a.sbatch").read_text() == "text"
    assert (tmp_path / "runs").is_dir()  # Slurm cannot make the folder of the log it writes there


def test_what_cannot_be_written_is_refused_naming_the_setting_to_change(tmp_path):
    (tmp_path / "file").write_text("mine")
    with pytest.raises(UsageError) as error:
        deliver(settings(output_dir=str(tmp_path / "file" / "runs")), Delivery(), "text")
    assert str(error.value) == (
        f"cannot make the output folder {tmp_path}/file/runs (Not a directory); choose a writable "
        "--output-dir."
    )
    elsewhere = Delivery(output=str(tmp_path / "file" / "jobs" / "a.sbatch"))
    with pytest.raises(UsageError) as error:
        deliver(settings(output_dir=str(tmp_path / "runs")), elsewhere, "text")
    assert str(error.value) == (
        f"cannot write {tmp_path}/file/jobs/a.sbatch (Not a directory); choose a writable --output (or "
        "--output-dir)."
    )
    assert (tmp_path / "file").read_text() == "mine"


def test_what_sbatch_refuses_is_said_with_its_own_words(tmp_path, monkeypatch, capsys):
    refusing = "echo 'sbatch: error: invalid partition specified: gpu' >&2\nexit 1"
    monkeypatch.setenv("PATH", f"{sbatch(tmp_path, refusing)}{os.pathsep}{os.environ['PATH']}")
    job = settings(output_dir=str(tmp_path / "runs"))
    with pytest.raises(UsageError) as error:
        deliver(job, Delivery(submit=True), "text")
    script = tmp_path / "runs" / "trlstack-grpo.sbatch"
    assert str(error.value) == f"sbatch refused {script}: sbatch: error: invalid partition specified: gpu"
    assert capsys.readouterr().out == ""  # no job id


def test_the_job_id_is_read_from_sbatchs_parsable_answer_on_a_federated_cluster(
    tmp_path, monkeypatch, capsys
):
    answering = 'echo "$@" > "$(dirname "$0")/argv"\necho "77;cluster-b"'
    bin_dir = sbatch(tmp_path, answering)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    job = settings(output_dir=str(tmp_path / "runs"))
    assert deliver(job, Delivery(submit=True), "text") == 0
    script = tmp_path / "runs" / "trlstack-grpo.sbatch"
    assert (bin_dir / "argv").read_text() == f"--parsable {script}\n"
    captured = capsys.readouterr()
    assert captured.out == "77\n"
    assert captured.err == (
        f"trlstack slurm: submitted {script} as job 77; watch: squeue -j 77; "
        f"tail -f {tmp_path}/runs/trlstack-grpo-77.out\n"
    )
