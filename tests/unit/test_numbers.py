"""Numbers from a user, however odd, end in a message or a command, never in a traceback or a hang: every
numeric setting of every command, given as a flag or as its variable."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trlstack import cli
from trlstack.roles import serve, train

ODD = [
    "inf", "-inf", "nan", "1e400", "1e-400", "-0", "0.0", "+7", "1_0", "0x10", "٣", "9" * 5000,
    "99999999999999999999", "4294967297", "-1", "", " ", "--",
]  # fmt: skip

# (command, its main, argv before the value, the flag, the variable read for it)
NUMERIC = [
    ("serve-vllm", serve.main, ["--gpus", "2", "--print-command"], "--port", "TRLSTACK_VLLM_PORT"),
    ("serve-vllm", serve.main, ["--gpus", "2", "--print-command"], "--tensor-parallel-size", None),
    ("serve-vllm", serve.main, ["--gpus", "2", "--print-command"], "--data-parallel-size", None),
    ("serve-vllm", serve.main, ["--gpus", "2", "--print-command"], "--gpu-memory-utilization", None),
    ("serve-vllm", serve.main, ["--gpus", "2", "--print-command"], "--max-model-len", None),
    ("serve-vllm", serve.main, ["--print-command"], "--gpus", None),
    ("train", train.main, ["grpo", "--gpus", "2", "--print-command"], "--health-timeout", None),
    ("train", train.main, ["grpo", "--gpus", "2", "--print-command"], "--num-processes", None),
    ("train", train.main, ["grpo", "--gpus", "2", "--print-command"], "--group-port", None),
    ("train", train.main, ["grpo", "--print-command"], "--gpus", None),
    ("trlstack", cli.main, ["plan"], "--gpus", None),
    ("trlstack", cli.main, ["plan", "--gpus", "4"], "--serve", None),
    ("trlstack", cli.main, ["plan", "--gpus", "4"], "--tensor-parallel-size", None),
    ("trlstack", cli.main, ["plan", "--gpus", "4"], "--num-heads", None),
    ("trlstack", cli.main, ["plan", "--gpus", "4"], "--port", None),
    ("trlstack", cli.main, ["plan", "--gpus", "4"], "--group-port", None),
    ("trlstack", cli.main, ["doctor"], "--group-port", None),
]
VARIABLES = {
    "--tensor-parallel-size": "TRLSTACK_TENSOR_PARALLEL_SIZE",
    "--health-timeout": "TRLSTACK_HEALTH_TIMEOUT",
}
VARIABLES |= {"--num-processes": "TRLSTACK_NUM_PROCESSES", "--group-port": "TRLSTACK_VLLM_GROUP_PORT"}
VARIABLES |= {"--port": "TRLSTACK_VLLM_PORT", "--group-port": "TRLSTACK_VLLM_GROUP_PORT"}
VARIABLES |= {
    "--max-model-len": "TRLSTACK_MAX_MODEL_LEN",
    "--data-parallel-size": "TRLSTACK_DATA_PARALLEL_SIZE",
}
VARIABLES |= {"--gpu-memory-utilization": "TRLSTACK_GPU_MEMORY_UTILIZATION"}


def outcome(main, argv, capsys) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


@pytest.fixture
def quiet_machine(clean_env, machine, tmp_path):
    machine([])  # no GPU: every run stays a preview or a refusal
    clean_env.chdir(tmp_path)
    return clean_env


@pytest.mark.parametrize(
    ("name", "main", "before", "flag", "_"), NUMERIC, ids=[f"{c[0]} {c[3]}" for c in NUMERIC]
)
@pytest.mark.parametrize("value", ODD, ids=repr)
def test_odd_numbers_as_flags_give_a_message_or_a_command(
    quiet_machine, capsys, name, main, before, flag, _, value
):
    code, err = outcome(main, [*before, f"{flag}={value}"], capsys)
    assert code in (0, 1), err
    assert "Traceback" not in err
    if code == 1:
        assert err.startswith(f"{name}: error: ")


@pytest.mark.parametrize(
    ("name", "main", "before", "flag", "_"),
    [case for case in NUMERIC if case[3] in VARIABLES],
    ids=[f"{c[0]} {VARIABLES[c[3]]}" for c in NUMERIC if c[3] in VARIABLES],
)
@pytest.mark.parametrize("value", ODD, ids=repr)
def test_odd_numbers_in_variables_give_a_message_or_a_command(
    quiet_machine, capsys, name, main, before, flag, _, value
):
    quiet_machine.setenv(VARIABLES[flag], value)
    code, err = outcome(main, before, capsys)
    assert code in (0, 1), err
    if code == 1:
        assert err.startswith(f"{name}: error: ")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.sampled_from(NUMERIC), value=st.text(alphabet="0123456789.eE+-_xinfa ", max_size=12))
def test_any_text_as_a_number_gives_a_message_or_a_command(quiet_machine, capsys, case, value):
    name, main, before, flag, _ = case
    code, err = outcome(main, [*before, f"{flag}={value}"], capsys)
    assert code in (0, 1), err


@pytest.mark.parametrize(
    ("main", "argv", "message"),
    [
        (train.main, ["grpo", "--health-timeout", "inf"], "'inf' is not a finite number"),
        (train.main, ["grpo", "--health-timeout", "1e9"], "at most 604800 s (a week)"),
        (serve.main, ["--gpus", "100000", "--print-command"], "100000 GPUs is more than any machine has"),
        (
            train.main,
            ["grpo", "--gpus", "99999999999999999999", "--print-command"],
            "more than any machine has",
        ),
        (
            cli.main,
            ["plan", "--gpus", "100000"],
            "--gpus: 100000 GPUs is more than any machine has (at most 1024)",
        ),
        (cli.main, ["plan", "--gpus", "-3"], "--gpus: -3 is not a positive whole number"),
        (
            serve.main,
            ["--gpus", "2", "--print-command", "--gpu-memory-utilization", "nan"],
            "not a finite number",
        ),
    ],
)
def test_impossible_numbers_are_refused_at_once_naming_the_flag(quiet_machine, capsys, main, argv, message):
    code, err = outcome(main, argv, capsys)
    assert code == 1
    assert message in err
