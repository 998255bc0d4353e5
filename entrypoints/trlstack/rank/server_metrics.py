"""The vLLM server's own view of the run, from its Prometheus `/metrics`, added to the run's metrics at each
logging step by the first rank of a run in server mode (rank/watch.py): tokens it generated and read per
second since the last logging step, its preemptions, its mean queue time, and at that moment its KV-cache
use and its requests running and waiting (summed over its engines; the KV cache the fullest engine's).

One GET per logging step on the address the trainer already talks to, bounded by a short timeout; a server
that does not answer costs the step nothing more and is said once.
"""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from trlstack.metrics import SERVER_PREFIX

# vLLM's counters (prometheus_client adds _total), histograms (_sum and _count) and gauges this reads.
COUNTERS = {
    "vllm:generation_tokens_total": "generation_tokens_per_s",
    "vllm:prompt_tokens_total": "prompt_tokens_per_s",
}
INCREASES = {"vllm:num_preemptions_total": "preemptions"}
MEANS = {"vllm:request_queue_time_seconds": "queue_time_s", "vllm:time_to_first_token_seconds": "ttft_s"}
GAUGES = {"vllm:num_requests_running": "requests_running", "vllm:num_requests_waiting": "requests_waiting"}
HIGHEST = {"vllm:kv_cache_usage_perc": "kv_cache_usage"}
TIMEOUT_S = 2.0
# A sample line: NAME{LABELS} VALUE [TIMESTAMP] (labels optional; a label value may hold spaces and braces).
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})?\s+(\S+)')


def parse(text: str) -> tuple[dict[str, float], dict[str, float]]:
    """(sum, max) of the samples of each metric in Prometheus' text format, over their labels."""
    sums: dict[str, float] = {}
    highest: dict[str, float] = {}
    for line in text.splitlines():
        sample = SAMPLE.match(line)
        if sample is None:
            continue  # a comment, an empty line
        name, value_text = sample.groups()
        try:
            value = float(value_text)
        except ValueError:
            continue
        sums[name] = sums.get(name, 0.0) + value
        highest[name] = max(highest.get(name, value), value)
    return sums, highest


def changes(
    before: Mapping[str, float], after: Mapping[str, float], highest: Mapping[str, float], seconds: float
) -> dict[str, float]:
    """The server metrics between two scrapes `seconds` apart (the first scrape: the gauges only)."""
    found = {SERVER_PREFIX + name: after[key] for key, name in GAUGES.items() if key in after}
    found |= {SERVER_PREFIX + name: highest[key] for key, name in HIGHEST.items() if key in highest}
    if not before or seconds <= 0:
        return found
    for key, name in COUNTERS.items():
        if key in after and key in before:
            found[SERVER_PREFIX + name] = max(after[key] - before[key], 0.0) / seconds
    for key, name in INCREASES.items():
        if key in after and key in before:
            found[SERVER_PREFIX + name] = max(after[key] - before[key], 0.0)
    for key, name in MEANS.items():
        count = after.get(f"{key}_count", 0.0) - before.get(f"{key}_count", 0.0)
        if count > 0:
            found[SERVER_PREFIX + name] = (after[f"{key}_sum"] - before.get(f"{key}_sum", 0.0)) / count
    return found


def fetch(url: str) -> str:
    with urllib.request.urlopen(f"{url.rstrip('/')}/metrics", timeout=TIMEOUT_S) as response:
        text: str = response.read().decode("utf-8", errors="replace")
        return text


@dataclass
class Scraper:
    """The server at `url`, scraped at each logging step; `say` tells once that it did not answer."""

    url: str
    say: Callable[[str], None]
    get: Callable[[str], str] = fetch
    clock: Callable[[], float] = time.monotonic
    last: dict[str, float] = field(default_factory=dict)
    last_at: float = 0.0
    failed: bool = False

    def scrape(self) -> dict[str, float]:
        try:
            sums, highest = parse(self.get(self.url))
        except (OSError, ValueError) as error:
            if not self.failed:
                self.failed = True
                self.say(
                    f"the vLLM server's {self.url}/metrics did not answer ({error}); its metrics are left out"
                )
            return {}
        now = self.clock()
        found = changes(self.last, sums, highest, now - self.last_at)
        self.last, self.last_at = sums, now
        return found
