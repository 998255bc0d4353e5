"""What goes into the bundle: the lock's pins for the target, less what it has and what it can run without."""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from trlstack.errors import UsageError


@dataclass(frozen=True)
class OptionalPackage:
    """A locked package a target can run without, why, and what the target must then set."""

    why: str
    env: Mapping[str, str] = field(default_factory=dict)


# Optional at run time for dense text models (Qwen2, Llama, ...) on Hopper and older: vLLM 0.25 imports
# none of them to start, serve and train with TRL (checked on an H200 with all of them left out).
# `--without NAME` prunes NAME and every package only NAME needed (uv export --prune).
OPTIONAL: dict[str, OptionalPackage] = {
    "flashinfer-cubin": OptionalPackage(
        "FlashInfer's precompiled kernels (~460 MB). vLLM uses FlashAttention on sm_80/sm_90; the FlashInfer "
        "sampler must then be switched off",
        {"VLLM_USE_FLASHINFER_SAMPLER": "0"},
    ),
    "flashinfer-python": OptionalPackage(
        "FlashInfer (attention/sampling kernels, JIT; pulls cuda-tile and the nvcc wheels). Without it the "
        "FlashInfer sampler must be switched off",
        {"VLLM_USE_FLASHINFER_SAMPLER": "0"},
    ),
    "tilelang": OptionalPackage("TileLang JIT kernels of a few newer architectures' layers; pulls z3-solver"),
    "nvidia-cutlass-dsl": OptionalPackage(
        "the CuTe DSL (~150 MB with its libs) behind FlashInfer, quack and MLA kernels, mostly for Blackwell"
    ),
    "quack-kernels": OptionalPackage("CuTe DSL kernels vLLM uses on Blackwell"),
    "tokenspeed-mla": OptionalPackage(
        "MLA prefill kernels for DeepSeek-style models, with a private Triton (~95 MB)"
    ),
    "humming-kernels": OptionalPackage(
        "GEMM kernels for NVFP4/MXFP4-quantized checkpoints; pulls the nvcc wheels"
    ),
    "pynvvideocodec": OptionalPackage("GPU video decoding, for video inputs of multimodal models"),
    "torchcodec": OptionalPackage("audio/video decoding, for multimodal inputs"),
}


@dataclass(frozen=True)
class Pin:
    """One line of `uv export`: an exact version, its environment marker and the lock's hashes."""

    name: str
    version: str
    marker: str = ""
    hashes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Plan:
    """What goes into the bundle and what stays out, with the reason."""

    included: tuple[Pin, ...]
    present: tuple[tuple[Pin, str], ...]  # (locked pin, version the target has)
    pruned: tuple[str, ...]  # left out with --without / --slim, with what only they needed
    env: Mapping[str, str]


def _exact_pin(line: str) -> tuple[str, str, str] | None:
    """(normalized name, version, marker) of a `name==version[; marker]` requirement, else None."""
    try:
        requirement = Requirement(line)
    except InvalidRequirement:
        return None
    specifiers = list(requirement.specifier)
    if len(specifiers) != 1 or specifiers[0].operator != "==":
        return None
    return canonicalize_name(requirement.name), specifiers[0].version, str(requirement.marker or "")


def parse_export(text: str) -> list[Pin]:
    """Pins from `uv export --format requirements.txt` output (hashes optional, comments ignored)."""
    pins: list[Pin] = []
    for entry in re.sub(r"\\\n", " ", text).splitlines():
        entry = entry.split("#", 1)[0].strip()
        if not entry or entry.startswith("-"):
            continue
        hashes = tuple(re.findall(r"--hash=(\S+)", entry))
        pin = _exact_pin(re.sub(r"--hash=\S+", "", entry))
        if pin is None:
            raise UsageError(
                f"uv export gave a line that is not 'name==version': {entry!r}. Is uv.lock up to date?"
            )
        pins.append(Pin(*pin, hashes))
    return pins


def parse_freeze(text: str) -> dict[str, str]:
    """name -> version from `pip list --format=freeze` / `pip freeze` (editable and URL lines are skipped)."""
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    pins = [_exact_pin(line) for line in lines if line and not line.startswith("-")]
    return {pin[0]: pin[1] for pin in pins if pin is not None}


def applies(pin: Pin, environment: Mapping[str, str]) -> bool:
    """Whether the lock installs `pin` on the target (its marker holds there)."""
    return not pin.marker or Marker(pin.marker).evaluate(dict(environment))


def same_release(locked: str, have: str) -> bool:
    """The target's version satisfies the pin: equal, or equal but for a local label (2.11.0+cu130)."""
    try:
        return Version(locked).public == Version(have).public
    except InvalidVersion:
        return locked == have


def check_without(names: Iterable[str], locked: Iterable[str]) -> list[str]:
    """Normalized --without names, each a locked package, else a UsageError naming the closest ones."""
    locked = sorted(set(locked))
    checked: list[str] = []
    for name in names:
        if not name.strip():
            raise UsageError("--without needs a package name, e.g. --without flashinfer-cubin")
        key = canonicalize_name(name)
        if key not in locked:
            close = difflib.get_close_matches(key, locked, n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise UsageError(
                f"--without {name}: no such package in uv.lock{hint}. Known optional: {', '.join(OPTIONAL)}"
            )
        checked.append(key)
    return checked


def plan_bundle(
    locked: Sequence[Pin],
    kept: Sequence[Pin],
    environment: Mapping[str, str],
    present: Mapping[str, str],
    without: Iterable[str] = (),
    any_version: bool = False,
) -> Plan:
    """Decide the bundle: `kept` (the export after pruning) for the target, less what the target already has.

    `locked` is the export without pruning: what it has and `kept` lacks was pruned. Leaving out a package
    named in `without` may ask the target for variables (OPTIONAL[name].env). With `any_version`, a package
    the target has stays out whatever its version (the target's build wins over the lock's).
    """
    target_locked = [pin for pin in locked if applies(pin, environment)]
    target_kept = [pin for pin in kept if applies(pin, environment)]
    kept_names = {pin.name for pin in target_kept}
    pruned = tuple(sorted({pin.name for pin in target_locked} - kept_names))
    included, already = [], []
    for pin in target_kept:
        have = present.get(pin.name)
        if have is not None and (any_version or same_release(pin.version, have)):
            already.append((pin, have))
        else:
            included.append(pin)
    env: dict[str, str] = {}
    for name in without:
        env.update(OPTIONAL[name].env if name in OPTIONAL and name in pruned else {})
    return Plan(tuple(included), tuple(already), pruned, env)


def render_requirements(pins: Iterable[Pin]) -> str:
    """A pip requirements file with every hash, so `pip install` checks each wheel (hash-checking mode)."""
    lines = []
    for pin in sorted(pins, key=lambda pin: pin.name):
        hashes = "".join(f" \\\n    --hash={digest}" for digest in pin.hashes)
        lines.append(f"{pin.name}=={pin.version}{hashes}")
    return "\n".join(lines) + "\n"


def render_env(env: Mapping[str, str]) -> str:
    header = "# Variables the target needs (what was left out asks for them). Load: set -a; . ./bundle.env\n"
    return header + "".join(f"{key}={shlex.quote(value)}\n" for key, value in sorted(env.items()))


def render_report(plan: Plan) -> str:
    """left-out.txt: each package left out and why."""
    lines = [f"{name}: left out with --without ({_why(name)})" for name in plan.pruned]
    lines += [f"{pin.name}=={pin.version}: the target has {have}" for pin, have in plan.present]
    return "\n".join(lines) + ("\n" if lines else "")


def _why(name: str) -> str:
    return OPTIONAL[name].why if name in OPTIONAL else "only needed by a package left out"
