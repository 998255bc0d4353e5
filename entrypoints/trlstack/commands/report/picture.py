"""The report's picture: the six panels (panels.py) on one figure, drawn with matplotlib without a display
(the Agg backend), readable on a laptop screen."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trlstack.commands.report.panels import Panel


def draw(title: str, panels: list[Panel], path: Path) -> None:
    """Write the figure of `panels` under `title` to `path` (PNG, or what its suffix names)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(2, 3, figsize=(15, 8.5), constrained_layout=True)
    figure.suptitle(title, fontsize=13)
    for ax, panel in zip(axes.flat, panels, strict=True):
        draw_panel(ax, panel)
    figure.savefig(path, dpi=110)
    pyplot.close(figure)


def draw_panel(ax: Any, panel: Panel) -> None:
    ax.set_title(panel.title, fontsize=11)
    ax.set_xlabel("step")
    ax.set_ylabel(panel.unit)
    ax.grid(True, alpha=0.3)
    if not panel.lines:
        ax.text(
            0.5, 0.5, panel.note, ha="center", va="center", transform=ax.transAxes, color="gray", wrap=True
        )
        return
    if panel.stacked:
        steps = sorted({step for series in panel.lines.values() for step, _ in series})
        layers = [[dict(series).get(step, 0.0) for step in steps] for series in panel.lines.values()]
        ax.stackplot(steps, layers, labels=list(panel.lines), alpha=0.85)
        ax.legend(fontsize=8, loc="upper left")
        return
    handles = []
    for index, (name, series) in enumerate(panel.lines.items()):
        axis = ax.twinx() if name == panel.right else ax
        xs, ys = zip(*series, strict=True)
        marker = "." if len(series) < 30 else None
        (line,) = axis.plot(xs, ys, label=name, marker=marker, color=f"C{index}")
        if axis is not ax:
            axis.set_ylabel(name)
        handles.append(line)
    ax.legend(handles=handles, fontsize=8, loc="best")
