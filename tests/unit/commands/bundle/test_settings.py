"""trlstack.commands.bundle.settings: one declaration per setting; flag > variable > default, lists
included."""

from __future__ import annotations

import argparse

import pytest
from trlstack.commands.bundle.settings import THIS_PYTHON, BundleSettings, parse_size
from trlstack.errors import Parser
from trlstack.options import add_settings, settings_from


def settings(environ, *argv):
    parser = Parser(prog="t")
    add_settings(parser, BundleSettings, environ)
    return settings_from(BundleSettings, parser.parse_args(["b", *argv]))


def test_the_defaults_are_the_commands_before():
    assert settings({}) == BundleSettings(
        "b", THIS_PYTHON, "manylinux_2_34_x86_64", "wheelhouse", extra=("gpu",)
    )


def test_repeated_flags_replace_the_default_and_the_variable():
    assert settings({}, "--extra", "cpu").extra == ("cpu",)
    assert settings({}, "--without", "a", "--without=b").without == ("a", "b")
    environ = {"TRLSTACK_BUNDLE_WITHOUT": "tilelang, torchcodec", "TRLSTACK_BUNDLE_EXTRA": "gpu,dev"}
    assert (settings(environ).without, settings(environ).extra) == (
        ("tilelang", "torchcodec"),
        ("gpu", "dev"),
    )
    assert settings(environ, "--without", "x").without == ("x",)


def test_switches_and_sizes_come_from_flags_or_variables():
    environ = {
        "TRLSTACK_BUNDLE_SLIM": "1",
        "TRLSTACK_BUNDLE_PIECE_SIZE": "60M",
        "TRLSTACK_BUNDLE_FORMAT": "site",
    }
    found = settings(environ)
    assert (found.slim, found.piece_size, found.format) == (True, 60_000_000, "site")
    assert settings({}, "--slim", "--piece-size", "2Gi").piece_size == 2 * 2**30


@pytest.mark.parametrize(
    ("text", "size"), [("60M", 60_000_000), ("2Gi", 2 * 2**30), ("512k", 512_000), ("7", 7)]
)
def test_sizes(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["0", "60 MB extra", "-5M", "sixty"])
def test_bad_sizes(text):
    with pytest.raises(argparse.ArgumentTypeError):
        parse_size(text)
