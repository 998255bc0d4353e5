"""The pinned stack comes from trlstack's own metadata; docker/README's table repeats it and must agree."""

from __future__ import annotations

import re
from pathlib import Path

from trlstack.stack import parse_pins, pinned_stack

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
