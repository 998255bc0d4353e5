"""train's settings of async-grpo's pipeline: staleness, the weight-sync interval and the timeouts that end a
hung run. Each is a flag and a variable and defaults to the config's value, else TRL 1.16's default
(recipes/async_grpo.yaml says why each is what it is); asynchronous.py applies them."""

from __future__ import annotations

from typing import Any

from trlstack.defaults import Env
from trlstack.option_types import positive_int, seconds_or_never, wait_seconds, whole_number
from trlstack.options import setting

GROUP = "async-grpo"  # train's --help group of these settings


def max_staleness_setting() -> Any:
    return setting(
        Env.MAX_STALENESS,
        "syncs a sample's weights may lag the trained ones before it is dropped",
        type=whole_number,
        shown="the config's max_staleness, else TRL's 4",
        group=GROUP,
    )


def weight_sync_steps_setting() -> Any:
    return setting(
        Env.WEIGHT_SYNC_STEPS,
        "training steps between weight pushes to the server",
        type=positive_int,
        shown="the config's weight_sync_steps, else TRL's 1",
        group=GROUP,
    )


def weight_sync_timeout_setting() -> Any:
    return setting(
        Env.WEIGHT_SYNC_TIMEOUT,
        "seconds a weight push may take before the run ends naming it",
        type=positive_int,
        shown="the config's weight_sync_timeout, else TRL's 1800",
        group=GROUP,
    )


def heartbeat_timeout_setting() -> Any:
    return setting(
        Env.HEARTBEAT_TIMEOUT,
        "seconds without a rollout-worker heartbeat before the run ends naming it",
        type=wait_seconds,
        shown="the config's heartbeat_stale_after_s, else TRL's 300",
        group=GROUP,
    )


def server_lost_after_setting() -> Any:
    return setting(
        Env.SERVER_LOST_AFTER,
        "seconds the server may not answer /health before the run ends naming it, 0 never",
        type=seconds_or_never,
        shown="the config's server_lost_after_s, else 120",
        group=GROUP,
    )


# Flag -> (the TrainSettings field, the config key it sets, its variable)
PIPELINE = {
    "--max-staleness": ("max_staleness", "max_staleness", Env.MAX_STALENESS),
    "--weight-sync-steps": ("weight_sync_steps", "weight_sync_steps", Env.WEIGHT_SYNC_STEPS),
    "--weight-sync-timeout": ("weight_sync_timeout", "weight_sync_timeout", Env.WEIGHT_SYNC_TIMEOUT),
    "--heartbeat-timeout": ("heartbeat_timeout", "heartbeat_stale_after_s", Env.HEARTBEAT_TIMEOUT),
    "--server-lost-after": ("server_lost_after", "server_lost_after_s", Env.SERVER_LOST_AFTER),
}
