"""train's stop handling with real processes: a launcher (as accelerate's, it inherits the ignored signals)
starting training processes (as rank/run.py does, they handle the stop signal once started), under the
supervisor train runs (roles/train/stopping.py). torch and accelerate are not needed: the processes are
small Python scripts; the image smoke and the compose tests run the real chain."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from trlstack.command import Command
from trlstack.roles.train.stopping import Run, run

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")

# A training process: starts for `delay` s with the signals as inherited (ignored), then handles them, works
# in 50 ms steps and, once asked to stop, "saves" and exits 0; with `hang`, it never gets to stop.
TRAINER = """
import os, signal, sys, time
out, delay, mode = sys.argv[1], float(sys.argv[2]), sys.argv[3]
time.sleep(delay)
got = []
for signum in (signal.SIGTERM, signal.SIGINT):
    signal.signal(signum, lambda signum, frame: got.append(signum))
open(os.path.join(out, f"{os.getpid()}.ready"), "w").close()
step = 0
while not got or mode == "hang":
    time.sleep(0.05)
    step += 1
with open(os.path.join(out, f"{os.getpid()}.stopped"), "w") as f:
    f.write(" ".join(signal.Signals(signum).name for signum in got))
"""

# A launcher: starts the training processes and exits with the worst of their codes, like accelerate's.
LAUNCHER = """
import subprocess, sys
trainer, out, count, delay, mode = sys.argv[1:]
children = [subprocess.Popen([sys.executable, trainer, out, delay, mode]) for _ in range(int(count))]
sys.exit(max(child.wait() for child in children))
"""

SUPERVISOR = """
import os, sys
from trlstack.command import Command
from trlstack.roles.train.stopping import run
sys.exit(run(Command(sys.argv[1:]), os.environ))
"""


class Tree:
    """train's supervisor running the launcher and its training processes, in a session of their own."""

    def __init__(self, tmp_path: Path, count: int = 2, delay: float = 0.0, mode: str = "stop") -> None:
        self.out = tmp_path / "out"
        self.out.mkdir()
        for name, text in (("trainer.py", TRAINER), ("launcher.py", LAUNCHER)):
            (tmp_path / name).write_text(text)
        launcher = [sys.executable, str(tmp_path / "launcher.py"), str(tmp_path / "trainer.py")]
        argv = [sys.executable, "-c", SUPERVISOR, *launcher, str(self.out), str(count), str(delay), mode]
        self.count = count
        self.process = subprocess.Popen(argv, start_new_session=True, stderr=subprocess.PIPE, text=True)

    def files(self, suffix: str) -> dict[int, str]:
        return {int(path.stem): path.read_text() for path in self.out.glob(f"*.{suffix}")}

    def wait_launched(self) -> None:
        """Until train's supervisor has started the launcher: its stop handling is in place by then (it is
        set before the launcher starts), on a machine loaded however much."""
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        deadline = time.monotonic() + 30
        while not children.read_text().split():
            assert time.monotonic() < deadline, "train's supervisor did not start the launcher"
            time.sleep(0.02)

    def wait_ready(self) -> None:
        deadline = time.monotonic() + 30
        while len(self.files("ready")) < self.count:
            assert time.monotonic() < deadline, "the training processes did not start"
            time.sleep(0.05)

    def finish(self, timeout: float = 30) -> tuple[int, str]:
        _, err = self.process.communicate(timeout=timeout)
        return self.process.returncode, err


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]


def test_sigterm_stops_every_training_process_once_and_exits_143(tmp_path):
    tree = Tree(tmp_path)
    tree.wait_ready()
    tree.process.send_signal(signal.SIGTERM)
    code, err = tree.finish()
    assert code == 143, err
    assert list(tree.files("stopped").values()) == ["SIGTERM"] * tree.count  # each told once
    assert "train: SIGTERM: the training processes save a checkpoint when the step in progress ends" in err
    assert "Traceback" not in err


def test_a_signal_before_the_training_processes_handle_it_reaches_them_once_they_do(tmp_path):
    # They inherit the ignored signals, so a stop that came while they were starting would be lost; train
    # keeps looking for new handlers until the launcher ends.
    tree = Tree(tmp_path, delay=1.5)
    tree.wait_launched()
    tree.process.send_signal(signal.SIGTERM)
    code, err = tree.finish()
    assert code == 143, err
    assert list(tree.files("stopped").values()) == ["SIGTERM"] * tree.count


def test_ctrl_c_to_the_whole_group_stops_as_sigint_and_the_launcher_waits(tmp_path):
    # A terminal sends SIGINT to every process of the foreground group: the launcher must ignore it and wait
    # for its training processes (accelerate's would raise KeyboardInterrupt and leave them behind).
    tree = Tree(tmp_path)
    tree.wait_ready()
    os.killpg(tree.process.pid, signal.SIGINT)
    code, err = tree.finish()
    assert code == 130, err
    stopped = tree.files("stopped")
    assert len(stopped) == tree.count and all(set(got.split()) == {"SIGINT"} for got in stopped.values())
    assert "Traceback" not in err and "KeyboardInterrupt" not in err


def test_a_repeated_sigterm_still_saves(tmp_path):
    # `timeout` sends SIGTERM to the command and then to its whole process group, Slurm before the time limit
    # and at it: one stop, not two.
    tree = Tree(tmp_path, delay=0.5)
    tree.wait_launched()
    tree.process.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    os.killpg(tree.process.pid, signal.SIGTERM)
    code, err = tree.finish()
    assert code == 143, err
    stopped = tree.files("stopped")
    assert len(stopped) == tree.count and all(set(got.split()) == {"SIGTERM"} for got in stopped.values())
    assert "SIGTERM again: still saving the checkpoint" in err


def test_a_second_ctrl_c_stops_at_once_and_leaves_no_process_behind(tmp_path):
    tree = Tree(tmp_path, mode="hang")
    tree.wait_ready()
    trainers = list(tree.files("ready"))
    tree.process.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    tree.process.send_signal(signal.SIGINT)
    code, err = tree.finish(timeout=10)
    assert code == 143, err
    assert "SIGINT again: stopping at once, without a checkpoint" in err
    assert not tree.files("stopped")
    deadline = time.monotonic() + 5
    while any(alive(pid) for pid in trainers):
        assert time.monotonic() < deadline, "training processes outlived train"
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("script", "code"),
    [
        ("pass", 0),
        ("import sys; sys.exit(3)", 3),
        ("import os; os.kill(os.getpid(), 9)", 137),  # the OOM killer: 128 + 9, as a shell reports it
    ],
)
def test_without_a_signal_the_launchers_exit_code_is_trains(script, code):
    previous = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    assert run(Command([sys.executable, "-c", script]), os.environ) == code
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == previous


def test_torch_elastic_is_told_to_leave_the_stop_signals_to_train(tmp_path):
    # Its agent would forward them itself and SIGKILL a process still saving 30 s later.
    seen = tmp_path / "seen"
    script = f"import os; open({str(seen)!r}, 'w').write(os.environ['PET_SIGNALS_TO_HANDLE'])"
    assert run(Command([sys.executable, "-c", script]), os.environ) == 0
    assert "SIGTERM" not in seen.read_text() and "SIGINT" not in seen.read_text()


@pytest.mark.parametrize(
    ("signum", "returncode", "killed", "code"),
    [
        (signal.SIGTERM, 0, False, 143),  # stopped with a checkpoint
        (signal.SIGINT, 0, False, 130),
        (signal.SIGTERM, -9, True, 143),  # stopped at once by a second signal
        (signal.SIGTERM, 1, False, 1),  # failed while stopping: the failure is the news
        (0, 0, False, 0),
        (0, -15, False, 143),
    ],
)
def test_exit_codes(signum, returncode, killed, code):
    stopped = Run(child=None, signum=signum, killed=killed)  # type: ignore[arg-type]
    assert stopped.exit_code(returncode) == code


# train's supervisor, signalled the moment it spawns the launcher: SIGTERM lands before the launcher exists.
SIGNALLED_AT_SPAWN = """
import os, signal, subprocess, sys
import trlstack.roles.train.stopping as stopping
from trlstack.command import Command
spawn = subprocess.Popen
def signalled_spawn(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGTERM)
    return spawn(*args, **kwargs)
stopping.subprocess.Popen = signalled_spawn
sys.exit(stopping.run(Command(sys.argv[1:]), os.environ))
"""


def test_a_signal_while_the_launcher_starts_is_kept_not_lost(tmp_path):
    """A `docker compose stop` right after start: the run still stops with a checkpoint and 143 (train used to
    ignore the stop signals while it spawned the launcher, and such a SIGTERM was lost)."""
    for name, text in (("trainer.py", TRAINER), ("launcher.py", LAUNCHER)):
        (tmp_path / name).write_text(text)
    out = tmp_path / "out"
    out.mkdir()
    argv = [sys.executable, "-c", SIGNALLED_AT_SPAWN, sys.executable, str(tmp_path / "launcher.py")]
    argv += [str(tmp_path / "trainer.py"), str(out), "1", "0.3", "stop"]
    supervisor = subprocess.Popen(argv, start_new_session=True, stderr=subprocess.PIPE, text=True)
    try:
        _, err = supervisor.communicate(timeout=60)  # a lost signal: it would train on forever
    finally:
        if supervisor.poll() is None:
            os.killpg(supervisor.pid, signal.SIGKILL)
    assert supervisor.returncode == 143, err
    (stopped,) = out.glob("*.stopped")
    assert stopped.read_text() == "SIGTERM"  # the training process had it once it handled it, and saved


# A training process under a launcher that ends the run for a full disk as rank/space.py does: its report in
# the folder train names, then exit 0, so the launcher exits 0 too.
REPORTING_RANK = """
import json, os, sys
rank = int(sys.argv[1])
report = {"kind": "no-space", "rank": rank, "folder": sys.argv[2], "final": False, "free": 0, "need": 1000,
          "checkpoint": sys.argv[2] + "/checkpoint-1", "error": "RuntimeError: unexpected pos 10 vs 5"}
with open(os.path.join(os.environ["TRLSTACK_RUN_REPORTS"], f"rank-{rank}.json"), "w") as stream:
    json.dump(report, stream)
"""


def test_a_rank_that_ended_the_run_for_a_full_disk_makes_train_say_why_and_exit_1(tmp_path, capsys):
    out = tmp_path / "out"
    (out / "checkpoint-1").mkdir(parents=True)
    code = run(Command([sys.executable, "-c", REPORTING_RANK, "0", str(out)]), os.environ)
    assert code == 1  # the launcher's 0 is not the news
    err = capsys.readouterr().err
    assert f"train: the disk is full: checkpoint-1 could not be saved in {out}" in err
    assert f"train:   {out}/checkpoint-1 is incomplete: left in place" in err
    assert f"train:   a rerun starts anew: {out} holds no complete checkpoint" in err
    assert "Traceback" not in err
