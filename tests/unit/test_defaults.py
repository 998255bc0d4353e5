"""The shared values have one definition (trlstack.defaults): every file that cannot import it and repeats a
value is held equal to it here, and every variable the project's files name is in the registry."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml
from trlstack import __version__
from trlstack.defaults import DEFAULT_GROUP_PORT, DEFAULT_VLLM_PORT, IMAGE, Env
from trlstack.options import variables
from trlstack.roles.serve.settings import ServeSettings
from trlstack.run.settings import TrainSettings
from trlstack.stack import pinned_stack

REPO = Path(__file__).resolve().parents[2]
BAKE = (REPO / "docker" / "docker-bake.hcl").read_text()
# Files that show the image tag or the ports to users, or hand them to compose and the shell.
COPIES = ["compose/roles.yaml", "scripts/up.sh", ".env.example", "compose/README.md", "docker/README.md"]


def bake_default(name: str) -> str:
    found = re.search(rf'variable "{name}" {{ default = "([^"]*)" }}', BAKE)
    assert found, f"docker-bake.hcl has no default for {name}"
    return found.group(1)


def minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def test_the_image_tag_is_the_one_bake_builds_from_the_pins():
    tag = "${IMAGE}:${VERSION}-torch${minor(TORCH_VERSION)}-vllm${minor(VLLM_VERSION)}-cu${CUDA_MAJOR}"
    assert f'"{tag}"' in BAKE
    versions = {name: bake_default(name) for name in ("IMAGE", "VERSION", "TORCH_VERSION", "VLLM_VERSION")}
    built = (
        f"{versions['IMAGE']}:{versions['VERSION']}-torch{minor(versions['TORCH_VERSION'])}"
        f"-vllm{minor(versions['VLLM_VERSION'])}-cu{bake_default('CUDA_MAJOR')}"
    )
    assert built == IMAGE
    pins = pinned_stack()
    assert versions["VERSION"] == __version__
    assert (versions["TORCH_VERSION"], versions["VLLM_VERSION"]) == (pins["torch"], pins["vllm"])


@pytest.mark.parametrize("path", COPIES)
def test_every_copy_of_the_image_tag_is_the_image(path):
    tags = set(re.findall(r"trlstack:\d[\w.-]*", (REPO / path).read_text()))
    assert tags == {IMAGE}, f"{path} names {tags}; the image is {IMAGE} (trlstack/defaults.py)"


def test_compose_defaults_the_ports_to_the_roles_defaults():
    for path in sorted((REPO / "compose").glob("*.yaml")):
        text = path.read_text()
        assert set(re.findall(r"\$\{VLLM_PORT:-(\d+)\}", text)) <= {str(DEFAULT_VLLM_PORT)}, path
        assert set(re.findall(r"\$\{VLLM_GROUP_PORT:-(\d+)\}", text)) <= {str(DEFAULT_GROUP_PORT)}, path
    readme = (REPO / "compose" / "README.md").read_text()
    assert f"| `VLLM_PORT`, `VLLM_GROUP_PORT` | {DEFAULT_VLLM_PORT}, {DEFAULT_GROUP_PORT} |" in readme
    docker_readme = (REPO / "docker" / "README.md").read_text()
    assert f"os.environ.get('{Env.VLLM_PORT}', '{DEFAULT_VLLM_PORT}')" in docker_readme


def tracked_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True)
    skipped = ("uv.lock", "bench/results/")
    return [REPO / name for name in listed.stdout.split() if not name.startswith(skipped)]


def test_every_trlstack_variable_the_project_names_is_in_the_registry():
    registry = {variable.value for variable in Env}
    unknown = {}
    for path in tracked_files():
        try:
            text = path.read_text()
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        for name in set(re.findall(r"\bTRLSTACK_[A-Z_]*[A-Z]\b", text)) - registry:
            unknown.setdefault(name, path.relative_to(REPO))
    assert not unknown, f"add these to Env in entrypoints/trlstack/defaults.py: {unknown}"


def service_variables(path: str, service: str) -> set[str]:
    environment = yaml.safe_load((REPO / path).read_text())["services"][service].get("environment", {})
    return {name for name in environment if name.startswith("TRLSTACK_") or name == Env.VLLM_HOST_IP}


@pytest.mark.parametrize(
    ("path", "service", "settings"),
    [
        ("compose/roles.yaml", "server", ServeSettings),
        ("compose/roles.yaml", "trainer", TrainSettings),
        ("compose/layouts.yaml", "shared-server", ServeSettings),
        ("compose/layouts.yaml", "shared-trainer", TrainSettings),
        ("compose/layouts.yaml", "isolated-server", ServeSettings),
        ("compose/layouts.yaml", "isolated-trainer", TrainSettings),
        ("compose/layouts.yaml", "colocate-trainer", TrainSettings),
        ("compose/stack.yaml", "grpo", TrainSettings),
    ],
)
def test_compose_gives_each_role_only_settings_it_reads(path, service, settings):
    assert service_variables(path, service) <= set(variables(settings))
