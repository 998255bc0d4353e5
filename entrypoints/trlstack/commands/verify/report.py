"""What verify found: a difference per finding, the facts it established, and how both are printed."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Finding:
    """One difference: the part of the image, what differs (a package, a file) and how."""

    area: str
    subject: str
    detail: str

    def __str__(self) -> str:
        return f"{self.area}: {self.subject}: {self.detail}"


@dataclass
class Report:
    """The differences found (each makes verify fail) and the facts established (printed as evidence)."""

    findings: list[Finding] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)

    def add(self, area: str, subject: str, detail: str) -> None:
        self.findings.append(Finding(area, subject, detail))


def print_report(report: Report, where: str) -> int:
    """Print every difference, then the facts; the exit code: 1 when anything differs, else 0."""
    for finding in report.findings:
        print(f"trlstack verify: {finding}")
    for fact in report.facts:
        print(f"trlstack verify: {fact}")
    if report.findings:
        print(f"trlstack verify: {where}: {len(report.findings)} differences", file=sys.stderr)
        return 1
    print(f"trlstack verify: {where}: OK")
    return 0
