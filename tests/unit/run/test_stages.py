"""run/stages.py: a run's launch decided in named pure stages, each returning its Part of the decision for a
`Run`: the merge rule (a key set to None removes it, later parts win, notes in order), STAGES' order deciding
the notes' order and which keys win, what each stage decides for a small run, and the decisions several
stages read (`Run.processes`, `Run.vllm_share`) made once."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from trlstack.errors import UsageError
from trlstack.gpus import Gpu
from trlstack.plan import memory
from trlstack.recipes import RECIPES
from trlstack.run import asynchronous, stages
from trlstack.run.settings import TrainSettings
from trlstack.run.stages import STAGES, Part, decide, make_run, merged

GIB = 1 << 30
GRPO = yaml.safe_load(RECIPES["grpo"].bundled_config.read_text())


def gpus(n: int, gib: int = 80) -> list[Gpu]:
    return [Gpu(i, uuid=f"GPU-{i}", compute_capability=(9, 0), memory_bytes=gib * GIB) for i in range(n)]


def run_of(config=None, n: int = 2, *machine, **fields) -> stages.Run:
    settings = TrainSettings(**{"recipe": "grpo", "vllm_url": "http://127.0.0.1:8000", **fields})
    return make_run(settings, GRPO if config is None else config, "grpo.yaml", gpus(n), *machine)


def test_a_key_set_to_none_is_removed_and_a_later_part_wins():
    first = Part({"a": 1, "b": 2}, {"X": "1"}, ["first"], {"processes": 2})
    second = Part({"a": None, "b": 3, "c": None}, {"X": "2", "Y": "y"}, ["second"], {"sharding": "none"})
    config = {"a": 0, "keep": True}
    done = merged(config, [first, second])
    assert done == Part(
        {"keep": True, "b": 3},
        {"X": "2", "Y": "y"},
        ["first", "second"],
        {"processes": 2, "sharding": "none"},
    )
    assert config == {"a": 0, "keep": True}  # the run's config is left as it was


def test_decide_is_every_stage_in_the_order_of_stages():
    run = run_of()
    parts = [stage(run) for stage in STAGES]
    done = decide(run)
    assert done.notes == [note for part in parts for note in part.notes]
    assert done == merged(run.config, parts)


def test_the_stages_order_is_the_one_the_module_documents():
    documented = re.findall(r"^\d\. `(\w+)`: ", stages.__doc__ or "", re.MULTILINE)
    assert documented == [stage.__name__ for stage in STAGES]


def test_a_later_stage_wins_where_two_set_one_key(monkeypatch):
    def early(run):
        return Part({"seed": 1, "beta": 0.5}, notes=["early"])

    def late(run):
        return Part({"seed": 2, "beta": None}, notes=["late"])

    monkeypatch.setattr(stages, "STAGES", (early, late))
    done = decide(run_of())
    assert (done.config["seed"], "beta" in done.config, done.notes) == (2, False, ["early", "late"])


def test_the_processes_and_vllms_share_are_decided_once_for_every_stage_that_reads_them(monkeypatch):
    counted = {"processes": 0, "share": 0}
    real_processes, real_share = stages.training_processes, memory.vllm_share

    def processes(*args):
        counted["processes"] += 1
        return real_processes(*args)

    def share(*args):
        counted["share"] += 1
        return real_share(*args)

    monkeypatch.setattr(stages, "training_processes", processes)
    monkeypatch.setattr(memory, "vllm_share", share)
    run = run_of(vllm_mode="colocate", vllm_kv_cache_gib=1.0)  # the KV cache and the sharding read the share
    done = decide(run)
    assert done.accelerate == {"processes": 2, "sharding": "none"}
    assert counted == {"processes": 1, "share": 1}


def test_layout_gives_accelerate_the_processes_and_the_ranks_how_they_meet():
    part = stages.layout(run_of(num_machines=2, machine_rank=1, main_process_ip="10.0.0.1"))
    assert part.accelerate == {"processes": 2}
    assert part.env == {"TRLSTACK_RANKS_PER_GPU": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert part.notes == ["machine rank 1 of 2, meeting at 10.0.0.1:29500"]
    cpu = stages.layout(run_of(cpu=True, num_processes=3))
    assert cpu.accelerate == {"processes": 3} and "CUDA_DEVICE_ORDER" not in cpu.env


def test_layout_logs_the_mode_make_run_chose_first():
    part = stages.layout(make_run(TrainSettings(recipe="grpo"), GRPO, "grpo.yaml", gpus(1)))
    assert part.notes[0].startswith("vLLM mode colocate: one GPU and no server named")


def test_generation_against_a_server_names_it_and_bounds_each_push():
    part = stages.generation(run_of())
    assert part.config == {
        "use_vllm": True,
        "vllm_mode": "server",
        "vllm_server_base_url": "http://127.0.0.1:8000",
        "vllm_group_port": 51216,
    }
    assert part.env["TRLSTACK_WEIGHT_TRANSFER"] == "nccl" and part.env["VLLM_HOST_IP"] == "127.0.0.1"
    assert "TRLSTACK_WEIGHT_PUSH_TIMEOUT" in part.env


def test_generation_inside_the_trainer_takes_vllms_environment_and_no_server():
    part = stages.generation(run_of(vllm_mode="colocate"))
    assert part.config == {"use_vllm": True, "vllm_mode": "colocate"}
    assert part.env["VLLM_USE_FLASHINFER_SAMPLER"] == "0" and "TRLSTACK_WEIGHT_TRANSFER" not in part.env
    assert stages.generation(run_of(cpu=True)) == Part()  # no vLLM at all


def test_precision_is_fp32_on_the_cpu_the_configs_where_it_says_else_the_gpus_best():
    assert stages.precision(run_of(cpu=True)) == Part(notes=["precision fp32 (CPU run)"])
    assert stages.precision(run_of({**GRPO, "fp16": True})) == Part(
        notes=["precision fp16 (set in grpo.yaml)"]
    )
    chosen = stages.precision(run_of())
    assert chosen.config == {"bf16": True, "fp16": False} and chosen.notes[0].startswith("precision bf16 (")


def test_sharding_reaches_accelerate_and_is_refused_on_the_cpu():
    assert stages.sharded(run_of(sharding="fsdp2")).accelerate == {"sharding": "fsdp2"}
    with pytest.raises(UsageError) as error:
        stages.sharded(run_of(cpu=True, sharding="fsdp2"))
    assert str(error.value) == stages.CPU_SHARDING and "drop --sharding" in stages.CPU_SHARDING


def test_attention_is_chosen_unless_the_config_sets_it_and_async_grpo_always_packs_trees():
    chosen = stages.attention(run_of({**GRPO, "model_init_kwargs": {"dtype": "bfloat16"}}, cpu=True))
    assert chosen.config == {"model_init_kwargs": {"dtype": "bfloat16", "attn_implementation": "sdpa"}}
    assert chosen.notes == ["attention sdpa"]
    given = {**GRPO, "model_init_kwargs": {"attn_implementation": "eager"}}
    assert stages.attention(run_of(given)) == Part(notes=["attention as set in grpo.yaml"])
    async_grpo = yaml.safe_load(RECIPES["async-grpo"].bundled_config.read_text())
    assert stages.attention(run_of(async_grpo, recipe="async-grpo")) == Part(notes=list(asynchronous.NOTES))


def test_resume_continues_the_newest_checkpoint_unless_the_config_names_one():
    checkpoint = Path("outputs/grpo/checkpoint-4")
    assert stages.resume(run_of(None, 2, checkpoint)) == Part(
        {"resume_from_checkpoint": "outputs/grpo/checkpoint-4"},
        notes=["resuming from outputs/grpo/checkpoint-4"],
    )
    named = {**GRPO, "resume_from_checkpoint": "elsewhere"}
    assert stages.resume(run_of(named, 2, checkpoint)) == Part()
    assert stages.resume(run_of()) == Part()


def test_resume_leaves_transformers_own_save_on_stop_off_saying_so_where_the_config_asked_for_it():
    assert stages.resume(run_of({**GRPO, "enable_jit_checkpoint": True})) == Part(
        {"enable_jit_checkpoint": None},
        notes=["enable_jit_checkpoint in grpo.yaml left off: train saves a checkpoint when stopped"],
    )
    assert stages.resume(run_of({**GRPO, "enable_jit_checkpoint": False})) == Part(
        {"enable_jit_checkpoint": None}
    )


@pytest.mark.parametrize(("recipe", "silenced"), [("grpo", False), ("rloo", False), ("online-dpo", True)])
def test_the_experimental_trainers_warning_is_silenced_for_the_recipes_that_choose_them(recipe, silenced):
    config = yaml.safe_load(RECIPES[recipe].bundled_config.read_text())
    part = stages.environment(run_of(config, recipe=recipe))
    assert part.env == ({"TRL_EXPERIMENTAL_SILENCE": "1"} if silenced else {})
