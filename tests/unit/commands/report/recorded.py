"""A run's metrics as train records them, for the report's tests."""

from __future__ import annotations

from pathlib import Path

import tracked

SPLIT = {"time/generation_s": 6.0, "time/weight_push_s": 0.5, "time/forward_backward_s": 2.5}
SPLIT |= {"time/optimizer_s": 0.25, "time/wait_s": 0.0, "time/checkpoint_s": 0.0, "time/other_s": 0.75}


def recorded_run(output_dir: Path, steps: int = 4) -> Path:
    """A GRPO run's metrics as train records them: TRL's, the step split, throughput, memory, the server's."""
    path = tracked.database(output_dir)
    tracked.config(path, "grpo", {"model_name_or_path": "Qwen/Qwen2.5-0.5B-Instruct", "max_steps": 10})
    for step in range(1, steps + 1):
        values = {"loss": 0.1 / step, "reward": step / 10, "rewards/accuracy_reward/mean": step / 10}
        values |= {"rewards/format_reward/mean": 0.5, "rewards/format_reward/std": 0.1}
        values |= {"completions/mean_length": 100.0 + step, "time/step_s": 10.0, **SPLIT}
        values |= {"throughput/tokens_per_s": 1000.0, "throughput/completions_per_s": 3.2}
        values |= {"memory/peak_gib/rank0": 20.5, "memory/peak_gib/rank1": 19.0, "server/kv_cache_usage": 0.4}
        tracked.log(path, "grpo", step, tracked.train_row(step, **values))
    return output_dir
