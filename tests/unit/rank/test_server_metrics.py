"""rank/server_metrics.py: the vLLM server's Prometheus metrics become rates and means over each logging
interval; a server that does not answer is said once and costs nothing else."""

from __future__ import annotations

from trlstack.rank.server_metrics import Scraper, parse

# vLLM 0.25's /metrics, two engines (data parallel), as prometheus_client writes it.
SCRAPE = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="Qwen/Qwen2.5-0.5B-Instruct"}} 3.0
vllm:num_requests_running{{engine="1",model_name="Qwen/Qwen2.5-0.5B-Instruct"}} 5.0
vllm:num_requests_waiting{{engine="0",model_name="Qwen/Qwen2.5-0.5B-Instruct"}} 0.0
vllm:kv_cache_usage_perc{{engine="0",model_name="Qwen/Qwen2.5-0.5B-Instruct"}} 0.25
vllm:kv_cache_usage_perc{{engine="1",model_name="Qwen/Qwen2.5-0.5B-Instruct"}} 0.5
vllm:generation_tokens_total{{engine="0",model_name="Qwen/Qwen2.5-0.5B-Instruct"}} {generated}
vllm:prompt_tokens_total{{engine="0",model_name="Qwen/Qwen2.5-0.5B-Instruct"}} {prompts}
vllm:num_preemptions_total{{engine="0",model_name="Qwen/Qwen2.5-0.5B-Instruct"}} {preempted}
vllm:request_queue_time_seconds_sum{{engine="0",model_name="Qwen/Qwen2.5-0.5B-Instruct"}} {queued}
vllm:request_queue_time_seconds_count{{engine="0",model_name="Qwen/Qwen2.5-0.5B-Instruct"}} {requests}
"""


def scrape(generated, prompts, preempted, queued, requests):
    return SCRAPE.format(
        generated=generated, prompts=prompts, preempted=preempted, queued=queued, requests=requests
    )


def test_samples_sum_over_labels_and_keep_the_highest():
    sums, highest = parse(scrape(10, 5, 0, 0, 0))
    assert sums["vllm:num_requests_running"] == 8.0
    assert highest["vllm:kv_cache_usage_perc"] == 0.5
    assert "# HELP" not in " ".join(sums)


def test_rates_and_means_over_the_interval_between_two_logging_steps():
    pages = iter([scrape(1000, 500, 1, 2.0, 10), scrape(5000, 1500, 3, 5.0, 40)])
    times = iter([100.0, 102.0])
    scraper = Scraper("http://127.0.0.1:8000", print, get=lambda url: next(pages), clock=lambda: next(times))
    first = scraper.scrape()
    assert first == {
        "server/requests_running": 8.0,
        "server/requests_waiting": 0.0,
        "server/kv_cache_usage": 0.5,
    }
    second = scraper.scrape()
    assert second["server/generation_tokens_per_s"] == 2000.0
    assert second["server/prompt_tokens_per_s"] == 500.0
    assert second["server/preemptions"] == 2.0
    assert second["server/queue_time_s"] == 0.1  # 3 s over 30 requests


def test_a_server_that_does_not_answer_is_said_once():
    said = []

    def refused(url):
        raise ConnectionRefusedError(111, "Connection refused")

    scraper = Scraper("http://127.0.0.1:9", said.append, get=refused)
    assert scraper.scrape() == {} and scraper.scrape() == {}
    assert len(said) == 1 and "http://127.0.0.1:9/metrics did not answer" in said[0]
