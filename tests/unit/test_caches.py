"""Where the Hugging Face and kernel caches are: the rules, and (where the libraries are installed, as in the
image) the same answers as huggingface_hub and kernels give for the same environment."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest
from trlstack.caches import cached_kernel_versions, hf_hub_cache, kernel_cache

HOME = {"HOME": "/home/u"}
CACHE_RULES = [
    ({}, "/home/u/.cache/huggingface/hub"),
    ({"XDG_CACHE_HOME": "/xdg"}, "/xdg/huggingface/hub"),
    ({"HF_HOME": "/cache/huggingface", "XDG_CACHE_HOME": "/xdg"}, "/cache/huggingface/hub"),
    ({"HF_HOME": "~/hf"}, "/home/u/hf/hub"),
    ({"HF_HUB_CACHE": "/models", "HF_HOME": "/cache/huggingface"}, "/models"),
    ({"HUGGINGFACE_HUB_CACHE": "/old", "HF_HOME": "/cache/huggingface"}, "/old"),
    ({"HF_HUB_CACHE": "~/models", "HUGGINGFACE_HUB_CACHE": "/old"}, "/home/u/models"),
]


@pytest.mark.parametrize(("environ", "expected"), CACHE_RULES)
def test_hf_hub_cache_follows_huggingface_hub(environ, expected):
    assert hf_hub_cache({**HOME, **environ}) == expected


def test_kernels_look_in_their_own_cache_else_the_hub_cache():
    assert kernel_cache({**HOME, "KERNELS_CACHE": "/k", "HF_HOME": "/hf"}) == "/k"
    assert kernel_cache({**HOME, "HF_HOME": "/hf"}) == "/hf/hub"


def cache_entry(cache, repo_id, refs, kind="kernels"):
    repo = cache / f"{kind}--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    for ref in refs:
        (repo / "refs" / ref).write_text("0123abc")
    return repo


def test_cached_versions_are_the_vn_refs_of_either_repo_kind(tmp_path):
    environ = {**HOME, "KERNELS_CACHE": str(tmp_path)}
    assert cached_kernel_versions("org/attn", environ) is None
    cache_entry(tmp_path, "org/attn", ["v1", "main", "vx"], kind="models")
    assert cached_kernel_versions("org/attn", environ) == {1}
    cache_entry(tmp_path, "org/attn", ["v3"])
    assert cached_kernel_versions("org/attn", environ) == {1, 3}


# The libraries read the environment when imported: each case runs in a fresh interpreter.
def library_answer(code, environ):
    done = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


needs_hub = pytest.mark.skipif(
    importlib.util.find_spec("huggingface_hub") is None,
    reason="huggingface_hub is not installed (light install)",
)
needs_kernels = pytest.mark.skipif(
    importlib.util.find_spec("kernels") is None, reason="kernels is not installed (light install)"
)


@needs_hub
@pytest.mark.parametrize(("environ", "expected"), CACHE_RULES)
def test_hf_hub_cache_is_huggingface_hubs(environ, expected):
    code = "import json, huggingface_hub.constants as c; print(json.dumps(c.HF_HUB_CACHE))"
    assert library_answer(code, {**HOME, **environ}) == hf_hub_cache({**HOME, **environ}) == expected


@needs_kernels
@pytest.mark.parametrize("kernels_cache", [True, False])
def test_cached_versions_are_what_kernels_finds(tmp_path, kernels_cache):
    own, hub = tmp_path / "kernels", tmp_path / "hf" / "hub"
    cache_entry(own, "org/attn", ["v1", "v2"])
    cache_entry(hub, "org/attn", ["v3"], kind="models")
    environ = {
        **HOME,
        "HF_HOME": str(tmp_path / "hf"),
        **({"KERNELS_CACHE": str(own)} if kernels_cache else {}),
    }
    code = (
        "import json; from kernels._versions import _get_available_versions_from_cache as cached; "
        "print(json.dumps(sorted(cached('org/attn'))))"
    )
    assert set(library_answer(code, environ)) == cached_kernel_versions("org/attn", environ)
