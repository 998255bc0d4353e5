"""The target's facts: its Python and its wheel platform, as pip's and uv's flags and as PEP 508 markers."""

from __future__ import annotations

import re

from trlstack.errors import UsageError


def platform_tags(platform: str) -> list[str]:
    """Every tag pip must accept for `platform`; pip matches each --platform exactly. (uv's --python-platform
    knows these aliases itself, but uv has no command that saves wheel files, so the wheelhouse needs pip.)

    manylinux_2_28_x86_64 -> manylinux_2_28 ... manylinux_2_5 plus the legacy aliases (2014 = 2_17,
    2010 = 2_12, 1 = 2_5), since a wheel built for an older glibc runs on a newer one.
    """
    match = re.fullmatch(r"manylinux_2_(\d+)_(\w+)", platform)
    if not match:
        if re.fullmatch(
            r"(manylinux1|manylinux2010|manylinux2014|linux)_(x86_64|aarch64|ppc64le|s390x|i686)", platform
        ):
            return [platform]
        raise UsageError(
            f"--platform {platform!r} is not a Linux wheel platform (uv.lock holds Linux wheels only); "
            "use e.g. manylinux_2_28_x86_64 (glibc 2.28+) or manylinux_2_34_aarch64"
        )
    glibc, arch = int(match.group(1)), match.group(2)
    aliases = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    tags = []
    for minor in range(glibc, 4, -1):
        tags.append(f"manylinux_2_{minor}_{arch}")
        if minor in aliases and (minor == 17 or arch in ("x86_64", "i686")):
            tags.append(f"{aliases[minor]}_{arch}")
    return tags


def python_tag(python_version: str) -> tuple[str, str]:
    """'3.12' -> ('3.12', '3.12.0'); rejects what pip's --python-version would not take."""
    if not re.fullmatch(r"3\.\d+(\.\d+)?", python_version):
        raise UsageError(f"--python-version {python_version!r}: give the target's version as e.g. 3.12")
    parts = python_version.split(".")
    return ".".join(parts[:2]), ".".join((parts + ["0"])[:3])


def uv_platform(platform: str) -> str:
    """uv's --python-platform for a wheel platform: manylinux_2_34_x86_64 -> x86_64-manylinux_2_34."""
    match = re.fullmatch(r"(manylinux_2_\d+|manylinux\d+|linux)_(\w+)", platform_tags(platform)[0])
    assert match is not None  # platform_tags accepted it
    glibc, arch = match.groups()
    return f"{arch}-unknown-linux-gnu" if glibc == "linux" else f"{arch}-{glibc}"


def marker_environment(python_version: str, platform: str) -> dict[str, str]:
    """PEP 508 environment of CPython `python_version` on Linux `platform`, for the lock's markers."""
    short, full = python_tag(python_version)
    machine = re.sub(r"^(manylinux_2_\d+|manylinux\d*|linux)_", "", platform_tags(platform)[0])
    return {
        "python_version": short,
        "python_full_version": full,
        "implementation_name": "cpython",
        "implementation_version": full,
        "platform_python_implementation": "CPython",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "os_name": "posix",
        "platform_machine": machine,
        "platform_release": "",
        "platform_version": "",
        "extra": "",
    }
