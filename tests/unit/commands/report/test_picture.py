"""The report's picture (report/picture.py), drawn with matplotlib from the `report` extra, in an isolated
environment so this checkout's stays as it is: the six panels on one figure the size of a laptop screen."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

from .recorded import recorded_run

REPO = Path(__file__).resolve().parents[4]
WITH_THE_EXTRA = ["uv", "run", "--frozen", "--isolated", "--extra", "report"]


def png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", header[16:24])
    return width, height


def test_the_picture_is_drawn_with_the_report_extra(tmp_path):
    """As README says, from a checkout: `uv run --extra report trlstack report OUTPUT_DIR -o PNG`."""
    folder = recorded_run(tmp_path / "grpo", steps=12)
    picture = tmp_path / "grpo.png"
    argv = [*WITH_THE_EXTRA, "trlstack", "report", str(folder)]
    done = subprocess.run([*argv, "-o", str(picture)], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"picture: {picture}" in done.stdout
    assert png_size(picture) == (1650, 935)  # 15 x 8.5 inches at 110 dpi: a laptop screen's width


DRAW_NOTES_ONLY = """
import sys
from pathlib import Path
from trlstack.commands.report import panels, picture
from trlstack.metrics import Run

run = Run("r", [{"_step": 1, "train/epoch": 0.0}])
drawn = panels.panels(run)
assert all(not panel.lines for panel in drawn)
picture.draw("run r", drawn, Path(sys.argv[1]))
"""


def test_a_run_with_nothing_to_plot_yet_draws_every_panel_as_its_note(tmp_path):
    picture = tmp_path / "empty.png"
    argv = [*WITH_THE_EXTRA, "python", "-c", DRAW_NOTES_ONLY, str(picture)]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert png_size(picture) == (1650, 935)
