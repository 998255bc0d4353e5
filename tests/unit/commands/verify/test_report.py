"""trlstack.commands.verify.report: each difference and fact on its own line; the count on stderr and exit
1 when anything differs."""

from __future__ import annotations

import pytest
from trlstack.commands.verify.report import Report, print_report


def test_differences_fail_and_are_counted(capsys: pytest.CaptureFixture[str]) -> None:
    report = Report(facts=["2 Debian packages match the SBOM"])
    assert print_report(report, "/") == 0
    assert capsys.readouterr().out.splitlines() == [
        "trlstack verify: 2 Debian packages match the SBOM",
        "trlstack verify: /: OK",
    ]
    report.add("debian", "tini:amd64", "0.19.0-4 installed, not in the SBOM")
    assert print_report(report, "/") == 1
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == "trlstack verify: debian: tini:amd64: 0.19.0-4 installed, not in the SBOM"
    assert err == "trlstack verify: /: 1 differences\n"
