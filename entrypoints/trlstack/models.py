"""Whether the model the vLLM server serves is the one train trains, however each is named.

TRL's weight sync sends every parameter by name and shape into the served model, so "the same model" means the
same architecture and sizes. A model is named by a Hub id (`Qwen/Qwen2.5-0.5B-Instruct`), a snapshot folder of
a Hub cache (`.../models--Qwen--Qwen2.5-0.5B-Instruct/snapshots/REV`), or a local folder (a copy). Equal
names, or names of one Hub repo, are the same model; otherwise both config.json files (read from the folder,
or from this machine's Hub cache for an id) must agree on every key that shapes the weights.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from trlstack.caches import hf_hub_cache
from trlstack.errors import UsageError

# config.json keys that decide the parameters' names and shapes (top level, and in text_config).
SHAPE_KEYS = (
    "architectures",
    "model_type",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "vocab_size",
    "tie_word_embeddings",
    "num_experts",
    "num_local_experts",
    "moe_intermediate_size",
)
_SNAPSHOT = re.compile(r"(?:^|/)models--([^/]+?)--([^/]+)/snapshots/[^/]+/?$")
_HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")


def hub_id(reference: str) -> str | None:
    """The Hub repo a reference names: an `org/name` id that is no local folder, or a Hub cache snapshot."""
    found = _SNAPSHOT.search(reference)
    if found:
        return f"{found.group(1)}/{found.group(2)}"
    if _HUB_ID.match(reference) and not os.path.isdir(reference):
        return reference
    return None


def is_local_path(reference: str) -> bool:
    """Whether a model or dataset reference names a path on this machine rather than a Hub id (NAME or
    ORG/NAME): it starts with /, ~ or ., or holds more than one slash."""
    return reference.startswith(("/", "~", ".")) or reference.count("/") > 1


def check_local_path(reference: str, name: str) -> None:
    """UsageError where `reference` (given as `name`, the setting as the user wrote it) is a local path
    that does not exist here: every role refuses it before anything starts, previews included."""
    if is_local_path(reference) and not os.path.exists(os.path.expanduser(reference)):
        raise UsageError(
            f"{name} {reference}: no such file or folder on this machine (in a container: as the container "
            "sees it); give a path that exists here, or a Hub id (ORG/NAME)."
        )


def read_config(reference: str, environ: Mapping[str, str]) -> dict[str, Any] | None:
    """The config.json of a local folder, or of a Hub id's snapshot in the cache here; None if unreadable."""
    candidates = [Path(reference) / "config.json"]
    repo = hub_id(reference)
    if repo is not None and not os.path.isdir(reference):
        folder = Path(hf_hub_cache(environ)) / ("models--" + repo.replace("/", "--"))
        try:
            revision = (folder / "refs" / "main").read_text().strip()
        except OSError:
            revision = ""
        if revision:
            candidates.append(folder / "snapshots" / revision / "config.json")
    for path in candidates:
        try:
            config = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(config, dict):
            return config
    return None


def _shape(config: Mapping[str, Any]) -> dict[str, Any]:
    shape = {key: config.get(key) for key in SHAPE_KEYS if key in config}
    text = config.get("text_config")
    if isinstance(text, dict):
        shape |= {f"text_config.{key}": text.get(key) for key in SHAPE_KEYS if key in text}
    return shape


def same_model(served: str, trained: str, read: Callable[[str], dict[str, Any] | None]) -> tuple[bool, str]:
    """(whether `served` and `trained` are one model, how that was decided); `read` finds a config.json."""
    if os.path.normpath(served) == os.path.normpath(trained):
        return True, "the same name"
    served_id, trained_id = hub_id(served), hub_id(trained)
    if served_id is not None and served_id == trained_id:
        return True, f"both are the Hub model {served_id}"
    served_config, trained_config = read(served), read(trained)
    if served_config is None or trained_config is None:
        unread = served if served_config is None else trained
        return False, f"the names differ and the config.json of {unread} is not readable here to compare"
    served_shape, trained_shape = _shape(served_config), _shape(trained_config)
    keys = served_shape.keys() | trained_shape.keys()
    differing = sorted(key for key in keys if served_shape.get(key) != trained_shape.get(key))
    if not served_shape or differing:
        shown = ", ".join(
            f"{key} {served_shape.get(key)} vs {trained_shape.get(key)}" for key in differing[:3]
        )
        return False, f"their config.json files differ: {shown or 'no architecture keys to compare'}"
    return True, "their config.json files agree on the architecture and every size"
