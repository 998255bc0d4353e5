"""The job script's shell text: words quoted or left for the script to expand, long commands broken between
options, and the script's fixed parts, read from the shell files beside this module (package data, so
shellcheck reads them as it reads every other script), one of them inserted in another."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from importlib import resources

# A line that only tells shellcheck something (`# shellcheck disable=SC2086 # why`): not for the job.
DIRECTIVE = re.compile(r"^\s*# shellcheck ")
# A line that stands for another shell file's fixed part (`# insert node-check.sh`): a script the job hands to
# another shell (each node's check, run through srun), kept in a file of its own so that shellcheck reads it.
INSERT = re.compile(r"^# insert (\S+\.sh)$")


class Var(str):
    """A shell word the script expands at run time (written as is); plain strings are quoted."""


def quote(word: str) -> str:
    return word if isinstance(word, Var) else shlex.quote(word)


def assign(name: str, value: str | int | None) -> str:
    return f"{name}={shlex.quote(str(value)) if value not in (None, '') else ''}"


def chunks(words: Sequence[str]) -> list[str]:
    """Quoted shell words, an option joined with its value so a line break never parts them."""
    joined: list[str] = []
    for word in words:
        text = quote(word)
        option = joined and joined[-1].startswith("--") and " " not in joined[-1] and "=" not in joined[-1]
        if option and not word.startswith("-") and joined[-1] != "--":
            joined[-1] += " " + text
        else:
            joined.append(text)
    return joined


def lines(words: Sequence[str], indent: str, width: int = 104) -> list[str]:
    """`words` as lines of at most `width` characters (an option and its value stay on one), each indented."""
    found: list[str] = []
    for chunk in chunks(words):
        if found and len(found[-1]) + 1 + len(chunk) <= width:
            found[-1] += " " + chunk
        else:
            found.append(indent + chunk)
    return found


def fixed_part(name: str) -> list[str]:
    """The lines of the shell file `name` (prepare.sh, supervise.sh) that go into every job script: those
    after its header, which ends at the first empty line, less shellcheck's directives."""
    text = resources.files("trlstack.commands.slurm").joinpath(name).read_text(encoding="utf-8")
    _, _, body = text.partition("\n\n")
    return [line for line in body.splitlines() if not DIRECTIVE.match(line)]


def assembled(name: str) -> list[str]:
    """The fixed part of `name`, each of its `# insert FILE` lines replaced by the fixed part of FILE."""
    found: list[str] = []
    for line in fixed_part(name):
        insert = INSERT.match(line)
        found += fixed_part(insert.group(1)) if insert else [line]
    return found
