"""What the report shows of a run, decided from its metrics alone (pure): the series of each panel of the
picture, and the lines of the terminal summary. Metric names are the trainers' (TRL's GRPO, RLOO, online DPO,
async GRPO) and the ones every run adds (trlstack/metrics.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from trlstack.metrics import (
    COMPLETIONS_PER_S,
    MEMORY_PEAK,
    SERVER_PREFIX,
    STEP_PARTS,
    STEP_S,
    TOKENS_PER_S,
    Run,
)

# Per-function rewards: GRPO's and RLOO's rewards/NAME/mean, async-grpo's rewards/NAME, online DPO's
# rewards/chosen and the like; their spreads (/std) are left out.
REWARD = re.compile(r"^rewards/([^/]+)(?:/mean)?$")
KL_KEYS = ("kl", "objective/kl")
LENGTH_KEYS = ("completions/mean_length",)
Series = list[tuple[float, float]]


@dataclass
class Panel:
    """One plot: its title, y label, named series, and a note when it has nothing to show."""

    title: str
    unit: str
    lines: dict[str, Series] = field(default_factory=dict)
    stacked: bool = False  # the step split: parts stacked up to the step
    right: str = ""  # a series of another scale, drawn against a y axis of its own on the right
    note: str = ""


def first_present(run: Run, keys: tuple[str, ...]) -> tuple[str, Series] | None:
    for key in keys:
        series = run.series(key)
        if series:
            return key, series
    return None


def reward_panel(run: Run) -> Panel:
    panel = Panel("reward per function", "mean reward")
    total = run.series("reward")
    if total:
        panel.lines["total"] = total
    for key in sorted(run.names()):
        match = REWARD.match(key)
        if match and run.series(key):
            panel.lines[match.group(1)] = run.series(key)
    if not panel.lines:
        panel.note = "no reward logged yet"
    return panel


def single_panel(run: Run, title: str, unit: str, keys: tuple[str, ...], missing: str) -> Panel:
    found = first_present(run, keys)
    panel = Panel(title, unit)
    if found is None:
        panel.note = missing
    else:
        panel.lines[found[0]] = found[1]
    return panel


def split_panel(run: Run) -> Panel:
    panel = Panel("where each step's time goes", "seconds per step", stacked=True)
    for key, name in STEP_PARTS:
        series = run.series(key)
        if series and any(value > 0 for _, value in series):
            panel.lines[name] = series
    if not panel.lines:
        panel.note = "no step split logged (a run of this version of trlstack logs it)"
    return panel


def throughput_panel(run: Run) -> Panel:
    panel = Panel("throughput", "tokens per second", right="completions/s")
    for key, name in ((TOKENS_PER_S, "tokens/s"), (COMPLETIONS_PER_S, "completions/s")):
        series = run.series(key)
        if series:
            panel.lines[name] = series
    if not panel.lines:
        panel.note = "no throughput logged"
    return panel


def panels(run: Run) -> list[Panel]:
    """The picture's six panels, in reading order."""
    return [
        reward_panel(run),
        single_panel(run, "loss", "loss", ("loss",), "no loss logged yet"),
        single_panel(run, "KL to the reference", "KL", KL_KEYS, "KL not logged (GRPO logs it with beta > 0)"),
        single_panel(run, "completion length", "tokens (mean)", LENGTH_KEYS, "no completion length logged"),
        split_panel(run),
        throughput_panel(run),
    ]


def last(series: Series) -> float | None:
    return series[-1][1] if series else None


def shown(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def mean(series: Series) -> float | None:
    return sum(value for _, value in series) / len(series) if series else None


def split_line(run: Run) -> str | None:
    """`step 15.6 s: generation 8.1 (52%), ...`: the run's mean step and its parts."""
    step = mean(run.series(STEP_S))
    if not step:
        return None
    parts = []
    for key, name in STEP_PARTS:
        value = mean(run.series(key))
        if value:
            parts.append(f"{name} {value:.3g} s ({100 * value / step:.0f}%)")
    return f"{step:.3g} s: " + ", ".join(parts)


def summary(run: Run, where: str) -> list[str]:
    """The terminal summary: the run, how far it got, the last values and where the time went."""
    steps = [step for step, _ in run.series("loss")] or [float(row["_step"] or 0) for row in run.rows]
    config = run.config
    model = config.get("model_name_or_path") or config.get("_name_or_path") or "model unknown"
    max_steps = config.get("max_steps")
    reached = f"step {int(max(steps))}" if steps else "no step logged"
    if isinstance(max_steps, int) and max_steps > 0:
        reached += f" of {max_steps}"
    lines = [f"run {run.name} ({where}): {model}, {reached}"]
    rows: list[tuple[str, str]] = []
    for name, series in reward_panel(run).lines.items():
        rows.append((f"reward {name}", f"{shown(last(series))} (first {shown(series[0][1])})"))
    for panel in panels(run)[1:4]:
        text = "; ".join(shown(last(series)) for series in panel.lines.values()) or panel.note
        rows.append((panel.title, text))
    split = split_line(run)
    rows.append(("step", split or "no step split logged"))
    throughput = [f"{shown(last(series))} {name}" for name, series in throughput_panel(run).lines.items()]
    rows.append(("throughput", ", ".join(throughput) or "not logged"))
    memory = sorted(key for key in run.names() if key.startswith(MEMORY_PEAK))
    if memory:
        peaks = [
            f"rank {key.removeprefix(MEMORY_PEAK)} {shown(last(run.series(key)), 3)} GiB" for key in memory
        ]
        rows.append(("GPU memory peak", ", ".join(peaks)))
    server = sorted(key for key in run.names() if key.startswith(SERVER_PREFIX))
    if server:
        values = [f"{key.removeprefix(SERVER_PREFIX)} {shown(last(run.series(key)))}" for key in server]
        rows.append(("vLLM server (last)", ", ".join(values)))
    width = max(len(label) for label, _ in rows)
    return lines + [f"  {label:<{width}}  {text}" for label, text in rows]
