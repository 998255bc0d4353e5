"""Every check of a job made once, before rendering: the checked Job comes from `check` alone."""

from __future__ import annotations

import pytest
from trlstack.commands.slurm.checks import Job, check
from trlstack.commands.slurm.layout import make_layout
from trlstack.errors import UsageError
from trlstack.recipes import RECIPES

from .harness import settings


def test_check_gives_the_job_with_its_layout():
    asked = settings(nodes=4, tensor_parallel_size=2)
    job = check(asked)
    assert job.settings is asked
    assert job.layout == make_layout(asked)


def test_a_job_is_made_by_check_only():
    asked = settings()
    with pytest.raises(TypeError, match=r"a Job comes from trlstack.commands.slurm.checks.check\(settings\)"):
        Job(asked, make_layout(asked), RECIPES["grpo"], {})


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (dict(runtime="docker"), "--runtime 'docker': choose one of apptainer, pyxis, none"),
        (dict(output_dir="runs"), "--output-dir runs must be an absolute path"),
        (dict(bind=("models",)), "--bind models: give SRC or SRC:DST as absolute paths"),
        (dict(image=None), "--runtime apptainer needs --image (a .sif file)"),
    ],
)
def test_what_the_command_line_cannot_refuse_is_refused_here(changes, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check(settings(**changes))
