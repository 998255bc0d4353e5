"""The machine's facts as doctor gathers them, and the pure judgements that turn them into findings, in the
order a user fixes them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from trlstack.defaults import BF16_CAPABILITY, Env, is_true
from trlstack.errors import UsageError
from trlstack.gpus import Gpu, Probe, describe_indices, select_visible
from trlstack.stack import GET_GPU_STACK

MIN_DRIVER = 580  # first driver branch for CUDA 13, which torch 2.11's wheels and vLLM 0.25 are built for
MIN_CAPABILITY = (7, 5)  # CUDA 13 dropped Maxwell, Pascal and Volta
MIN_SHM = 1 << 30
MIN_CACHE_FREE = 10 << 30

LEVELS = ("ok", "info", "warn", "fail")


@dataclass(frozen=True)
class Finding:
    level: str  # one of LEVELS
    topic: str
    message: str
    fix: str | None = None


@dataclass(frozen=True)
class Facts:
    """What doctor looks at, gathered once."""

    probe: Probe
    cuda_visible_devices: str | None = None
    shm_bytes: int | None = None  # None: no /dev/shm
    ports: Mapping[int, str | None] = field(
        default_factory=dict
    )  # port -> why it cannot be bound, None if free
    hf_cache: str = ""
    hf_cache_exists: bool = False
    hf_cache_writable: bool = True
    hf_cache_free_bytes: int | None = None
    hf_offline: str | None = None
    pins: Mapping[str, str] = field(default_factory=dict)
    installed: Mapping[str, str | None] = field(default_factory=dict)


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{n} B"


def driver_major(version: str) -> int | None:
    match = re.match(r"^(\d+)", version)
    return int(match.group(1)) if match else None


def judge_driver(probe: Probe) -> list[Finding]:
    if probe.source is None:
        return [
            Finding(
                "warn",
                "driver",
                f"no NVIDIA driver here ({probe.problem}): the CLI, the tests and `train --cpu` work, "
                "vLLM does not",
                f"on a GPU machine, install NVIDIA driver >= {MIN_DRIVER} (and the NVIDIA Container Toolkit "
                "for the images); in a container, start it with GPUs (`docker run --gpus all`, or compose's "
                "device reservations)",
            )
        ]
    versions = sorted({gpu.driver_version for gpu in probe.gpus if gpu.driver_version})
    if not versions:
        return [Finding("warn", "driver", f"the driver answers ({probe.source}) but reports no version")]
    version = versions[0]
    major = driver_major(version)
    if major is None or major < MIN_DRIVER:
        return [
            Finding(
                "fail",
                "driver",
                f"NVIDIA driver {version} is too old for CUDA 13 (torch 2.11 and vLLM 0.25 need "
                f">= {MIN_DRIVER})",
                f"upgrade the driver to the {MIN_DRIVER} branch or newer",
            )
        ]
    return [Finding("ok", "driver", f"NVIDIA driver {version} supports CUDA 13 (needs >= {MIN_DRIVER})")]


def _judge_gpu(gpu: Gpu) -> Finding:
    from trlstack import policy

    label = f"GPU {gpu.index}: {gpu.name or 'unknown model'}"
    capability = gpu.compute_capability
    chosen, why = policy.precision([gpu])  # the one decision train makes
    if capability is None:
        return Finding("info", "gpu", f"{label}: train uses {chosen} ({why})")
    if capability < MIN_CAPABILITY:
        return Finding(
            "fail",
            "gpu",
            f"{label}, compute capability {gpu.capability}: CUDA 13 needs >= "
            f"{'.'.join(map(str, MIN_CAPABILITY))}",
            "use a Turing (7.5) or newer GPU",
        )
    if capability < BF16_CAPABILITY:
        return Finding(
            "info",
            "gpu",
            f"{label}, compute capability {gpu.capability}: train uses {chosen} and sdpa (no bf16)",
        )
    return Finding("ok", "gpu", f"{label}, compute capability {gpu.capability}: train uses {chosen}")


def judge_gpus(probe: Probe, cuda_visible_devices: str | None) -> list[Finding]:
    if probe.source is None:
        return [Finding("info", "gpu", "no GPU to check; `trlstack plan --gpus N` plans for another machine")]
    if not probe.gpus:
        return [
            Finding("warn", "gpu", "the driver reports no GPU", "check `nvidia-smi` and the GPU's power/PCIe")
        ]
    findings = [_judge_gpu(gpu) for gpu in probe.gpus]
    try:
        visible = select_visible(probe.gpus, cuda_visible_devices, probe.mig)
    except UsageError as error:
        return [
            *findings,
            Finding("warn", "gpu", str(error).split(";")[0], "fix or unset CUDA_VISIBLE_DEVICES"),
        ]
    if cuda_visible_devices is not None:
        shown = describe_indices([gpu.index for gpu in visible])
        findings.append(
            Finding("info", "gpu", f"CUDA_VISIBLE_DEVICES={cuda_visible_devices!r}: GPUs {shown} visible")
        )
    if visible:
        from trlstack.plan import make_plan
        from trlstack.plan.render import layout

        plan = make_plan(visible)
        train = plan.env()["TRAIN_GPUS"]
        where = (
            f"by default the trainer runs vLLM inside it on GPU {train}, no server"
            if plan.colocate
            else f"by default vLLM serves on {plan.env()['SERVE_GPUS']}, training on {train}"
        )
        count = f"{len(visible)} GPU" + ("s" if len(visible) > 1 else "")
        findings.append(Finding("ok", "plan", f"{count}: {where}; {layout(plan)} (see `trlstack plan`)"))
    return findings


def judge_shm(shm_bytes: int | None) -> list[Finding]:
    fix = (
        "give the container more shared memory: `docker run --shm-size=16g` (or --ipc=host), "
        "compose's shm_size"
    )
    if shm_bytes is None:
        return [
            Finding(
                "warn", "shm", "/dev/shm is missing; vLLM and NCCL share memory between processes there", fix
            )
        ]
    if shm_bytes < MIN_SHM:
        return [
            Finding(
                "warn",
                "shm",
                f"/dev/shm is {_size(shm_bytes)}; vLLM and NCCL need more than {_size(MIN_SHM)} "
                "(Docker's default is 64 MiB)",
                fix,
            )
        ]
    return [Finding("ok", "shm", f"/dev/shm is {_size(shm_bytes)}")]


def judge_ports(ports: Mapping[int, str | None]) -> list[Finding]:
    findings = []
    for port, problem in ports.items():
        if problem is None:
            findings.append(Finding("ok", "ports", f"port {port} is free on 127.0.0.1"))
        else:
            findings.append(
                Finding(
                    "warn",
                    "ports",
                    f"port {port} cannot be bound on 127.0.0.1 ({problem})",
                    f"stop what listens there (`ss -ltnp 'sport = :{port}'`) or choose other ports with "
                    f"--port/--group-port ({Env.VLLM_PORT}, {Env.VLLM_GROUP_PORT})",
                )
            )
    return findings


def judge_hf(facts: Facts) -> list[Finding]:
    offline = is_true(facts.hf_offline)
    if facts.hf_cache_exists:
        where = f"Hugging Face cache at {facts.hf_cache}"
    else:
        where = f"Hugging Face cache will be created at {facts.hf_cache}"
    findings = []
    if not facts.hf_cache_writable:
        findings.append(
            Finding("fail", "hf", f"{where}, which is not writable", "set HF_HOME to a writable folder")
        )
    elif facts.hf_cache_free_bytes is not None and facts.hf_cache_free_bytes < MIN_CACHE_FREE:
        findings.append(
            Finding(
                "warn",
                "hf",
                f"{where}, with {_size(facts.hf_cache_free_bytes)} free (models and datasets need more)",
                "free disk space or point HF_HOME at a larger disk",
            )
        )
    else:
        free = "" if facts.hf_cache_free_bytes is None else f" ({_size(facts.hf_cache_free_bytes)} free)"
        findings.append(Finding("ok", "hf", where + free))
    if offline and not facts.hf_cache_exists:
        findings.append(
            Finding(
                "warn",
                "hf",
                f"{Env.HF_HUB_OFFLINE}={facts.hf_offline}, but the cache is empty: no model or dataset can "
                "load",
                f"fill the cache on a connected machine (or mount it), or unset {Env.HF_HUB_OFFLINE}",
            )
        )
    elif offline:
        findings.append(
            Finding("info", "hf", f"{Env.HF_HUB_OFFLINE}={facts.hf_offline}: models load only from the cache")
        )
    else:
        findings.append(
            Finding(
                "info",
                "hf",
                f"online: models and datasets download from the Hub ({Env.HF_HUB_OFFLINE}=1 to forbid)",
            )
        )
    return findings


def judge_stack(pins: Mapping[str, str], installed: Mapping[str, str | None]) -> list[Finding]:
    if not pins:
        return [Finding("info", "stack", "pins unknown: trlstack is not installed as a package")]
    present = {name: installed.get(name) for name in pins if installed.get(name)}
    if not present:
        return [
            Finding(
                "info",
                "stack",
                f"light install: none of {', '.join(pins)} is installed, so the CLI and tests run, "
                "not the roles",
                GET_GPU_STACK,
            )
        ]
    findings = []
    for name, pinned in pins.items():
        version = installed.get(name)
        if version == pinned:
            findings.append(Finding("ok", "stack", f"{name} {version}"))
        else:
            seen = "not installed" if version is None else f"{version} installed"
            findings.append(
                Finding(
                    "warn",
                    "stack",
                    f"{name}: {seen}, pinned {pinned}",
                    GET_GPU_STACK,
                )
            )
    return findings


def judge(facts: Facts) -> list[Finding]:
    """Every finding, in the order a user fixes them."""
    return [
        *judge_driver(facts.probe),
        *judge_gpus(facts.probe, facts.cuda_visible_devices),
        *judge_shm(facts.shm_bytes),
        *judge_ports(facts.ports),
        *judge_hf(facts),
        *judge_stack(facts.pins, facts.installed),
    ]
