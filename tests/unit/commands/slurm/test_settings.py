"""What sbatch reads, checked before a script is written: the time limit in every form Slurm accepts, and the
names of a partition, an account and a job."""

from __future__ import annotations

import argparse

import pytest
from trlstack.commands.slurm.settings import limit_seconds, slurm_name, time_limit

FORMS = [
    ("90", 90 * 60),  # minutes
    ("90:30", 90 * 60 + 30),  # minutes:seconds
    ("24:00:00", 24 * 3600),  # hours:minutes:seconds
    ("48:00:00", 48 * 3600),  # hours past a day, as Slurm reads them
    ("2-12", (2 * 24 + 12) * 3600),  # days-hours
    ("1-12:30", (36 * 60 + 30) * 60),  # days-hours:minutes
    ("1-00:00:15", 24 * 3600 + 15),  # days-hours:minutes:seconds
    ("UNLIMITED", None),
    ("infinite", None),
    ("0", None),  # sbatch: a limit of zero imposes none
]


@pytest.mark.parametrize(("limit", "seconds"), FORMS)
def test_every_form_slurm_accepts_is_taken_as_given(limit, seconds):
    assert time_limit(limit) == limit
    assert limit_seconds(limit) == seconds


@pytest.mark.parametrize("limit", ["25h", "1d", "1-", "-5", "1:2:3:4", "1-2-3", "12:", " 90", "", "١٢"])
def test_other_limits_are_refused_naming_the_forms(limit):
    with pytest.raises(argparse.ArgumentTypeError, match=r"give minutes \(90\), MM:SS, HH:MM:SS") as error:
        time_limit(limit)
    assert "D-HH, D-HH:MM, D-HH:MM:SS (1-12:00:00) or UNLIMITED" in str(error.value)


@pytest.mark.parametrize("name", ["gpu", "a100_long", "proj-123", "v1.2+x"])
def test_names_sbatch_takes(name):
    assert slurm_name("account")(name) == name


def test_a_partition_may_be_a_list():
    assert slurm_name("partition", lists=True)("gpu,gpu-long") == "gpu,gpu-long"
    with pytest.raises(argparse.ArgumentTypeError, match="or several joined by commas"):
        slurm_name("partition", lists=True)("gpu,")


@pytest.mark.parametrize("name", ["", "two words", "a/b", "-x", "r%j", "q'uote", "a,b", "x" * 201, "é"])
def test_names_that_would_change_what_sbatch_reads_are_refused(name):
    with pytest.raises(argparse.ArgumentTypeError, match=r"is not a Slurm job name; give letters, digits"):
        slurm_name("job name")(name)
