"""`trlstack doctor`: is this machine ready for the stack? Each finding says what was seen and, when it
matters, the fix.

`command.gather_facts` is the one function that looks at the machine; the `judge_*` functions (judge.py) turn
facts into findings and are pure, so every verdict is tested without the hardware it describes.
"""

from trlstack.commands.doctor.command import add_arguments, run

__all__ = ["add_arguments", "run"]
