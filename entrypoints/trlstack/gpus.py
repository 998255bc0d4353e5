"""The GPUs of this machine, as the driver's NVML library numbers them, and GPU specs such as "0-3,5".

Indices are the driver's (PCI bus order, as `nvidia-smi` and `docker --gpus device=N` use them), so a plan
made here names the same GPUs in compose. CUDA numbers GPUs the same way when CUDA_DEVICE_ORDER=PCI_BUS_ID.
Discovery is the one side effect here; parsing and selection are pure functions.

Discovery asks NVML only (nvidia-ml-py): nvidia-smi is a front end to the same libnvidia-ml, so where NVML
cannot load, nvidia-smi cannot either, and its text output would be a second, weaker reading of one source.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trlstack.defaults import Env
from trlstack.errors import UsageError

# The order CUDA numbers GPUs in when CUDA_DEVICE_ORDER says so: NVML's and nvidia-smi's.
PCI_BUS_ID = "PCI_BUS_ID"

# No machine has more GPUs than this; it keeps a typo such as 0-100000 or --gpus 100000 from building a huge
# list.
MAX_GPU_INDEX = 1023


@dataclass(frozen=True)
class Gpu:
    """One GPU; everything except the index is unknown (None) when the plan is made for another machine."""

    index: int  # a MIG device has its GPU's index
    uuid: str | None = None  # GPU-... for a GPU, MIG-... for a MIG device
    name: str | None = None
    compute_capability: tuple[int, int] | None = None
    driver_version: str | None = None
    parent: str | None = None  # a MIG device's GPU (its UUID)
    memory_bytes: int | None = None  # the device's memory (a MIG device's own slice), as NVML reports it

    @property
    def capability(self) -> str | None:
        """Compute capability as NVIDIA writes it, e.g. "9.0"."""
        return None if self.compute_capability is None else "{}.{}".format(*self.compute_capability)

    @property
    def physical_uuid(self) -> str | None:
        """The UUID of the GPU this is or is a slice of: two MIG devices of one GPU share it."""
        return self.parent or self.uuid


@dataclass(frozen=True)
class Probe:
    """What discovery found: all GPUs of the machine, where the facts came from, and why there are none."""

    gpus: tuple[Gpu, ...]
    source: str | None  # "nvml", or None when the driver cannot be asked
    problem: str | None = None
    mig: tuple[Gpu, ...] = ()  # MIG devices of GPUs in MIG mode, which CUDA_VISIBLE_DEVICES may name


def describe_indices(indices: Sequence[int]) -> str:
    """Short human form of a set of GPU indices: "0-3", "0,2,5", "none"."""
    if not indices:
        return "none"
    ordered = sorted(indices)
    if ordered == list(range(ordered[0], ordered[-1] + 1)) and len(ordered) > 2:
        return f"{ordered[0]}-{ordered[-1]}"
    return ",".join(map(str, ordered))


def describe_machine(gpus: Sequence[Gpu]) -> str:
    """Say which GPUs there are, for error messages: "this machine has 4 GPUs: 0-3"."""
    count = f"{len(gpus)} GPU" + ("" if len(gpus) == 1 else "s")
    return f"this machine has {count}: {describe_indices([gpu.index for gpu in gpus])}"


def gpu_count(raw: str) -> int:
    """argparse type: how many GPUs a machine has, 1 to MAX_GPU_INDEX + 1."""
    if not raw.isascii():  # int() also reads other scripts' digits (٣), which no GPU list takes
        raise argparse.ArgumentTypeError(f"{raw!r} is not a whole number (write it with the digits 0-9)")
    try:
        count = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a whole number") from None
    if count < 1:
        raise argparse.ArgumentTypeError(f"{count} is not a positive whole number")
    if count > MAX_GPU_INDEX + 1:
        raise argparse.ArgumentTypeError(
            f"{count} GPUs is more than any machine has (at most {MAX_GPU_INDEX + 1})"
        )
    return count


_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$", re.ASCII)


def is_index(text: str) -> bool:
    """Whether `text` is a whole number in the digits 0-9, as CUDA and compose read one (str.isdigit and int
    also take other scripts' digits, such as ٣, which CUDA_VISIBLE_DEVICES does not)."""
    return text.isascii() and text.isdigit()


def parse_gpu_spec(spec: str, source: str = "GPU spec") -> tuple[int, ...]:
    """Parse "0-3,5" into (0, 1, 2, 3, 5), keeping the order written; `source` names the flag in errors."""
    example = "write GPU indices and ranges such as 0-3,5"
    if spec is None or not spec.strip():
        raise UsageError(f"{source} is empty; {example}.")
    indices: list[int] = []
    seen: set[int] = set()
    for item in spec.split(","):
        item = item.strip()
        if not item:
            raise UsageError(
                f"{source} {spec!r} has an empty entry; {example} (no doubled or trailing commas)."
            )
        if item.startswith("-") and is_index(item[1:]):
            raise UsageError(f"{source} {spec!r} has the negative index {item}; GPU indices start at 0.")
        match = _RANGE.match(item)
        if not match:
            raise UsageError(f"{source} {spec!r}: {item!r} is not an index or a range; {example}.")
        start = int(match.group(1))
        stop = start if match.group(2) is None else int(match.group(2))
        if stop < start:
            raise UsageError(f"{source} {spec!r}: range {item} is reversed; write {stop}-{start}.")
        if stop > MAX_GPU_INDEX:
            raise UsageError(
                f"{source} {spec!r}: GPU {stop} is beyond any machine (indices go up to {MAX_GPU_INDEX})."
            )
        for index in range(start, stop + 1):
            if index in seen:
                raise UsageError(f"{source} {spec!r} names GPU {index} twice; list each GPU once.")
            seen.add(index)
            indices.append(index)
    return tuple(indices)


def gpu_spec(raw: str) -> tuple[int, ...]:
    """argparse type: GPU indices and ranges such as 0-3,5 (parse_gpu_spec), named by the flag or variable."""
    try:
        return parse_gpu_spec(raw, "GPU spec")
    except UsageError as error:
        raise argparse.ArgumentTypeError(str(error).removeprefix("GPU spec ")) from None


# CUDA hides every GPU for these values; -1 is the usual way to say "no GPU".
_HIDE_ALL = {"", "-1", "NoDevFiles"}


def _by_uuid(entry: str, devices: Sequence[Gpu], kind: str, value: str, fix: str) -> Gpu:
    """The one device whose UUID starts with `entry`, as CUDA matches a UUID or a unique prefix of one."""
    matches = [gpu for gpu in devices if gpu.uuid and gpu.uuid.startswith(entry)]
    if len(matches) != 1:
        found = f"no {kind}" if not matches else f"several {kind}s"
        raise UsageError(f"CUDA_VISIBLE_DEVICES={value!r}: {entry} matches {found}; {fix}.")
    return matches[0]


def select_visible(
    gpus: Sequence[Gpu], cuda_visible_devices: str | None, mig: Sequence[Gpu] = ()
) -> list[Gpu]:
    """The GPUs CUDA_VISIBLE_DEVICES makes visible, in its order: indices, GPU UUIDs, MIG device UUIDs (of
    `mig`), or unique prefixes of either."""
    if cuda_visible_devices is None or not gpus:
        return list(gpus)
    value = cuda_visible_devices.strip()
    if value in _HIDE_ALL:
        return []
    fix = f"{describe_machine(gpus)}; fix or unset CUDA_VISIBLE_DEVICES"
    by_index = {gpu.index: gpu for gpu in gpus}
    chosen: list[Gpu] = []
    for entry in (entry.strip() for entry in value.split(",")):
        if is_index(entry):
            gpu = by_index.get(int(entry))
            if gpu is None:
                raise UsageError(f"CUDA_VISIBLE_DEVICES={value!r} names GPU {entry}, but {fix}.")
        elif entry.startswith("GPU-"):
            gpu = _by_uuid(entry, gpus, "GPU", value, fix)
        elif entry.startswith("MIG-"):
            if not mig:
                raise UsageError(
                    f"CUDA_VISIBLE_DEVICES={value!r}: {entry} matches no GPU (no GPU here is in MIG mode); "
                    f"{fix}."
                )
            mig_fix = f"this machine has {len(mig)} MIG devices (`nvidia-smi -L` lists them); fix or unset it"
            gpu = _by_uuid(entry, mig, "MIG device", value, mig_fix)
        else:
            raise UsageError(
                f"CUDA_VISIBLE_DEVICES={value!r}: {entry!r} is neither a GPU index nor a GPU UUID; {fix}."
            )
        if gpu in chosen:
            raise UsageError(
                f"CUDA_VISIBLE_DEVICES={value!r} names GPU {gpu.index} twice; list each GPU once."
            )
        chosen.append(gpu)
    return chosen


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _capability(pynvml: Any, handle: Any) -> tuple[int, int] | None:
    """NVML's compute capability of a GPU, or None where the driver does not say (it is then unknown, and the
    policy chooses what every GPU runs)."""
    try:
        major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
    except pynvml.NVMLError:
        return None
    return int(major), int(minor)


def _memory(pynvml: Any, handle: Any) -> int | None:
    """NVML's total memory of a GPU or MIG device, or None where the driver (or the binding) does not say."""
    try:
        return int(pynvml.nvmlDeviceGetMemoryInfo(handle).total)
    except (pynvml.NVMLError, AttributeError):
        return None


def _mig_devices(pynvml: Any, handle: Any, gpu: Gpu) -> list[Gpu]:
    """The MIG devices of a GPU in MIG mode (none otherwise), with the GPU's index and compute capability."""
    try:
        current, _ = pynvml.nvmlDeviceGetMigMode(handle)
    except pynvml.NVMLError:
        return []  # no MIG on this GPU
    if current != pynvml.NVML_DEVICE_MIG_ENABLE:
        return []
    found = []
    for slot in range(pynvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
        try:
            mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
        except pynvml.NVMLError:
            continue  # an empty slot
        uuid, name = _text(pynvml.nvmlDeviceGetUUID(mig)), _text(pynvml.nvmlDeviceGetName(mig))
        found.append(
            dataclasses.replace(gpu, uuid=uuid, name=name, parent=gpu.uuid, memory_bytes=_memory(pynvml, mig))
        )
    return found


def probe() -> Probe:
    """All GPUs of this machine, and the MIG devices of those in MIG mode; none, and why, where there is no
    driver."""
    try:
        import pynvml
    except ImportError:
        return Probe((), None, "nvidia-ml-py is not installed")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as error:
        return Probe((), None, f"NVML: {error}")
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        gpus, migs = [], []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            gpu = Gpu(
                index=index,
                uuid=_text(pynvml.nvmlDeviceGetUUID(handle)),
                name=_text(pynvml.nvmlDeviceGetName(handle)),
                compute_capability=_capability(pynvml, handle),
                driver_version=driver,
                memory_bytes=_memory(pynvml, handle),
            )
            gpus.append(gpu)
            migs += _mig_devices(pynvml, handle, gpu)
        return Probe(tuple(gpus), "nvml", mig=tuple(migs))
    except pynvml.NVMLError as error:
        return Probe((), None, f"NVML: {error}")
    finally:
        pynvml.nvmlShutdown()


def check_device_order(environ: Mapping[str, str]) -> None:
    """Refuse a CUDA_DEVICE_ORDER other than the PCI bus order: trlstack's indices (CUDA_VISIBLE_DEVICES, the
    plan, SERVE_GPUS) are NVML's and nvidia-smi's, which CUDA uses only in that order. The roles set it in
    their command's environment, so an unset variable is fine."""
    order = environ.get(Env.CUDA_DEVICE_ORDER, "")
    if order not in ("", PCI_BUS_ID):
        raise UsageError(
            f"{Env.CUDA_DEVICE_ORDER}={order} numbers GPUs differently from nvidia-smi, whose numbers "
            "trlstack's GPU indices are (CUDA_VISIBLE_DEVICES, the plan, SERVE_GPUS); unset it or set "
            f"{PCI_BUS_ID}."
        )


def visible_gpus(environ: Mapping[str, str] | None = None) -> list[Gpu]:
    """The GPUs a CUDA program started from this environment (with CUDA_DEVICE_ORDER=PCI_BUS_ID, as the roles
    start theirs) would see, in CUDA_VISIBLE_DEVICES order."""
    environ = os.environ if environ is None else environ
    check_device_order(environ)
    found = probe()
    return select_visible(found.gpus, environ.get(Env.CUDA_VISIBLE_DEVICES), found.mig)


def nccl_host_id(role: str, hostname: str | None = None) -> dict[str, str]:
    """The NCCL_HOSTID a role sets when it shares its GPUs with the other role: NCCL refuses two ranks of one
    communicator on one GPU of one host ("Duplicate GPU detected"), so the server and the trainer name
    themselves as two hosts of this machine, and NCCL moves the weights over its socket transport."""
    import socket

    return {Env.NCCL_HOSTID: f"{hostname or socket.gethostname()}-trlstack-{role}"}
