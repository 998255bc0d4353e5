"""trlstack.commands.verify.command: `trlstack verify`'s exit codes and settings."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from trlstack.cli import main as trlstack_main
from trlstack.commands.verify.layout import LOCK_LABEL, SBOM_LABEL

from .built_image import SITE


def test_cli_exit_codes(image: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert trlstack_main(["verify", "--root", str(image), "--only", "python", "--only", "debian"]) == 0
    assert "OK" in capsys.readouterr().out
    (image / SITE / "demo/__init__.py").write_bytes(b"VALUE = 3\n")
    assert trlstack_main(["verify", "--root", str(image), "--only", "python"]) == 1
    assert "demo/__init__.py: sha256 differs" in capsys.readouterr().out
    assert trlstack_main(["verify", "--root", str(image / "nowhere")]) == 1
    assert "no such folder" in capsys.readouterr().err


def test_each_setting_may_come_from_its_variable(
    image: Path, clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_env.setenv("TRLSTACK_VERIFY_ROOT", str(image))
    clean_env.setenv("TRLSTACK_VERIFY_ONLY", "python, debian")
    assert trlstack_main(["verify"]) == 0
    out = capsys.readouterr().out
    assert f"trlstack verify: {image}: OK" in out
    assert "Python distributions" in out and "Debian packages match" in out and "kernel cache" not in out
    assert trlstack_main(["verify", "--only", "kernels"]) == 0  # a flag replaces the variable's list
    out = capsys.readouterr().out
    assert "kernel cache" in out and "Python distributions" not in out


def test_one_place_only_and_bad_values_name_their_source(
    image: Path, clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert trlstack_main(["verify", "--root", str(image), "--tarball", "image.tar"]) == 1
    assert "not allowed with argument --root" in capsys.readouterr().err
    clean_env.setenv("TRLSTACK_VERIFY_IMAGE", "trlstack:test")
    assert trlstack_main(["verify", "--root", str(image)]) == 1
    assert "--root and --image are both set" in capsys.readouterr().err
    clean_env.setenv("TRLSTACK_VERIFY_ONLY", "python,everything")
    assert trlstack_main(["verify", "--root", str(image)]) == 1
    assert "TRLSTACK_VERIFY_ONLY='python,everything' is not valid for --only" in capsys.readouterr().err
    clean_env.delenv("TRLSTACK_VERIFY_ONLY")
    assert trlstack_main(["verify", "--only", "everything"]) == 1
    assert "argument --only: 'everything' is not one of provenance, python" in capsys.readouterr().err


def test_help_names_each_variable(clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        trlstack_main(["verify", "--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for variable in ("ROOT", "IMAGE", "TARBALL", "EXPECT_LOCK_SHA256", "EXPECT_SBOM_SHA256"):
        assert f"[env TRLSTACK_VERIFY_{variable}; default: unset]" in text
    assert "[env TRLSTACK_VERIFY_ONLY, comma-separated; default: none]" in text


def test_an_image_is_checked_in_a_throwaway_container_with_its_labels(
    clean_env: pytest.MonkeyPatch,
) -> None:
    ran: list[list[str]] = []

    def docker(argv: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        ran.append(argv)
        labels = json.dumps({LOCK_LABEL: "1" * 64, SBOM_LABEL: "2" * 64, "other": "x"})
        return subprocess.CompletedProcess(argv, 0, stdout=labels, stderr="")

    clean_env.setattr(subprocess, "run", docker)
    assert trlstack_main(["verify", "--image", "trlstack:test", "--only", "python"]) == 0
    assert ran[0][:3] == ["docker", "image", "inspect"] and ran[0][-1] == "trlstack:test"
    assert (
        ran[1]
        == (
            "docker run --rm --network none --entrypoint trlstack trlstack:test verify "
            f"--expect-lock-sha256 {'1' * 64} --expect-sbom-sha256 {'2' * 64} --only python"
        ).split()
    )


def test_an_image_that_is_not_there_is_named(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def docker(argv: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(argv, 1, stdout="", stderr="No such image: nowhere:1")

    clean_env.setattr(subprocess, "run", docker)
    assert trlstack_main(["verify", "--image", "nowhere:1"]) == 1
    assert "no local image 'nowhere:1' (No such image: nowhere:1); build it or" in capsys.readouterr().err


@pytest.mark.skipif(Path("/opt/trlstack").exists(), reason="this machine is a trlstack image")
def test_on_a_host_verify_says_what_it_checks_and_how_to_run_it_there(
    clean_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert trlstack_main(["verify"]) == 1
    captured = capsys.readouterr()
    assert "this machine is not a trlstack image (it has no /opt/trlstack)" in captured.err
    assert "`docker run --rm IMAGE trlstack verify`" in captured.err and "--image IMAGE" in captured.err
    assert "differences" not in captured.err and not captured.out  # nothing checked, nothing reported


def test_an_image_is_told_by_its_venv_kernel_cache_or_provenance(tmp_path: Path, image: Path) -> None:
    from trlstack.commands.verify.command import is_image

    assert is_image(str(image)) and not is_image(str(tmp_path))
    (tmp_path / "opt" / "trlstack" / "kernels").mkdir(parents=True)  # the build's kernels stage
    assert is_image(str(tmp_path))
