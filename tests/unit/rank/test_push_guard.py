"""trlstack.rank.push_guard: a weight push to vLLM that runs past its bound ends the rank with one line
naming the rank and what it is stuck in; a push that finishes changes nothing. With stand-ins for TRL's
classes (no torch or TRL needed), and in child processes through the recipe runner, as train starts every
rank."""

from __future__ import annotations

import importlib
import inspect
import os
import subprocess
import sys
import textwrap
import time

import pytest
from trlstack.defaults import Env
from trlstack.rank import push_guard
from trlstack.rank.push_guard import (
    CLIENT,
    GENERATION,
    ONLINE_DPO,
    Watch,
    bound_from,
    guard,
    stuck_message,
    watchdog,
)
from trlstack.rank.push_phases import (
    COLOCATED,
    GATHERING,
    HANDED,
    HELPER,
    JOINING,
    SENDER,
    SENDING,
    SENT,
    SETTLING,
    WALKED,
)

NAMES = ["model.embed_tokens.weight", "model.layers.3.mlp.up_proj.weight", "lm_head.weight"]


class Accelerator:
    def __init__(self, main: bool) -> None:
        self.is_main_process = main


class Client:
    """VLLMClient's send as TRL calls it: metadata first, then the (name, tensor) pairs it broadcasts."""

    def __init__(self, watch: Watch) -> None:
        self.watch, self.seen = watch, []

    def init_communicator(self, device=0):
        self.seen.append(("join", self.watch.phase, self.watch.since is not None))

    def update_named_params(self, metadata, named_params):
        self.seen.append(("send", self.watch.phase))
        for name, _ in named_params:
            self.seen.append((name, self.watch.phase))


class Generation:
    """VLLMGeneration as sync_weights uses it: each parameter named for vLLM, gathered, then handed on."""

    client_cls = Client

    def __init__(self, watch: Watch, mode: str = "server", main: bool = True, fails: bool = False) -> None:
        self.mode, self.accelerator, self.fails = mode, Accelerator(main), fails
        self.watch, self.vllm_client = watch, self.client_cls(watch)
        self.gathered, self.armed = [], []

    def _fix_param_name_to_vllm(self, name, extra_prefixes=None):
        return name.replace("_checkpoint_wrapped_module.", "")

    def _iter_named_params(self):
        self.armed.append((self.watch.since is not None, self.watch.role))
        for name in NAMES:
            name = self._fix_param_name_to_vllm(f"_checkpoint_wrapped_module.{name}")
            self.gathered.append(self.watch.phase)  # where the all-gather would run
            yield name, [0.0]

    def sync_weights(self):
        if self.fails:
            raise RuntimeError("NCCL error: remote process exited")
        if self.mode == "server" and self.accelerator.is_main_process:
            metadata = [(name, "bfloat16", [1]) for name, _ in self._iter_named_params()]
            self.vllm_client.update_named_params(metadata, self._iter_named_params())
        else:
            for _ in self._iter_named_params():
                pass
        return "pushed"


class OnlineDPO:
    """OnlineDPOTrainer's push: each parameter named, gathered and sent inline, one send per parameter."""

    client_cls = Client

    def __init__(self, watch: Watch) -> None:
        self.vllm_mode, self.accelerator, self.vllm_client = (
            "server",
            Accelerator(True),
            self.client_cls(watch),
        )

    def _fix_param_name_to_vllm(self, name, extra_prefixes=None):
        return name

    def _move_model_to_vllm(self):
        for name in NAMES:
            name = self._fix_param_name_to_vllm(name)
            self.vllm_client.update_named_params([(name, "bfloat16", [1])], iter([(name, [0.0])]))


@pytest.fixture
def guarded():
    """A watch over fresh stand-in classes (each holding the guarded client), and the GPU's settlings."""
    watch, settled = Watch(timeout_s=600.0, rank="0"), []
    client = type("Client", (Client,), {})
    generation = type("Generation", (Generation,), {"client_cls": client})
    online_dpo = type("OnlineDPO", (OnlineDPO,), {"client_cls": client})
    guard(watch, {GENERATION: generation, ONLINE_DPO: online_dpo}, client, lambda: settled.append(True))
    return watch, generation, online_dpo, settled


def test_joining_the_servers_group_is_armed_as_the_first_rank_and_disarmed_after(guarded):
    watch, generation, _, _ = guarded
    client = generation(watch).vllm_client
    client.init_communicator()
    assert client.seen == [("join", (JOINING, ""), True)]
    assert watch.since is None and watch.role == SENDER


def test_a_push_that_finishes_returns_its_value_and_disarms(guarded):
    watch, generation, _, settled = guarded
    assert generation(watch).sync_weights() == "pushed"
    assert watch.since is None and settled == [True]
    assert stuck_message(watch, now=10**9) is None


def test_each_parameter_is_noted_before_its_gather_and_once_handed_to_the_send(guarded):
    watch, generation, _, _ = guarded
    pusher = generation(watch)
    pusher.sync_weights()
    assert pusher.gathered == [(GATHERING, name) for name in NAMES] * 2  # the metadata walk, then the send
    assert pusher.vllm_client.seen == [
        ("send", (SENDING, "")),
        *[(name, (HANDED, name)) for name in NAMES],
    ]
    assert watch.phase == (SETTLING, NAMES[-1])


def test_online_dpo_notes_each_send_of_one_parameter(guarded):
    watch, _, online_dpo, settled = guarded
    trainer = online_dpo(watch)
    trainer._move_model_to_vllm()
    assert [phase for name, phase in trainer.vllm_client.seen if name == "send"] == [
        (SENDING, name) for name in NAMES
    ]
    assert watch.since is None and settled == [True]


def test_the_push_is_armed_while_it_runs_with_this_ranks_part(guarded):
    watch, generation, _, _ = guarded
    for mode, main, part in (
        ("server", True, SENDER),
        ("server", False, HELPER),
        ("colocate", True, COLOCATED),
    ):
        pusher = generation(watch, mode=mode, main=main)
        pusher.sync_weights()
        assert set(pusher.armed) == {(True, part)}
        assert watch.since is None


def test_a_failing_push_raises_its_error_and_disarms(guarded):
    watch, generation, _, settled = guarded
    with pytest.raises(RuntimeError, match="remote process exited"):
        generation(watch, fails=True).sync_weights()
    assert watch.since is None and settled == []


def test_a_push_within_a_push_leaves_the_outer_one_armed(guarded):
    watch, generation, _, settled = guarded
    inner = generation(watch, mode="colocate")  # sync_weights as generate() calls it, within another push
    armed = []

    def outer(owner):
        armed.append(inner.sync_weights())
        armed.append(watch.since is not None)

    push_guard.timed_push(outer, watch, lambda owner: COLOCATED, lambda: settled.append("outer"))(object())
    assert armed == ["pushed", True] and watch.since is None
    assert settled == ["outer"]  # the GPU settled once, by the outer push


@pytest.mark.parametrize(
    ("raw", "seconds"), [("", None), ("600", 600.0), ("0.5", 0.5)], ids=["unset", "600", "0.5"]
)
def test_the_bound_comes_from_trains_variable(raw, seconds):
    assert bound_from({"TRLSTACK_WEIGHT_PUSH_TIMEOUT": raw}) == seconds


@pytest.mark.parametrize("raw", ["0", "-1", "x", "inf", "nan"])
def test_a_bad_bound_is_refused_naming_the_variable(raw):
    with pytest.raises(SystemExit, match="TRLSTACK_WEIGHT_PUSH_TIMEOUT=.* --weight-push-timeout"):
        bound_from({"TRLSTACK_WEIGHT_PUSH_TIMEOUT": raw})


def test_no_line_within_the_bound_nor_without_a_push():
    assert stuck_message(Watch(600.0, "1", since=0.0), now=600.0) is None
    assert stuck_message(Watch(600.0, "1"), now=10**9) is None


def test_past_the_bound_the_line_names_the_rank_the_phase_and_what_to_do():
    watch = Watch(600.0, "1", since=0.0, phase=(GATHERING, "model.layers.3.mlp.up_proj.weight"))
    line = stuck_message(watch, now=600.5)
    assert line is not None
    assert line.startswith(
        "rank 1: the weight push to vLLM has not finished in 600 s (--weight-push-timeout); stuck while "
        "gathering parameter model.layers.3.mlp.up_proj.weight (FSDP all-gather): a rank that stopped "
        "taking part"
    )
    assert "a vLLM server that stopped (check its log)" in line
    assert "the run ends (checkpoints are kept; run again to resume" in line
    colocated = stuck_message(Watch(600.0, "0", since=0.0, role=COLOCATED), now=601.0)
    assert colocated is not None and "server" not in colocated


def test_a_stuck_cuda_ipc_push_names_the_servers_load():
    watch = Watch(30.0, "0", transport="ipc", since=0.0, phase=(SENDING, "lm_head.weight"), role=SENDER)
    line = stuck_message(watch, now=31.0)
    assert line is not None and line.startswith("rank 0: the weight push to vLLM has not finished in 30 s")
    assert "stuck while waiting for the vLLM server to load the parameters up to lm_head.weight from" in line


def test_the_cuda_ipc_steps_and_online_dpos_walk_are_noted_as_the_push_goes():
    from types import SimpleNamespace

    watch = Watch(600.0, "0", transport="ipc")
    seen = []

    class Server:
        def start(self):
            seen.append(watch.phase)

        def load(self, update):
            seen.append(watch.phase)

    def online_dpo_params(trainer):
        yield ("a", 1)
        seen.append(watch.phase)
        yield ("b", 2)

    module = SimpleNamespace(Server=Server, online_dpo_params=online_dpo_params)
    push_guard.guard_ipc(watch, module)
    Server().start()
    Server().load({"names": ["a", "b"]})
    assert seen == [(SENDING, ""), (SENDING, "b")] and watch.phase == (SENT, "b")
    assert list(module.online_dpo_params(None)) == [("a", 1), ("b", 2)]
    assert seen[-1] == (HANDED, "a") and watch.phase == (WALKED, "b")


def test_the_watchdog_ends_the_run_once_past_the_bound():
    watch = Watch(10.0, "2", since=0.0, phase=(HANDED, "lm_head.weight"), role=SENDER)
    clock = iter([5.0, 9.0, 11.0])
    ended = []
    watchdog(watch, ended.append, clock=lambda: next(clock), sleep=lambda seconds: None)
    assert len(ended) == 1 and ended[0].startswith("rank 2: ") and "lm_head.weight" in ended[0]


# Stand-ins for torch, transformers and TRL's generation modules, written for a child process that runs the
# recipe runner as train starts every rank: the push gets stuck where FAKE_STUCK says.
FAKES = {
    "torch/__init__.py": """
        from types import SimpleNamespace
        serialization = SimpleNamespace(register_package=lambda *args: None)
        cuda = SimpleNamespace(is_available=lambda: False, is_initialized=lambda: False)
    """,
    "transformers/__init__.py": """
        class Trainer:
            def train(self, *args, **kwargs):
                return None
    """,
    "trl/__init__.py": "",
    "trl/generation/__init__.py": "",
    "trl/generation/vllm_client.py": """
        import os, time
        class VLLMClient:
            def init_communicator(self, device=0):
                if os.environ.get("FAKE_STUCK") == "join":
                    time.sleep(3600)  # a server still inside an earlier push
            def update_named_params(self, metadata, named_params):
                for name, _ in named_params:
                    if os.environ.get("FAKE_STUCK") == "broadcast:" + name:
                        time.sleep(3600)  # a server that stopped receiving
    """,
    "trl/generation/vllm_generation.py": f"""
        import os, time
        from trl.generation.vllm_client import VLLMClient
        class Accelerator:
            is_main_process = os.environ.get("RANK", "0") == "0"
        class VLLMGeneration:
            def __init__(self, mode):
                self.mode, self.accelerator, self.vllm_client = mode, Accelerator(), VLLMClient()
                if mode == "server" and self.accelerator.is_main_process:
                    self.vllm_client.init_communicator()
            def _fix_param_name_to_vllm(self, name, extra_prefixes=None):
                return name
            def _iter_named_params(self):
                for name in {NAMES!r}:
                    name = self._fix_param_name_to_vllm(name)
                    if os.environ.get("FAKE_STUCK") == "gather:" + name:
                        time.sleep(3600)  # an all-gather another rank never joins
                    yield name, [0.0]
            def sync_weights(self):
                if self.mode == "server" and self.accelerator.is_main_process:
                    metadata = [(name, "bfloat16", [1]) for name in {NAMES!r}]
                    self.vllm_client.update_named_params(metadata, self._iter_named_params())
                else:
                    for _ in self._iter_named_params():
                        pass
                return "pushed"
    """,
    "fake_push.py": """
        import sys
        from trl.generation.vllm_generation import VLLMGeneration
        print(VLLMGeneration(sys.argv[1]).sync_weights(), flush=True)
    """,
}


@pytest.fixture
def rank(tmp_path, clean_env):
    """Run the recipe runner on fake_push.py as rank N with a bound of 1 s, stuck where told."""
    for name, text in FAKES.items():
        path = tmp_path / "fakes" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))

    def run(number: int, mode: str, stuck: str = "") -> tuple[subprocess.CompletedProcess[str], float]:
        env = {
            **{k: v for k, v in os.environ.items() if k not in ("LOCAL_RANK", "PYTHONPATH")},
            "PYTHONPATH": os.pathsep.join([str(tmp_path / "fakes"), *sys.path]),
            "RANK": str(number),
            "TRLSTACK_WEIGHT_PUSH_TIMEOUT": "1",
            "FAKE_STUCK": stuck,
        }
        argv = [sys.executable, "-m", "trlstack.rank.run", "fake_push", mode]
        started = time.monotonic()
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
        return done, time.monotonic() - started

    return run


def test_a_rank_stuck_in_a_gather_ends_naming_itself_and_the_parameter(rank):
    done, took = rank(1, "server", stuck="gather:model.layers.3.mlp.up_proj.weight")
    assert done.returncode == push_guard.EXIT_CODE != 0, done.stderr
    assert (
        "train: rank 1: the weight push to vLLM has not finished in 1 s (--weight-push-timeout); stuck "
        "while gathering parameter model.layers.3.mlp.up_proj.weight (FSDP all-gather)"
    ) in done.stderr
    assert "pushed" not in done.stdout and took < 10


def test_the_sender_stuck_in_the_broadcast_ends_naming_the_server(rank):
    done, took = rank(0, "server", stuck="broadcast:model.embed_tokens.weight")
    assert done.returncode == push_guard.EXIT_CODE, done.stderr
    assert "train: rank 0: " in done.stderr
    assert (
        "stuck while sending the parameters up to model.embed_tokens.weight to the vLLM server (NCCL "
        "broadcast)"
    ) in done.stderr
    assert "check its log" in done.stderr and took < 10


def test_joining_a_server_held_in_an_earlier_push_ends_naming_it(rank):
    done, took = rank(0, "server", stuck="join")
    assert done.returncode == push_guard.EXIT_CODE, done.stderr
    assert (
        "train: rank 0: the weight push to vLLM has not finished in 1 s (--weight-push-timeout); stuck "
        "while joining the vLLM server's weight-transfer group (HTTP /init_weight_transfer_engine, NCCL "
        "rendezvous); a server still inside a push whose trainer ended waits there until it is restarted"
    ) in done.stderr
    assert took < 10


@pytest.mark.parametrize("mode", ["server", "colocate"])
def test_a_push_that_finishes_lets_the_rank_run_on(rank, mode):
    done, _ = rank(0, mode)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "pushed"
    assert "each weight push to vLLM must finish within 1 s (TRLSTACK_WEIGHT_PUSH_TIMEOUT)" in done.stderr
    assert "has not finished" not in done.stderr


def test_trl_still_has_every_name_the_guard_wraps(monkeypatch):
    """An upgrade of TRL that renames one fails here instead of leaving the push unguarded."""
    pytest.importorskip("trl", reason="needs the gpu extra (TRL); runs in the image")
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")  # Online DPO's trainer is in trl.experimental
    for pusher in (GENERATION, ONLINE_DPO):
        cls = getattr(importlib.import_module(pusher.module), pusher.name)
        for method in (pusher.push, *pusher.names):
            assert callable(getattr(cls, method, None)), f"{pusher.name}.{method}"
        for method in pusher.walks:
            assert inspect.isgeneratorfunction(getattr(cls, method, None)), f"{pusher.name}.{method}"
        source = inspect.getsource(cls)  # the attributes each rank's part is read from
        assert f"self.{pusher.mode} =" in source and "accelerator.is_main_process" in source
    module, name, method = CLIENT
    client = getattr(importlib.import_module(module), name)
    parameters = list(inspect.signature(getattr(client, method)).parameters)
    assert parameters[:3] == ["self", "metadata", "named_params"]
    assert callable(getattr(client, push_guard.JOIN, None)), f"{name}.{push_guard.JOIN}"


def test_trls_own_push_runs_through_the_guard_unchanged(monkeypatch):
    """TRL's real sync_weights (server mode, one process, no FSDP) through the installed guard, on the CPU:
    the client gets every parameter under vLLM's names, equal to the model's, and the push ends disarmed."""
    pytest.importorskip("trl", reason="needs the gpu extra (TRL); runs in the image")
    torch = pytest.importorskip("torch", reason="needs the gpu extra (torch); runs in the image")
    import contextlib
    from types import SimpleNamespace

    generation = importlib.import_module(GENERATION.module)
    client_module, client_name, send = CLIENT
    client_class = getattr(importlib.import_module(client_module), client_name)
    cls = getattr(generation, GENERATION.name)
    for method in (GENERATION.push, *GENERATION.names, *GENERATION.walks):
        monkeypatch.setattr(cls, method, getattr(cls, method))  # undone after the test
    monkeypatch.setattr(client_class, send, getattr(client_class, send))
    received = {}

    class Server:  # the client's real send, wrapped by the guard, handing each tensor here
        def reset_prefix_cache(self):
            received["reset"] = True

    def take(client, metadata, named_params):
        received["metadata"] = metadata
        received["params"] = {name: tensor.clone() for name, tensor in named_params}

    monkeypatch.setattr(client_class, send, take)
    said = []
    watch = push_guard.install(said.append, "trl.scripts.grpo", {Env.WEIGHT_PUSH_TIMEOUT: "60", "RANK": "0"})
    assert watch is not None and said
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 1))
    pusher = object.__new__(cls)  # the attributes sync_weights reads, as its __init__ sets them
    pusher.model, pusher.mode, pusher.enable_sleep_mode = model, "server", False
    pusher._weight_metadata = None
    pusher.accelerator = SimpleNamespace(is_main_process=True)
    pusher._dist = SimpleNamespace(is_fsdp=False, gather_params=lambda params: contextlib.nullcontext())
    pusher.vllm_client = object.__new__(client_class)
    pusher.vllm_client.reset_prefix_cache = Server().reset_prefix_cache
    pusher.sync_weights()
    names = [name for name, _ in model.named_parameters()]
    assert [row[0] for row in received["metadata"]] == names
    assert list(received["params"]) == names
    assert all(torch.equal(received["params"][name], p) for name, p in model.named_parameters())
    assert received["reset"] and watch.since is None  # disarmed: the push ended
