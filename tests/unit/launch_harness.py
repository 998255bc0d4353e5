"""What the train tests share: the bundled GRPO config, a machine's GPUs, and the tail of every launch
command."""

from __future__ import annotations

import yaml
from trlstack.gpus import Gpu
from trlstack.recipes import RECIPES

GRPO = yaml.safe_load(RECIPES["grpo"].bundled_config.read_text())


def gpus(n, capability=(9, 0)):
    return [Gpu(i, uuid=f"GPU-{i:04d}", compute_capability=capability) for i in range(n)]


def launch_tail(module="trl.scripts.grpo", config="outputs/grpo/trlstack-grpo.yaml"):
    return ["-m", "trlstack.rank.run", module, "--config", config]
