"""A reward the tiny random model earns in varying amounts, so GRPO's and RLOO's advantages are not all zero
and a run really trains (the recipes' accuracy_reward is always 0 on it). Imported by the trainer through
`--reward_funcs rewards.varied_reward` with this folder on PYTHONPATH."""

from __future__ import annotations


def varied_reward(completions, **_) -> list[float]:
    """Longer completions and more digits earn more: random completions differ in both."""
    texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
    return [len(text) / 100 + sum(ch.isdigit() for ch in text) / max(1, len(text)) for text in texts]
