"""Structure of the trlstack image: hadolint on the Dockerfiles, then container-structure-test with the
static checks in trlstack.yaml plus checks rendered here from uv.lock, the image labels and the CA secret."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from packaging.markers import Marker

REPO = Path(__file__).resolve().parents[2]
STATIC_CONFIG = Path(__file__).with_name("trlstack.yaml")
EXCLUDED = REPO / "docker" / "excluded-packages.txt"  # locked packages the image leaves out on purpose
PYTHON = re.search(
    r'variable "PYTHON_VERSION" \{ default = "([\d.]+)" \}', (REPO / "docker" / "docker-bake.hcl").read_text()
)[1]
IMAGE_PYTHON = {  # the markers uv.lock is read with for the image: Debian trixie's CPython on x86-64
    "python_version": PYTHON,
    "python_full_version": "3.13.5",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "os_name": "posix",
}
PEM = re.compile(r"-----BEGIN CERTIFICATE-----\n(.*?)-----END CERTIFICATE-----", re.S)


def tool(name: str) -> str:
    # The dev group installs the tools next to this Python, on PATH or not.
    path = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if path is None:
        pytest.fail(f"`{name}` is missing: it comes with the dev and lint groups (`uv sync --frozen`)")
    return path


def test_dockerfiles_are_hadolint_clean() -> None:
    dockerfiles = [REPO / "docker" / "Dockerfile", *sorted((REPO / "bench").glob("*.Dockerfile"))]
    done = subprocess.run(
        [tool("hadolint"), "--config", str(REPO / ".hadolint.yaml"), *map(str, dockerfiles)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def shell_scripts() -> list[Path]:
    """Every .sh file of the checkout: the package's (trlstack/commands/slurm/*.sh), scripts/, docker/, the
    tests'; not the ones under hidden folders (.venv, .git) or in another checkout inside this one (a
    worktree)."""
    found = []
    for folder, subfolders, files in os.walk(REPO):
        checkouts = {name for name in subfolders if Path(folder, name, ".git").exists()}
        subfolders[:] = [
            name for name in subfolders if not name.startswith((".", "__")) and name not in checkouts
        ]
        found += [Path(folder, name).relative_to(REPO) for name in files if name.endswith(".sh")]
    return sorted(found)


def test_shell_scripts_are_shellcheck_clean() -> None:
    scripts = shell_scripts()
    assert Path("entrypoints/trlstack/commands/slurm/prepare.sh") in scripts
    assert Path("entrypoints/trlstack/commands/slurm/node-check.sh") in scripts
    done = subprocess.run(
        [tool("shellcheck"), "--format=gcc", *map(str, scripts)], cwd=REPO, capture_output=True, text=True
    )
    assert done.stderr == "", done.stderr
    # gcc format: `FILE:LINE:COLUMN: LEVEL: MESSAGE [SCNNNN]`
    findings = done.stdout.splitlines()
    assert findings == [], "shellcheck findings (fix them, or say why in a directive):\n" + "\n".join(
        findings
    )


def locked_versions() -> dict[str, str]:
    """name -> version of every package the image's venv must hold: uv.lock for Python 3.13, less EXCLUDED."""
    exported = subprocess.run(
        [
            tool("uv"),
            "export",
            "--frozen",
            "--extra",
            "gpu",
            "--no-default-groups",
            "--no-hashes",
            "--no-emit-project",
            "--no-header",
            "--no-annotate",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    left_out = {line.split("#")[0].strip() for line in EXCLUDED.read_text().splitlines()} - {""}
    versions = {}
    for line in exported.splitlines():
        requirement, _, marker = line.partition(";")
        if "==" not in requirement or (marker.strip() and not Marker(marker.strip()).evaluate(IMAGE_PYTHON)):
            continue
        name, _, version = requirement.strip().partition("==")
        versions[re.sub(r"[-_.]+", "-", name.split("[")[0]).lower()] = version
    missing = left_out - set(versions)
    assert not missing, f"{EXCLUDED.name} names packages uv.lock lacks: {missing}"
    return {name: version for name, version in versions.items() if name not in left_out}


# Runs inside the image: compares installed distributions with the lock, one line per difference.
COMPARE = """
import importlib.metadata as m, json, re, sys
want = json.loads(sys.argv[1])
have = {re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower(): d.version for d in m.distributions()}
have.pop("trlstack", None)
bad = [f"{n}: lock {want.get(n)} installed {have.get(n)}" for n in sorted(set(want) | set(have))
       if want.get(n) != have.get(n)]
print("\\n".join(bad) or f"lock matches: {len(want)} packages")
"""


def rendered_config(image: str) -> dict:
    versions = locked_versions()
    labels = json.loads(
        subprocess.run(
            ["docker", "image", "inspect", "--format", "{{json .Config.Labels}}", image],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    lock_sha = hashlib.sha256((REPO / "uv.lock").read_bytes()).hexdigest()
    cached = labels.get("org.trlstack.kernel-cache")
    # Label 1: the kernels lock and downloaded builds are there; label 0: the folder is empty.
    kernel_check = "import pathlib; c = pathlib.Path('/opt/trlstack/kernels'); " + (
        "assert (c / 'kernels.lock').stat().st_size and any(c.rglob('*.so'))"
        if cached == "1"
        else "assert not any(c.iterdir()), sorted(c.iterdir())"
    )
    return {
        "schemaVersion": "2.0.0",
        "metadataTest": {
            "labels": [
                {"key": f"org.trlstack.{name}.version", "value": versions[name]}
                for name in ("torch", "vllm", "trl", "transformers")
            ]
            + [
                {"key": "org.trlstack.python.version", "value": PYTHON},
                {"key": "org.trlstack.uv-lock.sha256", "value": lock_sha},
                {"key": "org.trlstack.sbom.sha256", "value": "^[0-9a-f]{64}$", "isRegex": True},
                {"key": "org.opencontainers.image.revision", "value": "^[0-9a-f]{40}$", "isRegex": True},
            ]
        },
        "commandTests": [
            {
                "name": "installed distributions equal uv.lock",
                "command": "python",
                "args": ["-c", COMPARE, json.dumps(versions)],
                "expectedOutput": [f"(?m)^lock matches: {len(versions)} packages$"],
            },
            {
                # Every installed file against uv.lock's wheels and the SBOM, Debian against the SBOM, the
                # kernel cache against its lock; the labels must name the lock and the SBOM the image holds.
                "name": "trlstack verify: the image holds what its labels and uv.lock say",
                "command": "trlstack",
                "args": [
                    "verify",
                    "--expect-lock-sha256",
                    labels["org.trlstack.uv-lock.sha256"],
                    "--expect-sbom-sha256",
                    labels["org.trlstack.sbom.sha256"],
                ],
                "exitCode": 0,
                "expectedOutput": ["(?m)^trlstack verify: /: OK$"],
            },
            {
                "name": f"kernel cache matches its label ({cached})",
                "command": "python",
                "args": ["-c", kernel_check],
                "exitCode": 0,
            },
        ],
    }


@pytest.mark.docker
def test_image_structure(trlstack_image: str, tmp_path: Path) -> None:
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(yaml.safe_dump(rendered_config(trlstack_image), sort_keys=False))
    done = subprocess.run(
        [
            tool("container-structure-test"),
            "test",
            "--image",
            trlstack_image,
            "--config",
            str(STATIC_CONFIG),
            "--config",
            str(rendered),
            "--output",
            "text",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-8000:] + done.stderr[-2000:]
    assert "FAIL" not in done.stdout


# Runs as root inside the image: lists files, where a build or a run writes, that hold a Hugging Face token
# or one of the given certificate lines (argv[1], newline-separated).
SCAN = r"""
import os, re, sys
needles = [n.encode() for n in sys.argv[1].splitlines() if n]
token = re.compile(rb"hf_[A-Za-z0-9]{30,}")
tops = ("/etc", "/root", "/home", "/cache", "/outputs", "/tmp", "/var", "/usr/local", "/opt/trlstack/kernels")
for top in tops:
    for folder, _, files in os.walk(top):
        for name in files:
            path = os.path.join(folder, name)
            try:
                data = open(path, "rb").read(4_000_000)
            except OSError:
                continue
            if token.search(data) or any(n in data for n in needles):
                print(path)
"""


def build_only_certificates(image: str) -> list[str]:
    """Certificates of the CA secret that Debian's public bundle in the image lacks: the proxy's own CAs."""
    bundle = os.environ.get("TRLSTACK_CA_BUNDLE")
    if not bundle:
        return []
    secret = set(PEM.findall(Path(bundle).read_text()))
    shipped = docker_root(image, "cat", "/etc/ssl/certs/ca-certificates.crt").stdout
    build_only = secret - set(PEM.findall(shipped))
    assert build_only, (
        f"every certificate of {bundle} is in the image's CA bundle: the build secret reached a layer "
        "(or it adds nothing to Debian's roots; then leave TRLSTACK_CA_BUNDLE unset)"
    )
    return sorted(build_only)


def docker_root(image: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            "docker",
            "run",
            "--rm",
            "--user",
            "0",
            "--network",
            "none",
            "--entrypoint",
            argv[0],
            image,
            *argv[1:],
        ],
        capture_output=True,
        text=True,
        check=True,
    )


@pytest.mark.docker
def test_no_token_or_build_ca_in_file_contents(trlstack_image: str) -> None:
    # A distinctive line from the middle of each build-only certificate.
    needles = [
        cert.splitlines()[len(cert.splitlines()) // 2] for cert in build_only_certificates(trlstack_image)
    ]
    found = docker_root(trlstack_image, "python", "-c", SCAN, "\n".join(needles)).stdout.split()
    assert found == [], f"files holding a token or a certificate of the build secret: {found}"


@pytest.mark.docker
def test_no_index_url_in_the_image_history(trlstack_image: str) -> None:
    # The build arguments a shipped layer's RUN uses are written into the image's history ("RUN |2 A=1 B=2"),
    # and an index URL may carry a token: the venv's RUN reads the index from a file of the uv stage.
    history = subprocess.run(
        ["docker", "history", "--no-trunc", "--format", "{{.CreatedBy}}", trlstack_image],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    arguments = [
        word.split("=", 1)[0]
        for count, words in re.findall(r"^RUN \|(\d+) (.*)$", history, flags=re.MULTILINE)
        for word in words.split(" ")[: int(count)]
    ]
    assert "SOURCE_DATE_EPOCH" in arguments, history  # the history names the arguments, as parsed here
    assert [name for name in arguments if name.endswith("INDEX_URL")] == [], history
