"""Every command a README shows, and how a test exercises it, so that no example is one the product refuses.

`shown()` reads each shell block (```bash, ```sh, ```console) of every Markdown file the repository ships and
yields its commands: continuation lines joined, the trailing comment dropped. `EXERCISED` says, for each
command, how it runs:

- `Dry`: tests/unit/test_readme_commands.py runs it for real, in the dry mode it names (`--dry-run`,
  `--print-command`, `--help`, a plan for a stated GPU count);
- `InCompose`: tests/compose/test_readme_compose.py runs it with compose's own `--dry-run`, on a plan's .env
  and the test image (the engine, no containers);
- `InImage`: tests/image/test_readme_image.py runs it against the test image, the role in its dry mode;
- `Elsewhere`: a named test does what the command does (a build, a cluster, a GPU).

tests/unit/test_readme_commands.py fails on a command nobody covers, on an entry no README shows any more and
on an `Elsewhere` that names no test.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHELL_BLOCKS = {"bash", "sh", "shell", "console"}
FENCE = re.compile(r"^```(\S*)\s*$")


@dataclass(frozen=True)
class Shown:
    """One command as a README shows it."""

    path: str  # the README, from the repository root
    line: int  # where the command starts
    text: str  # the command, continuation lines joined, without its trailing comment

    @property
    def key(self) -> str:
        """The command with its runs of blanks made one: what EXERCISED is keyed by."""
        return " ".join(self.text.split())

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.key}"


def without_comment(line: str) -> str:
    """`line` up to a `#` that starts a word outside quotes (the shell's comment), stripped."""
    quote = ""
    for index, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1].isspace()):
            return line[:index].strip()
    return line.strip()


def commands_in(path: Path, root: Path = REPO) -> Iterator[Shown]:
    """The commands of the shell blocks in one Markdown file (named from `root`)."""
    language: str | None = None  # None: outside a fenced block
    pending, start = "", 0
    for number, line in enumerate(path.read_text().splitlines(), 1):
        fence = FENCE.match(line.strip())
        if fence:
            language = fence.group(1) if language is None else None
            continue
        if language not in SHELL_BLOCKS:
            continue
        if not pending:
            start = number
        text = f"{pending} {line.strip()}" if pending else line.strip()
        if text.endswith("\\"):
            pending = text[:-1].rstrip()
            continue
        pending = ""
        if command := without_comment(text):
            yield Shown(str(path.relative_to(root)), start, command)


def markdown_files() -> list[Path]:
    """Every Markdown file the repository ships (tracked, or new and not ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.md"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return sorted({REPO / name for name in listed.stdout.split() if (REPO / name).is_file()})


def shown() -> list[Shown]:
    return [command for path in markdown_files() for command in commands_in(path)]


@dataclass(frozen=True)
class Dry:
    """Run for real by tests/unit/test_readme_commands.py: the command with `replace` applied and `append`
    after it, by bash, in an empty folder (`cwd="tmp"`) or the checkout (`cwd="repo"`); it must exit 0."""

    append: str = ""
    replace: tuple[tuple[str, str], ...] = ()
    cwd: str = "tmp"
    needs_uv: bool = False

    def command(self, text: str) -> str:
        for old, new in self.replace:
            assert old in text, f"{old!r} is not in {text!r}"
            text = text.replace(old, new)
        return f"{text} {self.append}".strip()


@dataclass(frozen=True)
class InCompose:
    """Run by tests/compose/test_readme_compose.py as `docker compose --dry-run ...`, the words in `drop` left
    out (why: `reason`)."""

    drop: tuple[str, ...] = ()
    reason: str = ""


@dataclass(frozen=True)
class InImage:
    """Run by tests/image/test_readme_image.py against the test image: `--gpus all` left out (no GPU there),
    named volumes renamed for the test and removed after, `role_append` after the role's arguments."""

    role_append: str = ""


@dataclass(frozen=True)
class Elsewhere:
    """Done by the named test (`path::function`), which does what the command does."""

    test: str
    reason: str


Exercise = Dry | InCompose | InImage | Elsewhere

IMAGE_TAG = "trlstack:0.1.0-torch2.11-vllm0.25-cu13"
PLAN_GPUS = "--gpus 8"  # the plan of an 8-GPU machine: GPU discovery is the dry part
TRAINER_OF_TWO = "--gpus 2 --print-command"
HELP = "--help"
SLURM = "tests/slurm/test_cpu_smoke.py::test_cpu_smoke_trains_one_model_across_two_nodes"
NIX = "tests/nix/test_flake.py::"
KERNEL_BAKE = "tests/image/test_kernel_bake.py"
INIT_MYTASK = "trlstack init mytask >/dev/null"
COMPOSE_TASK = "tests/compose/test_compose_task.py::test_compose_up_trains_on_the_task_folder"
# docker/README: the roles by hand, as compose's shared layout runs them
DOCKER_RUN_SHARED = "docker run --rm --gpus all --network host --ipc host --pid host -e TINI_SUBREAPER=1"

EXERCISED: dict[str, Exercise] = {
    # README.md: the two commands
    "scripts/up.sh grpo": Elsewhere(
        "tests/unit/test_readme_commands.py::test_up_sh_hands_over_to_compose_with_a_plan",
        "up.sh run with a stand-in for docker: it needs the engine, a GPU and the image",
    ),
    "bash scripts/test.sh": Elsewhere(
        "tests/unit/test_readme_commands.py::test_ci_runs_the_test_command_readme_gives", "what .ci/run runs"
    ),
    # README.md and compose/README.md: the main job by hand
    "docker/build.sh": Elsewhere("tests/conftest.py::trlstack_image", "every image test builds with it"),
    "trlstack plan --format env -o .env": Dry(append=PLAN_GPUS),
    "mkdir -p outputs": Dry(),
    "docker compose up grpo": InCompose(),
    "docker compose up -d grpo && docker compose logs -f grpo": InCompose(
        drop=("-d",), reason="compose's dry run of a detached up waits for a health that never comes"
    ),
    "docker compose --profile '*' down": InCompose(),
    "docker compose -f compose.yaml -f compose/smoke.yaml up grpo": InCompose(),
    "trlstack plan --serve-gpus 0-5 --train-gpus 6,7 --tensor-parallel-size 2 --num-heads 14": Dry(
        append=PLAN_GPUS
    ),
    # README.md: your own task (each Dry command runs in an empty folder: the task is made first)
    "trlstack init mytask --recipe grpo": Dry(),
    "trlstack check-task mytask": Dry(
        replace=(("trlstack check-task", f"{INIT_MYTASK} && trlstack check-task"),)
    ),
    "TRLSTACK_TASK=mytask docker compose up grpo": Elsewhere(
        COMPOSE_TASK, "up on the CPU smoke stack with a task trlstack init wrote (no GPU here)"
    ),
    # compose/README.md: a task's CPU smoke
    "TRLSTACK_TASK=mytask SMOKE_DATASET= SMOKE_REWARD_MODEL= docker compose -f compose.yaml "
    "-f compose/smoke.yaml up grpo": Elsewhere(COMPOSE_TASK, "that command, in the test's own project"),
    # slurm/README.md: a task on shared storage
    "trlstack init /shared/tasks/mytask --recipe grpo": Elsewhere(
        "tests/slurm/test_slurm_task.py::test_a_task_on_the_shared_mount_trains_across_two_nodes",
        "trlstack init on the test cluster's shared volume",
    ),
    "trlstack slurm grpo --task /shared/tasks/mytask --nodes 4 --gpus-per-node 8 --image "
    "/shared/images/trlstack.sif --output-dir /shared/runs/mytask --submit": Dry(
        replace=(
            ("--submit", "--dry-run"),
            # a task on storage this host does not take for node-local (/tmp is, where the command runs): a
            # folder in the home folder, removed after
            ("/shared/tasks/mytask", '"$task/mytask"'),
            (
                "trlstack slurm",
                'task=$(mktemp -d -p "$HOME") && trlstack init "$task/mytask" >/dev/null && trlstack slurm',
            ),
        ),
        append='; rc=$?; rm -rf "$task"; exit $rc',
    ),
    # README.md (and docker/README.md, from a checkout): watching a run
    "trlstack dashboard outputs/grpo": Elsewhere(
        "tests/image/test_watch.py::test_the_dashboard_shows_the_reward_curve_in_a_real_browser",
        "the image's trlstack dashboard on a CPU run's folder, opened in headless Chromium",
    ),
    "uv run --extra dashboard trlstack dashboard outputs/grpo": Dry(
        append=HELP,
        cwd="repo",
        needs_uv=True,
        replace=(("uv run --extra", "uv run --frozen --isolated --extra"),),
    ),
    "uv run --extra report trlstack report outputs/grpo -o grpo.png": Elsewhere(
        "tests/unit/commands/report/test_picture.py::test_the_picture_is_drawn_with_the_report_extra",
        "the same command on a recorded run (isolated: the checkout's environment stays as it is)",
    ),
    "trlstack report outputs/grpo --text": Elsewhere(
        "tests/unit/commands/report/test_command.py::test_the_summary_says_how_far_the_run_got_and_where_its_time_went",
        "the same command on a recorded run",
    ),
    # README.md: one GPU
    "trlstack plan --share-gpus --format env -o .env": Dry(append="--gpus 1"),
    "train grpo --vllm-mode colocate": Dry(append="--gpus 1 --print-command"),
    # README.md and slurm/README.md: Slurm
    f"trlstack export --format sif {IMAGE_TAG} -o /shared/images/trlstack.sif": Dry(append="--print-command"),
    f"trlstack export --format sqsh {IMAGE_TAG} -o /shared/images/trlstack.sqsh": Dry(
        append="--print-command"
    ),
    "trlstack slurm grpo --nodes 4 --gpus-per-node 8 --image /shared/images/trlstack.sif --time 24:00:00 "
    "--output-dir /shared/runs/grpo-1 --submit": Dry(replace=(("--submit", "--dry-run"),)),
    "trlstack slurm grpo --nodes 4 --gpus-per-node 8 --image /shared/images/trlstack.sif --partition gpu "
    "--time 24:00:00 --output-dir /shared/runs/grpo-1 --submit -- --max_steps 2000": Dry(
        replace=(("--submit", "--dry-run"),)
    ),
    "tail -f /shared/runs/grpo-1/trlstack-grpo-JOB.out": Elsewhere(
        SLURM, "reads the job's log, as tail would"
    ),
    "squeue -j JOB": Elsewhere(SLURM, "real squeue on the test cluster"),
    "sacct -j JOB --duplicates": Elsewhere(
        "tests/slurm/test_preemption.py::test_a_stopped_job_is_requeued_and_resumes_from_its_newest_checkpoint",
        "real sacct on the test cluster, every attempt",
    ),
    # docker/README.md: air-gapped
    "trlstack bundle bundle --python-version 3.12 --platform manylinux_2_34_x86_64 --format site --slim": Dry(
        append="--dry-run", cwd="repo", needs_uv=True
    ),
    "sh bundle/install.sh /opt/trlstack": Elsewhere(
        "tests/unit/commands/bundle/test_build.py::test_a_small_bundle_installs_offline",
        "install.sh, offline",
    ),
    # docker/README.md
    "docker image inspect trlstack:latest --format '{{json .Config.Labels}}'": InImage(),
    "BASE_IMAGE=trlstack-base:trixie WITH_KERNEL_CACHE=0 CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt "
    "docker/build.sh": Elsewhere("tests/conftest.py::bake_env", "the test build's settings (CI's)"),
    'git checkout "$(docker image inspect IMAGE --format '
    '\'{{index .Config.Labels "org.opencontainers.image.revision"}}\')"': Elsewhere(
        "tests/image/test_reproducible.py::test_a_rebuild_without_cache_is_the_same_image",
        "a rebuild of HEAD",
    ),
    "docker/build.sh --set trlstack.tags=trlstack:rebuilt": Elsewhere(
        "tests/image/test_reproducible.py::test_a_rebuild_without_cache_is_the_same_image", "the rebuild"
    ),
    "cp dist/sbom/kernels.lock docker/kernels/kernels.lock": Elsewhere(
        f"{KERNEL_BAKE}::test_a_build_without_a_lock_locks_bakes_and_prints_it",
        "commits the lock the build printed (in a copy of the build context) and builds with it",
    ),
    "docker run --rm trlstack:latest cat /opt/trlstack/kernels/kernels.lock > docker/kernels/kernels.lock": (
        Elsewhere(
            f"{KERNEL_BAKE}::test_a_build_without_a_lock_locks_bakes_and_prints_it",
            "reads the lock out of the image it baked, as this does",
        )
    ),
    "docker image inspect --format '{{.Id}}' IMAGE trlstack:rebuilt": Elsewhere(
        "tests/image/test_reproducible.py::test_a_rebuild_without_cache_is_the_same_image", "compares the IDs"
    ),
    "trlstack verify --image trlstack:latest": Elsewhere(
        "tests/image/test_verify_image.py::test_one_changed_byte_fails_verify_naming_package_and_file",
        "verify --image on the test image",
    ),
    "docker run --rm trlstack:latest trlstack verify": InImage(role_append="--only provenance --only debian"),
    "trlstack verify --tarball image.tar": Elsewhere(
        "tests/unit/commands/verify/test_trees.py::test_an_archive_is_read_layer_by_layer",
        "docker save and OCI archives, streamed",
    ),
    "apptainer exec trlstack.sif trlstack verify": Elsewhere(
        "tests/slurm/test_apptainer.py::test_cpu_smoke_runs_inside_the_sif_on_two_nodes",
        "apptainer exec of the .sif the tests make (verify itself: the image tests)",
    ),
    f"{DOCKER_RUN_SHARED} -e CUDA_VISIBLE_DEVICES=0 -v hf:/cache/huggingface -v vllm:/cache/vllm "
    "trlstack:latest serve-vllm --model Qwen/Qwen2.5-0.5B-Instruct": InImage(
        role_append="--gpus 1 --print-command"
    ),
    f"{DOCKER_RUN_SHARED} -e CUDA_VISIBLE_DEVICES=1 -v hf:/cache/huggingface -v "
    '"$PWD/outputs:/outputs" trlstack:latest train grpo --serve-gpus 0 --output-dir /outputs/grpo': InImage(
        role_append="--gpus 1 --print-command"
    ),
    "python -c \"import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/health' % "
    "os.environ.get('TRLSTACK_VLLM_PORT', '8000'), timeout=5)\"": Elsewhere(
        "tests/image/test_readme_image.py::test_the_health_command_shown_passes_only_on_200",
        "run in the image beside a stand-in for vLLM's /health",
    ),
    # bench/README.md
    "uv run --group bench python bench/startup.py": Dry(
        append=HELP, cwd="repo", replace=(("uv run --group bench ", ""),)
    ),
    "uv run --group bench python bench/image.py": Dry(
        append=HELP, cwd="repo", replace=(("uv run --group bench ", ""),)
    ),
    "uv run --group bench python bench/reproducible.py": Dry(
        append=HELP, cwd="repo", replace=(("uv run --group bench ", ""),)
    ),
    "python bench/gpu_attention.py --out bench/results/gpu_attention.json": Dry(append=HELP, cwd="repo"),
    "python bench/gpu_grpo.py --out bench/results/gpu_grpo.json": Dry(append=HELP, cwd="repo"),
    "python bench/gpu_grpo_breakdown.py --plan levers --out bench/results/gpu_grpo_breakdown.json": Dry(
        append=HELP, cwd="repo"
    ),
    "python bench/gpu_serve.py --out bench/results/gpu_serve.json": Dry(append=HELP, cwd="repo"),
    "python bench/gpu_fsdp.py --out bench/results/gpu_fsdp.json": Dry(append=HELP, cwd="repo"),
    "python bench/gpu_async_grpo.py --layout shared-gpu --plot --out bench/results/gpu_async_grpo.json": Dry(
        append=HELP, cwd="repo"
    ),
    "python bench/gpu_server_mode.py --layout shared-gpu --out bench/results/gpu_server_mode.json": Dry(
        append=HELP, cwd="repo"
    ),
    "python bench/gpu_server_mode.py --ipc --step-shapes 1.5B --async-steps 6 --steps 4 --skip 1 --pushes 5 "
    "--out bench/results/gpu_ipc.json": Dry(append=HELP, cwd="repo"),
    "python bench/gpu_watch_overhead.py --out bench/results/gpu_watch_overhead.json --plot": Dry(
        append=HELP, cwd="repo"
    ),
    # nix/README.md: no nixpkgs where the tests run; the flake's outputs are checked offline
    "nix develop": Elsewhere(
        NIX + "test_dev_shell_is_the_light_set_plus_dev_group_from_this_repos_lock", "offline"
    ),
    "nix develop .#cuda": Elsewhere(
        NIX + "test_cuda_shell_has_cuda_13_nvcc_and_its_host_compiler_first", "offline"
    ),
    "nix run . -- plan --gpus 8": Elsewhere(NIX + "test_cli_package_is_the_light_set_only", "offline"),
    "nix flake check": Elsewhere(
        NIX + "test_flake_check_instantiates_every_output_on_both_systems", "offline"
    ),
    "nix fmt": Elsewhere(NIX + "test_formatter_is_nixfmt", "offline"),
}
