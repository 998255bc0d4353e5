"""The script's shell text: words quoted or expanded, commands broken between options, and the fixed parts
read from the package's shell files without their header and shellcheck's directives."""

from __future__ import annotations

from importlib import resources

import pytest
from trlstack.commands.slurm.shell import Var, assembled, assign, fixed_part, lines


@pytest.mark.parametrize("name", ["prepare.sh", "node-check.sh", "supervise.sh"])
def test_a_fixed_part_is_its_file_less_the_header_and_the_directives(name):
    text = resources.files("trlstack.commands.slurm").joinpath(name).read_text()
    header, _, body = text.partition("\n\n")
    assert header.startswith("# shellcheck shell=bash\n")
    part = fixed_part(name)
    assert part[0] and not part[0].startswith("#!")
    assert not any("# shellcheck" in line for line in part)
    directives = [line for line in body.splitlines() if line.lstrip().startswith("# shellcheck ")]
    assert len(part) == len(body.splitlines()) - len(directives)


def test_each_nodes_check_is_inserted_in_prepare_in_place_of_its_line():
    prepare, check = fixed_part("prepare.sh"), fixed_part("node-check.sh")
    at = prepare.index("# insert node-check.sh")
    assert prepare[at - 1] == "read -r -d '' NODE_CHECK <<'CHECK'" and prepare[at + 1] == "CHECK"
    assert assembled("prepare.sh") == [*prepare[:at], *check, *prepare[at + 1 :]]
    assert check[0] == "node=$SLURMD_NODENAME" and "CHECK" not in check  # nothing ends the heredoc early
    assert assembled("supervise.sh") == fixed_part("supervise.sh")


def test_words_are_quoted_unless_the_script_expands_them():
    assert lines(["echo", "a b", Var('"$X"')], "") == ["echo 'a b' \"$X\""]
    assert assign("IMAGE", None) == "IMAGE=" and assign("DIR", "/a b") == "DIR='/a b'"


def test_a_long_command_breaks_between_options_never_inside_one():
    words = ["train", *[word for i in range(12) for word in (f"--option-{i}", f"value-{i}")]]
    broken = lines(words, "    ", width=40)
    assert all(len(line) <= 40 for line in broken)
    assert all(line.lstrip().startswith(("train", "--option-")) for line in broken)
    assert " ".join(" ".join(broken).split()) == " ".join(words)
