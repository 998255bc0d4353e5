"""trlstack.run.settings: train's settings from its flags or the environment."""

from __future__ import annotations

import pytest
from trlstack.errors import UsageError
from trlstack.roles.command_line import parse_role
from trlstack.roles.train.main import ROLE
from trlstack.run.settings import TrainSettings


def test_machine_settings_come_from_flags_or_the_environment():
    environ = {
        "TRLSTACK_NUM_MACHINES": "4",
        "TRLSTACK_MACHINE_RANK": "3",
        "TRLSTACK_MAIN_PROCESS_IP": "10.1.0.1",
    }
    settings, _ = parse_role(ROLE, TrainSettings, ["grpo", "--main-process-port", "29600"], environ)
    assert (settings.num_machines, settings.machine_rank) == (4, 3)
    assert (settings.main_process_ip, settings.main_process_port) == ("10.1.0.1", 29600)


def test_the_weight_push_timeout_comes_from_the_flag_or_the_variable():
    environ = {"TRLSTACK_WEIGHT_PUSH_TIMEOUT": "1200"}
    settings, _ = parse_role(ROLE, TrainSettings, ["grpo"], environ)
    assert (settings.weight_push_timeout, settings.push_timeout) == (1200.0, 1200.0)
    settings, _ = parse_role(ROLE, TrainSettings, ["grpo", "--weight-push-timeout", "90"], environ)
    assert settings.push_timeout == 90.0
    settings, _ = parse_role(ROLE, TrainSettings, ["grpo"], {})
    assert (settings.weight_push_timeout, settings.push_timeout) == (None, 600.0)  # None: not given


@pytest.mark.parametrize("value", ["0", "-5", "0.0", "nan", "soon"])
def test_a_weight_push_timeout_of_no_time_is_refused_naming_the_flag(value):
    with pytest.raises(UsageError, match=r"--weight-push-timeout.*is not a (positive |finite )?number"):
        parse_role(ROLE, TrainSettings, ["grpo", "--weight-push-timeout", value], {})
    with pytest.raises(UsageError, match=r"TRLSTACK_WEIGHT_PUSH_TIMEOUT=.* for --weight-push-timeout"):
        parse_role(ROLE, TrainSettings, ["grpo"], {"TRLSTACK_WEIGHT_PUSH_TIMEOUT": value})
