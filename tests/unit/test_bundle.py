"""trlstack.bundle: the decisions (what goes in, for which target) and the files it writes for the target."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from trlstack import bundle
from trlstack.bundle import Pin
from trlstack.cli import main
from trlstack.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]

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
    return bundle.marker_environment(python, platform)


def test_parse_export_reads_pins_markers_and_hashes():
    pins = bundle.parse_export(EXPORT)
    assert [p.name for p in pins] == ["accelerate", "networkx", "networkx", "torch", "flashinfer-python"]
    assert pins[0] == Pin("accelerate", "1.15.0", 'sys_platform == "linux"', ("sha256:aaa", "sha256:bbb"))


def test_parse_export_rejects_unpinned_lines():
    with pytest.raises(UsageError, match="name==version"):
        bundle.parse_export("vllm>=0.25\n")


def test_markers_follow_the_target_python_not_this_one():
    pins = bundle.parse_export(EXPORT)
    on_312 = {p.version for p in pins if p.name == "networkx" and bundle.applies(p, target("3.12"))}
    on_311 = {p.version for p in pins if p.name == "networkx" and bundle.applies(p, target("3.11"))}
    assert (on_312, on_311) == ({"3.7"}, {"3.6.1"})


def test_markers_follow_the_target_cpu():
    flashinfer = bundle.parse_export(EXPORT)[-1]
    assert bundle.applies(flashinfer, target(platform="manylinux_2_34_x86_64"))
    assert not bundle.applies(flashinfer, target(platform="manylinux_2_34_aarch64"))


def test_platform_tags_accept_older_glibc_and_legacy_aliases():
    tags = bundle.platform_tags("manylinux_2_28_x86_64")
    assert tags[0] == "manylinux_2_28_x86_64"
    assert {
        "manylinux_2_17_x86_64",
        "manylinux2014_x86_64",
        "manylinux2010_x86_64",
        "manylinux1_x86_64",
    } <= set(tags)
    assert "manylinux_2_29_x86_64" not in tags
    assert "manylinux2010_aarch64" not in bundle.platform_tags("manylinux_2_28_aarch64")


@pytest.mark.parametrize("platform", ["macosx_14_0_arm64", "win_amd64", "manylinux_x86_64"])
def test_non_linux_platforms_are_refused_with_an_example(platform):
    with pytest.raises(UsageError, match="manylinux_2_28_x86_64"):
        bundle.platform_tags(platform)


@pytest.mark.parametrize("version", ["3", "python3.12", "2.7"])
def test_bad_python_versions_are_refused(version):
    with pytest.raises(UsageError, match="e.g. 3.12"):
        bundle.python_tag(version)


def test_present_packages_at_the_locked_release_stay_out():
    pins = bundle.parse_export(EXPORT)
    present = bundle.parse_freeze(
        "Torch==2.11.0+cu130\naccelerate==1.14.0\n-e git+https://x#egg=y\nfoo @ file:///f\n"
    )
    plan = bundle.plan_bundle(pins, pins, target(), present)
    assert [p.name for p, _ in plan.present] == ["torch"]  # a local build label is the same release
    assert [p.name for p in plan.included] == [
        "accelerate",
        "networkx",
        "flashinfer-python",
    ]  # older accelerate
    assert plan.pruned == () and dict(plan.env) == {}


def test_keep_target_versions_leaves_out_what_the_target_has_at_any_version():
    pins = bundle.parse_export(EXPORT)
    present = bundle.parse_freeze("accelerate==1.14.0\nnetworkx==3.5\n")
    plan = bundle.plan_bundle(pins, pins, target(), present, any_version=True)
    assert [(p.name, have) for p, have in plan.present] == [("accelerate", "1.14.0"), ("networkx", "3.5")]
    assert [p.name for p in plan.included] == ["torch", "flashinfer-python"]


def test_keep_target_versions_needs_the_targets_freeze(tmp_path):
    args = parser().parse_args([str(tmp_path / "b"), "--project", str(ROOT), "--keep-target-versions"])
    with pytest.raises(UsageError, match="--exclude-present"):
        bundle.run(args)


def test_missing_uv_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UsageError, match="uv is missing"):
        bundle.run(parser().parse_args([str(tmp_path / "b"), "--project", str(ROOT)]))


def test_optional_packages_left_out_by_name_ask_for_their_variables():
    locked = bundle.parse_export(EXPORT)
    kept = [p for p in locked if p.name != "flashinfer-python"]
    plan = bundle.plan_bundle(locked, kept, target(), {}, ["flashinfer-python"])
    assert plan.pruned == ("flashinfer-python",)
    assert dict(plan.env) == {"VLLM_USE_FLASHINFER_SAMPLER": "0"}
    assert "flashinfer-python: left out with --without" in bundle.render_report(plan)
    assert "VLLM_USE_FLASHINFER_SAMPLER=0" in bundle.render_env(plan.env)


def test_without_rejects_unknown_names_with_a_suggestion():
    assert bundle.check_without(["FlashInfer_Python"], ["flashinfer-python"]) == ["flashinfer-python"]
    with pytest.raises(UsageError, match="did you mean flashinfer-python"):
        bundle.check_without(["flashinfr-python"], ["flashinfer-python", "torch"])


def test_without_refuses_an_empty_name():
    with pytest.raises(UsageError, match="--without needs a package name"):
        bundle.check_without([""], ["flashinfer-python"])


def test_every_optional_package_is_in_the_lock():
    locked = {p.name for p in bundle.export(ROOT, ["gpu"], [])} if shutil.which("uv") else None
    if locked is None:
        pytest.skip("uv is not on PATH")
    assert set(bundle.OPTIONAL) <= locked


def test_requirements_keep_every_hash_and_drop_markers():
    text = bundle.render_requirements(bundle.parse_export(EXPORT)[:1])
    assert text == "accelerate==1.15.0 \\\n    --hash=sha256:aaa \\\n    --hash=sha256:bbb\n"
    assert bundle.parse_export(text) == [Pin("accelerate", "1.15.0", "", ("sha256:aaa", "sha256:bbb"))]


@pytest.mark.parametrize(
    ("text", "size"), [("60M", 60_000_000), ("2Gi", 2 * 2**30), ("512k", 512_000), ("7", 7)]
)
def test_sizes(text, size):
    assert bundle.parse_size(text) == size


@pytest.mark.parametrize("text", ["0", "60 MB extra", "-5M", "sixty"])
def test_bad_sizes(text):
    with pytest.raises(argparse.ArgumentTypeError):
        bundle.parse_size(text)


@pytest.mark.parametrize("fmt", bundle.FORMATS)
def test_install_scripts_are_valid_sh(fmt, tmp_path):
    script = tmp_path / "install.sh"
    script.write_text(bundle.render_install_script(fmt, "3.12", "manylinux_2_34_x86_64"))
    subprocess.run(["sh", "-n", str(script)], check=True)


def parser():
    parser = argparse.ArgumentParser()
    bundle.add_arguments(parser)
    return parser


def test_piece_size_needs_the_site_format(tmp_path):
    args = parser().parse_args([str(tmp_path / "b"), "--piece-size", "60M", "--project", str(ROOT)])
    with pytest.raises(UsageError, match="--format site"):
        bundle.run(args)


def test_an_existing_folder_is_left_alone(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(UsageError, match="not empty"):
        bundle.run(parser().parse_args([str(tmp_path), "--project", str(ROOT)]))
    assert (tmp_path / "keep.txt").read_text() == "mine"


def test_a_folder_without_a_lock_is_refused(tmp_path):
    with pytest.raises(UsageError, match="no uv.lock"):
        bundle.run(parser().parse_args([str(tmp_path / "b"), "--project", str(tmp_path)]))


def _everything_but(names: set[str], tmp_path: Path, version: str = "3.12") -> Path:
    """A freeze listing every locked package except `names`, so the bundle holds only those."""
    here = bundle.marker_environment(version, "manylinux_2_34_x86_64")
    pins = [pin for pin in bundle.export(ROOT, ["gpu"], []) if bundle.applies(pin, here)]
    freeze = tmp_path / "freeze.txt"
    freeze.write_text("".join(f"{p.name}=={p.version}\n" for p in pins if p.name not in names))
    return freeze


needs_index = pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not on PATH")


@needs_index
def test_dry_run_prints_what_the_target_lacks(tmp_path, capsys):
    freeze = _everything_but({"tqdm", "pyyaml"}, tmp_path)
    argv = [str(tmp_path / "b"), "--project", str(ROOT), "--exclude-present", str(freeze)]
    args = parser().parse_args(argv + ["--python-version", "3.12", "--dry-run"])
    assert bundle.run(args) == 0
    out = capsys.readouterr().out
    assert [line.split("==")[0] for line in out.splitlines() if "==" in line] == ["pyyaml", "tqdm"]
    assert not (tmp_path / "b").exists()


@needs_index
def test_the_command_needs_no_without(tmp_path, capsys):
    """README's bundle command, which names no --without: the option's default is no value given empty."""
    argv = ["bundle", str(tmp_path / "b"), "--project", str(ROOT), "--dry-run", "--python-version", "3.12"]
    assert main(argv + ["--platform", "manylinux_2_39_x86_64"]) == 0
    out = capsys.readouterr().out
    assert "\ntorch==" in out and not (tmp_path / "b").exists()
    assert main(argv + ["--without="]) == 1
    assert "--without needs a package name" in capsys.readouterr().err


def python_with_pip() -> tuple[str, str]:
    """An interpreter that has pip (the test's own venv may not), and its X.Y version."""
    # uv's venvs have no pip; the interpreter they were made from usually has.
    base = os.path.join(sys.base_prefix, "bin", "python3")
    for python in (sys.executable, base, shutil.which("python3")):
        if python and subprocess.run([python, "-m", "pip", "--version"], capture_output=True).returncode == 0:
            probe = [python, "-c", "import sys; print(*sys.version_info[:2], sep='.')"]
            return python, subprocess.run(probe, capture_output=True, text=True).stdout.strip()
    pytest.skip("no Python with pip here (python3 -m pip fails)")


@needs_index
@pytest.mark.parametrize("fmt", bundle.FORMATS)
def test_a_small_bundle_installs_offline(fmt, tmp_path):
    """Real uv export, pip download from the index and install.sh, for two small pure-Python packages."""
    python, version = python_with_pip()
    freeze = _everything_but({"tqdm", "tenacity"}, tmp_path, version)
    out = tmp_path / "bundle"
    argv = [str(out), "--project", str(ROOT), "--exclude-present", str(freeze), "--format", fmt]
    argv += ["--without", "vllm", "--python-version", version, "--pip", f"{python} -m pip"]
    if fmt == "site":
        argv += ["--piece-size", "20K"]
    assert bundle.run(parser().parse_args(argv)) == 0
    assert "vllm: left out with --without" in (out / "left-out.txt").read_text()
    assert not out.with_name("bundle.partial").exists()
    env = {"PYTHON": python, "PATH": os.environ["PATH"]}
    if fmt == "wheelhouse":
        site = tmp_path / "site"
        subprocess.run(["sh", str(out / "install.sh"), "--target", str(site)], check=True, env=env)
    else:
        assert len(list(out.glob("site.tar.xz.*"))) >= 2  # split into pieces
        site = tmp_path / "dest"
        subprocess.run(["sh", str(out / "install.sh"), str(site)], check=True, env=env)
        activate = (site / "activate").read_text()
        assert f"PYTHONPATH={site}" in activate
        assert "VLLM_USE_FLASHINFER_SAMPLER" not in activate  # vllm itself was left out
    probe = "import tqdm, tenacity; print(tqdm.__file__)"
    done = subprocess.run(
        [python, "-c", probe], env={"PYTHONPATH": str(site)}, capture_output=True, text=True
    )
    assert done.stdout.startswith(str(site)), done.stderr
