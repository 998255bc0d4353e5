"""The compose files say each thing once: every service, named volume, secret and network is declared in one
file only (the stack's services, volumes and secret in compose/stack.yaml, what only one layout has in that
layout's file), so a layout says only what it changes and the CPU smoke override only changes services the
stack declares. compose reads compose/layouts.yaml whole in every layout, so the GPU sets a layout's roles
read are required in that layout's own file, never there."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from trlstack.plan.env_check import LAYOUT_VARIANTS

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "compose"
FILES = [REPO / "compose.yaml", *sorted(COMPOSE.glob("*.yaml"))]
SMOKE = COMPOSE / "smoke.yaml"  # passed with -f after compose.yaml: it changes services declared elsewhere
LAYOUTS = COMPOSE / "layouts.yaml"
SECTIONS = ("services", "volumes", "secrets", "networks")
GPU_SETS = ("SERVE_GPUS", "TRAIN_GPUS")


class ComposeLoader(yaml.SafeLoader):
    """YAML as compose reads it: merge keys resolved, its tags (!override, !reset) read as what they tag."""


def untagged(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_scalar(node)  # type: ignore[arg-type]


ComposeLoader.add_multi_constructor("!", untagged)


def load(path: Path) -> dict[str, Any]:
    return yaml.load(path.read_text(), Loader=ComposeLoader) or {}  # noqa: S506 (a SafeLoader)


def declares(entry: Any) -> bool:
    """A service entry that says where the service comes from (an image, a build or what it extends), as
    against one that only changes a service declared elsewhere."""
    return isinstance(entry, dict) and bool({"image", "build", "extends"} & entry.keys())


def entries() -> Iterator[tuple[Path, str, str, Any]]:
    for path in FILES:
        model = load(path)
        for section in SECTIONS:
            for name, entry in (model.get(section) or {}).items():
                yield path, section, name, entry


def declared() -> dict[tuple[str, str], list[str]]:
    found: dict[tuple[str, str], list[str]] = {}
    for path, section, name, entry in entries():
        if section == "services" and not declares(entry):
            continue  # a change: only the smoke override may make one (below)
        found.setdefault((section, name), []).append(str(path.relative_to(REPO)))
    return found


def test_the_files_are_read():
    services = {name for _, section, name, _ in entries() if section == "services"}
    assert {
        "plan-check",
        "vllm",
        "grpo",
        "async-grpo",
        "async-grpo-check",
        "tiny",
        "shared-trainer",
    } <= services
    assert {("volumes", "hf-cache"), ("secrets", "hf_token"), ("networks", "private")} <= set(declared())


def test_each_service_volume_secret_and_network_is_declared_in_one_file():
    repeated = {f"{section} {name}": files for (section, name), files in declared().items() if len(files) > 1}
    assert not repeated, f"declared in more than one file (say it once; layouts say what differs): {repeated}"


def test_only_the_smoke_override_changes_services_and_only_ones_declared_elsewhere():
    services = {name for section, name in declared() if section == "services"}
    for path, section, name, entry in entries():
        if section == "services" and not declares(entry):
            assert path == SMOKE, (
                f"{path.name} changes {name}: declare it once, layout changes in layouts.yaml"
            )
            assert name in services, f"{path.name} changes {name}, which no compose file declares"


def strings(value: Any) -> Iterator[str]:
    """Every string of a loaded compose value, keys aside."""
    if isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)
    elif isinstance(value, str):
        yield value


def test_the_layouts_file_requires_no_variable():
    # compose interpolates the whole file for whichever layout runs: a ${X:?} there would stop the layouts
    # that do without X (colocate has no SERVE_GPUS).
    required = [text for text in strings(load(LAYOUTS)) if re.search(r"\$\{\w+:?\?", text)]
    assert not required


@pytest.mark.parametrize("layout", LAYOUT_VARIANTS)
def test_a_layout_requires_the_gpu_sets_its_roles_read(layout):
    # Required in compose/<layout>.yaml, which compose reads for that layout only: without them compose stops
    # with the message naming the fix (tests/compose: test_without_a_plan_compose_names_the_fix).
    roles = [entry for name, entry in load(LAYOUTS)["services"].items() if name.startswith(f"{layout}-")]
    assert roles, f"compose/layouts.yaml has no {layout}-* role"
    read = {key for text in strings(roles) for key in GPU_SETS if re.search(rf"\$\{{{key}\b", text)}
    plan = load(COMPOSE / f"{layout}.yaml")["x-plan"]
    fix = "is not set; write .env with `trlstack plan --format env -o .env` or copy .env.example"
    assert plan == {key: f"${{{key}:?{key} {fix}}}" for key in read}


def test_up_sh_knows_the_layouts_compose_has():
    # scripts/up.sh names a misspelled TRLSTACK_VARIANT through the plan check before compose fails on it; its
    # list of the layouts is plan/env_check.py's.
    text = (REPO / "scripts" / "up.sh").read_text()
    match = re.search(r"^\s*([a-z]+(?: \| [a-z]+)*)\) ;;$", text, re.MULTILINE)
    assert match and set(match.group(1).split(" | ")) == set(LAYOUT_VARIANTS)
