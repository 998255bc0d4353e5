"""The pinned GPU stack, read from trlstack's own package metadata (so pyproject.toml stays the one source),
and what is installed in this environment."""

from __future__ import annotations

from collections.abc import Iterable
from importlib import metadata

GPU_EXTRA = "gpu"

# How to get the GPU stack, as every message that asks for it says it. trlstack is on no package index (a
# `pip install 'trlstack[gpu]'` finds nothing), so each way named works from what the user has: the image, a
# checkout of trlstack, or a bundle made from one for a machine without an index.
GET_GPU_STACK = (
    "run it in the trlstack image (docker/build.sh builds it), or install the GPU stack from a checkout of "
    f"trlstack (`uv sync --extra {GPU_EXTRA}`; for a machine without a package index, `trlstack bundle`)"
)


def parse_pins(requirements: Iterable[str]) -> dict[str, str]:
    """Exact `name==version` pins of the gpu extra among Requires-Dist lines, in the order declared."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    pins: dict[str, str] = {}
    for line in requirements:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        marker = requirement.marker
        only_with_the_extra = (
            marker is not None
            and marker.evaluate({"extra": GPU_EXTRA})
            and not marker.evaluate({"extra": ""})
        )
        specifiers = list(requirement.specifier)
        if only_with_the_extra and len(specifiers) == 1 and specifiers[0].operator == "==":
            pins[canonicalize_name(requirement.name)] = specifiers[0].version
    return pins


def pinned_stack() -> dict[str, str]:
    """name -> pinned version of the GPU stack; empty when trlstack runs without being installed."""
    try:
        return parse_pins(metadata.requires("trlstack") or [])
    except metadata.PackageNotFoundError:
        return {}


def installed_version(name: str) -> str | None:
    """The installed version of a distribution, or None."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
