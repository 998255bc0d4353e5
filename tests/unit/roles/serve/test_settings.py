"""serve-vllm's settings (roles/serve/settings.py), its public face: each a flag and a variable, the flag
winning, loopback and the plan's shares by default, a value of the wrong kind refused naming the variable and
the flag; and the vLLM options serve-vllm sets itself (TAKEN), each with what to do instead."""

from __future__ import annotations

import dataclasses

import pytest
from trlstack.errors import UsageError
from trlstack.options import variables
from trlstack.roles.command_line import parse_role
from trlstack.roles.serve import command as serve
from trlstack.roles.serve.command import ROLE
from trlstack.roles.serve.settings import DTYPES, TAKEN, ServeSettings


def test_flags_beat_the_environment(clean_env, capsys, no_exec):
    clean_env.setenv("TRLSTACK_VLLM_HOST", "10.0.0.1")
    clean_env.setenv("TRLSTACK_TENSOR_PARALLEL_SIZE", "2")
    assert serve.main(["--gpus", "4", "--host", "10.0.0.2", "--print-command"]) == 0
    out = capsys.readouterr().out
    assert "--host 10.0.0.2 " in out
    assert "--tensor-parallel-size 2 --data-parallel-size 2 " in out


def test_every_setting_is_a_flag_and_a_trlstack_variable():
    fields = [field.name for field in dataclasses.fields(ServeSettings) if field.name != "extra"]
    found = variables(ServeSettings)
    assert len(found) == len(fields) and all(name.startswith("TRLSTACK_") for name in found)
    settings, _ = parse_role(ROLE, ServeSettings, ["--", "--max-num-seqs", "8"], {})
    assert settings.extra == ["--max-num-seqs", "8"]  # after `--`: vllm serve's, unchanged


def test_unset_the_server_binds_loopback_on_8000_and_leaves_the_rest_to_the_plan_and_the_model():
    settings, _ = parse_role(ROLE, ServeSettings, [], {})
    assert settings == ServeSettings()
    assert (settings.host, settings.port, settings.dtype, settings.weight_transfer) == (
        "127.0.0.1",
        8000,
        "auto",
        "auto",
    )
    assert settings.gpu_memory_utilization is None and settings.tensor_parallel_size is None
    assert not settings.share_gpus and not settings.allow_public_bind


@pytest.mark.parametrize(
    ("variable", "value", "flag"),
    [
        ("TRLSTACK_VLLM_PORT", "http", "--port"),
        ("TRLSTACK_TENSOR_PARALLEL_SIZE", "0", "--tensor-parallel-size"),
        ("TRLSTACK_DATA_PARALLEL_SIZE", "-1", "--data-parallel-size"),
        ("TRLSTACK_GPU_MEMORY_UTILIZATION", "1.5", "--gpu-memory-utilization"),
        ("TRLSTACK_MAX_MODEL_LEN", "4k", "--max-model-len"),
        ("TRLSTACK_DTYPE", "fp8", "--dtype"),
        ("TRLSTACK_SHARE_GPUS", "maybe", "--share-gpus"),
        ("TRLSTACK_WEIGHT_TRANSFER", "shm", "--weight-transfer"),
    ],
)
def test_a_variable_of_the_wrong_kind_is_refused_naming_it_and_its_flag(variable, value, flag):
    with pytest.raises(UsageError) as error:
        parse_role(ROLE, ServeSettings, [], {variable: value})
    message = str(error.value)
    assert message.startswith(f"{variable}={value!r} is not valid for {flag}: ")
    assert message.endswith(f"Fix or unset {variable}.")


def test_the_dtypes_are_vllms_own():
    assert DTYPES == ("auto", "bfloat16", "float16", "half", "float", "float32")
    settings, _ = parse_role(ROLE, ServeSettings, ["--dtype", "bfloat16"], {"TRLSTACK_DTYPE": "half"})
    assert settings.dtype == "bfloat16"


def test_what_serve_vllm_sets_itself_is_taken_each_with_what_to_do_instead():
    own = ["model", "host", "port", "tensor_parallel_size", "data_parallel_size", "gpu_memory_utilization"]
    own += ["max_model_len", "dtype"]
    assert {dest: TAKEN[dest] for dest in own} == {
        dest: f"use serve-vllm's own --{dest.replace('_', '-')} (before `--`)" for dest in own
    }
    assert all(dest in {field.name for field in dataclasses.fields(ServeSettings)} for dest in own)
    trl_needs = {key: value for key, value in TAKEN.items() if key not in own}
    assert trl_needs == dict.fromkeys(
        ("weight_transfer_config", "logprobs_mode", "max_logprobs"), "TRL needs the value serve-vllm sets"
    )
