"""A task's reward functions checked as the trainer will use them (`check_rewards`, the task check's rewards
step): imported by the name the config gives (TRL's built-in names, or an import path found from the task
folder first), held to the keywords the recipe's trainer passes, and called on the rows the data step read,
with stand-in completions. Each finding is a Problem that names the file (and the line), the function, and
the fix.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import inspect
import sys
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trlstack.recipes import Recipe
from trlstack.reward_calls import (
    NONE_FIX,
    describe_row,
    failing_row,
    raise_site,
    resolved,
    scores_problem,
    shown_path,
    source_file,
)
from trlstack.run.task_report import Problem, Report, Rows, Task

# TRL's own reward functions by the names its scripts take, and the dataset columns each needs.
BUILT_IN = {
    "accuracy_reward": ("solution",),
    "reasoning_accuracy_reward": ("solution",),
    "think_format_reward": (),
    "get_soft_overlong_punishment": (),
}
# Stand-ins for what a model writes: nothing at all, a bare answer, and a worked one.
COMPLETIONS = ("", "42", "Let me think step by step: 6 * 7 = 42. The answer is \\boxed{42}.")


@dataclass(frozen=True)
class Reward:
    name: str  # as the config names it
    func: Callable[..., Any]

    def where(self, root: Path) -> str:
        """FILE:LINE of the function's definition, FILE relative to `root`; one of TRL's by its name (the
        check holds a stand-in of its signature, whose file is trlstack's, not the task's)."""
        path = None if self.name in BUILT_IN else source_file(self.func)
        if path is None:
            return self.name
        try:
            line = inspect.getsourcelines(inspect.unwrap(self.func))[1]
        except (OSError, TypeError):
            return shown_path(path, root)
        return f"{shown_path(path, root)}:{line}"


@contextlib.contextmanager
def importing_from(root: Path) -> Iterator[None]:
    """Import as a training process will, with `root` first on the path (its PYTHONPATH); modules of the
    same names imported before are set aside meanwhile, and everything imported here is forgotten after."""
    saved_path, saved_modules = list(sys.path), dict(sys.modules)
    own = {path.stem for path in root.glob("*.py")} | {path.name for path in root.iterdir() if path.is_dir()}
    for name in [name for name in sys.modules if name.split(".")[0] in own]:
        del sys.modules[name]
    sys.path.insert(0, str(root))
    importlib.invalidate_caches()
    try:
        yield
    finally:
        sys.path[:] = saved_path
        sys.modules.clear()
        sys.modules.update(saved_modules)


def load(name: str, root: Path, where: str) -> Reward | Problem:
    """The function `name` names (call inside importing_from(root)), or the Problem that stops it."""
    module_name, _, attribute = name.rpartition(".")
    if not module_name:
        choices = ", ".join(BUILT_IN)
        fix = f"name one of TRL's ({choices}) or an import path such as rewards.my_reward"
        return Problem(where, f"reward {name!r} is neither one of TRL's rewards nor an import path", fix)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        return _not_found(name, module_name, error, root, where)
    except SyntaxError as error:
        path = shown_path(Path(error.filename or "?").resolve(), root)
        return Problem(f"{path}:{error.lineno}", f"syntax error: {error.msg}", "fix the line")
    except Exception as error:
        site = _import_site(error, root)
        what = f"importing {module_name} raised {type(error).__name__}: {error}"
        return Problem(site, what, "fix the module so that it imports")
    func = getattr(module, attribute, None)
    if func is None or not callable(func):
        return _no_function(name, module, attribute, root)
    return Reward(name, func)


def _not_found(name: str, module: str, error: ModuleNotFoundError, root: Path, where: str) -> Problem:
    missing = error.name or module
    if module == missing or module.startswith(missing + "."):
        fix = f"put {module.replace('.', '/')}.py in the task folder {root}, or fix the name in reward_funcs"
        return Problem(where, f"reward {name}: no module {missing}", fix)
    site = _import_site(error, root)
    what = f"{module} imports {missing}, which is not installed here"
    return Problem(
        site, what, f"install it (`pip install {missing.split('.')[0]}`) where the check and the trainer run"
    )


def _import_site(error: BaseException, root: Path) -> str:
    """FILE:LINE of the deepest frame in the task folder where an import failed."""
    import traceback

    frames = [
        f
        for f in traceback.extract_tb(error.__traceback__)
        if Path(f.filename).resolve().is_relative_to(root)
    ]
    return (
        f"{shown_path(Path(frames[-1].filename).resolve(), root)}:{frames[-1].lineno}"
        if frames
        else str(root)
    )


def _no_function(name: str, module: types.ModuleType, attribute: str, root: Path) -> Problem:
    path = Path(getattr(module, "__file__", None) or module.__name__).resolve()
    functions = sorted(
        key
        for key, value in vars(module).items()
        if callable(value) and not key.startswith("_") and getattr(value, "__module__", "") == module.__name__
    )
    near = difflib.get_close_matches(attribute, functions, n=1)
    hint = f"did you mean {module.__name__}.{near[0]}? " if near else ""
    what = f"reward {name}: {module.__name__} has no function {attribute}"
    return Problem(
        shown_path(path, root), what, f"{hint}name one of its functions ({', '.join(functions) or 'none'})"
    )


def call_keywords(recipe: Recipe, columns: set[str]) -> set[str]:
    """Every keyword the recipe's trainer calls a reward function with, for data of `columns`."""
    return set(recipe.reward_kwargs) | (columns - set(recipe.columns_not_passed))


def signature_problems(reward: Reward, recipe: Recipe, columns: set[str] | None, root: Path) -> list[Problem]:
    """Whether the trainer can call `reward` with what it passes (`columns`: the data's, None: unknown)."""
    try:
        parameters = inspect.signature(reward.func).parameters.values()
    except (TypeError, ValueError):
        return []
    where, found = reward.where(root), []
    by_position = [p.name for p in parameters if p.kind is p.POSITIONAL_ONLY and p.default is p.empty]
    if by_position:
        what = f"reward {reward.name} takes {', '.join(by_position)} by position only"
        found.append(Problem(where, what, "the trainer passes every argument by keyword: drop the `/`"))
    passed = call_keywords(recipe, columns or set())
    required = [
        p.name
        for p in parameters
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.default is p.empty
    ]
    for name in required:
        if name in passed or (columns is None and name not in recipe.reward_kwargs):
            continue
        found.append(_not_passed(reward, name, recipe, columns, where))
    takes_any = any(p.kind is p.VAR_KEYWORD for p in parameters)
    extra = sorted(passed - {p.name for p in parameters}) if columns is not None else []
    if not takes_any and extra:
        also = ", ".join(extra)
        what = f"reward {reward.name} takes no **kwargs, but the {recipe.name} trainer also passes {also}"
        found.append(Problem(where, what, "add **kwargs to its parameters"))
    return found


def _not_passed(reward: Reward, name: str, recipe: Recipe, columns: set[str] | None, where: str) -> Problem:
    if name in ("prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric"):
        what = f"reward {reward.name} needs {name}, which the {recipe.name} trainer does not pass"
        return Problem(where, what, f"give {name} a default (None), or take it from **kwargs")
    have = ", ".join(sorted(columns or ())) or "none"
    what = f"reward {reward.name} needs the column {name}, which the data lacks (its columns: {have})"
    return Problem(where, what, f"add a column {name} to the data, or give the parameter a default")


def call_kwargs(rows: Sequence[Mapping[str, Any]], recipe: Recipe, max_steps: int) -> dict[str, Any]:
    """The keywords of one call as the trainer makes it: each row's prompt and columns once per stand-in
    completion, the completions as the data's prompts are (text, or an assistant message)."""
    count = len(COMPLETIONS)
    prompts = [row.get("prompt") for row in rows for _ in range(count)]
    chat = bool(prompts) and isinstance(prompts[0], list)
    completions = [[{"role": "assistant", "content": c}] if chat else c for _ in rows for c in COMPLETIONS]
    stand_ins: dict[str, Any] = {
        "prompts": prompts,
        "completions": completions,
        "completion_ids": [list(range(len(c) // 4 + 1)) for _ in rows for c in COMPLETIONS],
        "trainer_state": types.SimpleNamespace(global_step=0, max_steps=max_steps, epoch=0.0),
        "log_extra": lambda column, values: None,
        "log_metric": lambda name, value: None,
    }
    kwargs = {key: stand_ins[key] for key in recipe.reward_kwargs}
    columns = {key for row in rows for key in row} - set(recipe.columns_not_passed)
    kwargs.update({key: [row.get(key) for row in rows for _ in range(count)] for key in sorted(columns)})
    return kwargs


def call_problem(reward: Reward, kwargs: dict[str, Any], root: Path, data: str) -> Problem | None:
    """Call `reward` as the trainer would on rows of the file `data`; the Problem with what it raised or
    returned, or None."""
    expected = len(kwargs["completions"])
    try:
        result = resolved(reward.func(**kwargs))
    except Exception as error:
        index = failing_row(reward.func, kwargs, expected)
        row = ""
        if index is not None:
            number = index // len(COMPLETIONS) + 1
            row = f" on row {number} of {data} ({describe_row(kwargs, index)})"
        what = f"reward {reward.name} raised {type(error).__name__}: {error}{row}"
        return Problem(raise_site(error, reward.func, root), what, f"fix it, or {NONE_FIX}")
    wrong = scores_problem(result, expected)
    if wrong is None:
        return None
    return Problem(reward.where(root), f"reward {reward.name} {wrong}", "fix what it returns")


def check_rewards(found: Task, report: Report) -> None:
    """Each reward the config names, imported as a training process imports it (the task folder first on
    the path), held to what the trainer passes, then called on the rows the data step read."""
    with importing_from(found.root):
        rewards = _load_all(found, report)
        _use(rewards, report.rows, found, report)


def _load_all(found: Task, report: Report) -> list[Reward]:
    names = found.config.get("reward_funcs") or []
    if isinstance(names, str):
        names = [names]
    loaded = []
    for name in names:
        if name in BUILT_IN:
            loaded.append(Reward(name, _built_in_stand_in(name)))
            continue
        reward = load(str(name), found.root, f"{found.where}: reward_funcs")
        if isinstance(reward, Problem):
            report.problems.append(reward)
        else:
            loaded.append(reward)
    return loaded


def _built_in_stand_in(name: str) -> Any:
    """TRL's own reward by its signature only: the check holds the data to the columns it takes, and does not
    import TRL (torch) to call it."""
    keyword = inspect.Parameter.KEYWORD_ONLY
    parameters = [inspect.Parameter(column, keyword) for column in BUILT_IN[name]]
    parameters.append(inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD))

    def built_in(**kwargs: Any) -> list[float]:
        return [0.0] * len(kwargs["completions"])

    built_in.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    built_in.__name__ = name
    return built_in


def _use(rewards: list[Reward], data: Rows, found: Task, report: Report) -> None:
    """Each reward held to what the trainer passes, then called on the rows read (where there are some)."""
    recipe, root = found.recipe, found.root
    callable_ = []
    for reward in rewards:
        problems = signature_problems(reward, recipe, data.columns, root)
        report.problems += problems
        if not problems and reward.name not in BUILT_IN:
            callable_.append(reward)
    if not rewards:
        return
    if data.rows is None or not data.rows:
        report.checked.append(
            f"rewards {', '.join(r.name for r in rewards)} imported, not called (no rows here)"
        )
        return
    kwargs = call_kwargs(data.rows, recipe, int(found.config.get("max_steps") or 0))
    for reward in callable_:
        problem = call_problem(reward, kwargs, root, data.shown)
        if problem is not None:
            report.problems.append(problem)
    calls = f"{len(data.rows)} rows x {len(COMPLETIONS)} completions"
    report.checked.append(
        f"rewards {', '.join(r.name for r in rewards)} ({len(callable_)} called on {calls})"
    )
