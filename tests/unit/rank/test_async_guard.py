"""trlstack.rank.async_guard: each of async-grpo's hangs ends within its bound, naming the cause and the
setting; the watchdog, the liveness check and the rollout child's signals, without TRL."""

from __future__ import annotations

import multiprocessing
import signal
import subprocess
import sys
import textwrap
import time
import types

import pytest
from trlstack.rank import async_guard
from trlstack.rank.async_guard import (
    SYNC_UNWIND_S,
    Watch,
    checked_alive,
    child_ended,
    died_unreported,
    timed,
    verdict,
    watchdog,
    watched_start,
)


def watch(**changes):
    values = dict(
        server_url="http://vllm:8000",
        server_lost_after_s=120.0,
        weight_sync_timeout_s=1800.0,
        last_answer=0.0,
    )
    return Watch(**{**values, **changes})


def test_a_server_that_answers_ends_nothing():
    assert verdict(watch(), now=119.0) is None


def test_a_server_silent_past_its_bound_ends_the_run_naming_it_and_the_setting():
    cause = verdict(watch(), now=121.0)
    assert "http://vllm:8000 has not answered /health for 121 s (server_lost_after_s 120)" in cause
    assert "resume" in cause


def test_zero_never_gives_up_on_the_server():
    assert verdict(watch(server_lost_after_s=0.0), now=10**6) is None


def test_a_weight_sync_past_its_timeout_and_trls_own_unwinding_ends_the_run():
    limit = 1800.0 + SYNC_UNWIND_S
    assert verdict(watch(sync_since=0.0, last_answer=limit), now=limit) is None
    cause = verdict(watch(sync_since=0.0, last_answer=limit + 1), now=limit + 1)
    assert "weight sync" in cause and "weight_sync_timeout 1800 s" in cause and "NCCL transfer hangs" in cause
    ipc = verdict(watch(sync_since=0.0, last_answer=limit + 1, transport="ipc"), now=limit + 1)
    assert "the CUDA-IPC transfer hangs (the server loading from the trainer's GPU memory" in ipc


def test_timed_marks_a_sync_while_it_runs_even_when_it_fails():
    seen = []
    watched = watch()

    def sync(trainer):
        seen.append(watched.sync_since)
        raise RuntimeError("server gone")

    with pytest.raises(RuntimeError):
        timed(sync, watched)(object())
    assert seen[0] is not None and watched.sync_since is None


def test_the_watchdog_ends_the_run_once_with_the_cause(monkeypatch):
    clock = iter(range(0, 10**6, 50))
    monkeypatch.setattr(async_guard.time, "monotonic", lambda: float(next(clock)))
    monkeypatch.setattr(async_guard.time, "sleep", lambda seconds: None)
    ended = []
    watchdog(watch(last_answer=0.0), ended.append, ask=lambda url: False)
    assert len(ended) == 1 and "has not answered /health" in ended[0]


@pytest.mark.parametrize(
    ("exitcode", "said"),
    [(-9, "was killed by SIGKILL"), (-15, "was killed by SIGTERM"), (1, "exited with code 1")],
)
def test_how_a_child_ended(exitcode, said):
    assert child_ended(exitcode) == said


class Event:
    def __init__(self, is_set):
        self._set = is_set

    def is_set(self):
        return self._set


def worker(alive, failed=False, exitcode=-9, stopping=False):
    process = types.SimpleNamespace(pid=4242, exitcode=exitcode, is_alive=lambda: alive)
    return types.SimpleNamespace(
        _process=process, _failed_event=Event(failed), _stop_event_mp=Event(stopping)
    )


def test_a_killed_rollout_worker_is_reported_at_once_not_after_the_heartbeat():
    check = checked_alive(lambda worker, stale_after_s: None)
    with pytest.raises(RuntimeError, match=r"rollout worker \(pid 4242\) was killed by SIGKILL"):
        check(worker(alive=False), 300.0)


def test_a_live_worker_and_one_that_reported_its_failure_go_to_trls_check():
    calls = []
    check = checked_alive(lambda worker, stale_after_s: calls.append(stale_after_s))
    check(worker(alive=True), 300.0)
    check(worker(alive=False, failed=True), 300.0)  # TRL's own error carries the child's traceback
    assert calls == [300.0, 300.0]


def test_a_stopping_or_unstarted_worker_is_not_reported_lost():
    assert died_unreported(None) is None
    assert died_unreported(worker(alive=False, stopping=True)) is None  # the trainer ends it at the end
    assert died_unreported(types.SimpleNamespace(_process=None)) is None


def test_a_child_killed_by_sigkill_is_named_by_the_watchdog_though_the_server_answers(monkeypatch):
    child = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(60,), daemon=True)
    child.start()
    child.kill()
    child.join(10)
    lost = types.SimpleNamespace(_process=child, _failed_event=Event(False), _stop_event_mp=Event(False))
    clock = iter(range(0, 10**6, 5))
    monkeypatch.setattr(async_guard.time, "monotonic", lambda: float(next(clock)))
    monkeypatch.setattr(async_guard.time, "sleep", lambda seconds: None)
    ended = []
    watched = watch()
    watched_start(lambda self: None, watched)(lost)  # the worker's start, as the guard wraps it
    watchdog(watched, ended.append, ask=lambda url: True)
    assert ended == [died_unreported(lost)]
    assert (
        f"the rollout worker (pid {child.pid}) was killed by SIGKILL without reporting an error" in ended[0]
    )


# The trainer's main thread held where a killed child leaves it (here: a read from an empty queue, as after a
# half-written sample); the watchdog, a thread, still ends the process and names the child.
HELD_TRAINER = """
    import multiprocessing, os, signal, threading, time, types
    from trlstack.rank import async_guard

    if __name__ == "__main__":
        context = multiprocessing.get_context("spawn")
        samples = context.Queue()
        child = context.Process(target=time.sleep, args=(600,), daemon=True)
        child.start()
        events = {"_failed_event": context.Event(), "_stop_event_mp": context.Event()}
        worker = types.SimpleNamespace(_process=child, **events)
        watch = async_guard.Watch("http://127.0.0.1:9", 0.0, 1800.0, time.monotonic(), worker=worker)
        threading.Thread(target=async_guard.watchdog, args=(watch, async_guard.end_process, lambda url: True),
                         daemon=True).start()
        os.kill(child.pid, signal.SIGKILL)
        samples.get()  # never returns
"""


def test_a_trainer_held_after_its_child_was_killed_still_ends_naming_it(tmp_path):
    script = tmp_path / "held_trainer.py"
    script.write_text(textwrap.dedent(HELD_TRAINER))
    started = time.monotonic()
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == async_guard.EXIT_CODE, done.stderr
    assert "train: async-grpo: ending the run: the rollout worker (pid " in done.stderr
    assert "was killed by SIGKILL" in done.stderr
    assert time.monotonic() - started < async_guard.POLL_S * 3 + 10


def test_the_rollout_child_ignores_the_stop_signals_then_runs_trls_entry_point(monkeypatch):
    ran = []
    fake = types.ModuleType("trl.experimental.async_grpo.async_rollout_worker")
    fake._child_main = lambda *args: ran.append(args)
    package = types.ModuleType("trl.experimental.async_grpo")
    package.async_rollout_worker = fake
    monkeypatch.setitem(sys.modules, "trl.experimental.async_grpo", package)
    monkeypatch.setitem(sys.modules, "trl.experimental.async_grpo.async_rollout_worker", fake)
    before = {signum: signal.getsignal(signum) for signum in async_guard.STOP_SIGNALS}
    try:
        async_guard.child_main_ignoring_stops(1, 2)
        assert all(signal.getsignal(signum) == signal.SIG_IGN for signum in async_guard.STOP_SIGNALS)
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
    assert ran == [(1, 2)]
