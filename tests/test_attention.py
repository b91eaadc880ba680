"""calculate_attention and its five steps against torch.nn.functional.scaled_dot_product_attention."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

import attention_lib as al
from attention_lib import blend, calculate_attention, matchmaker, percentages, scaler

TOL = {torch.float32: {"atol": 2e-5, "rtol": 2e-5}, torch.float64: {"atol": 1e-10, "rtol": 1e-10}}


def make_qkv(batch, L, S, E, Ev, dtype, seed=0, requires_grad=False):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*batch, L, E, generator=g, dtype=dtype)
    k = torch.randn(*batch, S, E, generator=g, dtype=dtype)
    v = torch.randn(*batch, S, Ev, generator=g, dtype=dtype)
    return [t.requires_grad_(requires_grad) for t in (q, k, v)]


def random_mask(shape, dtype, seed, keep_rows=True):
    """A bool mask (True = may attend) or the equivalent float mask (0 / -inf) of `shape`."""
    g = torch.Generator().manual_seed(seed + 1000)
    allowed = torch.rand(shape, generator=g) > 0.4
    if keep_rows:
        allowed[..., 0] = True  # every query keeps at least one key, so SDPA's result is well defined
    if dtype == torch.bool:
        return allowed
    return torch.zeros(shape, dtype=dtype).masked_fill(~allowed, float("-inf"))


# -- equivalence with SDPA: a hypothesis sweep over shapes, masks, scales and dtypes ---------------------


@st.composite
def cases(draw):
    ndim = draw(st.integers(0, 3))
    batch = tuple(draw(st.lists(st.integers(1, 3), min_size=ndim, max_size=ndim)))
    L, S = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    E, Ev = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    dtype = draw(st.sampled_from([torch.float32, torch.float64]))
    mask_kind = draw(st.sampled_from(["none", "bool", "float", "causal"]))
    # Masks broadcast: drop leading dimensions and/or set some to 1.
    mask_shape = [*batch, L, S]
    keep = draw(st.integers(0, len(batch)))
    mask_shape = mask_shape[len(batch) - keep :]
    mask_shape = [1 if i < keep and draw(st.booleans()) else d for i, d in enumerate(mask_shape)]
    scale = draw(st.one_of(st.none(), st.floats(0.05, 2.0)))
    return batch, L, S, E, Ev, dtype, mask_kind, tuple(mask_shape), scale, draw(st.integers(0, 10_000))


@given(cases())
def test_matches_sdpa(case):
    batch, L, S, E, Ev, dtype, mask_kind, mask_shape, scale, seed = case
    q, k, v = make_qkv(batch, L, S, E, Ev, dtype, seed)
    kwargs = {"scale": scale}
    if mask_kind in ("bool", "float"):
        kwargs["attn_mask"] = random_mask(mask_shape, torch.bool if mask_kind == "bool" else dtype, seed)
    if mask_kind == "causal":
        kwargs["is_causal"] = True
    out, weights = calculate_attention(q, k, v, **kwargs)
    expected = F.scaled_dot_product_attention(q, k, v, **kwargs)
    torch.testing.assert_close(out, expected, **TOL[dtype])
    assert out.shape == (*batch, L, Ev)
    assert weights.shape == (*batch, L, S)
    torch.testing.assert_close(weights.sum(-1), torch.ones_like(weights.sum(-1)), **TOL[dtype])
    assert bool((weights >= 0).all())
    fast, none = calculate_attention(q, k, v, need_weights=False, **kwargs)
    assert none is None
    torch.testing.assert_close(fast, expected, **TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("L", "S"), [(3, 5), (5, 3), (4, 4), (1, 6)])
def test_causal_is_top_left_aligned(dtype, L, S):
    q, k, v = make_qkv((2,), L, S, 4, 3, dtype)
    out, weights = calculate_attention(q, k, v, is_causal=True)
    allowed = torch.ones(L, S, dtype=torch.bool).tril()
    assert bool((weights[..., ~allowed] == 0).all())
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True), **TOL[dtype])
    torch.testing.assert_close(out, calculate_attention(q, k, v, attn_mask=allowed)[0], **TOL[dtype])


def test_default_scale_is_one_over_sqrt_e():
    q, k, v = make_qkv((2,), 3, 4, 16, 5, torch.float64)
    out_default, _ = calculate_attention(q, k, v)
    out_explicit, _ = calculate_attention(q, k, v, scale=1 / math.sqrt(16))
    out_other, _ = calculate_attention(q, k, v, scale=1.0)
    torch.testing.assert_close(out_default, out_explicit)
    assert not torch.allclose(out_default, out_other)


# -- the five steps composed equal the whole --------------------------------------------------------------


@pytest.mark.parametrize("batch", [(), (2,), (2, 3)])
def test_steps_compose_to_the_whole(batch):
    q, k, v = make_qkv(batch, 4, 6, 8, 3, torch.float64)
    mask = random_mask((4, 6), torch.bool, 3)
    weights = percentages(scaler(matchmaker(q, k), q.size(-1)), mask)
    out = blend(weights, v)
    expected_out, expected_weights = calculate_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(weights, expected_weights)
    torch.testing.assert_close(out, expected_out)


def test_seed_recipe_equals_library():
    """The seed chapter's five lines, verbatim in spirit, give the library's answer."""
    q, k, v = make_qkv((2,), 4, 4, 8, 8, torch.float32)
    d_k = q.size(-1)
    scores = torch.matmul(q, k.transpose(-2, -1))
    w = F.softmax(scores / math.sqrt(d_k), dim=-1)
    out, weights = calculate_attention(q, k, v)
    torch.testing.assert_close(weights, w)
    torch.testing.assert_close(out, torch.matmul(w, v))


def test_step_values_by_hand():
    q = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    k = torch.tensor([[1.0, 1.0], [3.0, 0.0]])
    assert torch.equal(matchmaker(q, k), torch.tensor([[1.0, 3.0], [2.0, 0.0]]))
    assert torch.equal(scaler(torch.tensor([2.0, 4.0]), 4), torch.tensor([1.0, 2.0]))
    p = percentages(torch.tensor([[0.0, math.log(3.0)]]))
    torch.testing.assert_close(p, torch.tensor([[0.25, 0.75]]))
    assert torch.equal(blend(torch.tensor([[0.5, 0.5]]), torch.tensor([[2.0], [4.0]])), torch.tensor([[3.0]]))


# -- fully masked rows: zeros, never NaN, finite gradients ----------------------------------------------


@pytest.mark.parametrize("kind", ["bool", "float"])
@pytest.mark.parametrize("need_weights", [True, False])
def test_fully_masked_rows_are_zero(kind, need_weights):
    q, k, v = make_qkv((2,), 3, 4, 5, 6, torch.float64, requires_grad=True)
    allowed = torch.ones(3, 4, dtype=torch.bool)
    allowed[1] = False
    mask = allowed if kind == "bool" else torch.zeros(3, 4, dtype=torch.float64).masked_fill(~allowed, -math.inf)
    out, weights = calculate_attention(q, k, v, attn_mask=mask, need_weights=need_weights)
    assert torch.equal(out[:, 1], torch.zeros_like(out[:, 1]))
    if need_weights:
        assert torch.equal(weights[:, 1], torch.zeros_like(weights[:, 1]))
        torch.testing.assert_close(weights[:, [0, 2]].sum(-1), torch.ones(2, 2, dtype=torch.float64))
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    out.sum().backward()
    for t in (q, k, v):
        assert bool(torch.isfinite(t.grad).all())
    assert torch.equal(q.grad[:, 1], torch.zeros_like(q.grad[:, 1]))


def test_fully_masked_everything():
    q, k, v = make_qkv((), 2, 3, 4, 4, torch.float32)
    out, weights = calculate_attention(q, k, v, attn_mask=torch.zeros(2, 3, dtype=torch.bool))
    assert torch.equal(out, torch.zeros(2, 4))
    assert torch.equal(weights, torch.zeros(2, 3))


# -- gradients -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mask_kind", ["none", "bool", "float", "causal", "fully_masked_row"])
def test_gradcheck(mask_kind):
    q, k, v = make_qkv((2,), 3, 4, 5, 2, torch.float64, requires_grad=True)
    kwargs = {}
    if mask_kind in ("bool", "float"):
        kwargs["attn_mask"] = random_mask((3, 4), torch.bool if mask_kind == "bool" else torch.float64, 7)
    if mask_kind == "causal":
        kwargs["is_causal"] = True
    if mask_kind == "fully_masked_row":
        mask = torch.ones(3, 4, dtype=torch.bool)
        mask[2] = False
        kwargs["attn_mask"] = mask
    fn = lambda q, k, v: calculate_attention(q, k, v, **kwargs)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (q, k, v))


def test_gradients_match_sdpa():
    q, k, v = make_qkv((2, 2), 5, 6, 4, 3, torch.float64, requires_grad=True)
    mask = random_mask((5, 6), torch.bool, 11)
    out, _ = calculate_attention(q, k, v, attn_mask=mask)
    grads = torch.autograd.grad(out.square().sum(), (q, k, v))
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    ref_grads = torch.autograd.grad(ref.square().sum(), (q, k, v))
    for g, r in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(g, r, **TOL[torch.float64])


# -- dropout ---------------------------------------------------------------------------------------------


def test_dropout_only_when_positive():
    q, k, v = make_qkv((2,), 8, 8, 4, 4, torch.float32)
    torch.manual_seed(0)
    out_a, w_a = calculate_attention(q, k, v, dropout_p=0.0)
    out_b, _ = calculate_attention(q, k, v)
    assert torch.equal(out_a, out_b)
    torch.manual_seed(0)
    out_d, w_d = calculate_attention(q, k, v, dropout_p=0.5)
    assert bool((w_d == 0).any())
    kept = w_d != 0
    torch.testing.assert_close(w_d[kept], (w_a * 2)[kept])  # survivors are rescaled by 1 / (1 - p)
    torch.testing.assert_close(out_d, w_d @ v)


# -- errors a learner can act on -------------------------------------------------------------------------


def _qkv():
    return torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 6)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (("q", "k", "v"), {}, TypeError, r"query must be a torch.Tensor, but got str"),
        ((None, "k", "v"), {}, TypeError, r"query must be a torch.Tensor"),
        (([[1.0]], "k", "v"), {}, TypeError, r"got list; wrap your data with torch.tensor"),
    ],
)
def test_non_tensor_inputs(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        calculate_attention(*args, **kwargs)


def test_error_messages():
    q, k, v = _qkv()
    with pytest.raises(TypeError, match=r"key must be a torch.Tensor"):
        calculate_attention(q, "k", v)
    with pytest.raises(TypeError, match=r"query must be a floating-point tensor.*query.float\(\)"):
        calculate_attention(q.long(), k, v)
    with pytest.raises(ValueError, match=r"at least 2 dimensions.*query.shape=\(4,\)"):
        calculate_attention(torch.randn(4), k, v)
    with pytest.raises(ValueError, match=r"share the last dimension d_k.*\(2, 3, 4\).*\(2, 5, 7\).*project"):
        calculate_attention(q, torch.randn(2, 5, 7), v)
    with pytest.raises(ValueError, match=r"same number of positions S.*\(2, 5, 4\).*\(2, 4, 6\)"):
        calculate_attention(q, k, torch.randn(2, 4, 6))
    with pytest.raises(ValueError, match=r"batch dimensions .* must broadcast"):
        calculate_attention(torch.randn(2, 3, 4), torch.randn(3, 5, 4), torch.randn(3, 5, 6))
    with pytest.raises(ValueError, match=r"attn_mask must broadcast to .*\(2, 3, 5\).*attn_mask.shape=\(3, 4\)"):
        calculate_attention(q, k, v, attn_mask=torch.ones(3, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"attn_mask must broadcast.*\(3, 2, 3, 5\)"):
        calculate_attention(q, k, v, attn_mask=torch.ones(3, 2, 3, 5, dtype=torch.bool))
    with pytest.raises(TypeError, match=r"attn_mask must be bool .*attn_mask.dtype=torch.int64.*\.bool\(\)"):
        calculate_attention(q, k, v, attn_mask=torch.ones(3, 5, dtype=torch.long))
    with pytest.raises(TypeError, match=r"attn_mask must be a torch.Tensor"):
        calculate_attention(q, k, v, attn_mask=[[True]])
    with pytest.raises(ValueError, match=r"either attn_mask or is_causal=True, not both"):
        calculate_attention(q, k, v, attn_mask=torch.ones(3, 5, dtype=torch.bool), is_causal=True)
    with pytest.raises(ValueError, match=r"dropout_p must be in \[0, 1\), but dropout_p=1.5"):
        calculate_attention(q, k, v, dropout_p=1.5)
    with pytest.raises(TypeError, match=r"scale must be a number or None"):
        calculate_attention(q, k, v, scale="big")


def test_dtype_and_device_mismatch():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=r"share one dtype.*query.dtype=torch.float32, key.dtype=torch.float64"):
        calculate_attention(q, k.double(), v)
    with pytest.raises(TypeError, match=r"share one dtype"):  # DtypeMismatchError is also a TypeError
        calculate_attention(q, k, v.double())
    with pytest.raises(ValueError, match=r"float attn_mask must have the same dtype as query"):
        calculate_attention(q, k, v, attn_mask=torch.zeros(3, 5, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"same device.*query.device=cpu, key.device=meta"):
        calculate_attention(q, k.to("meta"), v)


def test_step_errors():
    with pytest.raises(TypeError, match=r"d_k must be an int"):
        scaler(torch.ones(2, 2), 4.0)
    with pytest.raises(ValueError, match=r"d_k must be positive, but d_k=0"):
        scaler(torch.ones(2, 2), 0)
    with pytest.raises(ValueError, match=r"share the last dimension"):
        matchmaker(torch.randn(3, 4), torch.randn(3, 5))
    with pytest.raises(ValueError, match=r"one column per value row.*\(3, 4\).*\(5, 2\)"):
        blend(torch.rand(3, 4), torch.randn(5, 2))
    with pytest.raises(ValueError, match=r"attn_mask must broadcast"):
        percentages(torch.randn(3, 4), torch.ones(4, 3, dtype=torch.bool))


def test_public_api():
    assert set(al.__all__) <= set(dir(al))
    for name in ("matchmaker", "scaler", "percentages", "blend", "calculate_attention", "get_device"):
        assert name in al.__all__
