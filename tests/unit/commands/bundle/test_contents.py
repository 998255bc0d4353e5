"""trlstack.commands.bundle.contents: what goes in for which target, and the files that say so."""

from __future__ import annotations

import pytest
from trlstack.commands.bundle.contents import (
    OPTIONAL,
    Pin,
    applies,
    check_without,
    parse_export,
    parse_freeze,
    plan_bundle,
    render_env,
    render_report,
    render_requirements,
)
from trlstack.commands.bundle.target import marker_environment
from trlstack.commands.bundle.tools import export
from trlstack.errors import UsageError

from .conftest import ROOT, needs_uv

EXPORT = """\
accelerate==1.15.0 ; sys_platform == 'linux' \\
    --hash=sha256:aaa \\
    --hash=sha256:bbb
    # via trl
networkx==3.6.1 ; python_full_version < '3.12' and sys_platform == 'linux' \\
    --hash=sha256:ccc
networkx==3.7 ; python_full_version >= '3.12' and sys_platform == 'linux' \\
    --hash=sha256:ddd
Torch==2.11.0 ; sys_platform == 'linux' \\
    --hash=sha256:eee
flashinfer_python==0.6.13 ; platform_machine == 'x86_64' \\
    --hash=sha256:fff
"""


def target(python="3.12", platform="manylinux_2_34_x86_64"):
    return marker_environment(python, platform)


def test_parse_export_reads_pins_markers_and_hashes():
    pins = parse_export(EXPORT)
    assert [p.name for p in pins] == ["accelerate", "networkx", "networkx", "torch", "flashinfer-python"]
    assert pins[0] == Pin("accelerate", "1.15.0", 'sys_platform == "linux"', ("sha256:aaa", "sha256:bbb"))


def test_parse_export_rejects_unpinned_lines():
    with pytest.raises(UsageError, match="name==version"):
        parse_export("vllm>=0.25\n")


def test_markers_follow_the_target_python_not_this_one():
    pins = parse_export(EXPORT)
    on_312 = {p.version for p in pins if p.name == "networkx" and applies(p, target("3.12"))}
    on_311 = {p.version for p in pins if p.name == "networkx" and applies(p, target("3.11"))}
    assert (on_312, on_311) == ({"3.7"}, {"3.6.1"})


def test_markers_follow_the_target_cpu():
    flashinfer = parse_export(EXPORT)[-1]
    assert applies(flashinfer, target(platform="manylinux_2_34_x86_64"))
    assert not applies(flashinfer, target(platform="manylinux_2_34_aarch64"))


def test_present_packages_at_the_locked_release_stay_out():
    pins = parse_export(EXPORT)
    present = parse_freeze(
        "Torch==2.11.0+cu130\naccelerate==1.14.0\n-e git+https://x#egg=y\nfoo @ file:///f\n"
    )
    plan = plan_bundle(pins, pins, target(), present)
    assert [p.name for p, _ in plan.present] == ["torch"]  # a local build label is the same release
    assert [p.name for p in plan.included] == [
        "accelerate",
        "networkx",
        "flashinfer-python",
    ]  # older accelerate
    assert plan.pruned == () and dict(plan.env) == {}


def test_keep_target_versions_leaves_out_what_the_target_has_at_any_version():
    pins = parse_export(EXPORT)
    present = parse_freeze("accelerate==1.14.0\nnetworkx==3.5\n")
    plan = plan_bundle(pins, pins, target(), present, any_version=True)
    assert [(p.name, have) for p, have in plan.present] == [("accelerate", "1.14.0"), ("networkx", "3.5")]
    assert [p.name for p in plan.included] == ["torch", "flashinfer-python"]


def test_optional_packages_left_out_by_name_ask_for_their_variables():
    locked = parse_export(EXPORT)
    kept = [p for p in locked if p.name != "flashinfer-python"]
    plan = plan_bundle(locked, kept, target(), {}, ["flashinfer-python"])
    assert plan.pruned == ("flashinfer-python",)
    assert dict(plan.env) == {"VLLM_USE_FLASHINFER_SAMPLER": "0"}
    assert "flashinfer-python: left out with --without" in render_report(plan)
    assert "VLLM_USE_FLASHINFER_SAMPLER=0" in render_env(plan.env)


def test_without_rejects_unknown_names_with_a_suggestion():
    assert check_without(["FlashInfer_Python"], ["flashinfer-python"]) == ["flashinfer-python"]
    with pytest.raises(UsageError, match="did you mean flashinfer-python"):
        check_without(["flashinfr-python"], ["flashinfer-python", "torch"])


def test_without_refuses_an_empty_name():
    with pytest.raises(UsageError, match="--without needs a package name"):
        check_without([""], ["flashinfer-python"])


@needs_uv
def test_every_optional_package_is_in_the_lock():
    assert set(OPTIONAL) <= {p.name for p in export(ROOT, ["gpu"], [])}


def test_requirements_keep_every_hash_and_drop_markers():
    text = render_requirements(parse_export(EXPORT)[:1])
    assert text == "accelerate==1.15.0 \\\n    --hash=sha256:aaa \\\n    --hash=sha256:bbb\n"
    assert parse_export(text) == [Pin("accelerate", "1.15.0", "", ("sha256:aaa", "sha256:bbb"))]
