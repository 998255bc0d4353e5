"""Precision and attention decisions for the training GPUs."""

from __future__ import annotations

import pytest
from trlstack import policy
from trlstack.gpus import Gpu
from trlstack.policy import (
    ATTENTION_PREFERENCE,
    Attention,
    choose_attention,
    hub_kernel_unavailable,
    kernels_mismatch,
    precision,
    publisher_problem,
)


def gpu(capability):
    return Gpu(0, compute_capability=capability)


@pytest.mark.parametrize(
    ("capabilities", "chosen"),
    [
        ([(9, 0)], "bf16"),  # H100, H200
        ([(8, 0), (8, 0)], "bf16"),  # A100
        ([(8, 6)], "bf16"),  # RTX 30xx
        ([(12, 0)], "bf16"),  # Blackwell
        ([(7, 5)], "fp16"),  # T4, RTX 20xx
        ([(7, 0)], "fp16"),  # V100
        ([(9, 0), (7, 5)], "fp16"),  # mixed: the oldest decides
    ],
)
def test_precision_follows_the_oldest_gpu(capabilities, chosen):
    assert precision([gpu(c) for c in capabilities])[0] == chosen


def test_precision_on_the_cpu_is_fp32():
    assert precision([], cpu=True) == ("fp32", "CPU run")


def test_without_evidence_of_the_capability_the_precision_every_cuda_13_gpu_has_is_chosen_and_said():
    for gpus in ([Gpu(0)], [gpu((9, 0)), Gpu(1)]):
        mode, why = precision(gpus)
        assert mode == "fp16"
        assert why == (
            "compute capability unknown: fp16, which every GPU CUDA 13 supports has "
            "(bf16 needs 8.0; set bf16: true in the config for Ampere or newer)"
        )


def always(reason):
    return lambda implementation: reason


@pytest.mark.parametrize(
    ("capability", "chosen"),
    [
        ((9, 0), "kernels-community/flash-attn3"),
        ((8, 0), "kernels-community/flash-attn2"),
        ((8, 9), "kernels-community/flash-attn2"),
        ((10, 0), "kernels-community/flash-attn2"),
        ((7, 5), "sdpa"),
    ],
)
def test_fastest_available_attention_for_the_gpu(capability, chosen):
    assert choose_attention([gpu(capability)], always(None)) == (chosen, [])


def test_every_gpu_must_support_the_choice():
    assert choose_attention([gpu((9, 0)), gpu((8, 0))], always(None))[0] == "kernels-community/flash-attn2"


def test_missing_kernels_fall_back_to_sdpa_with_the_reasons():
    chosen, notes = choose_attention([gpu((9, 0))], always("the `kernels` package is not installed"))
    assert chosen == "sdpa"
    assert notes == [
        "kernels-community/flash-attn3 skipped: the `kernels` package is not installed",
        "kernels-community/flash-attn2 skipped: the `kernels` package is not installed",
    ]


def test_only_the_missing_kernel_is_skipped():
    def unavailable(name):
        return "not cached" if name.endswith("flash-attn3") else None

    assert choose_attention([gpu((9, 0))], unavailable) == (
        "kernels-community/flash-attn2",
        ["kernels-community/flash-attn3 skipped: not cached"],
    )


def test_the_preference_table_is_data_a_benchmark_can_reorder():
    measured = [Attention("sdpa"), *ATTENTION_PREFERENCE]
    assert choose_attention([gpu((9, 0))], always(None), measured) == ("sdpa", [])
    assert ATTENTION_PREFERENCE[-1] == Attention("sdpa")  # the fallback that is always there


@pytest.fixture
def kernels_installed(monkeypatch):
    """transformers and a `kernels` it accepts are installed (the light test environment has neither)."""
    monkeypatch.setattr(policy, "installed_kernels_problem", lambda: None)


def test_without_the_kernels_package_no_hub_kernel_is_used(monkeypatch, tmp_path):
    monkeypatch.setattr(
        policy, "installed_kernels_problem", lambda: kernels_mismatch("5.17.0", TRANSFORMERS_5_17, None)
    )
    reason = hub_kernel_unavailable("kernels-community/flash-attn2", {"HOME": str(tmp_path)})
    assert reason == "the `kernels` package is not installed"


# Requires-Dist lines of transformers 5.17.0 that name kernels (its extras), and two unrelated ones.
TRANSFORMERS_5_17 = [
    "huggingface-hub<2.0,>=1.5.0",
    'kernels<0.17,>=0.16.0; extra == "kernels"',
    'kernels<0.17,>=0.16.0; extra == "integrations"',
    'torch>=2.4; extra == "torch"',
]


@pytest.mark.parametrize("version", ["0.16.0", "0.16.2"])
def test_a_kernels_version_transformers_declares_is_accepted(version):
    assert kernels_mismatch("5.17.0", TRANSFORMERS_5_17, version) is None


@pytest.mark.parametrize("version", ["0.17.2", "0.15.2", "0.17.0rc1"])
def test_a_kernels_version_transformers_refuses_is_named_with_the_range(version):
    reason = kernels_mismatch("5.17.0", TRANSFORMERS_5_17, version)
    assert reason == (
        f"kernels {version} is installed, but transformers 5.17.0 loads Hub kernels only with "
        "kernels<0.17,>=0.16.0"
    )


def test_without_transformers_or_its_range_no_hub_kernel_is_trusted():
    assert kernels_mismatch(None, [], "0.16.2") == "transformers is not installed"
    assert kernels_mismatch("9.0.0", ["torch>=2.4"], "0.16.2") == (
        "transformers 9.0.0 declares no `kernels` version it loads Hub kernels with"
    )


def test_a_refused_kernels_falls_back_to_sdpa_in_the_policy(monkeypatch, tmp_path):
    # What crashed Hopper runs: kernels 0.17.2 beside transformers 5.17.0 now means sdpa and a note.
    monkeypatch.setattr(
        policy, "installed_kernels_problem", lambda: kernels_mismatch("5.17.0", TRANSFORMERS_5_17, "0.17.2")
    )
    unavailable = lambda repo: hub_kernel_unavailable(repo, {"HOME": str(tmp_path)})  # noqa: E731
    chosen, notes = choose_attention([gpu((9, 0))], unavailable)
    assert chosen == "sdpa"
    assert notes[0] == (
        "kernels-community/flash-attn3 skipped: kernels 0.17.2 is installed, but transformers 5.17.0 loads "
        "Hub kernels only with kernels<0.17,>=0.16.0"
    )


def cache_entry(cache, repo_id, version, kind="kernels"):
    repo = cache / f"{kind}--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    if version is not None:
        (repo / "refs" / f"v{version}").write_text("0123abc")
    return repo


@pytest.mark.parametrize("kind", ["kernels", "models"])
def test_a_cached_kernel_is_available_offline(kernels_installed, tmp_path, kind):
    cache = tmp_path / "kernel-cache"
    cache_entry(cache, "kernels-community/flash-attn3", 1, kind)
    environ = {"KERNELS_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "HOME": str(tmp_path)}
    assert hub_kernel_unavailable("kernels-community/flash-attn3", environ) is None


def test_the_hub_cache_under_hf_home_counts(kernels_installed, tmp_path):
    cache_entry(tmp_path / "hf" / "hub", "kernels-community/flash-attn2", 3)
    environ = {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    assert hub_kernel_unavailable("kernels-community/flash-attn2", environ) is None


@pytest.mark.parametrize("cached", [1, None])  # another major version, or a snapshot without a version ref
def test_offline_the_cache_must_hold_the_version_transformers_loads(kernels_installed, tmp_path, cached):
    cache_entry(tmp_path / "cache", "kernels-community/flash-attn2", cached)
    environ = {"KERNELS_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1", "HOME": str(tmp_path)}
    reason = hub_kernel_unavailable("kernels-community/flash-attn2", environ)
    assert reason == "the kernel cache lacks v3 (the version transformers loads) and HF_HUB_OFFLINE is set"
    del environ["HF_HUB_OFFLINE"]
    # downloadable online, from a publisher the Hub trusts
    assert hub_kernel_unavailable("kernels-community/flash-attn2", environ, trusted) is None


def test_offline_without_the_kernel_in_a_cache_falls_back(kernels_installed, tmp_path):
    environ = {"HF_HUB_OFFLINE": "1", "HOME": str(tmp_path)}
    reason = hub_kernel_unavailable("kernels-community/flash-attn2", environ)
    assert reason == "not in the kernel cache and HF_HUB_OFFLINE is set"


def trusted(repo_id):  # the Hub's answer for a trusted publisher (the Hub is the one double here)
    return None


def test_online_the_kernel_can_be_downloaded(kernels_installed, tmp_path):
    assert hub_kernel_unavailable("kernels-community/flash-attn2", {"HOME": str(tmp_path)}, trusted) is None


@pytest.mark.parametrize("cached", [False, True])
def test_online_a_publisher_the_hub_cannot_vouch_for_falls_back_and_says_why(
    kernels_installed, tmp_path, cached
):
    # kernels asks the Hub before every online load, cached or not; without an answer the model load fails.
    if cached:
        cache_entry(tmp_path / "cache", "kernels-community/flash-attn3", 1)
    environ = {"KERNELS_CACHE": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    reason = hub_kernel_unavailable(
        "kernels-community/flash-attn3", environ, lambda repo: "the Hub cannot be reached (ConnectError)"
    )
    assert reason is not None and reason.startswith("the Hub cannot be reached (ConnectError)")
    assert ("HF_HUB_OFFLINE=1 loads it without asking" in reason) == cached
    chosen, notes = choose_attention([Gpu(0, compute_capability=(9, 0))], lambda repo: reason)
    assert chosen == "sdpa" and notes[0] == f"kernels-community/flash-attn3 skipped: {reason}"


def test_the_trust_question_is_the_one_kernels_asks(monkeypatch):
    hub = pytest.importorskip("huggingface_hub")
    answers = {"kernels-community": type("Info", (), {"trustedKernelPublisher": True})(),
               "someone": type("Info", (), {})()}  # fmt: skip

    def overview(self, organization):
        if organization not in answers:
            raise OSError("unreachable")
        return answers[organization]

    monkeypatch.setattr(hub.HfApi, "get_organization_overview", overview)
    assert publisher_problem("kernels-community/flash-attn3") is None
    assert publisher_problem("someone/kernel") == (
        "someone is not a trusted kernel publisher on the Hub, so kernels refuses it"
    )
    assert (
        publisher_problem("elsewhere/kernel") == "the Hub cannot be reached to verify its publisher (OSError)"
    )


def test_kernel_versions_match_what_the_installed_transformers_loads():
    hub_kernels = pytest.importorskip(
        "transformers.integrations.hub_kernels", reason="transformers is not installed (light install)"
    )
    for choice in ATTENTION_PREFERENCE:
        if choice.from_hub:
            expected = hub_kernels.get_attn_kernel_version(choice.implementation)
            assert (
                policy.HUB_KERNEL_VERSION.get(choice.implementation, policy.DEFAULT_HUB_KERNEL_VERSION)
                == expected
            )
