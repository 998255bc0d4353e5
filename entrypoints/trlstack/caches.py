"""Where huggingface_hub keeps models and where `kernels` looks for Kernels Hub kernels, by those libraries'
own rules, for an environment passed in (so doctor and the attention policy can be tested on any).

Kept here, not imported: huggingface_hub's constants would add 20 MB and 12 packages to the light install
(hf-xet alone is 11 MB) for five variables, and kernels' cache lookup is private and costs 240 ms to import;
tests/unit/test_caches.py holds both functions equal to the libraries' where they are installed (the image).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from trlstack.defaults import Env

_VERSION_REF = re.compile(r"^v(\d+)$")


def _home(environ: Mapping[str, str]) -> str:
    return environ.get(Env.HOME) or os.path.expanduser("~")


def _expand_user(path: str, environ: Mapping[str, str]) -> str:
    return _home(environ) + path[1:] if path == "~" or path.startswith("~/") else path


def hf_hub_cache(environ: Mapping[str, str]) -> str:
    """huggingface_hub's HF_HUB_CACHE: HF_HUB_CACHE, else HF_HOME/hub, else XDG_CACHE_HOME/huggingface/hub,
    else ~/.cache/huggingface/hub."""
    explicit = environ.get(Env.HF_HUB_CACHE) or environ.get(Env.HUGGINGFACE_HUB_CACHE)
    if explicit:
        return _expand_user(explicit, environ)
    cache = environ.get(Env.XDG_CACHE_HOME) or os.path.join(_home(environ), ".cache")
    hf_home = environ.get(Env.HF_HOME) or os.path.join(cache, "huggingface")
    return os.path.join(_expand_user(hf_home, environ), "hub")


def kernel_cache(environ: Mapping[str, str]) -> str:
    """Where `kernels` looks for downloaded kernels: KERNELS_CACHE, else the Hugging Face hub cache."""
    return environ.get(Env.KERNELS_CACHE) or hf_hub_cache(environ)


def cached_kernel_versions(repo_id: str, environ: Mapping[str, str]) -> set[int] | None:
    """Major versions of the Kernels Hub repo `repo_id` in the kernel cache (its refs/vN files), or None when
    the cache does not have the repo at all. Repos are kept as kernels--ORG--NAME, or models--ORG--NAME in
    caches written before the Hub had a kernel repo type."""
    cache = Path(kernel_cache(environ))
    folder = repo_id.replace("/", "--")
    found: set[int] | None = None
    for kind in ("kernels", "models"):
        repo = cache / f"{kind}--{folder}"
        if not repo.is_dir():
            continue
        found = found or set()
        refs = repo / "refs"
        if refs.is_dir():
            found |= {
                int(m[1]) for ref in refs.iterdir() if ref.is_file() and (m := _VERSION_REF.match(ref.name))
            }
    return found
