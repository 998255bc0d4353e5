"""Whether training shards its model states over its processes (FSDP2) or keeps a whole copy in each (DDP):
the choice from the memory estimate (plan/memory.py), and whether a checkpoint can be resumed by the run being
started (the accelerate config file a sharded run launches with is run/launch.py's).

- `choose`: `--sharding auto` shards where the estimate says DDP would not fit in a GPU and FSDP2 would; a
  layout that cannot fit even sharded is refused before anything starts, with the numbers and the fix.
- `resume_problem`: a sharded checkpoint holds one shard per process (a .distcp file each), so it is resumed
  only by a sharded run of as many processes; a whole (DDP) checkpoint only by an unsharded run.

DeepSpeed ZeRO-3 is refused: its ops are built just in time with nvcc, which the image does not ship, and
deepspeed is not among the locked packages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trlstack.defaults import Env
from trlstack.errors import UsageError
from trlstack.gpus import Gpu
from trlstack.option_types import one_of
from trlstack.plan import memory
from trlstack.plan.memory import STATES_SHARE, Estimate, gib

SHARDINGS = ("auto", "none", "fsdp2")
ZERO3_REFUSAL = (
    "DeepSpeed ZeRO-3 is not offered: DeepSpeed builds its ops just in time with nvcc, which the image does "
    "not ship (torch's wheels bring the CUDA runtime, not the compiler), and deepspeed is not among the "
    "locked packages; use --sharding fsdp2, which shards the same states with torch alone"
)
# What accelerate and transformers name a sharded checkpoint's model folder (one .distcp file per process).
SHARDED_MODEL_DIR = "pytorch_model_fsdp_0"
FSDP_FIX = "--sharding fsdp2"


# argparse type: auto, none or fsdp2, in any case; zero3 (and deepspeed) refused with the reason.
sharding_choice = one_of(
    *SHARDINGS, fold_case=True, refused=dict.fromkeys(("zero3", "zero-3", "deepspeed"), ZERO3_REFUSAL)
)


@dataclass(frozen=True)
class Memory:
    """What the choice weighs: the estimate (None: unknown, and why), the GPU's memory (None: unknown), the
    share of it a vLLM on the same GPU takes, and the processes the states would be sharded over."""

    estimate: Estimate | None
    why_unknown: str
    gpu_bytes: int | None
    vllm_share: float
    processes: int

    @property
    def available(self) -> int | None:
        """The trainer's memory on each GPU, or None when the GPU's is unknown."""
        return None if self.gpu_bytes is None else int(self.gpu_bytes * (1 - self.vllm_share))

    def per_process(self, sharded: bool) -> int | None:
        return None if self.estimate is None else self.estimate.per_process(sharded, self.processes)

    def fits(self, sharded: bool) -> bool | None:
        """Whether the counted memory fits in its share of the trainer's memory (None: unknown)."""
        need, available = self.per_process(sharded), self.available
        return None if need is None or available is None else need <= available * STATES_SHARE

    def possible(self, sharded: bool) -> bool | None:
        """Whether the counted memory fits in the trainer's memory at all (None: unknown)."""
        need, available = self.per_process(sharded), self.available
        return None if need is None or available is None else need <= available

    def lines(self) -> list[str]:
        """The estimate for people: DDP and FSDP2 per process against the GPU, and what is not counted."""
        if self.estimate is None:
            return [f"memory estimate unknown: {self.why_unknown}"]
        vllm = f" ({self.vllm_share:g} of {gib(self.gpu_bytes or 0)} left to vLLM)" if self.vllm_share else ""
        where = "the GPUs' memory is unknown"
        if self.available is not None:
            where = f"{gib(self.available)} per GPU for training{vllm}"
        return [
            f"memory counted: {self.estimate.describe()}",
            f"per process: DDP {gib(self.per_process(False) or 0)}, FSDP2 over {self.processes} "
            f"{gib(self.per_process(True) or 0)}; {where}",
            f"not counted: activations, the CUDA context, the allocator's fragmentation; a fit leaves "
            f"{1 - STATES_SHARE:.0%} of the training memory for them",
        ]


@dataclass(frozen=True)
class Choice:
    sharding: str  # "none" or "fsdp2"
    why: str


def choose(asked: str, memory: Memory, cpu: bool = False) -> Choice:
    """none or fsdp2 for `asked` (auto, none, fsdp2); UsageError, with the numbers and the fix, for a layout
    whose counted memory exceeds the trainer's memory on a GPU."""
    if asked == "fsdp2":
        _refuse_impossible(memory, sharded=True)
        alone = " (one process: nothing is shared out)" if memory.processes == 1 else ""
        return Choice("fsdp2", f"asked for{alone}")
    if asked == "none":
        _refuse_impossible(memory, sharded=False)
        return Choice("none", "asked for")
    if cpu:
        return Choice("none", "a CPU run")
    if memory.fits(sharded=False) is None:
        return Choice("none", "DDP: the estimate is unknown, so nothing is sharded")
    if memory.fits(sharded=False):
        return Choice("none", "DDP: a whole copy fits in each GPU")
    if memory.processes > 1 and memory.possible(sharded=True):
        return Choice("fsdp2", f"DDP would not fit; sharded over {memory.processes} processes")
    _refuse_impossible(memory, sharded=memory.processes > 1)
    return Choice("none", "DDP: FSDP2 over one process would save nothing")


def _refuse_impossible(memory: Memory, sharded: bool) -> None:
    if memory.possible(sharded) is not False:
        return
    assert memory.estimate is not None and memory.available is not None
    layout = "DDP (a whole copy in each process)"
    if sharded:
        layout = f"FSDP2 over {memory.processes} process{'es' if memory.processes > 1 else ''}"
    fixes = []
    if not sharded and memory.possible(sharded=True):
        fixes.append(f"shard it: {FSDP_FIX} (or auto, the default; {Env.SHARDING})")
    needed = memory.estimate.processes_needed(memory.available)
    if needed is not None and needed > memory.processes:
        fixes.append(f"train on {needed} or more GPUs with {FSDP_FIX}")
    if memory.estimate.dtype == "float32":
        fixes.append("load the weights in bf16 (model_init_kwargs: {dtype: bfloat16}: half the bytes)")
    fixes += ["train an adapter (use_peft: true)", "or a smaller model"]
    raise UsageError(
        f"the training memory does not fit: {memory.estimate.describe()}; {layout} needs "
        f"{gib(memory.per_process(sharded) or 0)} per process, but a GPU has {gib(memory.available)} for "
        f"training. Before anything starts: " + "; ".join(fixes) + "."
    )


def checkpoint_shards(files: list[str]) -> int | None:
    """How many processes a checkpoint was sharded over, from the file names in its model folder (one
    __RANK_0.distcp each), or None for a whole checkpoint (no such folder)."""
    return sum(1 for name in files if name.endswith(".distcp")) or None


def resume_problem(checkpoint: str, shards: int | None, sharding: str, processes: int) -> str | None:
    """Why `checkpoint` (sharded over `shards` processes, or None: whole) cannot be resumed by a run of
    `processes` with `sharding`, naming the fix; None when it can."""
    fresh = f"or start anew with --fresh ({Env.FRESH}=1), which moves the old run aside"
    if shards is None:
        if sharding == "fsdp2":
            return (
                f"{checkpoint} was saved whole, by a run without sharding, and an FSDP2 run resumes only "
                f"from its own shards; resume it with --sharding none, {fresh}"
            )
        return None
    if sharding != "fsdp2":
        return (
            f"{checkpoint} holds FSDP2 shards of {shards} processes, which only a sharded run reads; resume "
            f"it with --sharding fsdp2 --num-processes {shards} (over all machines), {fresh}"
        )
    if shards != processes:
        return (
            f"{checkpoint} holds FSDP2 shards of {shards} processes and this run has {processes}: the "
            "optimizer's shards, the random states of each process and the data each one skipped to are "
            f"per process; resume with {shards} processes (--num-processes, --num-machines), {fresh}"
        )
    return None


def summary(
    model_config: Mapping[str, Any],
    gpus: Sequence[Gpu],
    processes: int,
    vllm_share: float,
    recipe: str = "grpo",
    config: Mapping[str, Any] | None = None,
) -> list[str]:
    """The estimate and the choice `--sharding auto` would make, as lines for `trlstack plan` and doctor (a
    refusal is a line too): the recipe's defaults unless `config` says otherwise."""
    estimate, why = memory.estimate(model_config, recipe, config or {})
    sizes = [gpu.memory_bytes for gpu in gpus]
    smallest = min(size for size in sizes if size) if sizes and all(sizes) else None
    weighed = Memory(estimate, why, smallest, vllm_share, processes)
    try:
        chosen = choose("auto", weighed)
    except UsageError as error:
        return [*weighed.lines(), f"sharding: refused: {error}"]
    return [*weighed.lines(), f"sharding auto: {chosen.sharding} ({chosen.why})"]


def read_model_config(reference: str, environ: Mapping[str, str]) -> dict[str, Any]:
    """config.json of `reference`: the file itself, a folder holding it, or a Hub id in this machine's cache;
    UsageError naming what to give instead."""
    import json
    from pathlib import Path

    from trlstack.models import read_config

    path = Path(reference)
    if path.is_file():
        try:
            found = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, ValueError) as error:
            raise UsageError(f"--model {reference}: not a readable JSON file ({error}).") from None
        if isinstance(found, dict):
            return found
        raise UsageError(f"--model {reference}: holds no JSON object, as a config.json does.")
    config = read_config(reference, environ)
    if config is None:
        raise UsageError(
            f"--model {reference}: no config.json found there; give a model folder holding one, the "
            "config.json itself, or a Hub id this machine has in its cache."
        )
    return config
