"""trlstack.gpus: GPU specs, CUDA_VISIBLE_DEVICES, discovery through NVML."""

from __future__ import annotations

import argparse
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
        ("MIG-1234", "MIG-1234 matches no GPU"),
        ("zero", "neither a GPU index nor a GPU UUID"),
    ],
)
def test_select_visible_rejects_values_that_name_no_gpu_here(value, message):
    with pytest.raises(UsageError, match="CUDA_VISIBLE_DEVICES") as error:
        select_visible(FOUR, value)
    assert message in str(error.value)


A100 = "NVIDIA A100-SXM4-80GB"
MIG_UUIDS = ["MIG-5c89a7f0-1111-5e3b-9e1b-0f0a1b2c3d4e", "MIG-9d0b3c1e-2222-5a7c-8f2d-1e2f3a4b5c6d"]
MIGS = [Gpu(0, MIG_UUIDS[i], f"{A100} MIG 3g.40gb", (8, 0), "580.95.05", parent=UUIDS[0]) for i in range(2)]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (MIG_UUIDS[1], [MIG_UUIDS[1]]),
        ("MIG-5c89", [MIG_UUIDS[0]]),  # a unique prefix, as CUDA takes one
        (f"{MIG_UUIDS[0]},{MIG_UUIDS[1]}", MIG_UUIDS),
    ],
)
def test_mig_uuids_select_mig_devices_as_cuda_does(value, expected):
    chosen = select_visible(FOUR, value, MIGS)
    assert [gpu.uuid for gpu in chosen] == expected
    assert all(gpu.parent == UUIDS[0] and gpu.physical_uuid == UUIDS[0] for gpu in chosen)


def test_a_mig_uuid_that_names_no_mig_device_here_is_refused():
    with pytest.raises(UsageError, match="MIG-0000 matches no MIG device; this machine has 2 MIG devices"):
        select_visible(FOUR, "MIG-0000", MIGS)


def test_select_visible_without_a_driver_is_empty_whatever_the_variable_says():
    assert select_visible([], "0,1") == []


def fake_nvml(count=2, fail_init=False, driver=b"580.95.05", mig=None, capability_fails=()):
    """A stand-in for the NVML library (libnvidia-ml), the external boundary of discovery. `mig`: GPU index
    -> the UUIDs of its MIG devices (MIG mode on); `capability_fails`: GPUs whose capability NVML hides."""
    module = types.ModuleType("pynvml")
    mig = mig or {}

    class NVMLError(Exception):
        pass

    class NVMLError_NotSupported(NVMLError):  # noqa: N801 - pynvml's name
        pass

    class NVMLError_NotFound(NVMLError):  # noqa: N801 - pynvml's name
        pass

    def mig_mode(handle):
        if isinstance(handle, tuple) or handle not in mig:
            raise NVMLError_NotSupported("Not Supported")
        return (1, 1)

    def mig_handle(handle, index):
        if index >= len(mig[handle]):
            raise NVMLError_NotFound("Not Found")
        return (handle, index)

    def capability(handle):
        if handle in capability_fails or isinstance(handle, tuple):
            raise NVMLError_NotSupported("Not Supported")
        return (8, 0) if handle in mig else (9, 0)

    module.NVMLError = NVMLError
    module.NVMLError_NotSupported = NVMLError_NotSupported
    module.NVMLError_NotFound = NVMLError_NotFound
    module.NVML_DEVICE_MIG_ENABLE = 1
    module.nvmlDeviceGetMigMode = mig_mode
    module.nvmlDeviceGetMaxMigDeviceCount = lambda handle: 7
    module.nvmlDeviceGetMigDeviceHandleByIndex = mig_handle

    def init():
        if fail_init:
            raise NVMLError("NVML Shared Library Not Found")

    module.NVMLError = NVMLError
    module.nvmlInit = init
    module.nvmlShutdown = lambda: None
    module.nvmlSystemGetDriverVersion = lambda: driver
    module.nvmlDeviceGetCount = lambda: count
    module.nvmlDeviceGetHandleByIndex = lambda index: index
    module.nvmlDeviceGetUUID = lambda h: mig[h[0]][h[1]] if isinstance(h, tuple) else UUIDS[h]
    module.nvmlDeviceGetName = lambda h: (f"{A100} MIG 3g.40gb" if isinstance(h, tuple) else H200).encode()
    module.nvmlDeviceGetCudaComputeCapability = capability
    return module


def test_probe_reads_nvml_first(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml())
    assert gpus.probe() == Probe(tuple(FOUR[:2]), "nvml")


def test_probe_enumerates_mig_devices_with_their_gpus_capability(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(count=2, mig={0: MIG_UUIDS}))
    found = gpus.probe()
    assert [gpu.uuid for gpu in found.gpus] == UUIDS[:2] and found.gpus[0].compute_capability == (8, 0)
    assert [(gpu.index, gpu.uuid, gpu.parent, gpu.compute_capability) for gpu in found.mig] == [
        (0, MIG_UUIDS[0], UUIDS[0], (8, 0)),
        (0, MIG_UUIDS[1], UUIDS[0], (8, 0)),
    ]


def test_visible_gpus_take_mig_uuids(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(count=2, mig={0: MIG_UUIDS}))
    assert [gpu.uuid for gpu in gpus.visible_gpus({"CUDA_VISIBLE_DEVICES": MIG_UUIDS[1]})] == [MIG_UUIDS[1]]


def test_a_gpu_whose_capability_nvml_does_not_give_is_still_found(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(count=2, capability_fails={1}))
    found = gpus.probe()
    assert [(gpu.uuid, gpu.compute_capability) for gpu in found.gpus] == [
        (UUIDS[0], (9, 0)),
        (UUIDS[1], None),
    ]


@pytest.mark.parametrize("order", ["FASTEST_FIRST", "fastest_first", "bogus"])
def test_a_device_order_other_than_the_pci_bus_is_refused(monkeypatch, order):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(count=2))
    with pytest.raises(UsageError, match=f"CUDA_DEVICE_ORDER={order} numbers"):
        gpus.visible_gpus({"CUDA_DEVICE_ORDER": order, "CUDA_VISIBLE_DEVICES": "0"})
    assert len(gpus.visible_gpus({"CUDA_DEVICE_ORDER": "PCI_BUS_ID"})) == 2
    assert len(gpus.visible_gpus({"CUDA_DEVICE_ORDER": ""})) == 2


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


@pytest.mark.parametrize("text", ["٣", "²", "３", "", "-1", "1.0"])
def test_only_the_digits_0_to_9_make_an_index(text):
    assert not gpus.is_index(text)
    assert gpus.is_index("0") and gpus.is_index("15")


@pytest.mark.parametrize("value", ["١", "0,١", "²"])
def test_cuda_visible_devices_in_other_digits_is_refused_not_misread(value):
    with pytest.raises(UsageError, match="is neither a GPU index nor a GPU UUID"):
        gpus.select_visible([gpus.Gpu(0), gpus.Gpu(1)], value)


@pytest.mark.parametrize("raw", ["٣", "²", "1-٣"])
def test_a_gpu_spec_in_other_digits_is_refused(raw):
    with pytest.raises(UsageError, match="is not an index or a range"):
        gpus.parse_gpu_spec(raw, "--serve-gpus")
    with pytest.raises(argparse.ArgumentTypeError, match="write it with the digits 0-9"):
        gpus.gpu_count(raw)
