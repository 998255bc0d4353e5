"""The pinned stack comes from trlstack's own metadata; docker/README's table repeats it and must agree."""

from __future__ import annotations

import re
from pathlib import Path

from trlstack.stack import GET_GPU_STACK, parse_pins, pinned_stack

README = Path(__file__).resolve().parents[2] / "docker" / "README.md"


def test_only_exact_pins_of_the_gpu_extra_count():
    requires = [
        'trl[vllm]==1.16.0; extra == "gpu"',
        'Torch == 2.11.0 ; extra == "gpu" and sys_platform == "linux"',
        'datasets>=4.7.0; extra == "gpu"',  # a range is not a pin
        "pyyaml==6.0.2",  # the light install, not the extra
        'ruff==0.6; extra == "dev"',
        "not a requirement",
    ]
    assert parse_pins(requires) == {"trl": "1.16.0", "torch": "2.11.0"}


def test_readme_shows_the_pinned_versions():
    section = README.read_text().split("## The pinned stack", 1)[1].split("\n## ", 1)[0]
    table = dict(re.findall(r"^\| ([a-z][a-z0-9-]*) \| (\d[\w.]*)", section, re.MULTILINE))
    pins = pinned_stack()
    assert table == {name: version for name, version in pins.items() if name in table}
    assert set(table) == set(pins)


REPO = Path(__file__).resolve().parents[2]


def test_the_way_to_the_gpu_stack_names_what_works_from_a_checkout():
    assert "`uv sync --extra gpu`" in GET_GPU_STACK and "trlstack image" in GET_GPU_STACK
    assert "`trlstack bundle`" in GET_GPU_STACK
    assert "\ngpu = [" in (REPO / "pyproject.toml").read_text()  # the extra it names


def test_no_message_or_page_tells_to_install_trlstack_from_an_index():
    # trlstack is on no package index: an install hint must name the image, the checkout or a bundle
    # (stack.GET_GPU_STACK), never trlstack by name from an index.
    found = []
    for folder in ("entrypoints", "scripts", "docker", "compose", "slurm", "nix", "bench", "tests"):
        for path in (REPO / folder).rglob("*"):
            if path.suffix not in (".py", ".sh", ".md", ".yaml", ".nix", ".toml") or not path.is_file():
                continue
            for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                if re.search(r"pip3? install [^|;&]*\btrlstack\b(?!/)", line) and "finds nothing" not in line:
                    found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    found += [
        f"README.md: {line}" for line in (REPO / "README.md").read_text().splitlines() if "trlstack[" in line
    ]
    assert not found, "\n".join(found)
