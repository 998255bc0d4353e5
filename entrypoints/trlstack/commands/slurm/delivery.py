"""What becomes of a checked job's script: printed (--dry-run), written beside the run's outputs, or written
and submitted with sbatch (--submit); and what trlstack slurm says meanwhile."""

from __future__ import annotations

import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from trlstack.commands.slurm.settings import SlurmSettings
from trlstack.errors import UsageError
from trlstack.files import write_atomically
from trlstack.options import flag, switch


@dataclass(frozen=True)
class Delivery:
    """What becomes of the script: printed (dry_run), or written to `output` and maybe submitted."""

    dry_run: bool = switch(
        None,
        "print the script, write and submit nothing (the job's folders are checked as for writing; the "
        "image and this host's tools, sbatch and the runtime, when writing)",
    )
    submit: bool = switch(None, "write the script and submit it with sbatch")
    output: str | None = flag(
        "script file", None, metavar="FILE", aliases=("-o",), shown="OUTPUT_DIR/NAME.sbatch"
    )

    def script(self, settings: SlurmSettings) -> Path:
        """Where the script is written: --output, else OUTPUT_DIR/NAME.sbatch."""
        return Path(self.output or f"{settings.output_dir}/{settings.name}.sbatch")


def say(message: str) -> None:
    print(f"trlstack slurm: {message}", file=sys.stderr, flush=True)


def deliver(settings: SlurmSettings, delivery: Delivery, text: str) -> int:
    """Print the script (a dry run), or write it, and submit it with --submit; the exit code."""
    if delivery.dry_run:
        sys.stdout.write(text)
        return 0
    path = delivery.script(settings)
    write_script(settings, path, text)
    if not delivery.submit:
        print(f"trlstack slurm: wrote {path}; submit it with: sbatch {shlex.quote(str(path))}")
        return 0
    return submit(settings, path)


def write_script(settings: SlurmSettings, path: Path, text: str) -> None:
    try:
        # Slurm cannot create the log's folder itself: a job whose --output folder is missing fails unseen.
        Path(settings.output_dir).mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(
            f"cannot make the output folder {settings.output_dir} ({error.strerror}); choose a writable "
            "--output-dir."
        ) from None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, text)
    except OSError as error:
        raise UsageError(
            f"cannot write {path} ({error.strerror}); choose a writable --output (or --output-dir)."
        ) from None


def submit(settings: SlurmSettings, path: Path) -> int:
    done = subprocess.run(["sbatch", "--parsable", str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        raise UsageError(f"sbatch refused {path}: {done.stderr.strip()}")
    job = done.stdout.strip().split(";")[0]
    log = f"{settings.output_dir.rstrip('/')}/{settings.name}-{job}.out"
    print(job)
    print(
        f"trlstack slurm: submitted {path} as job {job}; watch: squeue -j {job}; tail -f {log}",
        file=sys.stderr,
    )
    return 0
