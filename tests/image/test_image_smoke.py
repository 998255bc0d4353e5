"""CPU smoke in the trlstack image: a real 2-step GRPO run on a tiny model made in the container, offline, and
serve-vllm refusing fast and clearly on a machine without a GPU."""

from __future__ import annotations

import math
import re
import subprocess
import time

import pytest

pytestmark = pytest.mark.docker

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


# The light test environment has no TRL; the image ships it, so the recipes are checked against it there.
RECIPES_AGAINST_TRL = """
import importlib, sys
from trlstack.recipes import PARSER_KEYS, RECIPES, accepted_keys, keys_from_trl
for name, recipe in RECIPES.items():
    stale = sorted(set(accepted_keys(name) - PARSER_KEYS) ^ set(keys_from_trl(name)))
    assert not stale, f"{name}: keys.json differs from TRL in {stale}; run python -m trlstack.recipes"
    parser = importlib.import_module(recipe.module).make_parser()
    args = parser.parse_args_and_config(
        ["--config", str(recipe.bundled_config), "--output_dir", "/tmp/out", "--use_cpu", "true"],
        fail_with_unknown_args=True,
    )
    print(name, "ok", args[-2].model_name_or_path)
"""


def test_recipes_match_the_trl_the_image_ships(trlstack_image: str) -> None:
    done = docker_run(trlstack_image, f"python - <<'PY'\n{RECIPES_AGAINST_TRL}\nPY", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    checked = [line.split()[:2] for line in done.stdout.splitlines()]
    assert checked == [[name, "ok"] for name in ("grpo", "rloo", "online-dpo")]


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
online = lambda repo: policy.hub_kernel_unavailable(repo, {"HOME": "/tmp"})  # as on a connected host
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
