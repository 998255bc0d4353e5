"""A role's command line: what follows `--` is passed on unchanged."""

from __future__ import annotations

from trlstack.run.passthrough import split_extra


def test_split_extra_keeps_everything_after_the_first_double_dash():
    assert split_extra(["a", "--", "--b", "--", "c"]) == (["a"], ["--b", "--", "c"])
    assert split_extra(["a"]) == (["a"], [])
