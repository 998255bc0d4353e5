"""What every training rank adds to its run's metrics, whatever the recipe: where each step's time goes, the
completions and tokens per second, each rank's GPU memory peak, the vLLM server's own metrics (server mode),
and a progress line in the log (step N of M, elapsed, ETA, the last mean reward) at each logging step.

rank/run.py calls `install` once per process and `attach` on the trainer it runs. The parts are timed where
the trainer calls them (rank/step_split.py adds them up):

- generation: TRL's vLLM generation (`vllm_generation.generate`, online DPO's `_generate_vllm`) and its
  profiling points `vLLM.generate`, `transformers.generate(_batch)`; in server mode, the wait for the server;
- weight push: `vllm_generation.sync_weights`, online DPO's `_move_model_to_vllm`, async-grpo's
  `_sync_weight`;
- forward + backward: `compute_loss` and `accelerator.backward`;
- optimizer: transformers' `on_pre_optimizer_step` to `on_optimizer_step`;
- waiting for data: `get_batch_samples`, async-grpo's wait for the rollout worker (elsewhere the prompts);
- checkpoint: `_save_checkpoint`.

The CPU waits for the GPU (one synchronisation) only where a part ends on it: after each backward, around the
optimizer, after a weight push and at the end of the step, so that queued GPU work is counted in its own part;
the cost is measured by bench/gpu_watch_overhead.py. Only the logging steps add a collective (each rank's
memory peak, one all-gather), on every rank alike; the first rank writes what is logged.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from trlstack.metrics import MEMORY_PEAK
from trlstack.rank import step_split
from trlstack.rank.server_metrics import Scraper
from trlstack.rank.step_split import Split

GENERATION, PUSH, FORWARD_BACKWARD, OPTIMIZER, WAIT, CHECKPOINT = (
    "time/generation_s",
    "time/weight_push_s",
    "time/forward_backward_s",
    "time/optimizer_s",
    "time/wait_s",
    "time/checkpoint_s",
)
# TRL's profiling points (trl.extras.profiling), by name less the trainer's class, and the part each is.
PROFILING_POINTS = {
    "vLLM.generate": GENERATION,
    "transformers.generate": GENERATION,
    "transformers.generate_batch": GENERATION,
    "sync_weights": PUSH,
    "compute_loss": FORWARD_BACKWARD,
}
# The trainer's methods (a path of attributes from the trainer), the part of each, and whether it ends on the
# GPU.
METHODS = (
    ("vllm_generation.generate", GENERATION, False),
    ("_generate_vllm", GENERATION, False),
    ("vllm_generation.sync_weights", PUSH, True),
    ("_move_model_to_vllm", PUSH, True),
    ("_sync_weight", PUSH, True),
    ("compute_loss", FORWARD_BACKWARD, False),
    ("accelerator.backward", FORWARD_BACKWARD, True),
    ("get_batch_samples", WAIT, False),
    ("_save_checkpoint", CHECKPOINT, False),
)
ACTIVE: list[Any] = []  # the Watch of the trainer this process is training (one at a time)


class Watch:
    """One trainer's accounting, and what its first rank adds to the logs."""

    def __init__(self, trainer: Any, say: Callable[[str], None]) -> None:
        import torch

        self.trainer, self.say = trainer, say
        self.split = Split()
        self.on_gpu = torch.cuda.is_available()
        self.sync: Callable[[], None] = torch.cuda.synchronize if self.on_gpu else lambda: None
        self.main = bool(trainer.accelerator.is_main_process)
        self.walls: list[float] = []  # every step of this process, for the ETA
        self.started = time.monotonic()
        self.tokens_seen: float | None = None
        self.memory: dict[str, float] = {}
        url = server_url(trainer.args)
        self.scraper = Scraper(url, say) if self.main and url else None

    def completions_per_step(self, logs: dict[str, Any]) -> float:
        """Completions one optimizer step trains on, over every rank (async-grpo counts its own)."""
        if isinstance(logs.get("batch/samples_per_step"), int | float):
            return float(logs["batch/samples_per_step"])
        args = self.trainer.args
        per_prompt = 2 if type(self.trainer).__name__ == "OnlineDPOTrainer" else 1  # a pair per prompt
        ranks = self.trainer.accelerator.num_processes
        return float(args.per_device_train_batch_size * args.gradient_accumulation_steps * ranks * per_prompt)

    def end_step(self, should_log: bool) -> None:
        self.sync()
        self.split.end_step()
        self.walls.append(self.split.steps[-1]["time/step_s"])
        if should_log and self.on_gpu:
            self.memory = self.memory_peaks()

    def memory_peaks(self) -> dict[str, float]:
        """Each rank's peak of allocated GPU memory since the start, in GiB (every rank gathers)."""
        import torch

        accelerator = self.trainer.accelerator
        mine = torch.tensor([float(torch.cuda.max_memory_allocated())], device=accelerator.device)
        peaks = accelerator.gather(mine).tolist()
        return {f"{MEMORY_PEAK}{rank}": peak / 2**30 for rank, peak in enumerate(peaks)}

    def add_to(self, logs: dict[str, Any]) -> bool:
        """Add the interval's step split, throughput, memory and server metrics to `logs` (the first rank's);
        False when no step closed since the last logging step (the end-of-training summary)."""
        steps = len(self.split.steps)
        means = self.split.summary()
        if not means:
            return False
        logs.update(means)
        counted = None
        if isinstance(logs.get("num_tokens"), int | float):  # GRPO's and RLOO's running count of tokens
            if self.tokens_seen is not None:
                counted = float(logs["num_tokens"]) - self.tokens_seen
            self.tokens_seen = float(logs["num_tokens"])
        completions = self.completions_per_step(logs)
        tokens = step_split.tokens_per_step(logs, completions, counted, steps)
        logs.update(step_split.throughput(means["time/step_s"], completions, tokens))
        logs.update(self.memory)
        if self.scraper is not None:
            logs.update(self.scraper.scrape())
        return True

    def progress(self, logs: dict[str, Any]) -> str:
        state = self.trainer.state
        timed = self.walls[1:] or self.walls  # the first step also warms up: left out once there are others
        mean = sum(timed) / len(timed) if timed else None
        elapsed = time.monotonic() - self.started
        return step_split.progress_line(state.global_step, state.max_steps, elapsed, mean, logs)


def server_url(args: Any) -> str | None:
    """The vLLM server the trainer generates with (None: colocated or no vLLM)."""
    if getattr(args, "vllm_mode", "server") != "server" or not getattr(args, "use_vllm", True):
        return None
    url = getattr(args, "vllm_server_base_url", None)
    return str(url) if url else None


def timed(watch: Watch, part: str, ends_on_gpu: bool, function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        with watch.split.timed(part):
            result = function(*args, **kwargs)
            if ends_on_gpu:
                watch.sync()
        return result

    return call


def wrap_methods(watch: Watch) -> None:
    """Time the trainer's methods of METHODS that it has, on this trainer object only."""
    trainer = watch.trainer
    for path, part, ends_on_gpu in METHODS:
        *owner_path, name = path.split(".")
        owner = functools.reduce(lambda obj, attribute: getattr(obj, attribute, None), owner_path, trainer)
        original = getattr(owner, name, None) if owner is not None else None
        if original is not None and callable(original):
            setattr(owner, name, timed(watch, part, ends_on_gpu, original))
    for callback in trainer.callback_handler.callbacks:  # async-grpo calls its weight push from a callback
        function = getattr(callback, "fn", None)
        if function is not None and getattr(function, "__name__", "") == "_sync_weight":
            callback.fn = timed(watch, PUSH, True, function)


def callback(watch: Watch) -> Any:
    from transformers import TrainerCallback

    class StepClock(TrainerCallback):  # type: ignore[misc]  # transformers is untyped here
        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            watch.split.start()
            watch.started = time.monotonic()
            watch.tokens_seen = float(state.num_input_tokens_seen or 0)  # restored where the run resumes

        def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            watch.sync()
            self.optimizer_started = time.perf_counter()

        def on_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            watch.sync()
            watch.split.add(OPTIMIZER, time.perf_counter() - self.optimizer_started)

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            watch.end_step(bool(control.should_log))

    return StepClock()


def with_watch(log: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap Trainer.log: the first rank adds the watched metrics before the trackers see the logs, and says
    where the run is once they have."""

    @functools.wraps(log)
    def watched_log(trainer: Any, logs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        watch: Watch | None = getattr(trainer, "_trlstack_watch", None)
        added = watch is not None and watch.main and watch.add_to(logs)
        output = log(trainer, logs, *args, **kwargs)
        if watch is not None and added:
            watch.say(watch.progress(logs))
        return output

    return watched_log


def profiled(base: type) -> type:
    """TRL's ProfilingContext, also counting its named points to the step's parts."""

    class Profiled(base):  # type: ignore[misc]  # TRL's class, untyped here
        def __enter__(self) -> Any:
            part = PROFILING_POINTS.get(str(self.name).split(".", 1)[-1])
            self._trlstack_part = ACTIVE[-1].split.timed(part) if part and ACTIVE else None
            if self._trlstack_part is not None:
                self._trlstack_part.__enter__()
            return super().__enter__()

        def __exit__(self, *exc: Any) -> Any:
            result = super().__exit__(*exc)
            if self._trlstack_part is not None:
                self._trlstack_part.__exit__(*exc)
            return result

    return Profiled


def install() -> None:
    """Once per process, before the recipe's script: Trainer.log adds the watched metrics, and TRL's
    profiling points count to the parts of the step."""
    import transformers

    if hasattr(transformers.Trainer, "log"):  # not in a stand-in for transformers (the push guard's tests)
        transformers.Trainer.log = with_watch(transformers.Trainer.log)
    try:
        from trl.extras import profiling
    except ModuleNotFoundError:  # a script without TRL's trainers (or a stand-in for TRL): nothing to count
        return
    profiling.ProfilingContext = profiled(profiling.ProfilingContext)


def attach(trainer: Any, say: Callable[[str], None]) -> None:
    """Watch `trainer`'s steps from now on (called as its training starts)."""
    watch = Watch(trainer, say)
    trainer._trlstack_watch = watch
    wrap_methods(watch)
    trainer.add_callback(callback(watch))
    ACTIVE[:] = [watch]
