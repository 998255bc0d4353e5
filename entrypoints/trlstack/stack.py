"""The pinned GPU stack, read from trlstack's own package metadata (so pyproject.toml stays the one source),
and what is installed in this environment."""

from __future__ import annotations

import re
from importlib import metadata

# A pin is an exact `name==version` requirement of the gpu extra, e.g. `trl[vllm]==1.16.0; extra == "gpu"`.
_PIN = re.compile(
    r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*==\s*([^\s;,]+)\s*;.*extra\s*==\s*['\"]gpu['\"]"
)


def parse_pins(requirements: list[str]) -> dict[str, str]:
    """Exact pins of the gpu extra among Requires-Dist lines, in the order declared."""
    pins = {}
    for requirement in requirements:
        match = _PIN.match(requirement)
        if match:
            pins[match.group(1).lower()] = match.group(2)
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
