"""`trlstack report OUTPUT_DIR [-o report.png]`: one picture of a run (reward per function, loss, KL,
completion length, where each step's time goes, tokens per second) and a compact summary in the terminal,
read from the output folder alone (trlstack/metrics.py): a folder copied off a cluster is enough.

`panels.py` picks what each panel and line shows from a run's metrics (pure), `picture.py` draws them with
matplotlib (the `report` extra), `command.py` is the command line.
"""

from trlstack.commands.report.command import add_arguments, run

__all__ = ["add_arguments", "run"]
