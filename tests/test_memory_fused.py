"""memory_efficient_attention's fast path on a CPU (blocks of keys through the fused kernel, merged by log-sum-exp)
against the plain recipe, in float64: output, gradients, and the edges where it must step aside."""

import pytest
import torch

from attention_lib import calculate_attention, memory_efficient_attention
from attention_lib.memory_efficient import _fused
from attention_lib.memory_efficient._fused import FUSED_BLOCK, fused_applies, fused_forward
from attention_lib.memory_efficient.forward import _blockwise_forward
from conftest import make_qkv


@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize(("L", "S"), [(7, 7), (5, 11), (11, 5), (1, 9), (13, 1)])
@pytest.mark.parametrize("block", [1, 2, 3, 4, 100])
def test_blocks_merged_by_log_sum_exp_are_the_recipe(is_causal, L, S, block):
    q, k, v = make_qkv((2, 3), L, S, 4, 4, torch.float64)
    output, row_max, row_sum = fused_forward(q, k, v, is_causal, 0.7, block)
    recipe, _ = calculate_attention(q, k, v, is_causal=is_causal, scale=0.7)
    torch.testing.assert_close(output, recipe, atol=1e-12, rtol=1e-12)
    # the same two numbers per query as the plain pass saves, read as weights: 2 ** (s - max) / sum
    plain_max, plain_sum = _blockwise_forward(q, k, v, None, is_causal, 0.7, (3, 3))[1:]
    torch.testing.assert_close(row_max + row_sum.log2(), plain_max + plain_sum.log2(), atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize(("L", "S"), [(FUSED_BLOCK + 37, 2 * FUSED_BLOCK + 5), (2 * FUSED_BLOCK + 3, 40)])
def test_the_public_function_takes_the_fast_path_and_gives_the_recipe_with_its_gradients(is_causal, L, S):
    q, k, v = (t.requires_grad_() for t in make_qkv((2,), L, S, 8, 8, torch.float64))
    assert fused_applies(q, k, v, None, True)
    out = memory_efficient_attention(q, k, v, is_causal=is_causal)
    recipe, _ = calculate_attention(q, k, v, is_causal=is_causal)
    torch.testing.assert_close(out, recipe, atol=1e-12, rtol=1e-12)
    grad = torch.randn_like(out)
    for got, wanted in zip(torch.autograd.grad(out, (q, k, v), grad), torch.autograd.grad(recipe, (q, k, v), grad),
                           strict=True):
        torch.testing.assert_close(got, wanted, atol=1e-10, rtol=1e-10)


def test_gradcheck_through_the_fast_path(monkeypatch):
    monkeypatch.setattr(_fused, "FUSED_BLOCK", 2)  # several blocks on a gradcheck-sized input
    q, k, v = (t.requires_grad_() for t in make_qkv((2,), 5, 7, 3, 3, torch.float64))
    assert fused_applies(q, k, v, None, True)
    for is_causal in (False, True):
        assert torch.autograd.gradcheck(lambda q, k, v, c=is_causal: memory_efficient_attention(q, k, v, is_causal=c),
                                        (q, k, v))


def test_a_nan_in_a_query_takes_the_plain_pass_and_keeps_the_nan_rule():
    q, k, v = make_qkv((2,), 3, 5, 4, 4, torch.float32)
    q[1, 2, 0] = float("nan")
    assert not fused_applies(q, k, v, None, True)  # the kernel alone would give that row zeros
    out = memory_efficient_attention(q, k, v)
    assert bool(out[1, 2].isnan().all())
    torch.testing.assert_close(out, calculate_attention(q, k, v)[0], equal_nan=True)


@pytest.mark.parametrize(("where", "number"), [(w, x) for w in ("query", "key", "value") for x in
                                                ("inf", "-inf", "nan") if (w, x) != ("query", "nan")])
def test_infinities_and_nans_elsewhere_come_out_as_in_the_plain_pass(monkeypatch, where, number):
    number = float(number)
    monkeypatch.setattr(_fused, "FUSED_BLOCK", 2)  # several blocks, merged
    q, k, v = make_qkv((2, 3), 5, 7, 4, 4, torch.float32)
    {"query": q, "key": k, "value": v}[where][1, 2, 3, 0] = number
    assert fused_applies(q, k, v, None, True)
    for is_causal in (False, True):
        out = memory_efficient_attention(q, k, v, is_causal=is_causal)
        plain = memory_efficient_attention(q, k, v, is_causal=is_causal, block_size=2)
        torch.testing.assert_close(out, plain, equal_nan=True)


@pytest.mark.parametrize("case", ["mask", "block_size", "float16", "other Ev", "broadcast batch", "no key", "2-D"])
def test_the_fast_path_steps_aside_where_it_could_differ(case):
    q, k, v = make_qkv((2, 3), 4, 6, 4, 4, torch.float32)
    mask, by_cache = None, True
    if case == "mask":
        mask = torch.ones(4, 6, dtype=torch.bool).tril()
    elif case == "block_size":
        by_cache = False
    elif case == "float16":
        q, k, v = q.half(), k.half(), v.half()
    elif case == "other Ev":
        v = v[..., :3]
    elif case == "broadcast batch":
        q = q[:1]
    elif case == "no key":
        k, v = k[..., :0, :], v[..., :0, :]
    else:
        q, k, v = q[0, 0], k[0, 0], v[0, 0]
    assert not fused_applies(q, k, v, mask, by_cache)
    assert fused_applies(*make_qkv((2, 3), 4, 6, 4, 4, torch.float32), None, True)  # the same, plain: it applies
