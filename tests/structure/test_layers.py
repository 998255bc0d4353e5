"""The package's floors, read from its imports (every import, those inside functions included): the core
(trlstack/*.py, plan/, recipes/) imports nothing above it; run/ (what defines a run, before launch) and rank/
(what runs inside a training rank) stand on the core side by side, neither importing the other; the roles
(roles/) import no command; no command (commands/X) imports another command, nor a role's internals other
than its public settings (roles/ROLE/settings.py; train's are run/settings.py); the cli only the commands it
names; and no module reaches itself again."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "entrypoints" / "trlstack"
FLOORS = {"core": 0, "run": 1, "rank": 1, "roles": 2, "commands": 3, "entry": 4}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def resolve(name: str) -> str | None:
    """The trlstack module an imported name is in (`from trlstack.x import y`: y a module or a name)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports(module: str) -> set[str]:
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + [base])
            names = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        found |= {target for target in map(resolve, names) if target and target != module}
    return found


def floor(module: str) -> str:
    parts = module.split(".")
    if module in ("trlstack.cli", "trlstack.__main__"):
        return "entry"
    if len(parts) > 1 and parts[1] in ("run", "rank", "roles", "commands"):
        return parts[1]
    return "core"


def command_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if floor(module) == "commands" and len(parts) > 2 else None


GRAPH = {module: imports(module) for module in MODULES}


def test_every_module_is_on_a_floor_the_graph_knows():
    assert {floor(module) for module in MODULES} == set(FLOORS)
    assert "trlstack.plan" in MODULES and floor("trlstack.plan") == "core"
    assert floor("trlstack.recipes") == "core" and floor("trlstack.roles.train.main") == "roles"
    assert floor("trlstack.run.settings") == "run" and floor("trlstack.rank.run") == "rank"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_import_points_up_a_floor(module):
    upward = sorted(target for target in GRAPH[module] if FLOORS[floor(target)] > FLOORS[floor(module)])
    assert not upward, f"{module} ({floor(module)}) imports {upward} from a higher floor"


@pytest.mark.parametrize("module", sorted(name for name in MODULES if floor(name) in ("run", "rank")))
def test_run_and_rank_stand_apart(module):
    other = "rank" if floor(module) == "run" else "run"
    crossing = sorted(target for target in GRAPH[module] if floor(target) == other)
    assert not crossing, f"{module} imports {crossing}: what decides a run and what runs in a rank stay apart"


def is_public_settings(module: str) -> bool:
    parts = module.split(".")
    return len(parts) == 4 and parts[1] == "roles" and parts[3] == "settings"


@pytest.mark.parametrize("module", sorted(name for name in MODULES if command_of(name)))
def test_no_command_imports_a_roles_internals(module):
    internals = sorted(
        target for target in GRAPH[module] if floor(target) == "roles" and not is_public_settings(target)
    )
    assert not internals, f"{module} imports {internals}; a command reads a role's settings module only"


@pytest.mark.parametrize("module", sorted(name for name in MODULES if command_of(name)))
def test_no_command_imports_another_command(module):
    others = sorted(
        target for target in GRAPH[module] if command_of(target) not in (None, command_of(module))
    )
    assert not others, f"{module} imports another command's {others}; move what they share a floor down"


def test_the_cli_names_every_command_and_only_commands():
    from trlstack.cli import MODULE_COMMANDS

    named = {module for module, _ in MODULE_COMMANDS.values()}
    assert all(floor(module) == "commands" for module in named)
    assert named == {f"trlstack.commands.{command}" for command in filter(None, map(command_of, MODULES))}


def test_no_module_imports_itself_again_through_others():
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            pytest.fail("import circle: " + " -> ".join([*path[path.index(module) :], module]))
        if module in done:
            return
        for target in sorted(GRAPH[module]):
            # A package's own __init__ importing its submodule is how a package names its entry point.
            if not target.startswith(module + "."):
                visit(target, [*path, module])
        done.add(module)

    for module in sorted(MODULES):
        visit(module, [])
