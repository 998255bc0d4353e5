"""trlstack.rank.tree_kernel: which kernel serves async-grpo's tree packing, never a silent failure; the
FA4 adapter's window, and the SDPA path's mask, pure."""

from __future__ import annotations

import importlib.util

import pytest
from trlstack.rank import tree_kernel
from trlstack.rank.tree_kernel import SPEEDS, choose_kernel, fa4_problem, fa4_window, visible_keys

HAS_TORCH = importlib.util.find_spec("torch") is not None


def problems(hub=None, fa4=None):
    return {"hub": lambda: hub, "fa4": lambda: fa4}


def test_auto_takes_trls_hub_kernel_where_it_loads():
    assert choose_kernel("auto", problems()) == ("hub", [])


def test_auto_takes_fa4_where_the_hub_kernel_is_not_cached_and_says_why():
    name, skipped = choose_kernel("auto", problems(hub="offline, not cached"))
    assert name == "fa4" and skipped == ["hub passed over: offline, not cached"]


def test_auto_ends_on_sdpa_naming_both_reasons():
    name, skipped = choose_kernel("auto", problems(hub="offline", fa4="not installed"))
    assert name == "sdpa"
    assert skipped == ["hub passed over: offline", "fa4 passed over: not installed"]


def test_a_kernel_asked_for_that_cannot_serve_is_an_error_naming_the_fix():
    with pytest.raises(ValueError, match="fa4 cannot serve: not installed.*tree_attention_kernel: auto"):
        choose_kernel("fa4", problems(fa4="not installed"))
    assert choose_kernel("hub", problems(fa4="not installed")) == ("hub", [])


def test_sdpa_serves_without_asking():
    def never():
        raise AssertionError("asked")

    assert choose_kernel("sdpa", {"hub": never, "fa4": never}) == ("sdpa", [])


def test_an_unknown_kernel_is_refused():
    with pytest.raises(ValueError, match="one of auto, hub, fa4, sdpa"):
        choose_kernel("fa3", problems())


def test_every_kernel_says_what_it_is_in_the_log():
    assert set(SPEEDS) == {"hub", "fa4", "sdpa"}


@pytest.mark.parametrize(
    ("capability", "found", "problem"),
    [
        (None, True, "no CUDA GPU"),
        ((8, 0), True, "8.0 is below Hopper's 9.0"),
        ((9, 0), False, "flash-attn-4 package is not installed"),
        ((9, 0), True, None),
        ((10, 0), True, None),
    ],
)
def test_fa4_needs_hopper_or_newer_and_its_package(capability, found, problem):
    got = fa4_problem(capability, find=lambda name: object() if found else None)
    assert got is None if problem is None else problem in got


def test_fa4_writes_an_unlimited_window_as_none():
    assert fa4_window((-1, -1)) == (None, None)
    assert fa4_window((127, 0)) == (127, 0)


def test_a_segments_queries_see_their_path_up_to_themselves():
    # 2 queries at the end of a 5-key path: the first sees keys 0-3, the second 0-4
    assert visible_keys(2, 5, -1) == [(0, 3), (0, 4)]
    assert visible_keys(1, 1, -1) == [(0, 0)]


def test_a_left_window_bounds_what_a_query_sees():
    assert visible_keys(2, 5, 2) == [(1, 3), (2, 4)]


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (light install)")
def test_sdpa_path_equals_attention_over_each_segment_alone():
    import torch
    from trlstack.rank.tree_kernel import SDPA

    torch.manual_seed(0)
    q, k, v = torch.randn(5, 4, 8), torch.randn(9, 2, 8), torch.randn(9, 2, 8)
    cu_q, cu_k = torch.tensor([0, 2, 5]), torch.tensor([0, 4, 9])
    out = SDPA.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 3, 5, softmax_scale=None, causal=True)
    for (q0, q1), (k0, k1) in zip([(0, 2), (2, 5)], [(0, 4), (4, 9)], strict=True):
        for head in range(4):
            for row in range(q1 - q0):
                last = (k1 - k0) - (q1 - q0) + row
                scores = k[k0 : k0 + last + 1, head // 2] @ q[q0 + row, head] / 8**0.5
                expected = torch.softmax(scores, 0) @ v[k0 : k0 + last + 1, head // 2]
                torch.testing.assert_close(out[q0 + row, head], expected, rtol=1e-4, atol=1e-5)


class Failing:
    @staticmethod
    def flash_attn_varlen_func(*args, **kwargs):
        raise RuntimeError("head dim 48 is not supported")


class Working:
    @staticmethod
    def flash_attn_varlen_func(*args, **kwargs):
        return ("fa4", args, kwargs)


def test_fa4_serves_while_it_works():
    said = []
    kernel = tree_kernel.FirstFailureToSDPA(Working, "fa4", said.append)
    assert kernel.flash_attn_varlen_func(1, 2, causal=True) == ("fa4", (1, 2), {"causal": True})
    assert said == []


def test_a_failing_fa4_call_and_every_later_one_go_to_sdpa_said_once(monkeypatch):
    calls = []

    def sdpa(*args, **kwargs):
        calls.append((args, kwargs))
        return "sdpa"

    monkeypatch.setattr(tree_kernel.SDPA, "flash_attn_varlen_func", staticmethod(sdpa))
    said = []
    kernel = tree_kernel.FirstFailureToSDPA(Failing, "fa4", said.append)
    assert kernel.flash_attn_varlen_func("q", "k", causal=True) == "sdpa"
    assert kernel.flash_attn_varlen_func("q2", "k2") == "sdpa"
    assert calls == [(("q", "k"), {"causal": True}), (("q2", "k2"), {})]
    assert len(said) == 1
    assert said[0].startswith("tree attention kernel: sdpa from now on")
    assert "fa4 failed (RuntimeError: head dim 48 is not supported)" in said[0]
