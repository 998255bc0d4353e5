"""The wait for vLLM's /health and the weight-transfer check, against a real local HTTP server."""

from __future__ import annotations

import json

import pytest
from trlstack.errors import UsageError
from trlstack.roles.train.health import check_weight_transfer, served_model, wait_for_health


def test_returns_once_the_server_is_healthy(vllm_server, capsys):
    vllm_server.health_failures = 2  # 503 while loading the model
    wait_for_health(vllm_server.url, timeout=30, interval=0.1)
    assert vllm_server.requests == ["/health"] * 3
    assert f"waiting for the vLLM server at {vllm_server.url}/health" in capsys.readouterr().err


def test_a_log_gets_the_progress_line_seldom_not_once_per_retry(vllm_server, capsys):
    """stderr is not a terminal here, as in a container's log: about 20 retries in 2 s draw the line at
    its start and end only (every 30 s in between), not once per retry."""
    vllm_server.health_failures = 20
    wait_for_health(vllm_server.url, timeout=30, interval=0.1)
    assert len(vllm_server.requests) == 21
    assert capsys.readouterr().err.count("waiting for the vLLM server") <= 3


def test_a_trailing_slash_in_the_url_is_fine(vllm_server):
    wait_for_health(vllm_server.url + "/", timeout=5)
    assert vllm_server.requests == ["/health"]


def test_timeout_names_the_url_what_was_seen_and_what_to_check(closed_port):
    url = f"http://127.0.0.1:{closed_port}"
    with pytest.raises(UsageError) as caught:
        wait_for_health(url, timeout=0.5, interval=0.1)
    message = str(caught.value)
    assert f"the vLLM server at {url}/health did not become healthy within 0.5 s" in message
    assert "Connection refused" in message
    assert "--vllm-url (TRLSTACK_VLLM_URL)" in message
    assert "--health-timeout (TRLSTACK_HEALTH_TIMEOUT)" in message


def test_a_server_that_stays_unhealthy_times_out_with_its_status(vllm_server):
    vllm_server.health_failures = 10**6
    with pytest.raises(UsageError, match=r"within 0.5 s \(last: HTTP 503\)"):
        wait_for_health(vllm_server.url, timeout=0.5, interval=0.1)


def test_weight_transfer_engine_is_reported_with_the_served_model(vllm_server):
    config = {"weight_transfer_config": {"backend": "nccl"}, "model_config": {"model": "org/m"}}
    vllm_server.server_info = (200, json.dumps({"vllm_config": config}).encode())
    assert check_weight_transfer(vllm_server.url) == config
    assert served_model(config) == "org/m"
    assert served_model({"model_config": "text"}) is None
    assert vllm_server.requests == ["/server_info?config_format=json"]


def test_no_weight_transfer_engine_names_the_flag(vllm_server):
    body = {"vllm_config": {"weight_transfer_config": None}, "vllm_env": {}}
    vllm_server.server_info = (200, json.dumps(body).encode())
    with pytest.raises(UsageError) as caught:
        check_weight_transfer(vllm_server.url)
    assert "has no weight-transfer engine" in str(caught.value)
    assert """--weight-transfer-config '{"backend": "nccl"}'""" in str(caught.value)


def test_missing_dev_mode_is_a_404_that_names_the_variable(vllm_server):
    vllm_server.server_info = (404, b'{"detail": "Not Found"}')
    with pytest.raises(UsageError, match="Restart it with VLLM_SERVER_DEV_MODE=1"):
        check_weight_transfer(vllm_server.url)


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (500, b"boom", "answered GET /server_info with HTTP 500"),
        (200, b"not json", "without vllm_config.weight_transfer_config"),
        (200, b'{"vllm_config": "text form"}', "without vllm_config.weight_transfer_config"),
    ],
)
def test_unexpected_server_info_answers_are_clear_errors(vllm_server, status, body, message):
    vllm_server.server_info = (status, body)
    with pytest.raises(UsageError, match=message):
        check_weight_transfer(vllm_server.url)


def test_a_server_gone_after_health_is_a_clear_error(closed_port):
    with pytest.raises(UsageError, match="stopped answering"):
        check_weight_transfer(f"http://127.0.0.1:{closed_port}")
