"""doctor's edge and command line: gather the machine's facts once, print the findings, exit 0 unless
--strict."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping

from trlstack import __version__
from trlstack.commands.doctor.judge import MIN_DRIVER, Facts, Finding, judge
from trlstack.defaults import Env
from trlstack.errors import UsageError
from trlstack.options import Setting, add_setting, add_settings, settings_from
from trlstack.plan.rules import check_ports
from trlstack.ports import Ports, port_problem
from trlstack.run.sharding import read_model_config


def render(findings: list[Finding]) -> str:
    lines = [f"trlstack doctor {__version__}"]
    width = max(len(finding.topic) for finding in findings)
    for finding in findings:
        lines.append(f"{finding.level:<4}  {finding.topic:<{width}}  {finding.message}")
        if finding.fix and finding.level != "ok":
            lines.append(f"{'':<4}  {'':<{width}}  fix: {finding.fix}")
    problems = [finding for finding in findings if finding.level in ("warn", "fail")]
    lines.append(f"{len(problems)} problem{'' if len(problems) == 1 else 's'} found")
    return "\n".join(lines) + "\n"


def exit_code(findings: list[Finding], strict: bool) -> int:
    """0 unless --strict and something is wrong: doctor reports, it does not gate, unless asked to."""
    return int(strict and any(finding.level in ("warn", "fail") for finding in findings))


# The edge: look at the machine. -----------------------------------------------------------------------------


def _existing_ancestor(path: str) -> str:
    path = os.path.abspath(path)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return path


def gather_facts(ports: tuple[int, ...], environ: Mapping[str, str] | None = None) -> Facts:
    import shutil

    from trlstack.caches import hf_hub_cache
    from trlstack.gpus import probe
    from trlstack.stack import installed_version, pinned_stack

    environ = os.environ if environ is None else environ
    try:
        stat = os.statvfs("/dev/shm")
        shm_bytes: int | None = stat.f_frsize * stat.f_blocks
    except OSError:
        shm_bytes = None
    cache = hf_hub_cache(environ)
    anchor = _existing_ancestor(cache)
    pins = pinned_stack()
    return Facts(
        probe=probe(),
        cuda_visible_devices=environ.get(Env.CUDA_VISIBLE_DEVICES),
        shm_bytes=shm_bytes,
        ports={port: port_problem(port) for port in ports},
        hf_cache=cache,
        hf_cache_exists=os.path.isdir(cache),
        hf_cache_writable=os.access(anchor, os.W_OK),
        hf_cache_free_bytes=shutil.disk_usage(anchor).free,
        hf_offline=environ.get(Env.HF_HUB_OFFLINE),
        pins=pins,
        installed={name: installed_version(name) for name in pins},
    )


STRICT = Setting(None, "exit 1 when any warning or failure is found", kind="switch")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        f"Check this machine for the stack: NVIDIA driver (CUDA 13 needs >= {MIN_DRIVER}), GPUs and their "
        "compute capability, /dev/shm, the vLLM ports, the Hugging Face cache and offline state, and the "
        "installed versions against the pins. Exit 0 unless --strict."
    )
    add_settings(parser, Ports, os.environ)
    add_setting(parser, "strict", STRICT, False, os.environ)


def memory_finding(facts: Facts, environ: Mapping[str, str]) -> list[Finding]:
    """The trainer's memory estimate for the model in TRLSTACK_MODEL, when it is a local folder with a
    config.json, on the default plan for this machine's visible GPUs."""
    from trlstack.gpus import select_visible
    from trlstack.plan import make_plan
    from trlstack.run.sharding import summary

    model = environ.get(Env.MODEL, "")
    if not model or not os.path.isfile(os.path.join(model, "config.json")):
        return []
    try:
        visible = select_visible(facts.probe.gpus, facts.cuda_visible_devices, facts.probe.mig)
        plan = make_plan(visible) if visible else None
        config = read_model_config(model, environ)
    except UsageError as error:
        return [Finding("warn", "memory", f"{Env.MODEL}={model}: {error}")]
    if plan is None:
        return [Finding("info", "memory", f"{Env.MODEL}={model}: no GPU to estimate for")]
    share = plan.vllm_share_of_training_gpus
    lines = summary(config, plan.train, plan.num_processes, share)
    level = "warn" if any(line.startswith("sharding: refused") for line in lines) else "info"
    return [Finding(level, "memory", f"{Env.MODEL}={model} on the default plan: " + "; ".join(lines))]


def run(args: argparse.Namespace) -> int:
    ports = settings_from(Ports, args)
    check_ports({"--port": ports.port, "--group-port": ports.group_port})
    facts = gather_facts((ports.port, ports.group_port))
    findings = judge(facts) + memory_finding(facts, os.environ)
    sys.stdout.write(render(findings))
    return exit_code(findings, args.strict)
