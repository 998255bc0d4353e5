"""trlstack.commands.doctor.judge: each judgement of the machine's facts, pure."""

from __future__ import annotations

import pytest
from trlstack.commands.doctor import judge
from trlstack.commands.doctor.judge import Facts, Finding
from trlstack.gpus import Gpu, Probe

NO_DRIVER = Probe((), None, "NVML: NVML Shared Library Not Found")


def gpu(index=0, capability=(9, 0), driver="580.95.05", name="NVIDIA H200"):
    return Gpu(index, f"GPU-{index:04d}", name, capability, driver)


def levels(findings):
    return [finding.level for finding in findings]


def only(findings):
    (finding,) = findings
    return finding


def test_no_driver_is_said_plainly_with_what_still_works_and_the_fix():
    finding = only(judge.judge_driver(NO_DRIVER))
    assert finding.level == "warn"
    assert "no NVIDIA driver here (NVML: NVML Shared Library Not Found" in finding.message
    assert "`train --cpu` work" in finding.message
    assert "driver >= 580" in finding.fix and "--gpus all" in finding.fix


@pytest.mark.parametrize(
    ("driver", "level"),
    [
        ("580.95.05", "ok"),
        ("590.1", "ok"),
        ("575.57.08", "fail"),
        ("535.104.05", "fail"),
        ("unknown", "fail"),
    ],
)
def test_driver_must_be_580_or_newer_for_cuda_13(driver, level):
    finding = only(judge.judge_driver(Probe((gpu(driver=driver),), "nvml")))
    assert finding.level == level and driver in finding.message
    if level == "fail":
        assert "too old for CUDA 13" in finding.message and "580 branch" in finding.fix


def test_a_driver_without_a_version_is_a_warning():
    assert levels(judge.judge_driver(Probe((gpu(driver=None),), "nvml"))) == ["warn"]


@pytest.mark.parametrize(
    ("capability", "level", "words"),
    [
        ((9, 0), "ok", "compute capability 9.0: train uses bf16"),
        ((8, 0), "ok", "bf16"),
        ((7, 5), "info", "train uses fp16 and sdpa (no bf16)"),
        ((7, 0), "fail", "CUDA 13 needs >= 7.5"),
        ((6, 1), "fail", "CUDA 13 needs >= 7.5"),
        (None, "info", "compute capability unknown"),
    ],
)
def test_each_gpu_is_judged_by_its_compute_capability(capability, level, words):
    finding = judge.judge_gpus(Probe((gpu(capability=capability),), "nvml"), None)[0]
    assert finding.level == level and words in finding.message and "GPU 0: NVIDIA H200" in finding.message


@pytest.mark.parametrize("capability", [(9, 0), (8, 0), (7, 5), None])
def test_doctor_says_the_precision_train_picks(capability):
    from trlstack import policy

    chosen, _ = policy.precision([gpu(capability=capability)])
    finding = judge.judge_gpus(Probe((gpu(capability=capability),), "nvml"), None)[0]
    assert f"train uses {chosen}" in finding.message
    assert {"bf16", "fp16"} - {chosen} & set(finding.message.replace(",", " ").split()) == set()


def test_one_gpu_is_colocate_by_default_with_the_measured_reason_and_the_server_named():
    findings = judge.judge_gpus(Probe((gpu(),), "nvml"), None)
    assert findings[-1].topic == "plan" and findings[-1].level == "ok"
    assert findings[-1].message.startswith(
        "1 GPU: by default the trainer runs vLLM inside it on GPU 0, no server; colocate, vLLM inside the "
        "trainer: measured faster on one GPU at 0.5B (the default model's size): a GRPO step of 1.10 s "
        "against 1.58 s for a shared-GPU server over NCCL sockets"
    )
    assert '(one H200; README.md, "One GPU"); --share-gpus chooses the server' in findings[-1].message
    assert findings[-1].fix is None


def test_several_gpus_show_the_default_plan():
    findings = judge.judge_gpus(Probe(tuple(gpu(i) for i in range(8)), "nvml"), None)
    assert findings[-1] == Finding(
        "ok",
        "plan",
        "8 GPUs: by default vLLM serves on 0,1,2,3, training on 4,5,6,7; disjoint GPU sets: weights are "
        "pushed over NCCL (P2P/NVLink where the GPUs have it) (see `trlstack plan`)",
    )


def test_cuda_visible_devices_is_reported_and_a_bad_value_named():
    probe = Probe(tuple(gpu(i) for i in range(4)), "nvml")
    shown = judge.judge_gpus(probe, "2,3")
    assert any("CUDA_VISIBLE_DEVICES='2,3': GPUs 2,3 visible" in f.message for f in shown)
    assert "vLLM serves on 2, training on 3" in shown[-1].message
    bad = judge.judge_gpus(probe, "9")[-1]
    assert bad.level == "warn" and "names GPU 9" in bad.message and "CUDA_VISIBLE_DEVICES" in bad.fix


def test_no_gpu_to_check_without_a_driver_and_a_driver_without_gpus():
    assert levels(judge.judge_gpus(NO_DRIVER, None)) == ["info"]
    assert levels(judge.judge_gpus(Probe((), "nvml"), None)) == ["warn"]


@pytest.mark.parametrize(
    ("size", "level", "words"),
    [
        (None, "warn", "/dev/shm is missing"),
        (64 << 20, "warn", "/dev/shm is 64.0 MiB"),
        (16 << 30, "ok", "16.0 GiB"),
    ],
)
def test_shared_memory_must_be_at_least_a_gib(size, level, words):
    finding = only(judge.judge_shm(size))
    assert finding.level == level and words in finding.message
    if level == "warn":
        assert "--shm-size" in finding.fix and "shm_size" in finding.fix


def test_ports_free_or_busy():
    findings = judge.judge_ports({8000: None, 51216: "Address already in use"})
    assert levels(findings) == ["ok", "warn"]
    assert "port 51216 cannot be bound on 127.0.0.1 (Address already in use)" in findings[1].message
    assert "sport = :51216" in findings[1].fix and "TRLSTACK_VLLM_GROUP_PORT" in findings[1].fix


def hf(**facts):
    base = {
        "probe": NO_DRIVER,
        "hf_cache": "/cache/huggingface/hub",
        "hf_cache_exists": True,
        "hf_cache_free_bytes": 100 << 30,
    }
    return judge.judge_hf(Facts(**{**base, **facts}))


def test_hf_cache_and_online_state():
    cache, state = hf()
    assert cache == Finding("ok", "hf", "Hugging Face cache at /cache/huggingface/hub (100.0 GiB free)")
    assert state.level == "info" and "online" in state.message


@pytest.mark.parametrize("value", ["1", "ON", "yes", "True"])
def test_offline_with_a_cache_loads_from_it(value):
    assert "models load only from the cache" in hf(hf_offline=value)[1].message


def test_offline_with_no_cache_cannot_load_anything():
    state = hf(hf_offline="1", hf_cache_exists=False)[1]
    assert state.level == "warn" and "no model or dataset can load" in state.message and "unset" in state.fix


def test_an_unwritable_or_full_cache_is_flagged():
    assert hf(hf_cache_writable=False)[0].level == "fail"
    low = hf(hf_cache_free_bytes=2 << 30)[0]
    assert low.level == "warn" and "2.0 GiB free" in low.message and "HF_HOME" in low.fix


def test_stack_versions_against_the_pins():
    pins = {"trl": "1.16.0", "torch": "2.11.0", "vllm": "0.25.0"}
    assert judge.judge_stack({}, {})[0].message.startswith("pins unknown")
    light = only(judge.judge_stack(pins, {"trl": None, "torch": None, "vllm": None}))
    assert light.level == "info" and "light install" in light.message and "uv sync --extra gpu" in light.fix
    findings = judge.judge_stack(pins, {"trl": "1.16.0", "torch": "2.10.0", "vllm": None})
    assert [(f.level, f.message) for f in findings] == [
        ("ok", "trl 1.16.0"),
        ("warn", "torch: 2.10.0 installed, pinned 2.11.0"),
        ("warn", "vllm: not installed, pinned 0.25.0"),
    ]
