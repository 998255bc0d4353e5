"""How `train` stops a run: it stays the parent of `accelerate launch` and turns a stop signal, SIGTERM
(`docker compose stop`, Slurm, `kill`) or SIGINT (Ctrl-C), into a checkpoint, then exits 128 + the signal's
number (143, 130).

The signal has to reach the training processes, and the launchers in between must neither die of it nor act
on it. Left alone they do both: accelerate's one-process launcher dies of SIGTERM (its trainer then dies with
the container) and turns SIGINT into a traceback; torch elastic's agent (two processes or more) forwards
either, SIGKILLs whoever is still saving 30 s later, and exits with a traceback. So `accelerate launch` starts
with both signals ignored, which its processes inherit (torch elastic is told to handle only SIGHUP and
SIGQUIT), and train sends the signal itself to each training process once that process handles it
(rank/run.py installs the handler first thing). Those save `checkpoint-N` together when the step in
progress ends, then exit 0, so no launcher reports a failure; train's exit code says the run was stopped.

Where the signal reaches every process at once (Ctrl-C in a terminal, Slurm signalling a job step), the
launchers ignore it and the training processes take it once: the same stop. A second Ctrl-C (SIGINT) stops at
once, without a checkpoint; a repeated SIGTERM changes nothing, because senders repeat it without meaning
"now" (`timeout` signals the command and then its process group; Slurm signals before the time limit and at
it), and the sender's own SIGKILL ends what is left. That kill, or the grace period running out, leaves a
checkpoint folder without trainer_state.json, which resume passes over (run/checkpoints.py).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from trlstack.command import Command
from trlstack.defaults import Env
from trlstack.errors import EXIT_USER_ERROR
from trlstack.roles.train import reports

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
# What torch elastic's agent still handles itself (forward, then SIGKILL after 30 s): not the stop signals.
AGENT_SIGNALS = "SIGHUP,SIGQUIT"
POLL_S = 0.5  # how often train looks for training processes that started after the signal


def say(message: str) -> None:
    print(f"train: {message}", file=sys.stderr, flush=True)


# The process tree, from /proc (Linux) ------------------------------------------------------------------


def process_tree() -> dict[int, list[int]]:
    """parent PID -> its children's PIDs, for every process this one can see."""
    tree: dict[int, list[int]] = {}
    try:
        entries = list(os.scandir("/proc"))
    except OSError:  # no /proc (not Linux): the signal reaches only processes that share the terminal
        return tree
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])  # fields after "pid (comm)": state, ppid, ...
        tree.setdefault(parent, []).append(int(entry.name))
    return tree


def catches(pid: int, signum: int) -> bool:
    """Whether process `pid` has a handler for `signum` (its SigCgt mask)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    for line in status.splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    return False


def handlers_below(root: int, signum: int, tree: Mapping[int, list[int]]) -> list[int]:
    """The first process on each branch below `root` that handles `signum`: the training processes, not the
    launchers (which ignore it) nor the helpers a training process starts (data loaders, compile workers)."""
    found, todo = [], list(tree.get(root, []))
    while todo:
        pid = todo.pop()
        if catches(pid, signum):
            found.append(pid)
        else:
            todo.extend(tree.get(pid, []))
    return found


def descendants(root: int, tree: Mapping[int, list[int]]) -> list[int]:
    found, todo = [], list(tree.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(tree.get(pid, []))
    return found


# The run ----------------------------------------------------------------------------------------------


@dataclass
class Run:
    """The launcher train started, and the stop signal it was given (0: none)."""

    child: subprocess.Popen[bytes]
    signum: int = 0
    told: set[int] = field(default_factory=set)  # training processes already sent the signal
    killed: bool = False

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.signum and signum == signal.SIGINT:
            say(f"{name} again: stopping at once, without a checkpoint")
            self.kill()
            return
        if self.signum:
            say(f"{name} again: still saving the checkpoint (a second Ctrl-C stops at once, without it)")
            return
        self.signum = signum
        say(
            f"{name}: the training processes save a checkpoint when the step in progress ends, then stop "
            "(a second Ctrl-C stops them at once, without one)"
        )
        self.forward()

    def forward(self) -> None:
        """Send the stop signal to every training process that handles it and has not had it yet."""
        if not self.signum or self.killed:
            return
        for pid in handlers_below(self.child.pid, self.signum, process_tree()):
            if pid not in self.told:
                self.told.add(pid)
                _signal(pid, self.signum)

    def kill(self) -> None:
        self.killed = True
        for pid in [*descendants(self.child.pid, process_tree()), self.child.pid]:
            _signal(pid, signal.SIGKILL)

    def exit_code(self, returncode: int) -> int:
        """128 + the stop signal when stopped, else the launcher's code (128 + N when signal N killed it)."""
        if self.signum and (returncode == 0 or self.killed):
            return 128 + self.signum
        return 128 - returncode if returncode < 0 else returncode


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
        os.kill(pid, signum)


def ignore_stop_signals() -> None:
    """In the launcher, between fork and exec: an ignored signal stays ignored across exec (a handled one
    would not), and the training processes it starts inherit that."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


def run(command: Command, environ: Mapping[str, str]) -> int:
    """Run `command` (accelerate launch) as a child until it ends; a stop signal becomes a checkpoint, and a
    rank that ended the run early says why through train (roles/train/reports.py: exit 1). Returns the exit
    code train should end with."""
    with reports.report_folder() as (variables, folder):
        code = supervise(command, {**environ, **variables})
        told = reports.explain(folder)
    for line in told or ():
        say(line)
    return EXIT_USER_ERROR if told else code


def supervise(command: Command, environ: Mapping[str, str]) -> int:
    """Run `command` as a child until it ends, turning a stop signal into a checkpoint; its exit code."""
    env = {**environ, **command.env, Env.PET_SIGNALS_TO_HANDLE: AGENT_SIGNALS}
    # A signal while the launcher starts is kept for it, not lost: train ignored the stop signals itself
    # while it spawned (so the launcher would inherit them ignored), and a SIGTERM in that moment, e.g. a
    # `docker compose stop` at once, was dropped and the run trained on (seen under load in CI).
    early: list[int] = []

    def keep(signum: int, frame: FrameType | None) -> None:
        early.append(signum)

    previous = {signum: signal.signal(signum, keep) for signum in STOP_SIGNALS}
    try:
        # train has no other thread here, which preexec_fn needs
        child = subprocess.Popen(command.argv, env=env, preexec_fn=ignore_stop_signals)  # noqa: PLW1509
        launched = Run(child)
        for signum in STOP_SIGNALS:
            signal.signal(signum, launched.on_signal)
        for kept in early:
            launched.on_signal(kept, None)
        while True:
            try:
                returncode = child.wait(timeout=POLL_S)
                break
            except subprocess.TimeoutExpired:
                launched.forward()  # training processes that were still starting when the signal came
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return launched.exit_code(returncode)
