"""trlstack.run.checks: the training GPUs never overlap the server's, whatever names them."""

from __future__ import annotations

import pytest
from launch_harness import gpus
from trlstack.errors import UsageError
from trlstack.gpus import Gpu
from trlstack.run.checks import check_overlap


def test_a_mig_device_of_a_serving_gpu_overlaps_it():
    machine = gpus(4)
    mig = Gpu(1, "MIG-9d0b3c1e", "A100 MIG 3g.40gb", (8, 0), parent=machine[1].uuid)
    check_overlap([mig], [0], machine)
    with pytest.raises(UsageError, match=r"GPU 1 \(GPU-0001\), which --serve-gpus gives the vLLM server"):
        check_overlap([mig], [1], machine)


def test_overlap_is_judged_by_uuid():
    machine = gpus(4)
    check_overlap(machine[2:], [0, 1], machine)
    with pytest.raises(UsageError, match=r"GPU 1 \(GPU-0001\), which --serve-gpus gives the vLLM server"):
        check_overlap(machine[1:], [0, 1], machine)
