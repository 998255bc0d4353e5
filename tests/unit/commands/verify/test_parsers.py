"""trlstack.commands.verify.parsers: what uv.lock says of dependencies, read even where they form a cycle."""

from __future__ import annotations

from trlstack.commands.verify.parsers import locked_dependencies, overlay

from .built_image import lock_text


def test_a_dependency_cycle_in_the_lock_ends() -> None:
    lock = lock_text({"a": ["b"], "b": ["a"]})
    assert locked_dependencies(lock)["a"] >= {"b"}
    assert overlay(["a", "b"], locked_dependencies(lock)) in {"a", "b"}
