"""A GPU plan rendered: a table for people, the `.env` keys compose reads (merged into an existing file), or
JSON."""

from __future__ import annotations

import io
from collections.abc import Sequence

from trlstack.defaults import Env
from trlstack.errors import UsageError
from trlstack.plan import COLOCATE_VARIANT, ENV_HEADER, ENV_KEYS, Plan
from trlstack.plan.env_check import check_variant
from trlstack.transfer import IPC
from trlstack.transfer import describe as describe_transfer

FORMATS = ("table", "env", "json")


def _processes(plan: Plan) -> str:
    return f"{plan.num_processes} process" + ("es" if plan.num_processes != 1 else "")


def _summary(plan: Plan) -> str:
    processes = _processes(plan)
    if plan.colocate:
        return f"training on GPU {plan.env()[Env.PLAN_TRAIN_GPUS]} ({processes}), no server; {layout(plan)}"
    summary = (
        f"vLLM serves on GPUs {','.join(map(str, plan.serve_indices))} "
        f"(tensor-parallel {plan.tensor_parallel_size} x data-parallel {plan.data_parallel_size}), "
        f"training on GPUs {','.join(map(str, plan.train_indices))} ({processes})"
    )
    if plan.share_gpus:
        summary += f"; {layout(plan)}"
    return summary


def layout(plan: Plan) -> str:
    """The GPU layout in words: why colocate, what sharing costs, or that the sets are disjoint; how the
    weights reach the server; why the plan chose the layout, where it chose."""
    if plan.colocate:
        return f"colocate, vLLM inside the trainer: {plan.why}"
    transfer = describe_transfer(plan.weight_transfer, plan.share_gpus)
    if plan.weight_transfer == IPC:
        transfer += " (--weight-transfer nccl for NCCL sockets)"
    if plan.share_gpus:
        shared = (
            f"shared GPUs: vLLM takes {plan.gpu_memory_utilization:g} of each GPU's memory, the trainer the "
            f"rest; {transfer}"
        )
        return f"{shared}; chosen for one GPU: {plan.why}" if plan.why else shared
    return f"disjoint GPU sets: {transfer}"


def render_env(plan: Plan) -> str:
    """The plan as `.env` lines for compose, under a comment header."""
    lines = [f"{ENV_HEADER}: {_summary(plan)}."]
    lines += [f"{key}={value}" for key, value in plan.env().items()]
    return "\n".join(lines) + "\n"


def merge_env(existing: str, plan: Plan) -> str:
    """An existing .env with the plan's keys replaced and every other line the user wrote kept as it was.

    python-dotenv reads the file as compose does: `export KEY=...`, quoted values over several lines and
    comments are entries of their own, kept or replaced whole. TRLSTACK_VARIANT is the user's (shared or
    isolated, kept) except where a plan chose it: a colocate plan writes it, and a server plan drops the
    colocate an earlier plan wrote, leaving compose's default layout (shared). A colocate plan over a server
    layout the user chose is refused, naming both ways on: nothing the user wrote is dropped unseen.
    """
    from dotenv.parser import parse_stream

    entries = list(parse_stream(io.StringIO(existing)))
    variants = [entry.value or "" for entry in entries if entry.key == Env.VARIANT]
    chosen = [check_variant({Env.VARIANT: value}) for value in variants]  # a misspelled one named so
    if plan.colocate and chosen and chosen[-1] not in ("", COLOCATE_VARIANT):
        # the isolated layout keeps the roles' IPC namespaces apart: its server beside the trainer takes NCCL
        nccl = " --weight-transfer nccl" if chosen[-1] == "isolated" else ""
        raise UsageError(
            f"{Env.VARIANT}={chosen[-1]} in the .env runs compose's {chosen[-1]} layout, with a vLLM "
            "server, and the plan for this machine of one GPU runs none (colocate: vLLM inside the "
            f"trainer). Keep your layout with a server beside the trainer: `trlstack plan --share-gpus{nccl} "
            f"--format env -o .env`; or remove the {Env.VARIANT} line for colocate."
        )

    def planned(key: str | None, value: str | None) -> bool:
        if key == Env.VARIANT:
            return plan.colocate or (value or "").strip() == COLOCATE_VARIANT
        return key in ENV_KEYS

    kept = "".join(
        entry.original.string
        for entry in entries
        if not planned(entry.key, entry.value) and not entry.original.string.lstrip().startswith(ENV_HEADER)
    ).splitlines()
    while kept and not kept[-1].strip():
        kept.pop()
    return "\n".join(kept) + ("\n\n" if kept else "") + render_env(plan)


def _gpu_details(plan: Plan) -> list[dict[str, object]]:
    roles = [("serve", gpu) for gpu in plan.serve] + [("train", gpu) for gpu in plan.train]
    return [
        {
            "index": gpu.index,
            "role": role,
            "uuid": gpu.uuid,
            "name": gpu.name,
            "compute_capability": gpu.capability,
        }
        for role, gpu in roles
    ]


def render_json(plan: Plan) -> str:
    """The plan as JSON: the sizes, the .env keys, and each GPU's role (with UUID and name when known)."""
    import json

    document = {
        "vllm_mode": "colocate" if plan.colocate else "server",
        "serve_gpus": list(plan.serve_indices),
        "train_gpus": list(plan.train_indices),
        "tensor_parallel_size": plan.tensor_parallel_size,
        "data_parallel_size": plan.data_parallel_size,
        "num_processes": plan.num_processes,
        "vllm_port": plan.port,
        "vllm_group_port": plan.group_port,
        "share_gpus": plan.share_gpus,
        "gpu_memory_utilization": plan.gpu_memory_utilization,
        "weight_transfer": None if plan.colocate else plan.weight_transfer,
        "env": plan.env(),
        "layout": layout(plan),
        "gpus": _gpu_details(plan),
    }
    return json.dumps(document, indent=2) + "\n"


def _columns(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows
    ]


def _server_rows(plan: Plan) -> list[tuple[str, ...]]:
    return [
        ("role", "CUDA_VISIBLE_DEVICES", "layout", "port"),
        (
            "serve",
            plan.env()[Env.PLAN_SERVE_GPUS],
            f"vLLM tensor-parallel {plan.tensor_parallel_size} x data-parallel {plan.data_parallel_size}, "
            f"{plan.gpu_memory_utilization:g} of each GPU's memory",
            f"{plan.port} (HTTP API)",
        ),
        (
            "train",
            plan.env()[Env.PLAN_TRAIN_GPUS],
            f"accelerate, {_processes(plan)}",
            "- (CUDA IPC: no port)"
            if plan.weight_transfer == IPC
            else f"{plan.group_port} (NCCL weight transfer)",
        ),
    ]


def _colocate_rows(plan: Plan) -> list[tuple[str, ...]]:
    return [
        ("role", "CUDA_VISIBLE_DEVICES", "layout"),
        ("serve", "-", "none: no vLLM server"),
        (
            "train",
            plan.env()[Env.PLAN_TRAIN_GPUS],
            f"accelerate, {_processes(plan)}, vLLM inside it (train --vllm-mode colocate)",
        ),
    ]


def render_table(plan: Plan) -> str:
    """The plan for people: one line per role, the layout and why, then one line per GPU when its name or
    UUID is known."""
    rows = _colocate_rows(plan) if plan.colocate else _server_rows(plan)
    lines = [*_columns(rows), "", f"layout: {layout(plan)}"]
    details = _gpu_details(plan)
    if any(gpu["uuid"] or gpu["name"] for gpu in details):
        gpu_rows: list[tuple[str, ...]] = [("GPU", "role", "name", "capability", "UUID")]
        gpu_rows += [
            tuple(
                "-" if gpu[key] is None else str(gpu[key])
                for key in ("index", "role", "name", "compute_capability", "uuid")
            )
            for gpu in details
        ]
        lines += ["", *_columns(gpu_rows)]
    return "\n".join(lines) + "\n"


def render(plan: Plan, fmt: str) -> str:
    """The plan in one of FORMATS."""
    renderers = {"table": render_table, "env": render_env, "json": render_json}
    if fmt not in renderers:
        raise UsageError(f"unknown plan format {fmt!r}; choose one of {', '.join(FORMATS)}.")
    return renderers[fmt](plan)
