"""trlstack.gpus: GPU specs, CUDA_VISIBLE_DEVICES, discovery through NVML."""

from __future__ import annotations

import sys
import types

import pytest
from hypothesis import given
from hypothesis import strategies as st
from trlstack import gpus
from trlstack.errors import UsageError
from trlstack.gpus import Gpu, Probe, parse_gpu_spec, select_visible

H200 = "NVIDIA H200"
UUIDS = [f"GPU-{i}{i}{i}{i}aaaa-bbbb-cccc-dddd-eeeeeeeeeee{i}" for i in range(4)]
FOUR = [Gpu(i, UUIDS[i], H200, (9, 0), "580.95.05") for i in range(4)]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("0-3,5", (0, 1, 2, 3, 5)),
        ("3", (3,)),
        (" 1 , 2 ", (1, 2)),
        ("5,0-1", (5, 0, 1)),
        ("4-4", (4,)),
        ("0-7", tuple(range(8))),
    ],
)
def test_parse_gpu_spec_reads_indices_and_ranges_in_order(spec, expected):
    assert parse_gpu_spec(spec) == expected


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "is empty"),
        ("   ", "is empty"),
        ("0,,1", "empty entry"),
        ("0,1,", "empty entry"),
        ("a", "'a' is not an index or a range"),
        ("1-", "'1-' is not an index or a range"),
        ("1-2-3", "'1-2-3' is not an index or a range"),
        ("0x1", "'0x1' is not an index or a range"),
        ("1.5", "'1.5' is not an index or a range"),
        ("-1", "negative index -1"),
        ("0,-2", "negative index -2"),
        ("3-1", "range 3-1 is reversed; write 1-3"),
        ("0,0", "names GPU 0 twice"),
        ("0-2,1", "names GPU 1 twice"),
        ("0-100000", "beyond any machine"),
    ],
)
def test_parse_gpu_spec_rejects_malformed_specs_naming_the_flag(spec, message):
    with pytest.raises(UsageError, match="--serve-gpus") as error:
        parse_gpu_spec(spec, "--serve-gpus")
    assert message in str(error.value)


@st.composite
def index_lists(draw):
    return draw(st.lists(st.integers(0, 63), min_size=1, max_size=16, unique=True))


def write_spec(indices):
    """Write indices as a spec, folding runs of consecutive ones into ranges."""
    parts, start = [], 0
    for i in range(1, len(indices) + 1):
        if i == len(indices) or indices[i] != indices[i - 1] + 1:
            run = indices[start:i]
            parts.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
            start = i
    return ",".join(parts)


@given(index_lists())
def test_parse_gpu_spec_reads_back_any_written_spec(indices):
    assert parse_gpu_spec(write_spec(indices)) == tuple(indices)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, [0, 1, 2, 3]),
        ("", []),
        ("-1", []),
        ("2,0", [2, 0]),
        (" 3 ", [3]),
        (UUIDS[1], [1]),
        ("GPU-3333,0", [3, 0]),
    ],
)
def test_select_visible_follows_cuda_visible_devices_in_its_order(value, expected):
    assert [gpu.index for gpu in select_visible(FOUR, value)] == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("7", "names GPU 7, but this machine has 4 GPUs: 0-3"),
        ("0,0", "names GPU 0 twice"),
        ("1," + UUIDS[1], "names GPU 1 twice"),
        ("GPU-", "matches several GPUs"),
        ("GPU-9999", "matches no GPU"),
        ("MIG-1234", "neither a GPU index nor a GPU UUID"),
        ("zero", "neither a GPU index nor a GPU UUID"),
    ],
)
def test_select_visible_rejects_values_that_name_no_gpu_here(value, message):
    with pytest.raises(UsageError, match="CUDA_VISIBLE_DEVICES") as error:
        select_visible(FOUR, value)
    assert message in str(error.value)


def test_select_visible_without_a_driver_is_empty_whatever_the_variable_says():
    assert select_visible([], "0,1") == []


def fake_nvml(count=2, fail_init=False, driver=b"580.95.05"):
    """A stand-in for the NVML library (libnvidia-ml), the external boundary of discovery."""
    module = types.ModuleType("pynvml")

    class NVMLError(Exception):
        pass

    def init():
        if fail_init:
            raise NVMLError("NVML Shared Library Not Found")

    module.NVMLError = NVMLError
    module.nvmlInit = init
    module.nvmlShutdown = lambda: None
    module.nvmlSystemGetDriverVersion = lambda: driver
    module.nvmlDeviceGetCount = lambda: count
    module.nvmlDeviceGetHandleByIndex = lambda index: index
    module.nvmlDeviceGetUUID = lambda handle: UUIDS[handle]
    module.nvmlDeviceGetName = lambda handle: H200.encode()
    module.nvmlDeviceGetCudaComputeCapability = lambda handle: (9, 0)
    return module


def test_probe_reads_nvml_first(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml())
    assert gpus.probe() == Probe(tuple(FOUR[:2]), "nvml")


def test_probe_without_a_driver_finds_nothing_and_says_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(fail_init=True))
    assert gpus.probe() == Probe((), None, "NVML: NVML Shared Library Not Found")


def test_probe_reads_a_driver_version_given_as_text(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(count=1, driver="590.1"))
    assert gpus.probe().gpus[0].driver_version == "590.1"


def test_visible_gpus_applies_cuda_visible_devices(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(count=4))
    visible = gpus.visible_gpus({"CUDA_VISIBLE_DEVICES": "3,1"})
    assert [(gpu.index, gpu.uuid) for gpu in visible] == [(3, UUIDS[3]), (1, UUIDS[1])]


def test_discovery_is_lazy_about_nvml():
    import subprocess

    code = "import sys, trlstack.gpus, trlstack.cli; print('pynvml' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
