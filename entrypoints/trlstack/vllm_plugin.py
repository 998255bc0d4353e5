"""vLLM's CUDA-IPC weight-transfer engine, importable without ray, in the server and in the trainer.

vLLM 0.25's `vllm/distributed/weight_transfer/ipc_engine.py` imports ray at its top, and uses it in one
place only: `ray.get` in the sender's `send_mode="ray"`, which trlstack never takes (its trainer sends over
HTTP). The image ships no ray (a cluster scheduler of some hundred megabytes that neither role otherwise
loads), so as shipped the server cannot create its engine (`--weight-transfer-config '{"backend": "ipc"}'`
fails at start-up in the worker that loads the model) and the trainer cannot import the sender.

`import_ipc_engine` imports that module once with a stand-in named `ray` in sys.modules for the length of
the import only: the module keeps the stand-in under its name `ray` (whose every attribute raises, naming
why), and nothing else ever finds a module named ray. The server's engine is created in vLLM's worker
processes, which vLLM starts itself; vLLM runs its general plugins (the entry-point group
`vllm.general_plugins`, declared in pyproject.toml) in every one of its processes before it loads a model, so
the plugin here imports the module there first, and vLLM's own import of it then finds it done. Where ray is
installed, nothing is replaced.

The plugin also registers trlstack's engine, `trlstack-ipc` (vllm_engine.py: vLLM's IPC engine, loading an
unquantized model's weights in place), by module path: vLLM imports it only where a server asks for it.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
import types
from typing import Any

IPC_ENGINE = "vllm.distributed.weight_transfer.ipc_engine"
ENGINE = ("trlstack-ipc", "trlstack.vllm_engine", "InPlaceIPCEngine")  # the backend's name, where it lives
WHY = (
    "ray is not installed: trlstack sends CUDA-IPC weight updates over HTTP (send_mode='http'), never "
    "through ray"
)


class _NoRay(types.ModuleType):
    """What `ray` names inside the IPC engine's module: every use raises, saying why."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise RuntimeError(f"ray.{name}: {WHY}")


def import_ipc_engine() -> types.ModuleType:
    """vLLM's ipc_engine module, imported (once) whether or not ray is installed."""
    done = sys.modules.get(IPC_ENGINE)
    if done is not None:
        return done
    if "ray" in sys.modules or importlib.util.find_spec("ray") is not None:
        return importlib.import_module(IPC_ENGINE)
    stand_in = _NoRay("ray", WHY)
    sys.modules["ray"] = stand_in
    try:
        return importlib.import_module(IPC_ENGINE)
    finally:
        if sys.modules.get("ray") is stand_in:
            del sys.modules["ray"]


def register_engine() -> None:
    """trlstack's engine in vLLM's registry, once per process (lazily: by module path)."""
    from vllm.distributed.weight_transfer.factory import WeightTransferEngineFactory

    if ENGINE[0] not in WeightTransferEngineFactory._registry:  # the plugin may run twice in one process
        WeightTransferEngineFactory.register_engine(*ENGINE)


def ipc_engines() -> None:
    """The vLLM plugin: vLLM calls it once in each of its processes (every process may create the engine).
    vLLM does not catch what a plugin raises, so a failure here is left to the engine's own import, where
    only a server that asks for the IPC engine meets it, in vLLM's words."""
    with contextlib.suppress(Exception):  # not this plugin's to report; see the docstring
        import_ipc_engine()
    with contextlib.suppress(Exception):  # a vLLM without the registry: `trlstack-ipc` is then unknown to it
        register_engine()
