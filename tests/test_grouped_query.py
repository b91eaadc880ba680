"""GroupedQueryAttention: equal to SDPA's enable_gqa (MHA, GQA, MQA; weights and fast path), the folded groups,
masks per head, token by token through a cache equal to one causal pass, rotary offsets, the window, errors, and
a decoding step that never allocates G times its cache (the broadcast it replaces did)."""

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from attention_lib import (
    GroupedQueryAttention,
    KVCache,
    RotaryPositions,
    SlidingWindowCache,
    group_heads,
    merge_heads,
    sliding_window_mask,
    split_heads,
    ungroup_heads,
)
from attention_lib.grouped_query import SDPA_HAS_GQA, group_mask


def gqa_module(H=4, kv=2, E=16, seed=0, **kwargs):
    torch.manual_seed(seed)
    return GroupedQueryAttention(E, H, kv, **kwargs).eval()


def with_sdpa_gqa(mha, x, **options):
    """The same module computed with SDPA's own grouped-query attention (``enable_gqa=True``)."""
    q = split_heads(mha.q_proj(x), mha.num_heads)  # (N, H, L, Dh)
    k, v = (split_heads(p(x), mha.num_kv_heads) for p in (mha.k_proj, mha.v_proj))  # (N, Hkv, L, Dh)
    if mha.rotary is not None:
        q, k = mha.rotary(q), mha.rotary(k)
    heads = torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True, **options)
    return mha.out_proj(merge_heads(heads))


@pytest.mark.parametrize("kv", [4, 2, 1])  # MHA, GQA, MQA
@pytest.mark.parametrize("need_weights", [True, False])
def test_num_kv_heads_agrees_with_sdpa_enable_gqa(kv, need_weights):
    mha = gqa_module(kv=kv)
    x = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(1))
    assert mha.k_proj.weight.shape == (kv * 4, 16)
    for options, ours in (({}, {"is_causal": False}), ({"is_causal": True}, {})):
        out, w = mha(x, need_weights=need_weights, **ours)
        torch.testing.assert_close(out, with_sdpa_gqa(mha, x, **options), atol=1e-5, rtol=1e-5)
        assert (w is None) != need_weights
        if need_weights:
            assert w.shape == (2, 4, 5, 5)
            torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 5))


def test_the_fold_puts_each_group_of_query_heads_into_its_rows():
    q = torch.randn(2, 6, 3, 5)  # (N, H, L, Dh)
    folded = group_heads(q, 2)  # (N, Hkv, G·L, Dh)
    assert folded.shape == (2, 2, 9, 5)
    torch.testing.assert_close(folded[:, 1, 3:6], q[:, 4])  # group 1, its second head (h = 1·3 + 1), rows 3..5
    assert torch.equal(ungroup_heads(folded, 6), q)
    mask = torch.rand(3, 7) > 0.5
    assert torch.equal(group_mask(mask, 6, 2), mask.repeat(3, 1))  # (L, S) -> (G·L, S)
    per_head = torch.rand(2, 6, 3, 7) > 0.5
    assert torch.equal(ungroup_heads(group_mask(per_head, 6, 2), 6), per_head)


def test_query_heads_of_a_group_read_the_same_key_head():
    mha = gqa_module(H=4, kv=2)
    x = torch.randn(1, 3, 16)
    _, w = mha(x, is_causal=False, need_weights=True)
    k = split_heads(mha.k_proj(x), 2)  # (N, Hkv, S, Dh)
    q = split_heads(mha.q_proj(x), 4)
    for h in range(4):
        expected = torch.softmax(q[:, h] @ k[:, h // 2].transpose(-2, -1) / 2.0, dim=-1)  # Dh = 4
        torch.testing.assert_close(w[:, h], expected)


def test_masks_reach_every_head_of_a_group_on_both_paths():
    mha = gqa_module(kv=2)
    x = torch.randn(2, 3, 16)
    per_head = torch.rand(2, 4, 3, 3, generator=torch.Generator().manual_seed(0)) > 0.3
    per_head[..., 0] = True
    _, w = mha(x, per_head, need_weights=True)
    assert bool((w[~per_head] == 0).all())
    torch.testing.assert_close(mha(x, per_head)[0], with_sdpa_gqa(mha, x, attn_mask=per_head), atol=1e-5,
                               rtol=1e-5)
    padding = torch.tensor([[True, True, False], [True, True, True]])[:, None, None, :]  # (N, 1, 1, S)
    for need_weights in (True, False):
        out, _ = mha(x, padding, need_weights=need_weights)
        torch.testing.assert_close(out, with_sdpa_gqa(mha, x, attn_mask=padding), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("need_weights", [True, False])
def test_edge_rules_hold_on_both_paths(need_weights):
    mha = gqa_module(kv=2)
    x = torch.randn(1, 3, 16)
    none_for_row_1 = torch.ones(3, 3, dtype=torch.bool)
    none_for_row_1[1] = False
    out, _ = mha(x, none_for_row_1, need_weights=need_weights)
    torch.testing.assert_close(out[0, 1], mha.out_proj.bias if mha.out_proj.bias is not None
                               else torch.zeros(16))  # no key: zeros before the output projection
    x[0, 2, 0] = float("nan")
    out, _ = mha(x, need_weights=need_weights)
    assert bool(out[0, 2].isnan().all())  # a query that holds a NaN gets NaN (NaN in, NaN out)


def test_the_fast_path_folds_a_decoding_step_and_asks_sdpa_for_enable_gqa_in_a_causal_prefill(monkeypatch):
    seen = []
    sdpa = torch.nn.functional.scaled_dot_product_attention
    def spy(*a, **k):
        seen.append((a[0].shape[1], a[1].shape[1], k.get("enable_gqa")))
        return sdpa(*a, **k)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    mha = gqa_module(kv=2)
    cache = KVCache(1, 4)
    mha(torch.randn(1, 3, 16), cache=cache)  # a causal prefill: enable_gqa and is_causal, or the fold
    assert seen == ([(4, 2, True)] if SDPA_HAS_GQA else [(2, 2, None)])  # H query heads over Hkv, or Hkv over Hkv
    mha(torch.randn(1, 1, 16), cache=cache)  # a decoding step: the fold, (N, Hkv, G·1, Dh) over (N, Hkv, S, Dh)
    assert seen[-1] == (2, 2, None)


@pytest.mark.parametrize(("kv", "window", "rotary"), [(4, None, False), (2, None, True), (1, None, True),
                                                       (2, 3, True), (4, 2, False)])
@pytest.mark.parametrize("need_weights", [True, False])
def test_token_by_token_through_a_cache_equals_one_causal_pass(kv, window, rotary, need_weights):
    mha = gqa_module(kv=kv, window=window, rotary=RotaryPositions(4) if rotary else None)
    x = torch.randn(2, 7, 16, generator=torch.Generator().manual_seed(2))
    whole, _ = mha(x)
    cache = (KVCache(1, 7) if window is None else SlidingWindowCache(1, window))
    steps = [mha(x[:, :3], cache=cache, need_weights=need_weights)[0]]  # the prefill, 3 tokens
    for t in range(3, 7):
        out, w = mha(x[:, t:t + 1], cache=cache, need_weights=True)
        steps.append(out)
        assert w.shape[-1] == (t + 1 if window is None else min(window, t + 1))
    torch.testing.assert_close(torch.cat(steps, dim=1), whole, atol=1e-5, rtol=1e-5)
    assert cache.get_seq_length() == 7


def test_a_window_is_the_end_aligned_sliding_window_mask():
    mha = gqa_module(kv=2, window=2)
    x = torch.randn(1, 5, 16)
    out, w = mha(x, need_weights=True)
    torch.testing.assert_close(out, mha(x, sliding_window_mask(5, 5, window=2, align="lower_right"))[0])
    assert bool((w[0, :, 4, :3] == 0).all())


def test_with_a_cache_causal_means_aligned_to_the_end_and_causal_bias_is_read_once():
    from torch.nn.attention.bias import causal_lower_right

    mha = gqa_module(kv=4)
    x = torch.randn(1, 4, 16)
    cache = KVCache(1, 4)
    mha(x[:, :2], cache=cache)
    _, w = mha(x[:, 2:], cache=cache, need_weights=True)
    assert bool((w[0, :, 1] > 0).all())
    assert bool((w[0, :, 0, 3] == 0).all())
    cache = KVCache(1, 4)
    mha(x[:, :2], cache=cache)
    out, _ = mha(x[:, 2:], causal_lower_right(2, 4), cache=cache)
    torch.testing.assert_close(out, mha(x)[0][:, 2:], atol=1e-5, rtol=1e-5)


def test_rotary_positions_follow_the_cache_and_an_explicit_offset():
    mha = gqa_module(kv=2, rotary=RotaryPositions(4))
    x = torch.randn(1, 5, 16)
    whole, _ = mha(x)
    cache = KVCache(1, 5)
    mha(x[:, :4], cache=cache)
    wrong, _ = mha(x[:, 4:], cache=cache, offset=0)  # positions not offset
    assert not torch.allclose(wrong, whole[:, 4:], atol=1e-3)
    cache = KVCache(1, 5)
    mha(x[:, :4], cache=cache)
    right, _ = mha(x[:, 4:], cache=cache, offset=4)
    torch.testing.assert_close(right, whole[:, 4:], atol=1e-5, rtol=1e-5)


def test_repr_names_the_key_value_heads_and_the_window():
    assert "num_kv_heads=2, head_dim=4, window=3" in repr(gqa_module(kv=2, window=3))


@pytest.mark.parametrize(("args", "kwargs", "error", "match"), [
    ((16, 4, 3), {}, ValueError, r"num_heads=4 and num_kv_heads=3; pick num_kv_heads among \[1, 2, 4\]"),
    ((16, 4, 0), {}, ValueError, "num_kv_heads must be positive"),
    ((16, 4, 2.0), {}, TypeError, "num_kv_heads must be an int"),
    ((15, 4, 2), {}, ValueError, r"embed_dim=15 and num_heads=4; pick num_heads among \[1, 3, 5, 15\]"),
    ((16, 4, 2), {"window": 0}, ValueError, "window must be positive"),
    ((16, 4, 2), {"rotary": RotaryPositions(8)}, ValueError, r"each head has head_dim=4.*RotaryPositions\(4\)"),
    ((16, 4, 2), {"rotary": "rope"}, TypeError, "rotary must be a RotaryPositions or None"),
    ((16, 4, 2), {"layer_idx": -1}, ValueError, "layer_idx must be non-negative"),
    ((16, 4, 2), {"dropout": 1.0}, ValueError, "dropout"),
])
def test_construction_errors(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        GroupedQueryAttention(*args, **kwargs)


@pytest.mark.parametrize(("call", "error", "match"), [
    (lambda m, x: m(x, torch.ones(3, 3, dtype=torch.bool), is_causal=True), ValueError,
     "either attn_mask or is_causal=True, not both"),
    (lambda m, x: m(x, torch.ones(1, 3, 3, dtype=torch.bool)), ValueError, r"\(L, S\) or \(N or 1, H or 1, L, S\)"),
    (lambda m, x: m(x, torch.ones(1, 3, 3, 3, dtype=torch.bool)), ValueError, "must broadcast to the scores"),
    (lambda m, x: m(x, is_causal=1), TypeError, "is_causal must be True or False"),
    (lambda m, x: m(x, need_weights="yes"), TypeError, "need_weights must be True or False"),
    (lambda m, x: m(x.long()), TypeError, r"floating-point vectors.*embed token ids"),
    (lambda m, x: m(x[0]), ValueError, r"must be 3-D \(N, length, features\)"),
])
def test_forward_errors(call, error, match):
    with pytest.raises(error, match=match):
        call(gqa_module(kv=2), torch.zeros(1, 3, 16))


def test_a_window_without_is_causal_is_refused():
    with pytest.raises(ValueError, match="sliding window .window=2. is causal: pass is_causal=True"):
        gqa_module(window=2)(torch.zeros(1, 3, 16), is_causal=False)


# --- one decoding step allocates no copy of the cache ----------------------------------------------------------

class LargestOutputs(TorchDispatchMode):
    """Records, for every aten op that runs, the op and the number of elements of its largest output."""

    def __init__(self):
        super().__init__()
        self.sizes: list[tuple[str, int]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        tensors = [t for t in (out if isinstance(out, tuple | list) else [out]) if isinstance(t, torch.Tensor)]
        self.sizes += [(str(func), t.numel()) for t in tensors]
        return out


def larger_than_the_cache(step, cache_numel: int) -> list[tuple[str, int]]:
    """The ops of ``step()`` whose output holds more numbers than one layer's keys (views of them hold as many)."""
    with LargestOutputs() as seen:
        step()
    return [(op, n) for op, n in seen.sizes if n > cache_numel]


def broadcast_step(q, k, v):
    """The package's old grouped-query step: a group dimension broadcast against keys (N, Hkv, 1, S, Dh)."""
    N, H, L, D = q.shape
    grouped = q.reshape(N, k.shape[1], H // k.shape[1], L, D)  # (N, Hkv, G, L, Dh)
    weights = torch.softmax(grouped @ k.unsqueeze(2).transpose(-2, -1) / D**0.5, dim=-1)  # expands K G times
    return weights @ v.unsqueeze(2)


@pytest.mark.parametrize("need_weights", [True, False])
def test_a_decoding_step_allocates_no_copy_of_the_cache(need_weights):
    H, Hkv, S, E = 8, 2, 256, 64
    mha = gqa_module(H=H, kv=Hkv, E=E)
    Dh = E // H
    cache = KVCache(1, S)
    cache.update(torch.randn(1, Hkv, S - 1, Dh), torch.randn(1, Hkv, S - 1, Dh), layer_idx=0)
    x = torch.randn(1, 1, E)
    with torch.no_grad():
        assert larger_than_the_cache(lambda: mha(x, cache=cache, need_weights=need_weights), Hkv * S * Dh) == []
    assert cache.get_seq_length() == S


def test_the_copy_detector_catches_the_old_broadcast():
    q, k, v = torch.randn(1, 8, 1, 8), torch.randn(1, 2, 256, 8), torch.randn(1, 2, 256, 8)
    found = larger_than_the_cache(lambda: broadcast_step(q, k, v), k.numel())
    assert any("clone" in op or "expand" in op for op, _ in found)
    assert max(n for _, n in found) == 4 * k.numel()  # G = 4 copies of the keys
