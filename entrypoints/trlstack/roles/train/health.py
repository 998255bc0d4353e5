"""Wait until a vLLM server answers /health, then check it can receive weights.

`train` waits for its server this way before anything starts; the GPU tests and benchmarks wait for the
servers they start with the same function. TRL's trainer syncs weights into the server after every step
through vLLM's dev-mode weight-transfer engine; a server started without it generates fine and fails only at
the first sync, so train checks up front.
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_exponential
from tqdm import tqdm

from trlstack.defaults import Env
from trlstack.errors import UsageError

# Talk to the server directly: a proxy from the environment must not sit between trainer and server.
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class NotReady(Exception):
    """The server did not answer /health with 200 yet; str() says what happened instead."""


def get(url: str, timeout: float) -> tuple[int, bytes]:
    """(HTTP status, body) of GET url; NotReady when nothing answers."""
    try:
        with _opener.open(url, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise NotReady(str(reason)) from None


def wait_for_health(
    base_url: str, timeout: float, interval: float = 2.0, stopped: Callable[[], str | None] = lambda: None
) -> None:
    """Poll base_url/health until it answers 200, with a progress line; UsageError after `timeout` s, or at
    once when `stopped()` says why the server cannot come up any more (its process exited, say).

    Retries come quickly at first (a server that is nearly up is noticed at once), then every `interval` s.
    """
    url = f"{base_url.rstrip('/')}/health"
    bar = tqdm(
        total=round(timeout),
        desc=f"waiting for the vLLM server at {url}",
        unit="s",
        bar_format="{desc}: {n}/{total} s {postfix}",
        file=sys.stderr,
        mininterval=1.0 if sys.stderr.isatty() else 30.0,
    )

    def probe_once() -> None:
        why = stopped()
        if why is not None:
            raise UsageError(f"the vLLM server at {url} stopped before it was healthy: {why}")
        status, _ = get(url, timeout=min(10.0, timeout))
        if status != 200:
            raise NotReady(f"HTTP {status}")

    def show(state: Any) -> None:
        bar.n = min(round(state.seconds_since_start), bar.total)
        bar.set_postfix_str(f"({state.outcome.exception()})", refresh=False)
        bar.update(0)  # drawn at most every mininterval: a log gets a line each 30 s, not one per retry

    retrying = Retrying(
        stop=stop_after_delay(timeout),
        wait=wait_exponential(multiplier=0.25, max=interval),  # quick at first, then every `interval` s
        retry=retry_if_exception_type(NotReady),
        before_sleep=show,
        reraise=True,
    )
    try:
        retrying(probe_once)
    except NotReady as last:
        raise UsageError(
            f"the vLLM server at {url} did not become healthy within {timeout:g} s (last: {last}). "
            "Check that serve-vllm is running and its log shows no error (model download, out of "
            f"GPU memory), that --vllm-url ({Env.VLLM_URL}) is its address and port as seen "
            "from this machine or container, and for large models raise --health-timeout "
            f"({Env.HEALTH_TIMEOUT})."
        ) from None
    finally:
        bar.close()


def check_weight_transfer(base_url: str, timeout: float = 30.0) -> dict[str, Any]:
    """The server's vllm_config; UsageError naming the fix when it has no weight-transfer engine."""
    url = f"{base_url.rstrip('/')}/server_info?config_format=json"
    try:
        status, body = get(url, timeout)
    except NotReady as error:
        raise UsageError(
            f"the vLLM server at {base_url} stopped answering ({error}) after /health was ok."
        ) from None
    if status == 404:
        raise UsageError(
            f"the vLLM server at {base_url} has no development endpoints (GET /server_info is 404), "
            f"which TRL uses to sync weights. Restart it with {Env.VLLM_SERVER_DEV_MODE}=1 in its "
            "environment (serve-vllm sets it)."
        )
    if status != 200:
        raise UsageError(f"the vLLM server at {base_url} answered GET /server_info with HTTP {status}.")
    try:
        vllm_config: dict[str, Any] = json.loads(body)["vllm_config"]
        transfer = vllm_config["weight_transfer_config"]
    except (ValueError, KeyError, TypeError):
        raise UsageError(
            f"the server at {base_url} answered /server_info without vllm_config.weight_transfer_config; "
            "is it vLLM 0.25 (the version trl 1.16 talks to)?"
        ) from None
    if transfer is None:
        raise UsageError(
            f"the vLLM server at {base_url} has no weight-transfer engine, so TRL cannot send it new "
            """weights. Restart it with --weight-transfer-config '{"backend": "nccl"}' """
            "(serve-vllm passes it)."
        )
    return vllm_config


def served_model(vllm_config: dict[str, Any]) -> str | None:
    """The model (Hub id or path) the server was started with, as /server_info reports it."""
    model_config = vllm_config.get("model_config")
    return model_config.get("model") if isinstance(model_config, dict) else None
