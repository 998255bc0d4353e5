"""The script's text: the header Slurm reads, the settings, a comment that says why before every step."""

from __future__ import annotations

import subprocess
from pathlib import Path

from trlstack.commands.slurm.checks import check
from trlstack.commands.slurm.render import render

from .harness import script, settings


def test_the_header_asks_for_whole_gpu_nodes_a_shared_log_a_stop_signal_and_requeue():
    text = script(partition="gpu", account="rl", time="24:00:00")
    header = [line for line in text.splitlines() if line.startswith("#SBATCH")]
    assert header == [
        "#SBATCH --job-name=trlstack-grpo",
        "#SBATCH --nodes=2",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --gpus-per-node=8",
        "#SBATCH --exclusive",
        "#SBATCH --partition=gpu",
        "#SBATCH --account=rl",
        "#SBATCH --time=24:00:00",
        "#SBATCH --output=/shared/runs/trlstack-grpo-%j.out",
        "#SBATCH --open-mode=append",
        "#SBATCH --signal=B:USR1@300",
        "#SBATCH --requeue",
    ]
    assert text.startswith(
        "#!/bin/bash\n# trlstack slurm grpo: vLLM on 1 node (tensor-parallel 1 x data-parallel 8)"
    )
    assert "IMAGE=/shared/images/trlstack.sif\n" in text
    assert "RUN_DIR=/shared/runs/grpo\n" in text
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)


def test_the_example_in_slurm_readme_is_what_trlstack_slurm_writes():
    # Regenerate with: trlstack slurm grpo --nodes 2 --gpus-per-node 8 --image /shared/images/trlstack.sif
    #   --partition gpu --time 24:00:00 --output-dir /shared/runs/grpo-2x8 --dry-run > slurm/grpo-2x8.sbatch
    example = Path(__file__).resolve().parents[4] / "slurm" / "grpo-2x8.sbatch"
    expected = settings(
        image="/shared/images/trlstack.sif",
        partition="gpu",
        time="24:00:00",
        output_dir="/shared/runs/grpo-2x8",
    )
    assert example.read_text() == render(check(expected))


def test_every_step_of_the_script_says_why():
    lines = script().splitlines()

    def comment_before(prefix: str) -> str:
        at = next(i for i, line in enumerate(lines) if line.lstrip().startswith(prefix))
        return lines[at - 1].strip()

    for step in ("#SBATCH --ntasks", "#SBATCH --exclusive", "#SBATCH --output", "#SBATCH --signal"):
        assert comment_before(step).startswith("# "), step
    assert comment_before("#SBATCH --requeue").startswith("# checkpoint in its output folder")
    assert comment_before("( CUDA_VISIBLE_DEVICES").startswith("# weight-transfer engine before")
    assert comment_before('for rank in "${!TRAINER_NODES[@]}"').startswith("# weight transfer.")
    assert any(line.startswith("# Stopping. USR1") for line in lines)
