"""trlstack.rank.push_phases: each phase of a weight push in words, over NCCL and through CUDA IPC."""

from __future__ import annotations

import pytest
from trlstack.rank.push_phases import (
    COLOCATED,
    GATHERING,
    HANDED,
    HELPER,
    JOINING,
    SENDER,
    SENDING,
    SENT,
    SETTLING,
    STARTING,
    WALKED,
    describe,
    role,
)


def test_a_ranks_part_comes_from_its_mode_and_whether_it_is_the_first():
    assert role("colocate", True) == role("colocate", False) == COLOCATED
    assert role("server", True) == SENDER and role("server", False) == HELPER


@pytest.mark.parametrize(
    ("kind", "part", "said"),
    [
        (STARTING, SENDER, "starting the push, before the first parameter"),
        (GATHERING, HELPER, "gathering parameter W (FSDP all-gather)"),
        (HANDED, SENDER, "sending the parameters up to W to the vLLM server (NCCL broadcast)"),
        (HANDED, COLOCATED, "loading parameter W into the colocated vLLM engine"),
        (HANDED, HELPER, "between parameters, after gathering W"),
        (WALKED, SENDER, "waiting for the vLLM server to take them (NCCL broadcast, HTTP /update_weights)"),
        (WALKED, COLOCATED, "resetting the colocated engine's prefix cache"),
        (SENDING, SENDER, "sending parameter W to the vLLM server (HTTP /update_weights, NCCL broadcast)"),
        (SENT, SENDER, "waiting for the vLLM server's answer after sending W (HTTP)"),
        (SETTLING, SENDER, "queued collectives (FSDP all-gathers, the NCCL broadcast; last named: W)"),
        (SETTLING, HELPER, "queued collectives (FSDP all-gathers; last named: W)"),
    ],
)
def test_each_phase_in_words(kind, part, said):
    assert said in describe(kind, "W", part)


@pytest.mark.parametrize(
    ("kind", "name", "part", "said"),
    [
        (GATHERING, "W", SENDER, "gathering parameter W (FSDP all-gather)"),
        (HANDED, "W", SENDER, "handing parameter W to the CUDA-IPC send (copied into the shared buffer)"),
        (
            WALKED,
            "W",
            SENDER,
            "exchanging CUDA-IPC handles with the other ranks and waiting for the vLLM server",
        ),
        (WALKED, "W", HELPER, "waiting for the first rank's send, whose server loads the last parameters"),
        (SENDING, "", SENDER, "starting the update on the vLLM server (HTTP /start_weight_update)"),
        (SENDING, "W", SENDER, "waiting for the vLLM server to load the parameters up to W from this GPU's"),
        (SENT, "W", SENDER, "waiting for the other ranks after the server loaded the parameters up to W"),
        (JOINING, "", SENDER, "asking the vLLM server for its CUDA-IPC engine (HTTP /init_weight_transfer"),
        (SETTLING, "W", SENDER, "queued work (FSDP all-gathers; last named: W)"),
    ],
)
def test_each_phase_of_a_cuda_ipc_push_in_its_words(kind, name, part, said):
    described = describe(kind, name, part, "ipc")
    assert said in described and "NCCL" not in described
