"""The GPUs of this machine, as NVML (or nvidia-smi) numbers them, and GPU specs such as "0-3,5".

Indices are the driver's (PCI bus order, as `nvidia-smi` and `docker --gpus device=N` use them), so a plan
made here names the same GPUs in compose. CUDA numbers GPUs the same way when CUDA_DEVICE_ORDER=PCI_BUS_ID.
Discovery is the one side effect here; parsing and selection are pure functions.
"""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trlstack.errors import UsageError

# No machine has more GPUs than this; it keeps a typo such as 0-100000 from building a huge list.
MAX_GPU_INDEX = 1023

# Fields queried from nvidia-smi when NVML cannot be used; compute_cap needs a driver from 2022 or newer.
SMI_FIELDS = ("index", "uuid", "name", "compute_cap", "driver_version")


@dataclass(frozen=True)
class Gpu:
    """One GPU; everything except the index is unknown (None) when the plan is made for another machine."""

    index: int
    uuid: str | None = None
    name: str | None = None
    compute_capability: tuple[int, int] | None = None
    driver_version: str | None = None

    @property
    def capability(self) -> str | None:
        """Compute capability as NVIDIA writes it, e.g. "9.0"."""
        return None if self.compute_capability is None else "{}.{}".format(*self.compute_capability)


@dataclass(frozen=True)
class Probe:
    """What discovery found: all GPUs of the machine, where the facts came from, and why there are none."""

    gpus: tuple[Gpu, ...]
    source: str | None  # "nvml", "nvidia-smi" or None
    problem: str | None = None


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


_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


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
        if item.startswith("-") and item[1:].isdigit():
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


def _capability(text: str) -> tuple[int, int] | None:
    match = re.match(r"^(\d+)\.(\d+)$", text.strip())
    return (int(match.group(1)), int(match.group(2))) if match else None


def _known(text: str) -> str | None:
    text = text.strip()
    return None if not text or text.startswith("[") else text  # "[N/A]", "[Not Supported]"


def parse_nvidia_smi(text: str) -> list[Gpu]:
    """Parse `nvidia-smi --query-gpu=index,uuid,name[,compute_cap],driver_version --format=csv,noheader`."""
    gpus = []
    for row in csv.reader((line for line in text.splitlines() if line.strip()), skipinitialspace=True):
        fields = [field.strip() for field in row]
        if len(fields) == len(SMI_FIELDS):
            index, uuid, name, capability, driver = fields
        elif len(fields) == len(SMI_FIELDS) - 1:  # older drivers cannot report compute_cap
            index, uuid, name, driver = fields
            capability = ""
        else:
            raise ValueError(f"unexpected nvidia-smi line: {','.join(row)!r}")
        gpus.append(
            Gpu(
                index=int(index),
                uuid=_known(uuid),
                name=_known(name),
                compute_capability=_capability(capability),
                driver_version=_known(driver),
            )
        )
    return gpus


# CUDA hides every GPU for these values; -1 is the usual way to say "no GPU".
_HIDE_ALL = {"", "-1", "NoDevFiles"}


def select_visible(gpus: Sequence[Gpu], cuda_visible_devices: str | None) -> list[Gpu]:
    """The GPUs CUDA_VISIBLE_DEVICES (indices, UUIDs or unique UUID prefixes) makes visible, in its order."""
    if cuda_visible_devices is None or not gpus:
        return list(gpus)
    value = cuda_visible_devices.strip()
    if value in _HIDE_ALL:
        return []
    fix = f"{describe_machine(gpus)}; fix or unset CUDA_VISIBLE_DEVICES"
    by_index = {gpu.index: gpu for gpu in gpus}
    chosen: list[Gpu] = []
    for entry in (entry.strip() for entry in value.split(",")):
        if entry.isdigit():
            gpu = by_index.get(int(entry))
            if gpu is None:
                raise UsageError(f"CUDA_VISIBLE_DEVICES={value!r} names GPU {entry}, but {fix}.")
        elif entry.startswith("GPU-"):
            matches = [gpu for gpu in gpus if gpu.uuid and gpu.uuid.startswith(entry)]
            if len(matches) != 1:
                found = "no GPU" if not matches else "several GPUs"
                raise UsageError(f"CUDA_VISIBLE_DEVICES={value!r}: {entry} matches {found}; {fix}.")
            gpu = matches[0]
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


def _probe_nvml() -> Probe:
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
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            gpus.append(
                Gpu(
                    index=index,
                    uuid=_text(pynvml.nvmlDeviceGetUUID(handle)),
                    name=_text(pynvml.nvmlDeviceGetName(handle)),
                    compute_capability=tuple(pynvml.nvmlDeviceGetCudaComputeCapability(handle)),
                    driver_version=driver,
                )
            )
        return Probe(tuple(gpus), "nvml")
    except pynvml.NVMLError as error:
        return Probe((), None, f"NVML: {error}")
    finally:
        pynvml.nvmlShutdown()


def _probe_nvidia_smi() -> Probe:
    import shutil
    import subprocess

    smi = shutil.which("nvidia-smi")
    if smi is None:
        return Probe((), None, "nvidia-smi is not on PATH")
    problem = None
    for fields in (SMI_FIELDS, tuple(field for field in SMI_FIELDS if field != "compute_cap")):
        try:
            result = subprocess.run(
                [smi, f"--query-gpu={','.join(fields)}", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            return Probe((), None, f"nvidia-smi: {error}")
        if result.returncode == 0:
            try:
                return Probe(tuple(parse_nvidia_smi(result.stdout)), "nvidia-smi")
            except ValueError as error:
                return Probe((), None, f"nvidia-smi: {error}")
        problem = f"nvidia-smi: {(result.stdout + result.stderr).strip() or f'exit {result.returncode}'}"
    return Probe((), None, problem)


def probe() -> Probe:
    """All GPUs of this machine, through NVML, else nvidia-smi; none (and why) where there is no driver."""
    found = _probe_nvml()
    if found.source:
        return found
    fallback = _probe_nvidia_smi()
    if fallback.source:
        return fallback
    return Probe((), None, f"{found.problem}; {fallback.problem}")


def visible_gpus(environ: Mapping[str, str] | None = None) -> list[Gpu]:
    """The GPUs a CUDA program started from this environment would see, in CUDA_VISIBLE_DEVICES order."""
    environ = os.environ if environ is None else environ
    return select_visible(probe().gpus, environ.get("CUDA_VISIBLE_DEVICES"))
