"""No function in entrypoints/ is longer than a screen (60 lines, its decorators and docstring included): a
longer one is split into named steps."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "entrypoints"
LIMIT = 60


def long_functions(root: Path = ROOT, limit: int = LIMIT) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                length = (node.end_lineno or node.lineno) - first + 1
                if length > limit:
                    where = f"{path.relative_to(root.parent)}:{node.lineno}"
                    found.append(f"{where} {node.name} ({length} lines)")
    return found


def test_every_function_in_entrypoints_fits_a_screen():
    assert long_functions() == []


def test_the_check_finds_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    (tmp_path / "long.py").write_text(f"def long():\n{body}\n\n\ndef short():\n    return 1\n")
    assert long_functions(tmp_path) == [f"{tmp_path.name}/long.py:1 long ({LIMIT + 1} lines)"]
