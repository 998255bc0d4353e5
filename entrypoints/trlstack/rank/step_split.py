"""Where a training step's time goes, and the progress a person reads, as plain accounting (no torch):
rank/watch.py feeds it from the trainer's calls and callbacks, and adds what it returns to the logged metrics.

A step is the wall time from the end of one optimizer step to the end of the next (the first from the start of
training), so the steps add up to the run. Each part counts its own time only: a part timed inside another
(the weight push inside online DPO's generation) is taken out of the outer one. `other` is the rest: rewards,
the old and reference log-probabilities, logging, callbacks.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from trlstack.metrics import COMPLETIONS_PER_S, STEP_PARTS, STEP_S, TOKENS_PER_S

PARTS = tuple(key for key, _ in STEP_PARTS)
OTHER = "time/other_s"
# The mean reward the progress line shows: GRPO, RLOO and async-grpo log `reward`, online DPO its RLHF reward.
REWARD_KEYS = ("reward", "objective/rlhf_reward", "objective/scores")


@dataclass
class Split:
    """Seconds per part of the step in progress, and the steps closed since the last summary."""

    clock: Callable[[], float] = time.perf_counter
    current: dict[str, float] = field(default_factory=dict)
    steps: list[dict[str, float]] = field(default_factory=list)
    open_parts: list[list[float]] = field(default_factory=list)  # [seconds spent in nested parts]
    last_end: float | None = None

    def start(self) -> None:
        """Training starts: the first step is timed from now."""
        self.last_end = self.clock()

    @contextlib.contextmanager
    def timed(self, part: str) -> Iterator[None]:
        """Count the time inside the block to `part`, less the time of parts timed inside it."""
        self.open_parts.append([0.0])
        started = self.clock()
        try:
            yield
        finally:
            seconds = self.clock() - started
            (nested,) = self.open_parts.pop()
            if self.open_parts:
                self.open_parts[-1][0] += seconds
            self.add(part, seconds - nested)

    def add(self, part: str, seconds: float) -> None:
        self.current[part] = self.current.get(part, 0.0) + seconds

    def end_step(self) -> None:
        """The optimizer step is done: close it, its `other` the part of its wall time no part counted."""
        now = self.clock()
        wall = now - (self.last_end if self.last_end is not None else now)
        step = {part: self.current.get(part, 0.0) for part in PARTS if part != OTHER}
        step[OTHER] = max(wall - sum(step.values()), 0.0)
        self.steps.append({**step, STEP_S: wall})
        self.current, self.last_end = {}, now

    def summary(self) -> dict[str, float]:
        """The mean of each part and of the step over the steps closed since the last summary (then none)."""
        if not self.steps:
            return {}
        keys = [*PARTS, STEP_S]
        means = {key: sum(step[key] for step in self.steps) / len(self.steps) for key in keys}
        self.steps = []
        return means


def tokens_per_step(
    logs: Mapping[str, float], completions_per_step: float, counted: float | None, steps: int
) -> float | None:
    """Tokens a step trained on over the interval's `steps`: `counted` the trainer's own count over them
    (GRPO's and RLOO's num_tokens, prompts and completions), else async-grpo's per-step count, else the
    completions times their mean length; None where the logs hold none of them."""
    if counted is not None and steps:
        return counted / steps
    for key in ("batch/trained_tokens_per_step",):
        if isinstance(logs.get(key), int | float):
            return float(logs[key])
    if isinstance(logs.get("completions/mean_length"), int | float):
        return completions_per_step * float(logs["completions/mean_length"])
    return None


def throughput(step_s: float, completions_per_step: float, tokens: float | None) -> dict[str, float]:
    """Completions and tokens per second of step time (`tokens`: per step, None where unknown)."""
    if step_s <= 0:
        return {}
    found = {COMPLETIONS_PER_S: completions_per_step / step_s}
    if tokens is not None:
        found[TOKENS_PER_S] = tokens / step_s
    return found


def clock_time(seconds: float) -> str:
    """H:MM:SS."""
    whole = int(round(max(seconds, 0.0)))
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


def progress_line(
    step: int, max_steps: int, elapsed_s: float, mean_step_s: float | None, logs: Mapping[str, float]
) -> str:
    """`step N of M (P%), elapsed H:MM:SS, ETA H:MM:SS, S s/step, reward R`: what the trainer's log says at
    each logging step; ETA from the mean step time of this process's steps."""
    parts = [f"step {step} of {max_steps}" + (f" ({100 * step / max_steps:.1f}%)" if max_steps > 0 else "")]
    parts.append(f"elapsed {clock_time(elapsed_s)}")
    if mean_step_s is not None and max_steps > 0:
        parts.append(f"ETA {clock_time((max_steps - step) * mean_step_s)}")
        parts.append(f"{mean_step_s:.3g} s/step")
    for key in REWARD_KEYS:
        value = logs.get(key)
        if isinstance(value, int | float):
            parts.append(f"{key} {value:.4g}")
            break
    return ", ".join(parts)
