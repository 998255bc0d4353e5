"""trlstack.rank.kv_cache: the vLLM engine TRL starts inside each rank (colocate) gets the fixed KV cache
train asks for (--vllm-kv-cache-gib), through TRL's own `LLM(...)` call; a bad value ends the rank naming the
variable. The engine itself needs a GPU: the last tests stop vLLM where it would start it, and
tests/gpu/test_train_fsdp.py runs it."""

from __future__ import annotations

import importlib
import inspect
import os
import subprocess
import sys

import pytest
from trlstack.defaults import Env
from trlstack.rank.kv_cache import BUILDERS, GENERATION, GIB, fixed, install, size_from, with_size
from trlstack.recipes import RECIPES

ONLINE_DPO_MODULE = BUILDERS[RECIPES["online-dpo"].module]


def test_no_variable_leaves_vllm_to_size_the_cache():
    assert size_from({}) is None
    assert size_from({Env.VLLM_KV_CACHE_GIB: ""}) is None
    assert install(lambda line: pytest.fail(line), "trl.scripts.grpo", {}) is None


@pytest.mark.parametrize(("raw", "size"), [("2", 2 * GIB), ("0.5", GIB // 2), ("1.25", 5 * GIB // 4)])
def test_the_variable_is_a_size_in_gib(raw, size):
    assert size_from({Env.VLLM_KV_CACHE_GIB: raw}) == size


@pytest.mark.parametrize("raw", ["0", "-1", "two", "inf", "nan", "2GiB"])
def test_a_bad_value_ends_the_rank_naming_the_variable_and_the_flag(raw):
    with pytest.raises(
        SystemExit, match=r"TRLSTACK_VLLM_KV_CACHE_GIB=.* train sets it from --vllm-kv-cache-gib"
    ):
        size_from({Env.VLLM_KV_CACHE_GIB: raw})


def test_the_size_joins_the_arguments_trl_passes():
    trl_call = {"model": "m", "gpu_memory_utilization": 0.1, "max_num_batched_tokens": 4096}
    assert with_size(trl_call, 3) == {**trl_call, "kv_cache_memory_bytes": 3}
    assert with_size({"kv_cache_memory_bytes": 7}, 3) == {"kv_cache_memory_bytes": 7}


def test_the_class_in_trls_place_passes_every_argument_and_the_size():
    class Engine:
        def __init__(self, *args, **kwargs):
            self.args, self.kwargs = args, kwargs

    engine = fixed(Engine, 5)(1, model="m")
    assert isinstance(engine, Engine)
    assert (engine.args, engine.kwargs) == ((1,), {"model": "m", "kv_cache_memory_bytes": 5})


def test_trl_still_builds_its_colocated_engines_through_the_name_replaced(monkeypatch):
    """An upgrade of TRL that builds the engine otherwise fails here instead of leaving the cache unfixed."""
    pytest.importorskip("trl", reason="needs the gpu extra (TRL); runs in the image")
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")  # Online DPO's trainer is in trl.experimental
    for name in (GENERATION, ONLINE_DPO_MODULE):
        module = importlib.import_module(name)
        source = inspect.getsource(module)
        assert "LLM(" in source and "kv_cache_memory_bytes" not in source, name
        assert module.LLM is importlib.import_module("vllm").LLM, name


SCRIPTS = [("trl.scripts.grpo", GENERATION), ("trl.scripts.rloo", GENERATION),
           (RECIPES["online-dpo"].module, ONLINE_DPO_MODULE)]  # fmt: skip


@pytest.mark.parametrize(("script", "builder"), SCRIPTS)
def test_vllm_gets_the_size_through_trls_own_call(monkeypatch, tmp_path, script, builder):
    """The recipe's module's `LLM`, replaced as the runner does, makes vLLM's real engine arguments with the
    size; vLLM's engine start, which needs a GPU, is where the test stops."""
    pytest.importorskip("trl", reason="needs the gpu extra (TRL); runs in the image")
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    module = importlib.import_module(builder)
    monkeypatch.setattr(module, "LLM", module.LLM)  # undone after the test
    engines = importlib.import_module("vllm.entrypoints.llm")
    made = []

    class EngineStart(Exception):
        pass

    def start(engine_args, **kwargs):
        made.append(engine_args)
        raise EngineStart

    monkeypatch.setattr(engines.LLMEngine, "from_engine_args", start)
    said = []
    replaced = install(said.append, script, {Env.VLLM_KV_CACHE_GIB: "1.5"})
    assert replaced is module.LLM and issubclass(replaced, engines.LLM)
    assert said == [
        "the vLLM engine in each rank holds a fixed 1.5 GiB KV cache (TRLSTACK_VLLM_KV_CACHE_GIB); vLLM "
        "skips sizing it from its start-up memory profile"
    ]
    with pytest.raises(EngineStart):  # the arguments TRL's colocate call passes (vllm_generation.py)
        module.LLM(model=str(tmp_path), gpu_memory_utilization=0.1, max_num_batched_tokens=4096, seed=0)
    assert made[0].kv_cache_memory_bytes == 3 * GIB // 2
    assert made[0].gpu_memory_utilization == 0.1


@pytest.mark.parametrize(("gib", "fixed_size"), [("2", True), ("", False)])
def test_the_runner_fixes_the_cache_only_where_train_sets_the_variable(tmp_path, gib, fixed_size):
    """Through the recipe runner, as train starts every rank: the script it runs sees TRL's `LLM` replaced."""
    pytest.importorskip("trl", reason="needs the gpu extra (TRL); runs in the image")
    (tmp_path / "show_llm.py").write_text(
        f"import importlib\nprint(importlib.import_module({GENERATION!r}).LLM.__name__)\n"
    )
    env = {key: value for key, value in os.environ.items() if key not in ("RANK", "PYTHONPATH")}
    env |= {"PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path]), Env.VLLM_KV_CACHE_GIB: gib}
    argv = [sys.executable, "-m", "trlstack.rank.run", "show_llm"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == ("FixedKVCacheLLM" if fixed_size else "LLM")
    assert ("holds a fixed 2 GiB KV cache" in done.stderr) is fixed_size
