"""docker/kernel-cache.py, the image build's Kernels Hub cache step, where it decides without the Hub: the
modes, a committed lock that no longer fits pyproject.toml, the one line an unreachable Hub gives (the Hub's
answer is the test double), and the cache it leaves for offline loading. Locking and downloading against a
stand-in Hub run in the image build: tests/image/test_kernel_bake.py."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = '[tool.kernels.dependencies]\n"org/attn2" = 3\n"org/attn3" = 1\n'
SHA = "a" * 40
LATER = "train loads them from the Hub at run time where it is reachable, else uses sdpa"


def load_script():
    spec = importlib.util.spec_from_file_location(
        "trlstack_image_kernel_cache", REPO / "docker/kernel-cache.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def script():
    return load_script()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels/pyproject.toml").write_text(PYPROJECT)
    return tmp_path / "kernels"


def run(script, project: Path, mode: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, Path]:
    outcome = project.parent / "outcome"
    code = script.main(
        [
            "--mode",
            mode,
            "--project",
            str(project),
            "--cache",
            str(project.parent / "cache"),
            "--outcome",
            str(outcome),
        ]
    )
    return code, capsys.readouterr().err, outcome


def test_mode_0_bakes_none_and_says_so_in_one_line(script, project, capsys) -> None:
    code, err, outcome = run(script, project, "0", capsys)
    assert code == 0
    assert err.splitlines() == [
        "kernels: baked no Hub kernels: WITH_KERNEL_CACHE=0; to bake them, build with WITH_KERNEL_CACHE=auto "
        f"(the default); meanwhile {LATER}"
    ]
    assert sorted(p.name for p in outcome.iterdir()) == ["kernels.txt"]
    assert (outcome / "kernels.txt").read_text() == err
    assert list((project.parent / "cache").iterdir()) == []


def test_an_unreachable_hub_bakes_none_in_auto_and_fails_mode_1(script, project, capsys, monkeypatch) -> None:
    asked = []
    monkeypatch.setattr(script, "hub_unreachable", lambda repo: asked.append(repo) or "ConnectError: refused")
    monkeypatch.setattr(script, "hub_endpoint", lambda: "http://127.0.0.1:9")
    code, err, outcome = run(script, project, "auto", capsys)
    assert code == 0 and asked == ["org/attn2"]
    assert err.splitlines() == [
        "kernels: baked no Hub kernels: http://127.0.0.1:9 could not be reached (ConnectError: refused); "
        "to bake them, build again where the Hub (or a mirror named by HF_ENDPOINT) is reachable; "
        f"meanwhile {LATER}"
    ]
    assert not (outcome / "kernels.lock").exists()
    code, err, _ = run(script, project, "1", capsys)
    assert code == 1
    assert err.startswith("kernels: WITH_KERNEL_CACHE=1 but http://127.0.0.1:9 could not be reached")


def test_a_mode_that_is_none_of_the_three_is_refused(script, project, capsys) -> None:
    code, err, _ = run(script, project, "yes", capsys)
    assert (code, err) == (1, "kernels: WITH_KERNEL_CACHE=yes: use auto (the default), 1 or 0\n")


def test_a_committed_lock_must_lock_what_pyproject_lists(script, project, capsys, monkeypatch) -> None:
    monkeypatch.setattr(script, "hub_unreachable", lambda repo: pytest.fail("the Hub is not asked"))
    (project / "kernels.lock").write_text(json.dumps([{"repo_id": "org/attn2", "sha": SHA, "variants": {}}]))
    code, err, _ = run(script, project, "auto", capsys)
    assert code == 1
    assert err == (
        "kernels: docker/kernels/kernels.lock locks ['org/attn2'] but docker/kernels/pyproject.toml lists "
        "['org/attn2', 'org/attn3']: delete the lock and build where the Hub is reachable (docker/build.sh "
        "prints the new one to commit)\n"
    )


def test_the_cache_is_left_ready_for_offline_loading(script, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    folder = cache / "kernels--org--attn2"
    (folder / "trees").mkdir(parents=True)
    (folder / "trees" / f"{SHA}.json").write_text("{}")
    (folder / "snapshots" / SHA / "build" / "torch211-cxx11-cu130-x86_64-linux").mkdir(parents=True)
    lock = [
        {"repo_id": "org/attn2", "sha": SHA, "variants": {}},
        {"repo_id": "org/gone", "sha": SHA, "variants": {}},
    ]
    script.ready_offline(cache, lock, {"org/attn2": 3})
    assert (folder / "refs" / "v3").read_text() == SHA  # what kernels resolves version 3 to offline
    assert not (
        folder / "trees"
    ).exists()  # a listing of the variants not baked would make the snapshot incomplete
    assert sorted(p.name for p in cache.iterdir()) == ["kernels--org--attn2"]
    assert script.baked_line(cache, lock, fresh=True) == (
        f"kernels: baked org/attn2@{SHA[:12]} (torch211-cxx11-cu130-x86_64-linux); org/gone@{SHA[:12]} "
        "(no variant), locked now from docker/kernels/pyproject.toml"
    )
