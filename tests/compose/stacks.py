"""The repository's compose stacks as tests drive them: a project handle and a clean environment, so the
shell's own settings never change what a test renders or starts."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trlstack.plan import ENV_KEYS

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "compose.yaml"
SMOKE_FILE = REPO / "compose" / "smoke.yaml"
METHODS = ("grpo", "rloo", "online-dpo", "async-grpo")
VARIANTS = ("shared", "isolated")
GPU_COUNTS = (2, 4, 8)

# The named volumes every role mounts, and where; the token secret's path in the containers.
CACHES = {
    "hf-cache": "/cache/huggingface",
    "vllm-cache": "/cache/vllm",
    "flashinfer-cache": "/cache/flashinfer",
}
SECRET = "/run/secrets/hf_token"

# Variables the stacks read; a test sets the ones it means, the caller's shell sets none of them.
STACK_VARIABLES = (
    *ENV_KEYS,  # the GPU plan, as `trlstack plan --format env` writes it
    "UID",
    "GID",
    "HF_TOKEN_FILE",
    "HF_HUB_OFFLINE",
)


def clean_environ(**settings: str) -> dict[str, str]:
    """The caller's environment without any stack setting, plus `settings`."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in STACK_VARIABLES and not key.startswith(("TRLSTACK_", "COMPOSE_"))
    }
    return {**env, **settings}


@dataclass
class Compose:
    """A compose project of this repository: `docker compose -p NAME -f compose.yaml [-f ...] --env-file F`"""

    env_file: Path
    project: str = field(default_factory=lambda: f"trlstack-test-{uuid.uuid4().hex[:8]}")
    files: Sequence[Path] = (COMPOSE_FILE,)
    settings: Mapping[str, str] = field(default_factory=dict)

    def argv(self, *args: str) -> list[str]:
        files = [arg for path in self.files for arg in ("-f", str(path))]
        return ["docker", "compose", "-p", self.project, *files, "--env-file", str(self.env_file), *args]

    def run(self, *args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            self.argv(*args),
            capture_output=True,
            text=True,
            timeout=timeout,
            env=clean_environ(**self.settings),
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"`{' '.join(self.argv(*args))}` exited {done.returncode}:\n{done.stderr[-4000:]}"
            )
        return done

    def popen(self, *args: str, log: Path) -> subprocess.Popen[bytes]:
        with log.open("wb") as out:
            return subprocess.Popen(
                self.argv(*args), stdout=out, stderr=subprocess.STDOUT, env=clean_environ(**self.settings)
            )

    def config(self, *services: str, profiles: Sequence[str] = ()) -> dict[str, Any]:
        """The rendered project model, as `docker compose config --format json` gives it."""
        flags = [arg for profile in profiles for arg in ("--profile", profile)]
        return json.loads(self.run(*flags, "config", "--format", "json", *services).stdout)

    def down(self) -> None:
        """Remove every container (whatever its profile), network and volume of the project."""
        self.run("--profile", "*", "down", "--volumes", "--remove-orphans", "--timeout", "5", check=False)


def read_env(path: Path) -> dict[str, str]:
    """A .env file's settings (comments and blank lines left out)."""
    lines = [line for line in path.read_text().splitlines() if line and not line.startswith("#")]
    return dict(line.split("=", 1) for line in lines)
