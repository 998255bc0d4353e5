"""trlstack.roles.train.settings: train's settings from its flags or the environment."""

from __future__ import annotations

from trlstack.roles.command_line import parse_role
from trlstack.roles.train.settings import ROLE, TrainSettings


def test_machine_settings_come_from_flags_or_the_environment():
    environ = {
        "TRLSTACK_NUM_MACHINES": "4",
        "TRLSTACK_MACHINE_RANK": "3",
        "TRLSTACK_MAIN_PROCESS_IP": "10.1.0.1",
    }
    settings, _ = parse_role(ROLE, TrainSettings, ["grpo", "--main-process-port", "29600"], environ)
    assert (settings.num_machines, settings.machine_rank) == (4, 3)
    assert (settings.main_process_ip, settings.main_process_port) == ("10.1.0.1", 29600)
