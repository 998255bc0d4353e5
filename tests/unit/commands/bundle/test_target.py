"""trlstack.commands.bundle.target: the target's Python and platform as pip's tags, uv's flags and markers."""

from __future__ import annotations

import pytest
from trlstack.commands.bundle.target import marker_environment, platform_tags, python_tag, uv_platform
from trlstack.errors import UsageError


def test_platform_tags_accept_older_glibc_and_legacy_aliases():
    tags = platform_tags("manylinux_2_28_x86_64")
    assert tags[0] == "manylinux_2_28_x86_64"
    assert {
        "manylinux_2_17_x86_64",
        "manylinux2014_x86_64",
        "manylinux2010_x86_64",
        "manylinux1_x86_64",
    } <= set(tags)
    assert "manylinux_2_29_x86_64" not in tags
    assert "manylinux2010_aarch64" not in platform_tags("manylinux_2_28_aarch64")


@pytest.mark.parametrize("platform", ["macosx_14_0_arm64", "win_amd64", "manylinux_x86_64"])
def test_non_linux_platforms_are_refused_with_an_example(platform):
    with pytest.raises(UsageError, match="manylinux_2_28_x86_64"):
        platform_tags(platform)


@pytest.mark.parametrize("version", ["3", "python3.12", "2.7"])
def test_bad_python_versions_are_refused(version):
    with pytest.raises(UsageError, match="e.g. 3.12"):
        python_tag(version)


def test_uv_names_the_platform_cpu_first():
    assert uv_platform("manylinux_2_34_x86_64") == "x86_64-manylinux_2_34"
    assert uv_platform("linux_aarch64") == "aarch64-unknown-linux-gnu"


def test_the_marker_environment_is_the_targets():
    environment = marker_environment("3.12", "manylinux_2_34_aarch64")
    assert environment["python_full_version"] == "3.12.0"
    assert (environment["platform_machine"], environment["sys_platform"]) == ("aarch64", "linux")
