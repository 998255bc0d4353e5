"""A training run's launch decided in named stages (STAGES): each a pure function of what the run is (`Run`)
that returns a `Part`: the config keys it sets, the environment every rank gets, the notes train logs and what
accelerate's launcher takes. `decide` runs them in order; run/launch.py turns the result into the command:

1. `layout`: the training processes on this machine, how ranks share a GPU, where machines meet;
2. `generation`: vLLM's mode: where a server reaches the trainer, the bound on each weight push, a colocated
   engine's KV cache, async-grpo's pipeline;
3. `tracked`: where the run's metrics go (trackio in the output folder by default);
4. `precision`: bf16, fp16 or fp32, from the GPUs unless the config says;
5. `sharded`: DDP or FSDP2, from the memory estimate;
6. `attention`: the attention implementation the GPUs run fastest;
7. `resume`: the checkpoint the run continues from;
8. `environment`: what the recipe's script needs besides;
9. `task_stage`: what the run takes from its task folder (paths, PYTHONPATH).

The run's settings are checked and its config made once, in `make_run`; the decisions more than one stage
reads are made once, on the `Run`: the training processes (`Run.processes`) and vLLM's share of each training
GPU (`Run.vllm_share`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from trlstack import addresses, policy
from trlstack.defaults import VLLM_ENV, Env
from trlstack.errors import UsageError
from trlstack.gpus import PCI_BUS_ID, Gpu, nccl_host_id
from trlstack.plan import memory, vllm_fraction
from trlstack.plan.rules import check_trainer_room
from trlstack.recipes import Recipe, resolve_recipe
from trlstack.run import asynchronous, sharding, task, trl_config
from trlstack.run.checks import check_contradictions
from trlstack.run.mode import choose_mode
from trlstack.run.passthrough import script_args
from trlstack.run.ranks import fixed_kv_cache, push_bound, rank_sharing, training_processes
from trlstack.run.settings import TrainSettings
from trlstack.run.tracking import tracking
from trlstack.run.weight_transfer import weight_transfer
from trlstack.transfer import NCCL


@dataclass(frozen=True)
class Part:
    """What one stage decides: TRL config keys (one set to None is removed from the config), the ranks'
    environment, notes to log, and accelerate's launch (`processes` on each machine, `sharding`)."""

    config: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    accelerate: dict[str, Any] = field(default_factory=dict)


def merged(config: Mapping[str, Any], parts: Iterable[Part]) -> Part:
    """`config` with every part's keys applied in order, and the parts' environment, notes and launch."""
    done = Part(dict(config))
    for part in parts:
        for key, value in part.config.items():
            if value is None:
                done.config.pop(key, None)
            else:
                done.config[key] = value
        done.env.update(part.env)
        done.notes.extend(part.notes)
        done.accelerate.update(part.accelerate)
    return done


@dataclass(frozen=True)
class Run:
    """What every stage reads: the settings, the recipe, the run's config (the user's with train's
    overrides) and the same as the recipe's script will see it (values given after `--` over the file's),
    where the config came from, and this machine: its training GPUs, the checkpoint to resume, the model's
    config.json (None: not readable here), and what the stages ask of it (`unavailable`: why a Hub kernel
    cannot be used; `route`, `is_local`: the trainer's address toward a server on another host)."""

    settings: TrainSettings
    recipe: Recipe
    config: Mapping[str, Any]
    seen: Mapping[str, Any]
    source: str
    gpus: Sequence[Gpu]
    checkpoint: Path | None = None
    model_config: Mapping[str, Any] | None = None
    unavailable: Callable[[str], str | None] = lambda implementation: None
    route: Callable[[str, int], str] = addresses.local_address_toward
    is_local: Callable[[str], bool] = addresses.is_local_address
    # what a task's paths are relative to without a task, and the PYTHONPATH its folder goes first on
    cwd: Path = field(default_factory=Path.cwd)
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    notes: tuple[str, ...] = ()  # what make_run decided for the run (vLLM's mode), to log

    @cached_property
    def processes(self) -> int:
        """The training processes on this machine; UsageError where the GPUs cannot hold them."""
        if self.settings.cpu:
            return self.settings.num_processes or 1
        return training_processes(self.settings, self.gpus)

    @cached_property
    def vllm_share(self) -> float:
        """The share of a training GPU's memory one vLLM engine on it takes: a colocated engine's (each rank
        has one), a server's beside the trainer, or none."""
        mode, settings = self.settings.mode, self.settings
        shared = settings.share_gpus and mode == "server"
        server = vllm_fraction(True, settings.gpu_memory_utilization) if shared else None
        return memory.vllm_share(mode, self.seen, self.recipe.name, server)


def make_run(settings: TrainSettings, user_config: Mapping[str, Any], source: str, gpus: Sequence[Gpu],
             *machine: Any) -> Run:  # fmt: skip
    """The run the stages decide on: vLLM's mode decided for its GPUs (run/mode.py), its settings checked,
    the arguments after `--` checked, the user's config checked against the recipe, with train's overrides
    and the output folder, and the local paths it names checked to exist (`machine`: Run's fields from
    `checkpoint` on); UsageError naming what is wrong, before anything starts."""
    recipe = resolve_recipe(settings.recipe)
    bare = Run(settings, recipe, {}, {}, source, tuple(gpus), *machine)  # this machine, before the run
    settings, notes = choose_mode(settings, recipe, len(gpus), bare.model_config)
    check_contradictions(settings, recipe)
    script = script_args(settings.extra, recipe.name, trl_config.TAKEN, "train")
    config, seen = trl_config.run_config(settings, user_config, recipe, source, script)
    trl_config.check_paths(config, settings, recipe, source)
    return replace(bare, settings=settings, config=config, seen=seen, notes=tuple(notes))


def decide(run: Run) -> Part:
    """Every stage's decision, in order, over the run's config."""
    return merged(run.config, (stage(run) for stage in STAGES))


def layout(run: Run) -> Part:
    """The training processes on this machine, and how they share GPUs and meet other machines."""
    settings = run.settings
    env, notes = rank_sharing(settings)
    notes = [*run.notes, *notes]
    if not settings.cpu:
        env[Env.CUDA_DEVICE_ORDER] = PCI_BUS_ID  # CUDA numbers the GPUs as NVML, so `gpus` are CUDA's
    if settings.num_machines > 1:  # on the CPU too: a smoke run across Slurm nodes meets so
        where = f"{settings.main_process_ip}:{settings.main_process_port}"
        notes.append(f"machine rank {settings.machine_rank} of {settings.num_machines}, meeting at {where}")
    return Part(env=env, notes=notes, accelerate={"processes": run.processes})


def generation(run: Run) -> Part:
    """How the trainer generates: the server it reaches and how weights get there, or vLLM inside it."""
    settings = run.settings
    # how the weights reach the server; refused where the run has none to push to
    transfer = Part(*weight_transfer(settings))
    if settings.cpu:
        return transfer
    pushed = transfer.env.get(Env.WEIGHT_TRANSFER)
    parts = [_server(run, pushed), transfer] if settings.mode == "server" else [transfer]
    if run.recipe.server_only:
        parts.append(Part(config=asynchronous.config_keys(settings)))
    else:
        keys: dict[str, Any] = {"use_vllm": True, "vllm_mode": settings.mode}
        if settings.mode == "server":
            keys.update(vllm_server_base_url=settings.server_url, vllm_group_port=settings.group_port)
        parts.append(Part(keys, *push_bound(settings)))
    if settings.mode == "colocate":
        parts.append(Part(env=dict(VLLM_ENV)))  # vLLM runs inside the trainer
        parts.append(Part({}, *fixed_kv_cache(settings, run.gpus, run.vllm_share)))
    return merged({}, parts)


def _server(run: Run, transfer: str | None) -> Part:
    """Where the server's workers reach this trainer for the weight-transfer rendezvous, and the NCCL host
    this trainer names itself when it shares the server's GPUs and pushes over NCCL (`transfer`)."""
    settings = run.settings
    host_ip, why = addresses.trainer_host_ip(settings.server_url, settings.host_ip, run.route, run.is_local)
    env: dict[str, str] = {Env.VLLM_HOST_IP: host_ip}
    notes = [f"{Env.VLLM_HOST_IP}={host_ip} ({why})"]
    if settings.share_gpus and transfer == NCCL:
        env.update(nccl_host_id("train"))
        notes.append(
            f"sharing the GPUs with the server: {Env.NCCL_HOSTID}={env[Env.NCCL_HOSTID]}, the weight push "
            "goes over NCCL sockets"
        )
    return Part(env=env, notes=notes)


def precision_of(config: Mapping[str, Any]) -> str:
    """bf16, fp16 or fp32, as the config's bf16 and fp16 keys say."""
    return "bf16" if config.get("bf16") else "fp16" if config.get("fp16") else "fp32"


def precision(run: Run) -> Part:
    """The run's precision: fp32 on the CPU, the config's where it says, else the GPUs' best."""
    if run.settings.cpu:  # the smoke run's keys turn bf16 and fp16 off
        return Part(notes=["precision fp32 (CPU run)"])
    if "bf16" in run.config or "fp16" in run.config:
        return Part(notes=[f"precision {precision_of(run.config)} (set in {run.source})"])
    chosen, why = policy.precision(run.gpus)
    return Part({"bf16": chosen == "bf16", "fp16": chosen == "fp16"}, notes=[f"precision {chosen} ({why})"])


# accelerate turns FSDP on only for accelerators: on the CPU its processes make a gloo group (MULTI_CPU),
# which AcceleratorState never shards (FSDP is set only for the GPU-like distributed types).
CPU_SHARDING = (
    "--sharding fsdp2 with --cpu: accelerate shards only on GPUs (on the CPU it never turns FSDP on), so the "
    "smoke run cannot shard; drop --sharding (or set it to none) for --cpu"
)


def sharded(run: Run) -> Part:
    """DDP or FSDP2 over the run's processes on every machine, from the memory estimate; UsageError for a
    layout that cannot fit."""
    settings = run.settings
    total = run.processes * settings.num_machines
    if settings.cpu and settings.sharding == "fsdp2":
        raise UsageError(CPU_SHARDING)
    weighed = training_memory(run, total)
    asked, notes = settings.sharding, list[str]()
    if run.recipe.server_only:  # several ranks of TRL's AsyncGRPOTrainer only with FSDP2, and at most two
        asked, notes = asynchronous.sharding_for(total, settings.sharding)
    if not settings.cpu:  # vLLM's share of a GPU it shares with the trainer, weighed first, by its name
        check_trainer_room(weighed.estimate, weighed.gpu_bytes, weighed.vllm_share, total, _share_name(run))
    chosen = sharding.choose(asked, weighed, settings.cpu)
    notes += [] if settings.cpu else weighed.lines()
    notes.append(f"sharding {chosen.sharding} ({chosen.why})")
    return Part(notes=notes, accelerate={"sharding": chosen.sharding})


def _share_name(run: Run) -> str:
    """The setting that gave vLLM its share of the training GPUs."""
    if run.settings.mode != "colocate":
        return f"--gpu-memory-utilization ({Env.GPU_MEMORY_UTILIZATION})"
    engines = run.settings.ranks_per_gpu
    every = f" of all {engines} engines on a GPU" if engines > 1 else ""
    return f"vllm_gpu_memory_utilization{every} (in {run.source} or after `--`)"


def training_memory(run: Run, processes: int) -> sharding.Memory:
    """What the sharding choice weighs: the estimate, the smallest training GPU split among the ranks on it,
    and the share of it the vLLM engines on it take."""
    settings = run.settings
    if run.model_config is None:
        estimate, why = None, f"no config.json of {run.config.get('model_name_or_path')} is readable here"
    else:
        estimate, why = memory.estimate(run.model_config, run.recipe.name, run.seen)
    sizes = [gpu.memory_bytes for gpu in run.gpus]
    smallest = min(size for size in sizes if size) if sizes and all(sizes) else None
    if smallest is not None:  # ranks sharing a GPU share its memory
        smallest //= settings.ranks_per_gpu
    engines = settings.ranks_per_gpu if settings.mode == "colocate" else 1  # an engine in each colocated rank
    return sharding.Memory(estimate, why, smallest, run.vllm_share * engines, processes)


def attention(run: Run) -> Part:
    """The attention implementation, unless the config sets one; async-grpo's trainer always uses tree
    packing, so there is nothing to choose (nor a Hub to ask)."""
    init_kwargs = trl_config.model_init_kwargs(run.config, run.source)
    if run.recipe.server_only:
        return Part(notes=list(asynchronous.NOTES))
    if "attn_implementation" in init_kwargs or run.config.get("attn_implementation"):
        return Part(notes=[f"attention as set in {run.source}"])
    chosen, skipped = ("sdpa", []) if run.settings.cpu else policy.choose_attention(run.gpus, run.unavailable)
    notes = [f"attention: {note}" for note in skipped] + [f"attention {chosen}"]
    return Part({"model_init_kwargs": {**init_kwargs, "attn_implementation": chosen}}, notes=notes)


def resume(run: Run) -> Part:
    """The newest checkpoint of this run to continue from, unless the config names one; transformers' own
    save on SIGTERM left off, as train saves a checkpoint when stopped (rank/run.py says why)."""
    config: dict[str, Any] = {}
    notes: list[str] = []
    if "enable_jit_checkpoint" in run.config:
        config["enable_jit_checkpoint"] = None
        if run.config["enable_jit_checkpoint"]:
            notes.append(
                f"enable_jit_checkpoint in {run.source} left off: train saves a checkpoint when stopped"
            )
    if run.checkpoint is not None and not run.config.get("resume_from_checkpoint"):
        config["resume_from_checkpoint"] = str(run.checkpoint)
        notes.append(f"resuming from {run.checkpoint}")
    return Part(config, notes=notes)


def environment(run: Run) -> Part:
    """What the recipe's script needs in its environment besides."""
    if run.recipe.name == "online-dpo" or run.recipe.server_only:
        # Their trainers live in trl.experimental, chosen knowingly: its warning is silenced.
        return Part(env={Env.TRL_EXPERIMENTAL_SILENCE: "1"})
    return Part()


def tracked(run: Run) -> Part:
    """Where the run's metrics go (run/tracking.py): trackio in the output folder unless the config names its
    own trackers."""
    return Part(*tracking(run.seen, run.recipe, run.source))


def task_stage(run: Run) -> Part:
    """What the run takes from its task folder (run/task.py): its data and model paths absolute, what TRL
    cannot load by name as a `datasets:` entry, the folder first on the ranks' PYTHONPATH."""
    keys, env, notes = task.task_launch(run.settings, run.config, run.environ, run.cwd)
    return Part(keys, env, notes)


# The stages in order: each later one's config keys win, and the notes are logged in this order.
STAGES: tuple[Callable[[Run], Part], ...] = (
    layout,
    generation,
    tracked,
    precision,
    sharded,
    attention,
    resume,
    environment,
    task_stage,
)
