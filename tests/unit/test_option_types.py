"""The settings' value types: yes/no as shells and compose write it."""

from __future__ import annotations

import pytest
from trlstack.option_types import parse_bool

TRUE = ["1", "TRUE", " yes ", "on"]


FALSE = ["0", "false", "No", "off"]


@pytest.mark.parametrize(("raw", "value"), [(raw, True) for raw in TRUE] + [(raw, False) for raw in FALSE])
def test_parse_bool_reads_what_shells_and_compose_write(raw, value):
    assert parse_bool(raw) is value
