"""CPU smoke in the trlstack image: a real 2-step GRPO run on a tiny model made in the container, offline, and
serve-vllm refusing fast and clearly on a machine without a GPU."""

from __future__ import annotations

import math
import re
import subprocess
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[2]
BAKE_FILE = REPO / "docker" / "docker-bake.hcl"

# TRL's per-step log lines: {'loss': ..., ...} (values may be quoted).
LOSS = re.compile(r"'loss': '?(-?[0-9.]+(?:e[-+]?[0-9]+)?|nan|inf)'?")


def docker_run(image: str, script: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run a bash script in a throwaway container without network: the smoke needs no Hub."""
    argv = [
        "docker",
        "run",
        "--rm",
        "--network",
        "none",
        "-e",
        "HF_HUB_OFFLINE=1",
        image,
        "bash",
        "-c",
        script,
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def test_train_grpo_cpu_runs_two_real_steps(trlstack_image: str) -> None:
    done = docker_run(
        trlstack_image,
        "set -e; trlstack tiny /tmp/smoke; "
        "train grpo --cpu --model /tmp/smoke/model --dataset /tmp/smoke/dataset --output-dir /tmp/smoke/out; "
        "ls /tmp/smoke/out",
        timeout=900,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    assert "SMOKE RUN (--cpu)" in output
    losses = [float(value) for value in LOSS.findall(output)]
    assert len(losses) == 2, f"expected 2 logged GRPO steps, got {losses}:\n{output[-4000:]}"
    assert all(math.isfinite(loss) for loss in losses), losses
    assert re.search(r"^checkpoint-2$", done.stdout, re.M), f"no checkpoint of step 2:\n{done.stdout[-2000:]}"


def test_serve_vllm_without_gpu_exits_fast_and_clearly(trlstack_image: str) -> None:
    started = time.monotonic()
    done = docker_run(trlstack_image, "serve-vllm", timeout=120)
    elapsed = time.monotonic() - started
    assert done.returncode == 1, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    assert "needs a CUDA GPU" in done.stderr, done.stderr[-2000:]
    assert elapsed < 30, f"serve-vllm took {elapsed:.0f} s to refuse"


# The unit tests that skip in the light environment (they need TRL, transformers, torch, huggingface_hub,
# kernels, vLLM or pyarrow, and say so in their skip reason) run in the image, which ships all of them, with
# pytest brought in read-only: the image has no test tools. Every one of them must run there; a skip would
# hide a test CI never runs. Found by their skip reasons, so that a new one cannot be left out.
GPU_STACK_SKIP = re.compile(r"runs in the image|\(light install\)|the gpu extra")


def needs_the_gpu_stack() -> list[str]:
    unit = REPO / "tests" / "unit"
    found = [path for path in sorted(unit.rglob("test_*.py")) if GPU_STACK_SKIP.search(path.read_text())]
    return [str(path.relative_to(unit)) for path in found]


def test_the_unit_tests_for_the_image_are_found_by_their_skip_reasons() -> None:
    found = needs_the_gpu_stack()
    for name in ("rank/test_run.py", "rank/test_ipc_push.py", "test_vllm_plugin.py", "run/test_rows.py"):
        assert name in found, found


@pytest.fixture(scope="module")
def pytest_for_the_image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pytest and hypothesis at the versions uv.lock pins, installed for the image's Python into a folder to
    mount."""
    folder = tmp_path_factory.mktemp("pytest-for-image")
    python = re.search(r'variable "PYTHON_VERSION" \{ default = "([\d.]+)" \}', BAKE_FILE.read_text())
    assert python, "docker-bake.hcl names no PYTHON_VERSION"
    export = ["uv", "export", "--frozen", "--only-group", "dev", "--no-hashes", "--no-emit-project"]
    pins = folder / "constraints.txt"
    pins.write_text(subprocess.run(export, cwd=REPO, capture_output=True, text=True, check=True).stdout)
    install = [
        "uv",
        "pip",
        "install",
        "--target",
        str(folder / "site"),
        "-c",
        str(pins),
        "pytest",
        "hypothesis",
    ]
    install += ["--python-version", python.group(1), "--python-platform", "x86_64-manylinux_2_28"]
    subprocess.run(install, capture_output=True, text=True, check=True)
    return folder / "site"


def test_unit_tests_that_need_the_gpu_stack_pass_in_the_image(
    trlstack_image: str, pytest_for_the_image: Path
) -> None:
    argv = ["docker", "run", "--rm", "--network", "none", "-e", "HF_HUB_OFFLINE=1"]
    argv += ["-e", "PYTHONPATH=/opt/pytest", "-e", "PYTHONDONTWRITEBYTECODE=1"]
    argv += ["-e", "TRL_EXPERIMENTAL_SILENCE=1"]  # the Online DPO recipe uses trl.experimental knowingly
    argv += ["-v", f"{pytest_for_the_image}:/opt/pytest:ro", "-v", f"{REPO / 'tests'}:/tests:ro"]
    argv += [trlstack_image, "python", "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs"]
    argv += [f"/tests/unit/{name}" for name in needs_the_gpu_stack()]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert re.fullmatch(r"\d+ passed(, \d+ warnings?)? in .*", summary), done.stdout[-4000:]  # none skipped


# transformers refuses a `kernels` outside the range it declares, at model load (a crash on every GPU). In the
# image, transformers must accept its kernels, the policy's metadata check must agree with transformers' own,
# and the kernel the policy picks for Hopper and for Ampere must load through transformers up to the download
# from the Hub, which this offline container cannot reach (the first step that needs the Hub or a GPU).
HUB_KERNELS_LOAD = """
from transformers.integrations.hub_kernels import get_attn_kernel_version, load_and_register_attn_kernel
from transformers.utils.import_utils import is_kernels_available
from trlstack import policy
from trlstack.gpus import Gpu

assert is_kernels_available(), "transformers refuses the kernels this image ships"
assert policy.installed_kernels_problem() is None, policy.installed_kernels_problem()
# As on a connected host whose Hub vouches for the publisher (what this offline container cannot ask).
trusted = lambda repo: None
online = lambda repo: policy.hub_kernel_unavailable(repo, {"HOME": "/tmp"}, trusted)
for capability in ((9, 0), (8, 0)):
    chosen, notes = policy.choose_attention([Gpu(0, compute_capability=capability)], online)
    assert chosen.startswith("kernels-community/"), (capability, chosen, notes)
    version = policy.HUB_KERNEL_VERSION.get(chosen, policy.DEFAULT_HUB_KERNEL_VERSION)
    assert get_attn_kernel_version(chosen) == version, (chosen, get_attn_kernel_version(chosen), version)
    try:
        load_and_register_attn_kernel(chosen)
    except ImportError:
        raise  # transformers refused the kernels package: what this test exists to catch
    except Exception as error:  # the Hub download, refused offline
        print(capability, chosen, "stopped at the Hub:", str(error).splitlines()[0][:300])
"""


def test_policy_hub_kernels_load_through_transformers_up_to_the_hub(trlstack_image: str) -> None:
    done = docker_run(trlstack_image, f"python - <<'PY'\n{HUB_KERNELS_LOAD}\nPY", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    reached = [line for line in done.stdout.splitlines() if "stopped at the Hub" in line]
    assert [line.split(" stopped")[0] for line in reached] == [
        "(9, 0) kernels-community/flash-attn3",
        "(8, 0) kernels-community/flash-attn2",
    ], done.stdout
    assert all("offline" in line.lower() for line in reached), done.stdout
