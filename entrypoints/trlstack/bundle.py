"""`trlstack bundle`: the locked GPU stack as an offline install for a machine without a package index.

From uv.lock (through `uv export`: pins and hashes exactly the lock's), for one target Python and platform:

- `--format wheelhouse`: `wheels/` fetched with `pip download --only-binary=:all: --no-deps --require-hashes`,
  installed on the target by `install.sh` (`pip install --no-index --no-deps --find-links wheels -r ...`);
- `--format site`: the same packages installed into one folder by `uv pip install --target --python-platform
  --python-version --require-hashes`, packed as `site.tar.xz` (optionally split into `--piece-size` pieces),
  unpacked on the target by `install.sh DEST`, which points the console scripts at the target's interpreter
  and writes `DEST/activate`.

Packages the target already has at the locked version (`--exclude-present`: `pip list --format=freeze` there)
and optional heavy ones (`--without`, `--slim`) are left out; `bundle.env` lists the variables the target then
needs. The decisions are pure functions; `run` does the side effects, into `DIR.partial`, renamed to DIR when
complete.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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

FORMATS = ("wheelhouse", "site")


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


# ------------------------------------------------------------------------------------------- pure decisions


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


def parse_size(text: str) -> int:
    """'60M' -> 60_000_000 bytes (K, M, G are powers of 1000; Ki, Mi, Gi of 1024)."""
    match = re.fullmatch(r"(\d+)\s*([KMG]i?)?B?", text.strip(), flags=re.IGNORECASE)
    if not match or int(match.group(1)) == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size such as 60M or 2Gi")
    unit = (match.group(2) or "").upper()
    scale = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "KI": 2**10, "MI": 2**20, "GI": 2**30}[unit]
    return int(match.group(1)) * scale


def render_install_script(fmt: str, python_version: str, platform: str) -> str:
    """install.sh for the target: checks the interpreter, then installs offline."""
    short, _ = python_tag(python_version)
    head = f"""#!/bin/sh
# Offline install of this bundle (trlstack bundle --format {fmt}, CPython {short}, {platform}).
# PYTHON picks the target interpreter (default python3). Variables the target needs: bundle.env.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
python=$(command -v "${{PYTHON:-python3}}") || {{
  echo "install.sh: no ${{PYTHON:-python3}} found; set PYTHON=/path/to/python{short}" >&2
  exit 1
}}
have=$("$python" -c 'import sys; print(*sys.version_info[:2], sep=chr(46))')
if [ "$have" != "{short}" ]; then
  echo "install.sh: the bundle is for Python {short}, $python is $have; set PYTHON=/path/to/python{short}" >&2
  exit 1
fi
"""
    if fmt == "wheelhouse":
        return (
            head
            + """# Usage: sh install.sh [more pip install arguments, e.g. --target DIR or --user]
"$python" -m pip install --no-index --no-deps --find-links "$here/wheels" -r "$here/requirements.txt" "$@"
echo "installed; before running, load $here/bundle.env (set -a; . $here/bundle.env; set +a)"
"""
        )
    return (
        head
        + """# Usage: sh install.sh [DEST]   (default: ./site beside this script; DEST: empty or absent)
dest=${1:-$here/site}
if [ -d "$dest" ] && [ -n "$(ls -A "$dest")" ]; then
  echo "install.sh: $dest is not empty; give an empty or new folder" >&2
  exit 1
fi
expected=$(cat "$here/site.sha256")
actual=$(cat "$here"/site.tar.xz* | sha256sum | cut -d' ' -f1)
if [ "$actual" != "$expected" ]; then
  echo "install.sh: site.tar.xz pieces are incomplete or damaged (sha256 $actual, expected $expected)" >&2
  exit 1
fi
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
cat "$here"/site.tar.xz* | tar -xJ -C "$dest"
# pip wrote the console scripts for the interpreter that built the bundle: point them at this one.
for script in "$dest"/bin/*; do
  [ -f "$script" ] && sed -i "1s|^#!.*python.*$|#!$python|" "$script"
done
{
  echo "export PYTHONPATH=$dest\\${PYTHONPATH:+:\\$PYTHONPATH}"
  echo "export PATH=$dest/bin:\\$PATH"
  grep -v '^#' "$here/bundle.env" | sed 's/^/export /'
} >"$dest/activate"
echo "installed in $dest; use it with: . $dest/activate"
"""
    )


# ------------------------------------------------------------------------------------------- side effects


def _uv() -> str:
    uv = shutil.which("uv")
    if uv is None:
        raise UsageError("uv is missing: install it (python3 -m pip install uv) and run again")
    return uv


def _pip(explicit: str | None) -> list[str]:
    if explicit:
        return shlex.split(explicit)
    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip"]
    for name in ("pip3", "pip"):
        if found := shutil.which(name):
            return [found]
    raise UsageError(
        "pip is missing: install it (python3 -m ensurepip, or apt-get install python3-pip) or pass --pip"
    )


def _call(argv: Sequence[str], what: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    print("+ " + shlex.join(argv), file=sys.stderr)
    try:
        return subprocess.run(argv, check=True, **kwargs)
    except subprocess.CalledProcessError as error:
        detail = (error.stderr or "").strip() if isinstance(error.stderr, str) else ""
        raise UsageError(
            f"{what} failed (exit {error.returncode}){': ' + detail if detail else ''}"
        ) from None


def export(project: Path, extras: Sequence[str], prune: Sequence[str]) -> list[Pin]:
    argv = [_uv(), "export", "--frozen", "--format", "requirements.txt", "--no-dev", "--no-emit-project"]
    argv += ["--no-header", "--no-annotate"]
    argv += [arg for extra in extras for arg in ("--extra", extra)]
    argv += [arg for name in prune for arg in ("--prune", name)]
    done = _call(argv, "uv export", cwd=project, capture_output=True, text=True)
    return parse_export(done.stdout)


def _target_flags(python_version: str, platform: str) -> list[str]:
    flags = [
        "--only-binary=:all:",
        "--implementation",
        "cp",
        "--python-version",
        python_tag(python_version)[0],
    ]
    return flags + [arg for tag in platform_tags(platform) for arg in ("--platform", tag)]


def build_project_wheel(project: Path, into: Path) -> Pin:
    """trlstack's own wheel (uv build), pinned by its sha256 like the locked ones."""
    _call([_uv(), "build", "--wheel", "--out-dir", str(into), str(project)], "uv build --wheel")
    (wheel,) = sorted(into.glob("*.whl"))
    name, version = wheel.name.split("-")[:2]
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    return Pin(canonicalize_name(name), version, "", (f"sha256:{digest}",))


def pack(site: Path, archive: Path, piece_size: int | None) -> list[Path]:
    """tar.xz of `site` (xz on every core), split into archive.000, .001, ... when piece_size is given."""
    for tool in ("tar", "xz"):
        if shutil.which(tool) is None:
            raise UsageError(
                f"{tool} is missing: install it (apt-get install {tool}) or use --format wheelhouse"
            )
    with archive.open("wb") as out:
        tar = subprocess.Popen(["tar", "-C", str(site), "-cf", "-", "."], stdout=subprocess.PIPE)
        xz = subprocess.run(["xz", "-T0", "-6", "-c"], stdin=tar.stdout, stdout=out)
        if tar.stdout is not None:
            tar.stdout.close()
        if tar.wait() != 0 or xz.returncode != 0:
            raise UsageError("packing the site folder failed (tar/xz); is the disk full?")
    if piece_size is None or archive.stat().st_size <= piece_size:
        return [archive]
    pieces: list[Path] = []
    with archive.open("rb") as whole:
        while chunk := whole.read(piece_size):
            piece = archive.with_name(f"{archive.name}.{len(pieces):03d}")
            piece.write_bytes(chunk)
            pieces.append(piece)
    archive.unlink()
    return pieces


def make_bundle(args: argparse.Namespace) -> Path:
    project = Path(args.project).resolve()
    if not (project / "uv.lock").is_file():
        raise UsageError(f"no uv.lock in {project}: run in the trlstack checkout or pass --project DIR")
    out = Path(args.dir).resolve()
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"{out} exists and is not empty: give a new folder (nothing there was changed)")
    environment = marker_environment(args.python_version, args.platform)
    if args.piece_size and args.format != "site":
        raise UsageError("--piece-size splits the packed site folder: add --format site")

    locked = export(project, args.extra, [])
    without = check_without(
        list(args.without) + (list(OPTIONAL) if args.slim else []), {p.name for p in locked}
    )
    kept = export(project, args.extra, without) if without else locked
    present = parse_freeze(Path(args.exclude_present).read_text()) if args.exclude_present else {}
    if args.keep_target_versions and not args.exclude_present:
        raise UsageError("--keep-target-versions needs --exclude-present FILE (the target's pip freeze)")
    plan = plan_bundle(locked, kept, environment, present, without, args.keep_target_versions)
    print(
        f"bundle: {len(plan.included)} packages for CPython {args.python_version} on {args.platform}; "
        f"{len(plan.present)} already on the target, {len(plan.pruned)} left out with --without",
        file=sys.stderr,
    )
    if args.dry_run:
        print(render_requirements(plan.included), end="")
        print(render_report(plan), end="", file=sys.stderr)
        return out

    stage = out.with_name(out.name + ".partial")
    shutil.rmtree(stage, ignore_errors=True)
    try:
        write_bundle(args, project, plan, stage)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)  # nothing half-made is left behind
        raise
    if out.exists():
        out.rmdir()
    stage.rename(out)
    return out


def write_bundle(args: argparse.Namespace, project: Path, plan: Plan, stage: Path) -> None:
    """Fill `stage`: wheels or the packed site folder, requirements.txt, bundle.env, install.sh."""
    wheels = stage / "wheels"
    wheels.mkdir(parents=True)
    pins = list(plan.included)
    requirements = stage / "requirements.txt"
    requirements.write_text(render_requirements(pins))
    if pins and args.format == "wheelhouse":
        _call(
            _pip(args.pip)
            + ["download", "--no-deps", "--require-hashes", "--dest", str(wheels), "-r", str(requirements)]
            + _target_flags(args.python_version, args.platform),
            "pip download (for a package with no wheel for this target: raise --platform's glibc if the "
            "target allows, or leave the package out with --without)",
        )
    if args.with_project:
        with tempfile.TemporaryDirectory() as built:
            pin = build_project_wheel(project, Path(built))
            for wheel in Path(built).glob("*.whl"):
                shutil.move(wheel, wheels / wheel.name)
        pins.append(pin)
        requirements.write_text(render_requirements(pins))
    (stage / "bundle.env").write_text(render_env(plan.env))
    (stage / "left-out.txt").write_text(render_report(plan))
    if args.format == "site":
        site = stage / "site"
        install_site(site, requirements, wheels, args.python_version, args.platform)
        pieces = pack(site, stage / "site.tar.xz", args.piece_size)
        digest = hashlib.sha256()
        for piece in pieces:
            with piece.open("rb") as data:
                while chunk := data.read(1 << 20):
                    digest.update(chunk)
        (stage / "site.sha256").write_text(digest.hexdigest() + "\n")
        shutil.rmtree(site)
        shutil.rmtree(wheels)
    script = stage / "install.sh"
    script.write_text(render_install_script(args.format, args.python_version, args.platform))
    script.chmod(0o755)


def install_site(site: Path, requirements: Path, wheels: Path, python_version: str, platform: str) -> None:
    """The requirements installed into `site` for the target, by uv from the index (wheels only, each hash
    checked); trlstack's own wheel, when added, comes from `wheels`."""
    argv = [_uv(), "pip", "install", "--target", str(site), "--no-deps", "--no-build", "--require-hashes"]
    argv += ["--python-platform", uv_platform(platform), "--python-version", python_tag(python_version)[0]]
    argv += ["--find-links", str(wheels), "-r", str(requirements)]
    _call(argv, "uv pip install --target", stderr=subprocess.PIPE, text=True)
    (site / ".lock").unlink(missing_ok=True)  # uv's lock of the folder, not part of the site


# ------------------------------------------------------------------------------------------- command line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Make an offline install of the locked GPU stack (uv.lock) for a machine without a package index: "
        "a wheelhouse, or a packed site folder, plus install.sh for the target."
    )
    optional = "; ".join(f"{name}: {info.why}" for name, info in OPTIONAL.items())
    parser.add_argument("dir", metavar="DIR", help="new folder to write the bundle into")
    parser.add_argument(
        "--python-version", default="{}.{}".format(*sys.version_info[:2]), help="target Python, e.g. 3.12"
    )
    parser.add_argument(
        "--platform",
        default="manylinux_2_34_x86_64",
        help="target wheel platform: glibc and CPU (glibc 2.34: RHEL 9, Ubuntu 22.04, Debian 12, newer)",
    )
    parser.add_argument(
        "--format", choices=FORMATS, default="wheelhouse", help="wheels + pip, or one packed site folder"
    )
    parser.add_argument(
        "--piece-size", type=parse_size, help="split site.tar.xz into pieces of at most this size (e.g. 60M)"
    )
    parser.add_argument(
        "--exclude-present",
        metavar="FILE",
        help="`pip list --format=freeze` of the target: leave out packages it has at the locked version",
    )
    parser.add_argument(
        "--keep-target-versions",
        action="store_true",
        help="with --exclude-present: leave out every package the target has, at any version (keeps a "
        "curated environment's own builds, e.g. its torch and numpy, instead of the lock's)",
    )
    parser.add_argument(
        "--without",
        metavar="NAME",
        action="append",
        default=[],
        help=f"leave out a locked package and what only it needs (repeatable). Optional ones: {optional}",
    )
    parser.add_argument(
        "--slim", action="store_true", help="leave out every optional package named under --without"
    )
    parser.add_argument(
        "--extra", action="append", default=None, help="pyproject extras to include (default: gpu)"
    )
    parser.add_argument(
        "--with-project", action="store_true", help="add trlstack's own wheel (built with uv build)"
    )
    parser.add_argument(
        "--project", default=".", help="folder holding pyproject.toml and uv.lock (default: .)"
    )
    parser.add_argument("--pip", help="pip command to use (default: this Python's pip, else pip3 on PATH)")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the requirements the bundle would hold and what stays out",
    )


def run(args: argparse.Namespace) -> int:
    args.extra = args.extra or ["gpu"]
    out = make_bundle(args)
    if not args.dry_run:
        print(
            f"bundle: wrote {out}; on the target run: sh {os.path.join(out.name, 'install.sh')}",
            file=sys.stderr,
        )
    return 0
