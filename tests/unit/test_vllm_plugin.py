"""trlstack.vllm_plugin: vLLM's CUDA-IPC engine module imported without ray, and no module named ray left
for anything else to find; the plugin declared where vLLM looks for it. On a stand-in of that module (it
imports ray at its top, as vLLM 0.25's does), in a process of its own; on vLLM's own where it is installed."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import textwrap

import pytest

CHECK = textwrap.dedent(
    """
    import importlib.util, sys
    from trlstack.vllm_plugin import import_ipc_engine, ipc_engines
    assert importlib.util.find_spec("ray") is None
    ipc_engines()
    module = sys.modules["vllm.distributed.weight_transfer.ipc_engine"]
    assert module is import_ipc_engine()  # once
    assert "ray" not in sys.modules and importlib.util.find_spec("ray") is None
    try:
        module.ray.get([])
    except RuntimeError as error:
        print(error)
    """
)


def stand_in(root, body):
    package = root / "vllm" / "distributed" / "weight_transfer"
    package.mkdir(parents=True)
    for folder in (root / "vllm", root / "vllm" / "distributed", package):
        (folder / "__init__.py").write_text("")
    (package / "ipc_engine.py").write_text(body)


def run(root, code=CHECK):
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={"PYTHONPATH": str(root)}
    )


def test_the_engine_module_imports_without_ray_and_leaves_no_ray_behind(tmp_path):
    stand_in(tmp_path, "import ray\n")
    done = run(tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "ray.get: ray is not installed: trlstack sends CUDA-IPC weight updates over HTTP (send_mode='http'), "
        "never through ray"
    )


def test_a_failing_import_is_left_to_vllm_and_never_breaks_its_other_engines(tmp_path):
    stand_in(tmp_path, "raise ImportError('pybase64 missing')\n")
    code = "from trlstack.vllm_plugin import ipc_engines\nipc_engines()\nprint('ok')"
    done = run(tmp_path, code)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_vllm_finds_the_plugin_among_its_general_plugins():
    found = importlib.metadata.entry_points(group="vllm.general_plugins")
    assert [e.value for e in found if e.name == "trlstack_ipc_engine"] == ["trlstack.vllm_plugin:ipc_engines"]


def test_vllms_own_ipc_engine_imports_through_it():
    pytest.importorskip("vllm", reason="needs the gpu extra (vLLM); runs in the image")
    code = (
        "import importlib.util, sys\nfrom trlstack.vllm_plugin import import_ipc_engine\n"
        "module = import_ipc_engine()\nprint(module.IPCWeightTransferEngine.__name__)\n"
        "print(importlib.util.find_spec('ray') is None or 'ray installed')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[0] == "IPCWeightTransferEngine"


def test_the_plugin_registers_trlstacks_engine_once_by_module_path(tmp_path):
    stand_in(tmp_path, "import ray\n")
    factory = tmp_path / "vllm" / "distributed" / "weight_transfer" / "factory.py"
    factory.write_text(
        textwrap.dedent(
            """
            class WeightTransferEngineFactory:
                _registry = {}
                calls = []

                @classmethod
                def register_engine(cls, name, module_path, class_name=None):
                    if name in cls._registry:
                        raise ValueError(name)
                    cls.calls.append((name, module_path, class_name))
                    cls._registry[name] = lambda: None
            """
        )
    )
    code = (
        "from trlstack.vllm_plugin import ipc_engines\nipc_engines()\nipc_engines()\n"
        "from vllm.distributed.weight_transfer.factory import WeightTransferEngineFactory as F\n"
        "print(F.calls)"
    )
    done = run(tmp_path, code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[('trlstack-ipc', 'trlstack.vllm_engine', 'InPlaceIPCEngine')]"
