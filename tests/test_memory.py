"""memory_efficient_attention and its online softmax against SDPA and calculate_attention."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from attention_lib import calculate_attention, memory_efficient_attention
from attention_lib.bench.measure import peak_memory
from attention_lib.memory_efficient import backward, forward
from attention_lib.memory_efficient.forward import DEFAULT_BLOCK_SIZE, _fold_block_, online_softmax_update
from conftest import TOL, attention_cases, case_kwargs, float_mask, make_qkv, random_mask

#: Block sizes to try: the default, one size for queries and keys, or a (queries, keys) pair.
BLOCKS = st.one_of(st.none(), st.integers(1, 12), st.tuples(st.integers(1, 12), st.integers(1, 12)))


# -- equivalence with SDPA: shapes, masks, causal, scales, dtypes and block sizes -----------------------


@given(attention_cases(), BLOCKS)
def test_matches_sdpa(case, block):
    batch, L, S, E, Ev, dtype, mask_kind, mask_shape, scale, seed = case
    q, k, v = make_qkv(batch, L, S, E, Ev, dtype, seed)
    kwargs = case_kwargs(mask_kind, mask_shape, dtype, scale, seed)
    out = memory_efficient_attention(q, k, v, block_size=block, **kwargs)
    assert out.shape == (*batch, L, Ev)
    assert out.dtype == dtype
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, **kwargs), **TOL[dtype])


@pytest.mark.parametrize("block_size", [1, 3, 4, 7, 100])
@pytest.mark.parametrize(("L", "S"), [(9, 9), (5, 12), (12, 5)])
def test_causal_skips_future_blocks_and_matches(block_size, L, S):
    q, k, v = make_qkv((2, 3), L, S, 4, 5)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    got = memory_efficient_attention(q, k, v, is_causal=True, block_size=block_size)
    torch.testing.assert_close(got, expected, **TOL[torch.float64])


def test_default_block_size_covers_long_sequences():
    q, k, v = make_qkv((1,), DEFAULT_BLOCK_SIZE + 37, DEFAULT_BLOCK_SIZE * 2 + 5, 8, 4, torch.float32)
    torch.testing.assert_close(memory_efficient_attention(q, k, v), F.scaled_dot_product_attention(q, k, v),
                               **TOL[torch.float32])


def test_broadcast_batch_dimensions():
    q, _, _ = make_qkv((), 5, 6, 4, 3)  # one query sequence shared by every batch
    _, k, v = make_qkv((2, 3), 5, 6, 4, 3, seed=1)
    expected, _ = calculate_attention(q, k, v)
    torch.testing.assert_close(memory_efficient_attention(q, k, v, block_size=2), expected)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_is_accumulated_in_float32(dtype):
    q, k, v = make_qkv((2,), 40, 40, 8, 8, torch.float32)
    out = memory_efficient_attention(q.to(dtype), k.to(dtype), v.to(dtype), block_size=8)
    assert out.dtype == dtype
    expected = F.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(out.float(), expected, atol=2e-2, rtol=2e-2)


# -- fully masked rows: exact zeros, finite gradients ----------------------------------------------------


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_fully_masked_rows_are_zero_with_finite_gradients(kind):
    q, k, v = make_qkv((2,), 6, 7, 5, 3, requires_grad=True)
    allowed = random_mask((6, 7), torch.bool, 3)
    allowed[2] = False
    mask = allowed if kind == "bool" else float_mask(allowed, torch.float64)
    out = memory_efficient_attention(q, k, v, attn_mask=mask, block_size=3)
    assert torch.equal(out[:, 2], torch.zeros_like(out[:, 2]))
    torch.testing.assert_close(out, calculate_attention(q, k, v, attn_mask=mask)[0])
    out.sum().backward()
    for t in (q, k, v):
        assert bool(torch.isfinite(t.grad).all())
    assert torch.equal(q.grad[:, 2], torch.zeros_like(q.grad[:, 2]))


def test_everything_masked_gives_zeros():
    q, k, v = make_qkv((), 4, 5, 3, 2, torch.float32)
    out = memory_efficient_attention(q, k, v, attn_mask=torch.zeros(4, 5, dtype=torch.bool), block_size=2)
    assert torch.equal(out, torch.zeros(4, 2))


# -- gradients --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mask_kind", ["none", "bool", "float", "causal", "fully_masked_row"])
@pytest.mark.parametrize(("q_batch", "L", "S"), [((2,), 5, 6), ((), 6, 4)])  # () broadcasts over key's batch
def test_gradcheck(mask_kind, q_batch, L, S):
    q, _, _ = make_qkv(q_batch, L, S, 3, 2, requires_grad=True)
    _, k, v = make_qkv((2,), L, S, 3, 2, seed=1, requires_grad=True)
    kwargs = {"scale": 0.7}
    allowed = random_mask((L, S), torch.bool, 7)
    if mask_kind == "fully_masked_row":
        allowed[3] = False
    if mask_kind in ("bool", "fully_masked_row"):
        kwargs["attn_mask"] = allowed
    if mask_kind == "float":
        kwargs["attn_mask"] = float_mask(allowed, torch.float64)
    if mask_kind == "causal":
        kwargs["is_causal"] = True
    fn = lambda q, k, v: memory_efficient_attention(q, k, v, block_size=2, **kwargs)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (q, k, v))


@given(attention_cases(), BLOCKS)
def test_gradients_match_sdpa(case, block):
    batch, L, S, E, Ev, dtype, mask_kind, mask_shape, scale, seed = case
    q, k, v = make_qkv(batch, L, S, E, Ev, dtype, seed, requires_grad=True)
    kwargs = case_kwargs(mask_kind, mask_shape, dtype, scale, seed)
    grad_output = torch.randn(*batch, L, Ev, generator=torch.Generator().manual_seed(seed + 7), dtype=dtype)
    out = memory_efficient_attention(q, k, v, block_size=block, **kwargs)
    grads = torch.autograd.grad(out, (q, k, v), grad_output)
    expected = torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, **kwargs), (q, k, v), grad_output)
    for got, want in zip(grads, expected, strict=True):
        torch.testing.assert_close(got, want, **TOL[dtype])


def test_broadcast_inputs_get_gradients_of_their_own_shape():
    q, _, _ = make_qkv((3,), 5, 7, 4, 3, requires_grad=True)  # (3, L, E) against (2, 3, S, E) keys
    _, k, v = make_qkv((2, 3), 5, 7, 4, 3, seed=2, requires_grad=True)
    mask = random_mask((1, 5, 7), torch.bool, 4)  # (1, L, S): one mask for every batch
    out = memory_efficient_attention(q, k, v, attn_mask=mask, block_size=3)
    grads = torch.autograd.grad(out.sum(), (q, k, v))
    expected = torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, attn_mask=mask).sum(), (q, k, v))
    for got, want, x in zip(grads, expected, (q, k, v), strict=True):
        assert got.shape == x.shape
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_fully_masked_rows_get_zero_gradients_like_sdpa(kind):
    q, k, v = make_qkv((2,), 6, 7, 5, 3, torch.float32, requires_grad=True)
    allowed = random_mask((2, 6, 7), torch.bool, 5)
    allowed[0, 1] = allowed[1, 4] = False
    mask = allowed if kind == "bool" else float_mask(allowed, torch.float32)
    grad_output = torch.randn(2, 6, 3, generator=torch.Generator().manual_seed(3))
    grads = torch.autograd.grad(memory_efficient_attention(q, k, v, attn_mask=mask, block_size=4), (q, k, v),
                                grad_output)
    expected = torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, attn_mask=mask), (q, k, v), grad_output)
    assert torch.equal(grads[0][0, 1], torch.zeros(5))
    assert torch.equal(grads[0][1, 4], torch.zeros(5))
    for got, want in zip(grads, expected, strict=True):
        torch.testing.assert_close(got, want, **TOL[torch.float32])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_gradients(dtype):
    q, k, v = make_qkv((2,), 40, 40, 8, 8, torch.float32)
    halves = [t.to(dtype).requires_grad_() for t in (q, k, v)]
    grad_output = torch.randn(2, 40, 8, generator=torch.Generator().manual_seed(1))
    grads = torch.autograd.grad(memory_efficient_attention(*halves, is_causal=True, block_size=16), halves,
                                grad_output.to(dtype))
    exact = [t.float().requires_grad_() for t in halves]  # the same rounded inputs, in float32
    expected = torch.autograd.grad(F.scaled_dot_product_attention(*exact, is_causal=True), exact, grad_output)
    for got, want in zip(grads, expected, strict=True):
        assert got.dtype == dtype
        torch.testing.assert_close(got.float(), want, atol=3e-2, rtol=3e-2)


def test_only_the_output_and_two_numbers_per_query_are_saved():
    q, k, v = make_qkv((2, 3), 64, 48, 8, 4, torch.float32, requires_grad=True)
    saved = []

    def pack(tensor):
        saved.append(tensor.shape)
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        out = memory_efficient_attention(q, k, v, attn_mask=random_mask((64, 48), torch.bool, 1), block_size=16)
    out.sum().backward()
    # the inputs, the mask, the output and each query's max and sum: nothing (N, ..., L, S)
    assert sorted(saved) == sorted([q.shape, k.shape, v.shape, (64, 48), out.shape, (2, 3, 64, 1), (2, 3, 64, 1)])


def test_double_backward_raises_instead_of_giving_wrong_second_derivatives():
    q, k, v = make_qkv((), 4, 4, 2, 2, requires_grad=True)
    out = memory_efficient_attention(q, k, v)
    (grad_q,) = torch.autograd.grad(out.square().sum(), (q,), create_graph=True)
    with pytest.raises(RuntimeError, match="marked with @once_differentiable"):
        grad_q.sum().backward()


@pytest.mark.parametrize("needs", [(False, False, True), (True, False, False), (False, True, True)])
def test_backward_computes_only_the_gradients_asked_for(monkeypatch, needs):
    """autograd's needs_input_grad reaches the backward pass, which returns None (and skips the work) for the rest."""
    q, k, v = make_qkv((2,), 5, 6, 3, 2)
    for t, need in zip((q, k, v), needs, strict=True):
        t.requires_grad_(need)
    asked, real = [], backward.blockwise_backward
    monkeypatch.setattr(forward, "blockwise_backward", lambda *a, **kw: asked.append(kw["needs"]) or real(*a, **kw))
    wanted = [t for t in (q, k, v) if t.requires_grad]
    got = torch.autograd.grad(memory_efficient_attention(q, k, v, block_size=2).sum(), wanted)
    assert asked == [needs]
    expected = torch.autograd.grad(F.scaled_dot_product_attention(q, k, v).sum(), wanted)
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a, b)
    with torch.no_grad():
        grads = real(torch.ones(2, 5, 2, dtype=torch.float64), q, k, v, None, F.scaled_dot_product_attention(q, k, v),
                     *_row_max_and_sum(q, k), False, 1 / math.sqrt(3), (2, 2), needs=needs)
    assert [g is not None for g in grads] == list(needs)


def _row_max_and_sum(q, k):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (N, L, S)
    row_max = scores.amax(-1, keepdim=True)
    return row_max, (scores - row_max).exp().sum(-1, keepdim=True)


def test_shared_keys_and_values_get_gradients_without_a_copy_per_head():
    """Keys and values shared by 8 heads: their gradients are summed block by block, never allocated 8 times."""
    q = torch.randn(1, 8, 64, 64)
    k, v = (torch.randn(1, 1, 2048, 64).requires_grad_() for _ in range(2))
    grad_output = torch.randn(1, 8, 64, 64)
    one_gradient = 2048 * 64 * 4
    grads = [None]

    def backward_pass():
        out = memory_efficient_attention(q, k, v, block_size=64)
        grads[0] = torch.autograd.grad(out, (k, v), grad_output)

    assert peak_memory(backward_pass) < 2 * one_gradient + 4 * 8 * 64 * 64 * 4 + 2 * 8 * 64 * 64 * 4
    expected = torch.autograd.grad(F.scaled_dot_product_attention(q, k, v), (k, v), grad_output)
    for got, want in zip(grads[0], expected, strict=True):
        torch.testing.assert_close(got, want, **TOL[torch.float32])


# -- the online softmax step ----------------------------------------------------------------------------


@pytest.mark.parametrize("splits", [[4], [1, 3], [2, 2], [1, 1, 1, 1], [3, 1]])
def test_online_update_equals_softmax_blend(splits):
    g = torch.Generator().manual_seed(sum(splits) * 10 + len(splits))
    scores, value = torch.randn(2, 3, 4, generator=g, dtype=torch.float64) * 5, torch.randn(2, 4, 2, generator=g,
                                                                                         dtype=torch.float64)
    state = (torch.full((2, 3, 1), -math.inf, dtype=torch.float64), torch.zeros(2, 3, 1, dtype=torch.float64),
             torch.zeros(2, 3, 2, dtype=torch.float64))
    start = 0
    for size in splits:
        state = online_softmax_update(*state, scores[..., start:start + size], value[..., start:start + size, :])
        start += size
    running_max, running_sum, running_output = state
    torch.testing.assert_close(running_max, scores.amax(-1, keepdim=True))
    torch.testing.assert_close(running_output / running_sum, torch.softmax(scores, -1) @ value)


@pytest.mark.parametrize("masked", [False, True])
def test_the_fast_in_place_fold_is_the_online_softmax_update_in_base_2(masked):
    g = torch.Generator().manual_seed(5)
    scores, value = torch.randn(2, 3, 4, generator=g), torch.randn(2, 4, 2, generator=g)
    if masked:
        scores[:, 1] = -math.inf  # a row that has seen only masked keys so far
    state = (torch.full((2, 3, 1), -math.inf), torch.zeros(2, 3, 1), torch.zeros(2, 3, 2))
    expected_max, expected_sum, expected_output = online_softmax_update(*state, scores, value)
    in_base_2 = scores * math.log2(math.e)  # the fold counts in powers of 2: 2 ** (s log2(e)) = e ** s
    running_max = _fold_block_(state[0], state[1], state[2], in_base_2, value)  # sum and output in place
    torch.testing.assert_close(running_max, expected_max * math.log2(math.e))
    torch.testing.assert_close(state[1], expected_sum)
    torch.testing.assert_close(state[2], expected_output)


def test_online_update_survives_huge_scores_and_masked_blocks():
    scores = torch.tensor([[-math.inf, -math.inf], [1000.0, 999.0]])  # the first block of row 0 is all masked
    value = torch.tensor([[1.0], [3.0]])
    state = torch.full((2, 1), -math.inf), torch.zeros(2, 1), torch.zeros(2, 1)
    state = online_softmax_update(*state, scores[:, :1], value[:1])
    assert torch.equal(state[1][0], torch.zeros(1))
    assert torch.equal(state[2][0], torch.zeros(1))
    state = online_softmax_update(*state, scores[:, 1:], value[1:])
    assert bool(torch.isfinite(state[1]).all())
    torch.testing.assert_close(state[2][1] / state[1][1], torch.softmax(scores[1], -1) @ value)


# -- errors and the public API ---------------------------------------------------------------------------


@pytest.mark.parametrize(("block_size", "error", "match"), [
    (0, ValueError, r"block_size must be positive, but block_size=0"),
    (-3, ValueError, r"block_size must be positive"),
    (2.0, TypeError, r"block_size must be an int, but got float \(2.0\); block_size=2.0; pass an int, a pair"),
    (True, TypeError, r"block_size must be an int, but got bool \(True\)"),
    ((4, 0), ValueError, r"block_size must be positive, but block_size=0; block_size=\(4, 0\)"),
    ((4, 2, 1), TypeError, r"block_size must be an int, but got tuple .* a pair of ints \(queries, keys\) or None"),
])
def test_block_size_errors(block_size, error, match):
    q, k, v = make_qkv((), 3, 3, 2, 2)
    with pytest.raises(error, match=match):
        memory_efficient_attention(q, k, v, block_size=block_size)


def test_input_errors_are_the_shared_ones():
    q, k, v = make_qkv((2,), 3, 4, 5, 2)
    with pytest.raises(ValueError, match="share the last dimension d_k"):
        memory_efficient_attention(q, k[..., :4], v)
    with pytest.raises(ValueError, match="either attn_mask or is_causal"):
        memory_efficient_attention(q, k, v, attn_mask=torch.ones(3, 4, dtype=torch.bool), is_causal=True)
    with pytest.raises(ValueError, match="must broadcast to the scores' shape"):
        memory_efficient_attention(q, k, v, attn_mask=torch.ones(4, 3, dtype=torch.bool))
    with pytest.raises(TypeError, match="must be a floating-point tensor"):
        memory_efficient_attention(q.long(), k, v)
    with pytest.raises(TypeError, match="scale must be a number"):
        memory_efficient_attention(q, k, v, scale="big")


def test_gpu_check_compares_the_backward_pass(monkeypatch, capsys):
    """The backward part of ``python course.py gpu-check``, run here on the CPU so that its code is exercised."""
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "tools"))
    import gpu_check

    assert gpu_check.backward_check("cpu")
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 12  # 3 dtypes x 4 masks
    assert all("relative error dQ, dK, dV" in line and "FAILED" not in line for line in lines)


@pytest.mark.parametrize("fn", ["memory_efficient_attention", "loop_attention"])
def test_no_features_are_refused_by_name_as_everywhere(fn):
    """E = 0 (SDPA would blend the values equally): the error calculate_attention gives, not ZeroDivisionError."""
    import attention_lib

    q, k, v = torch.randn(2, 5, 0), torch.randn(2, 7, 0), torch.randn(2, 7, 3)
    with pytest.raises(ValueError, match=r"at least one feature \(E >= 1\)"):
        getattr(attention_lib, fn)(q, k, v)


@pytest.mark.parametrize(("change", "error", "match"), [
    ({"scores": [[1.0, 2.0]]}, TypeError, "scores must be a torch.Tensor"),
    ({"value": torch.ones(2, 2, dtype=torch.long)}, TypeError, "value must be a floating-point tensor"),
    ({"running_max": torch.zeros(1, 2)}, ValueError, r"running_max and running_sum must both be \(..., L, 1\)"),
    ({"running_sum": torch.zeros(2, 1)}, ValueError, r"running_max and running_sum must both be \(..., L, 1\)"),
    ({"scores": torch.zeros(3, 2)}, ValueError, "the same number of queries L"),
    ({"scores": torch.zeros(1, 3)}, ValueError, "one column per key of the block"),
    ({"running_output": torch.zeros(1, 5)}, ValueError, "must share Ev"),
    ({"value": torch.zeros(2, 2, dtype=torch.float64)}, TypeError, "share one dtype"),
    ({"value": torch.zeros(2)}, ValueError, "at least 2 dimensions"),
])
def test_online_softmax_update_checks_its_inputs(change, error, match):
    state = {"running_max": torch.full((1, 1), float("-inf")), "running_sum": torch.zeros(1, 1),
             "running_output": torch.zeros(1, 2), "scores": torch.tensor([[1.0, 2.0]]), "value": torch.ones(2, 2)}
    online_softmax_update(**state)  # the unchanged state is fine
    with pytest.raises(error, match=match):
        online_softmax_update(**(state | change))
