"""The test files themselves: pytest imports a test file outside a package by its name alone (rootdir import
mode, which tests/gpu's sibling imports need), so two such files of one name stop the whole collection; and
every module has its unit tests where the scheme puts them, in a test package of its package's path, so that a
module's tests are found by its name."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
PACKAGE = REPO / "entrypoints" / "trlstack"
UNIT = TESTS / "unit"

# Modules whose tests cannot run in a unit test file, each with the test that covers it and why: {module as
# under entrypoints/trlstack: (test file, why)}. Short: a module earns a place here only where no unit test
# can hold it; one that needs TRL or torch has a unit test that skips saying it "runs in the image"
# (tests/image/test_image_smoke.py runs those there), as rank/online_dpo.py's does.
COVERED_ELSEWHERE: dict[str, tuple[str, str]] = {}


def test_every_test_file_outside_a_package_has_a_name_of_its_own():
    loose = [path for path in TESTS.rglob("test_*.py") if not (path.parent / "__init__.py").exists()]
    twice = {name: count for name, count in Counter(path.name for path in loose).items() if count > 1}
    assert not twice, f"test files of one name outside a package: {twice}; name them by their folder"


def defines_something(path: Path) -> bool:
    """Whether a module defines a function, a class or a name of its own (`__all__`, `__version__` and
    imports are none)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            return True
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(not (isinstance(target, ast.Name) and target.id.startswith("__")) for target in targets):
                return True
    return False


def scheme_file(module: Path) -> Path:
    """Where the scheme puts a module's tests: entrypoints/trlstack/<path>/<name>.py is tested by
    tests/unit/<path>/test_<name>.py (a package's __init__.py by tests/unit/<path>/test_<package>.py), and
    further files for it are tests/unit/<path>/test_<name>_<aspect>.py."""
    relative = module.relative_to(PACKAGE)
    if module.name == "__init__.py":
        return UNIT / relative.parent / f"test_{relative.parent.name}.py"
    return UNIT / relative.parent / f"test_{module.stem}.py"


def modules_to_test() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "__main__.py" or (path.name == "__init__.py" and not defines_something(path)):
            continue
        found.append(str(path.relative_to(PACKAGE)))
    return found


def test_every_module_has_its_test_file_under_the_scheme():
    modules = modules_to_test()
    missing = [
        f"{module}: {scheme_file(PACKAGE / module).relative_to(REPO)}"
        for module in modules
        if module not in COVERED_ELSEWHERE and not scheme_file(PACKAGE / module).is_file()
    ]
    assert not missing, "modules without their test file:\n  " + "\n  ".join(missing)
    loose = sorted(
        str(folder.relative_to(REPO))
        for folder in {scheme_file(PACKAGE / module).parent for module in modules}
        if folder != UNIT and folder.is_dir() and not (folder / "__init__.py").is_file()
    )
    assert not loose, f"test folders that are no package (add an __init__.py): {loose}"
    for module, (test, why) in COVERED_ELSEWHERE.items():
        assert module in modules, f"{module} is no module with tests due; take it out of COVERED_ELSEWHERE"
        assert not scheme_file(PACKAGE / module).is_file(), f"{module} has its test file; take it out"
        assert (REPO / test).is_file(), f"{module}: {test} does not exist"
        assert why, f"{module}: say why {test} covers it"
