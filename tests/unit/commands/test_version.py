"""`trlstack version`: trlstack's version, and the pinned stack beside what is installed."""

from __future__ import annotations

from trlstack import __version__
from trlstack.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_version_prints_the_version_and_every_pin(capsys, monkeypatch):
    # A pin no environment installs stands for a missing package, wherever the suite runs (light or gpu venv).
    pins = {"trlstack-absent-pkg": "1.0", "pyyaml": "6.0.4"}
    monkeypatch.setattr("trlstack.commands.version.pinned_stack", lambda: pins)
    code, out, _ = run(capsys, "version")
    lines = out.splitlines()
    assert code == 0 and lines[0] == f"trlstack {__version__}" and lines[1].startswith("python 3.")
    assert "trlstack-absent-pkg  1.0       installed: not installed" in out
    assert "pyyaml               6.0.4     installed: 6.0" in out


def test_version_reads_the_pins_from_the_installed_package(capsys):
    code, out, _ = run(capsys, "version")
    for name, version in [
        ("trl", "1.16.0"),
        ("vllm", "0.25.0"),
        ("torch", "2.11.0"),
        ("transformers", "5.17.0"),
    ]:
        assert any(line.split()[:2] == [name, version] for line in out.splitlines())
