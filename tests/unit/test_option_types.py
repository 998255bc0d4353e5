"""The settings' value types: yes/no as shells and compose write it; numbers in the digits 0-9 only."""

from __future__ import annotations

import argparse

import pytest
from trlstack.option_types import (
    fraction,
    parse_bool,
    port_number,
    positive_float,
    positive_int,
    rank_number,
    wait_seconds,
)

TRUE = ["1", "TRUE", " yes ", "on"]


FALSE = ["0", "false", "No", "off"]


@pytest.mark.parametrize(("raw", "value"), [(raw, True) for raw in TRUE] + [(raw, False) for raw in FALSE])
def test_parse_bool_reads_what_shells_and_compose_write(raw, value):
    assert parse_bool(raw) is value


@pytest.mark.parametrize(
    "kind", [positive_int, rank_number, port_number, positive_float, fraction, wait_seconds]
)
@pytest.mark.parametrize("raw", ["٣", "１", "²", "٠.٥"])
def test_numbers_in_other_scripts_digits_are_refused_naming_the_digits(kind, raw):
    # int() and float() read ٣ and full-width digits; the programs the value is handed to read only 0-9.
    with pytest.raises(argparse.ArgumentTypeError, match=r"write it with the digits 0-9"):
        kind(raw)
