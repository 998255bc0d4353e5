"""trlstack.plan.one_gpu: the one-GPU layout by measurement, colocate or a server sharing the GPU."""

from __future__ import annotations

import pytest
from trlstack.gpus import Gpu
from trlstack.plan import make_plan, one_gpu
from trlstack.plan.one_gpu import (
    ONE_GPU_STEPS,
    OneGpuStep,
    nearest_step,
    one_gpu_choice,
    one_gpu_colocate,
)


def machine(n):
    return [Gpu(i) for i in range(n)]


# The per-size choice on one GPU, on a table of the shape ONE_GPU_STEPS has (its figures come from the GPU).
MEASURED = (
    OneGpuStep("0.5B", 494_032_768, 1.10, 1.20, "one H100"),
    OneGpuStep("1.5B", 1_543_714_304, 1.80, 1.70, "one H100"),
    OneGpuStep("3B", 3_085_938_688, None, 2.9, "one H100"),
)


@pytest.mark.parametrize(
    ("parameters", "shape"),
    [(None, "0.5B"), (100_000_000, "0.5B"), (800_000_000, "0.5B"), (1_000_000_000, "1.5B"),
     (2_000_000_000, "1.5B"), (2_300_000_000, "3B"), (70_000_000_000, "3B")],
)  # fmt: skip
def test_the_measured_size_nearest_the_models_by_ratio_decides(parameters, shape):
    assert nearest_step(parameters, MEASURED).shape == shape


def test_on_one_gpu_the_faster_layout_at_the_models_size_wins():
    share, why = one_gpu_choice(1_500_000_000, MEASURED)
    assert share and "1.70 s against 1.80 s" in why and "one H100" in why and "--vllm-mode colocate" in why
    share, why = one_gpu_choice(500_000_000, MEASURED)
    assert (
        not share
        and "1.10 s against 1.20 s for a shared-GPU server (CUDA IPC)" in why
        and "--share-gpus" in why
    )
    share, why = one_gpu_choice(3_000_000_000, MEASURED)  # a size without both figures: colocate
    assert not share and "until a server on one GPU is measured faster at 3B" in why


def test_make_plan_takes_the_tables_choice_for_the_models_size(monkeypatch):
    monkeypatch.setattr(one_gpu, "ONE_GPU_STEPS", MEASURED)
    monkeypatch.setattr(one_gpu.one_gpu_choice, "__defaults__", (MEASURED,))
    served = make_plan(machine(1), parameters=1_543_714_304)
    assert served.share_gpus and not served.colocate and served.weight_transfer == "ipc"
    assert served.serve_indices == served.train_indices == (0,) and "1.70 s" in served.why
    assert make_plan(machine(1), parameters=494_032_768).colocate


def test_the_shipped_table_holds_colocate_for_every_size_until_measured_otherwise():
    # The figures the table ships with: colocate measured at 0.5B (against NCCL sockets), the rest to measure.
    assert [step.shape for step in ONE_GPU_STEPS] == ["0.5B", "1.5B", "3B"]
    assert not any(one_gpu_choice(step.parameters)[0] for step in ONE_GPU_STEPS)


def test_the_rule_applies_only_to_one_gpu_with_no_server_asked_for():
    assert one_gpu_colocate(2, False) == (False, "")
    assert one_gpu_colocate(1, True) == (False, "")
    colocate, why = one_gpu_colocate(1, False)
    assert colocate and "--share-gpus" in why
