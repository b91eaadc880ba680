"""calculate_attention and its five steps against torch.nn.functional.scaled_dot_product_attention."""

import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given

import attention_lib as al
from attention_lib import blend, calculate_attention, matchmaker, percentages, scaler
from conftest import TOL, attention_cases, case_kwargs, make_qkv, random_mask

# -- equivalence with SDPA: a hypothesis sweep over shapes, masks, scales and dtypes ---------------------


@given(attention_cases())
def test_matches_sdpa(case):
    batch, L, S, E, Ev, dtype, mask_kind, mask_shape, scale, seed = case
    q, k, v = make_qkv(batch, L, S, E, Ev, dtype, seed)
    kwargs = case_kwargs(mask_kind, mask_shape, dtype, scale, seed)
    out, weights = calculate_attention(q, k, v, **kwargs)
    expected = F.scaled_dot_product_attention(q, k, v, **kwargs)
    torch.testing.assert_close(out, expected, **TOL[dtype])
    assert out.shape == (*batch, L, Ev)
    assert weights.shape == (*batch, L, S)
    torch.testing.assert_close(weights.sum(-1), torch.ones_like(weights.sum(-1)), **TOL[dtype])
    assert bool((weights >= 0).all())


# -- the fast path (need_weights=False) is SDPA itself: test what it adds -----------------------------------


def test_fast_path_passes_is_causal_to_sdpa(monkeypatch):
    """SDPA sees is_causal=True (it can skip the future, and pick its flash kernel on CUDA), not a dense mask."""
    seen = []
    real = F.scaled_dot_product_attention
    monkeypatch.setattr(al.attention.F, "scaled_dot_product_attention",
                        lambda *args, **kwargs: seen.append(kwargs) or real(*args, **kwargs))
    q, k, v = make_qkv((2, 3), 6, 6, 4, 4)
    out, weights = calculate_attention(q, k, v, is_causal=True, need_weights=False)
    assert weights is None
    assert len(seen) == 1
    assert seen[0]["is_causal"] is True
    assert seen[0]["attn_mask"] is None
    torch.testing.assert_close(out, calculate_attention(q, k, v, is_causal=True)[0], **TOL[torch.float32])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_fast_path_keeps_the_dtype_and_agrees_with_the_recipe(dtype):
    q, k, v = (t.to(dtype) for t in make_qkv((2,), 5, 7, 8, 3))
    fast, _ = calculate_attention(q, k, v, is_causal=True, need_weights=False)
    recipe, _ = calculate_attention(q, k, v, is_causal=True)
    assert fast.dtype == recipe.dtype == dtype
    tol = {"atol": 2e-2, "rtol": 2e-2} if dtype == torch.bfloat16 else TOL[dtype]
    torch.testing.assert_close(fast, recipe, **tol)


def test_recipe_calls_its_own_steps(monkeypatch):
    """calculate_attention is the five steps: each step function is called once, in the recipe's order."""
    calls = []
    for step in ("matchmaker", "scaler", "percentages", "blend"):
        real = getattr(al.attention, step)
        spy = lambda *args, _real=real, _step=step, **kwargs: calls.append(_step) or _real(*args, **kwargs)
        monkeypatch.setattr(al.attention, step, spy)
    calculate_attention(*make_qkv((), 3, 4, 2, 2))
    assert calls == ["matchmaker", "scaler", "percentages", "blend"]


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


# -- the recipe against the seed chapter's five lines ----------------------------------------------------


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


def _mha_output(q, k, v, attn_mask):
    torch.manual_seed(0)
    mha = al.MultiHeadAttention(q.shape[-1], 1).to(q.dtype)
    return mha(q, k, v, attn_mask=attn_mask[None, None])[0]  # (L, S) -> (1, 1, L, S)


#: Every attention function of the package, as ``fn(query, key, value, attn_mask) -> output``.
IMPLEMENTATIONS = {
    "calculate_attention": lambda q, k, v, m: calculate_attention(q, k, v, attn_mask=m)[0],
    "need_weights=False": lambda q, k, v, m: calculate_attention(q, k, v, attn_mask=m, need_weights=False)[0],
    "memory_efficient_attention": lambda q, k, v, m: al.memory_efficient_attention(q, k, v, attn_mask=m,
                                                                                   block_size=2),
    "MultiHeadAttention": _mha_output,
}


@pytest.mark.parametrize("kind", ["bool", "float"])
@pytest.mark.parametrize("name", IMPLEMENTATIONS)
def test_fully_masked_rows_are_zero_with_zero_gradients(name, kind):
    """A query with no key to attend to gets exact zeros (never NaN) from every implementation, and so do its
    gradients; the other rows are unchanged."""
    q, k, v = make_qkv((2,), 3, 4, 6, 6, torch.float64, requires_grad=True)
    allowed = torch.ones(3, 4, dtype=torch.bool)
    allowed[1] = False
    mask = allowed if kind == "bool" else torch.zeros(3, 4, dtype=torch.float64).masked_fill(~allowed, -math.inf)
    out = IMPLEMENTATIONS[name](q, k, v, mask)
    if name != "MultiHeadAttention":  # its output projection adds a bias to the zero row
        assert torch.equal(out[:, 1], torch.zeros_like(out[:, 1]))
        torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    out.sum().backward()
    for t in (q, k, v):
        assert bool(torch.isfinite(t.grad).all())
    assert torch.equal(q.grad[:, 1], torch.zeros_like(q.grad[:, 1]))


def test_fully_masked_rows_give_zero_weights():
    q, k, v = make_qkv((2,), 3, 4, 5, 6, torch.float64)
    allowed = torch.ones(3, 4, dtype=torch.bool)
    allowed[1] = False
    _, weights = calculate_attention(q, k, v, attn_mask=allowed)
    assert torch.equal(weights[:, 1], torch.zeros_like(weights[:, 1]))
    torch.testing.assert_close(weights[:, [0, 2]].sum(-1), torch.ones(2, 2, dtype=torch.float64))


def test_fully_masked_everything():
    q, k, v = make_qkv((), 2, 3, 4, 4, torch.float32)
    out, weights = calculate_attention(q, k, v, attn_mask=torch.zeros(2, 3, dtype=torch.bool))
    assert torch.equal(out, torch.zeros(2, 4))
    assert torch.equal(weights, torch.zeros(2, 3))


# -- gradients -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("mask_kind", ["none", "bool", "float", "causal", "fully_masked_row"])
def test_gradcheck(mask_kind, need_weights):
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
    fn = lambda q, k, v: calculate_attention(q, k, v, need_weights=need_weights, **kwargs)[0]  # noqa: E731
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
    with pytest.raises(TypeError, match=r"scale must be a number, but got str"):
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
    with pytest.raises(TypeError, match=r"d_k must be an int, but got float \(4.0\); use query.size\(-1\)"):
        scaler(torch.ones(2, 2), 4.0)
    with pytest.raises(TypeError, match=r"scale must be a number, but got str"):
        scaler(torch.ones(2, 2), 4, scale="0.5")
    with pytest.raises(ValueError, match=r"d_k must be positive, but d_k=0"):
        scaler(torch.ones(2, 2), 0)
    with pytest.raises(ValueError, match=r"share the last dimension"):
        matchmaker(torch.randn(3, 4), torch.randn(3, 5))
    with pytest.raises(ValueError, match=r"one column per value row.*\(3, 4\).*\(5, 2\)"):
        blend(torch.rand(3, 4), torch.randn(5, 2))
    with pytest.raises(ValueError, match=r"attn_mask must broadcast"):
        percentages(torch.randn(3, 4), torch.ones(4, 3, dtype=torch.bool))


def test_every_exported_name_exists():
    assert set(al.__all__) <= set(dir(al))


# -- inputs people pass every day: every implementation against SDPA, output and the three gradients --------


def _mha_as_attention(q, k, v, **kwargs):
    """MultiHeadAttention with identity projections and one head: attention itself, through the module."""
    E = q.shape[-1]
    mha = al.MultiHeadAttention(E, 1, bias=False, kdim=k.shape[-1], vdim=v.shape[-1]).to(q.dtype)
    assert E == v.shape[-1]
    with torch.no_grad():
        for proj in (mha.q_proj, mha.k_proj, mha.v_proj, mha.out_proj):
            proj.weight.copy_(torch.eye(E, dtype=q.dtype))
    mask = kwargs.pop("attn_mask", None)
    if type(mask) is torch.Tensor and mask.dim() == 3:  # not a CausalBias, which the module reads itself
        mask = mask.unsqueeze(1)  # (N, L, S) -> (N, 1, L, S)
    return mha(q, k, v, attn_mask=mask, **kwargs)[0]


#: Every attention function of the package, as ``fn(query, key, value, **sdpa_options) -> output``.
EVERY_IMPLEMENTATION = {
    "calculate_attention": lambda q, k, v, **o: calculate_attention(q, k, v, **o)[0],
    "need_weights=False": lambda q, k, v, **o: calculate_attention(q, k, v, need_weights=False, **o)[0],
    "memory_efficient_attention": lambda q, k, v, **o: al.memory_efficient_attention(q, k, v, block_size=(16, 32),
                                                                                     **o),
    "MultiHeadAttention": _mha_as_attention,
}


def _assert_like_sdpa(name, q, k, v, dtype=torch.float64, **options):
    """Output and the gradients of query, key and value agree with SDPA's (inputs are leaves of ``dtype``)."""
    q, k, v = (t.detach().to(dtype).requires_grad_() for t in (q, k, v))
    out = EVERY_IMPLEMENTATION[name](q, k, v, **options)
    expected = F.scaled_dot_product_attention(q, k, v, **options)
    assert out.shape == expected.shape
    torch.testing.assert_close(out, expected, **TOL[dtype])
    grad_output = torch.randn(expected.shape, generator=torch.Generator().manual_seed(9), dtype=dtype)
    grads = torch.autograd.grad(out, (q, k, v), grad_output)
    for got, want in zip(grads, torch.autograd.grad(expected, (q, k, v), grad_output), strict=True):
        torch.testing.assert_close(got, want, **TOL[dtype])


# -- masks that block with torch.finfo(dtype).min, as Hugging Face's models do ---------------------------------
#
# Such a mask leaves every key a finite score. A row whose every key is blocked then gets the uniform average (the
# scores' own differences vanish next to finfo.min), and its gradients are autograd's through the formula
# softmax(Q Kᵀ · scale + mask) V. SDPA's output agrees in every release measured; its gradients of that row do not:
# measured on the CPU, with the inputs below, torch 2.13.0 gives the formula's gradients and torch 2.14.1 does not
# (float64: the row's first query gradient -0.541 where the formula gives -0.077, and the key and value gradients
# that the row feeds change with it). So the gradients are checked against the formula, computed in float64; SDPA
# stays the reference for what it does the same in both releases (the output, and every gradient when the fully
# blocked row passes no gradient back); and what SDPA does with that row's gradients is recorded, so that the next
# change is noticed.


def _finfo_min_case(dtype):
    """Inputs ``(2, 5, 6)``, ``(2, 7, 6)``, ``(2, 7, 6)`` (float64) and a float mask ``(5, 7)`` of ``dtype`` that
    blocks with ``finfo(dtype).min``: row 1 blocks every key, row 3 all keys but the first two."""
    q, k, v = make_qkv((2,), 5, 7, 6, 6)
    mask = torch.zeros(5, 7, dtype=dtype)
    mask[1] = torch.finfo(dtype).min
    mask[3, 2:] = torch.finfo(dtype).min
    return q, k, v, mask


def _formula(q, k, v, attn_mask):
    """softmax(Q Kᵀ / √E + mask) V, in float64, for autograd to differentiate: the math reference."""
    scores = q.double() @ k.double().transpose(-2, -1) / math.sqrt(q.size(-1))  # (N, L, E) @ (N, E, S) -> (N, L, S)
    return torch.softmax(scores + attn_mask.double(), dim=-1) @ v.double()  # (N, L, S) @ (N, S, Ev) -> (N, L, Ev)


def _output_and_gradients(fn, q, k, v, dtype, grad_output, **options):
    """``fn(q, k, v, **options)`` on leaves of ``dtype``, and the gradients of query, key and value for
    ``grad_output``: ``[output, dq, dk, dv]``."""
    q, k, v = (t.detach().to(dtype).requires_grad_() for t in (q, k, v))
    out = fn(q, k, v, **options)
    return [out, *torch.autograd.grad(out, (q, k, v), grad_output.to(out.dtype))]


def _grad_output(shape, dtype):
    return torch.randn(shape, generator=torch.Generator().manual_seed(9), dtype=dtype)


#: The implementations that compute the formula themselves (``need_weights=False`` is SDPA: its gradients are
#: SDPA's, whatever the release).
FORMULA_IMPLEMENTATIONS = [name for name in EVERY_IMPLEMENTATION if name != "need_weights=False"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", FORMULA_IMPLEMENTATIONS)
def test_finfo_min_masks_give_what_the_formula_gives(name, dtype):
    """A fully blocked row is the uniform average, and every gradient is autograd's through the formula."""
    q, k, v, mask = _finfo_min_case(dtype)
    grad_output = _grad_output((2, 5, 6), dtype)
    got = _output_and_gradients(EVERY_IMPLEMENTATION[name], q, k, v, dtype, grad_output, attn_mask=mask)
    want = _output_and_gradients(_formula, q, k, v, torch.float64, grad_output, attn_mask=mask)
    torch.testing.assert_close(got[0][:, 1], v.to(dtype).mean(dim=-2), **TOL[dtype])  # the uniform average
    for what, mine, reference in zip(["output", "dq", "dk", "dv"], got, want, strict=True):
        torch.testing.assert_close(mine, reference.to(dtype), **TOL[dtype], msg=lambda m, what=what: f"{what}: {m}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", EVERY_IMPLEMENTATION)
def test_finfo_min_masks_give_what_sdpa_gives(name, dtype):
    """The output is SDPA's, and so is every gradient while the fully blocked row passes none back (where
    SDPA's releases agree with each other)."""
    q, k, v, mask = _finfo_min_case(dtype)
    grad_output = _grad_output((2, 5, 6), dtype)
    grad_output[:, 1] = 0.0  # row 1, blocked everywhere, passes no gradient back
    got = _output_and_gradients(EVERY_IMPLEMENTATION[name], q, k, v, dtype, grad_output, attn_mask=mask)
    want = _output_and_gradients(F.scaled_dot_product_attention, q, k, v, dtype, grad_output, attn_mask=mask)
    for what, mine, reference in zip(["output", "dq", "dk", "dv"], got, want, strict=True):
        torch.testing.assert_close(mine, reference, **TOL[dtype], msg=lambda m, what=what: f"{what}: {m}")


#: What SDPA's CPU kernel gives as the gradients of a row that finfo.min blocks everywhere, as measured (the
#: release, then whether they are the formula's); a newer release is expected to behave like the newest one here.
SDPA_FULLY_BLOCKED_ROW_GRADIENTS = {(2, 13): True, (2, 14): False}


def test_what_sdpa_does_with_a_fully_blocked_finfo_min_row_is_recorded():
    """SDPA's output for the row is the uniform average (in every release measured); whether its gradients are the
    formula's is checked against :data:`SDPA_FULLY_BLOCKED_ROW_GRADIENTS`, and a release that differs from the
    record gets a warning in the test summary (update the record), not a failure: the package follows the
    formula either way."""
    q, k, v, mask = _finfo_min_case(torch.float64)
    grad_output = _grad_output((2, 5, 6), torch.float64)
    sdpa = _output_and_gradients(F.scaled_dot_product_attention, q, k, v, torch.float64, grad_output, attn_mask=mask)
    formula = _output_and_gradients(_formula, q, k, v, torch.float64, grad_output, attn_mask=mask)
    torch.testing.assert_close(sdpa[0][:, 1], v.mean(dim=-2), **TOL[torch.float64])
    torch.testing.assert_close(sdpa[0], formula[0], **TOL[torch.float64])
    difference = max(float((s - f).abs().max()) for s, f in zip(sdpa[1:], formula[1:], strict=True))
    release = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])
    recorded = [key for key in sorted(SDPA_FULLY_BLOCKED_ROW_GRADIENTS) if key <= release] or [(2, 13)]
    expected = SDPA_FULLY_BLOCKED_ROW_GRADIENTS[recorded[-1]]
    if (difference < 1e-10) != expected:
        warnings.warn(f"torch {torch.__version__}: SDPA's gradients of a row that finfo.min blocks everywhere "
                      f"{'are now' if difference < 1e-10 else 'are no longer'} the formula's (largest difference "
                      f"{difference:.3g}); the record for torch {'.'.join(map(str, recorded[-1]))} says otherwise: "
                      "update SDPA_FULLY_BLOCKED_ROW_GRADIENTS in tests/test_attention.py", stacklevel=1)


@pytest.mark.parametrize("name", EVERY_IMPLEMENTATION)
def test_no_keys_at_all_gives_zeros_like_sdpa(name):
    q, k, v = make_qkv((2,), 4, 0, 6, 6)
    out = EVERY_IMPLEMENTATION[name](q, k, v)
    if name != "MultiHeadAttention":
        assert torch.equal(out, torch.zeros(2, 4, 6, dtype=torch.float64))
    _assert_like_sdpa(name, q, k, v)


def test_the_loop_version_with_no_keys_gives_zeros_like_the_recipe():
    q, k, v = make_qkv((2,), 4, 0, 6, 6)
    out, weights = al.loop_attention(q, k, v)
    expected_out, expected_weights = al.calculate_attention(q, k, v)
    assert torch.equal(out, expected_out)
    assert torch.equal(weights, expected_weights)
    assert out.shape == (2, 4, 6)
    assert weights.shape == (2, 4, 0)


@pytest.mark.parametrize("name", [n for n in EVERY_IMPLEMENTATION if n != "MultiHeadAttention"])
def test_a_batch_dimension_only_value_has(name):
    q, k, _ = make_qkv((1,), 3, 4, 8, 5)
    _, _, v = make_qkv((2,), 3, 4, 8, 5, seed=1)
    assert EVERY_IMPLEMENTATION[name](q, k, v).shape == (2, 3, 5)
    _assert_like_sdpa(name, q, k, v)


@pytest.mark.parametrize("variant", ["upper_left", "lower_right"])
@pytest.mark.parametrize(("L", "S"), [(3, 7), (6, 6), (7, 4)])
@pytest.mark.parametrize("name", EVERY_IMPLEMENTATION)
def test_causal_bias_objects_mean_what_they_mean_to_sdpa(name, L, S, variant):
    from torch.nn.attention import bias

    if variant == "lower_right" and L > S:
        pytest.skip("SDPA warns that this variant may give NaN for L > S")
    q, k, v = make_qkv((2,), L, S, 6, 6)
    _assert_like_sdpa(name, q, k, v, attn_mask=getattr(bias, f"causal_{variant}")(L, S))


def test_causal_bias_for_other_lengths_is_refused():
    from torch.nn.attention.bias import causal_lower_right

    q, k, v = make_qkv((), 3, 5, 4, 4)
    with pytest.raises(ValueError, match=r"CausalBias for 3 queries and 4 keys, but .* L=3 queries and S=5 keys"):
        calculate_attention(q, k, v, attn_mask=causal_lower_right(3, 4))


@pytest.mark.parametrize("scale", [-0.3, -2.0])
@pytest.mark.parametrize("name", EVERY_IMPLEMENTATION)
def test_negative_scale_with_is_causal(name, scale):
    """torch 2.13's fused CPU kernel gives NaN here; the package does not hand it that case."""
    q, k, v = make_qkv((2, 2), 6, 6, 8, 8)
    if name == "MultiHeadAttention":
        pytest.skip("MultiHeadAttention has no scale argument")
    with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):  # the reference: SDPA's math kernel
        expected = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True, scale=scale)
    out = EVERY_IMPLEMENTATION[name](q.float(), k.float(), v.float(), is_causal=True, scale=scale)
    torch.testing.assert_close(out, expected, **TOL[torch.float32])


# -- the grids of other attention libraries' tests: odd lengths and head sizes, L != S both ways -------------

#: ``(L, S, E, Ev)``, after the sizes FlashAttention's, PyTorch's and xformers' tests use.
GRID = [(113, 203, 59, 59), (203, 113, 40, 40), (1, 77, 16, 16), (77, 1, 8, 8), (128, 97, 64, 64)]


@pytest.mark.parametrize("masking", ["none", "causal", "bool", "float"])
@pytest.mark.parametrize(("L", "S", "E", "Ev"), GRID)
@pytest.mark.parametrize("name", EVERY_IMPLEMENTATION)
def test_grid_of_other_libraries_against_sdpa(name, L, S, E, Ev, masking):
    q, k, v = make_qkv((1, 2) if name != "MultiHeadAttention" else (2,), L, S, E, Ev, seed=L + S)
    options = {"is_causal": True} if masking == "causal" else {}
    if masking in ("bool", "float"):
        options["attn_mask"] = random_mask((L, S), torch.bool if masking == "bool" else torch.float64, L * S)
    _assert_like_sdpa(name, q, k, v, **options)


# -- the same mistake gives the same error everywhere ----------------------------------------------------------


@pytest.mark.parametrize("call", [
    lambda bad: scaler(torch.ones(2, 2), bad),
    lambda bad: al.causal_mask(bad),
    lambda bad: al.padding_mask([1], bad),
    lambda bad: al.split_heads(torch.ones(1, 2, 4), bad),
    lambda bad: al.MultiHeadAttention(8, bad),
    lambda bad: al.sinusoidal_encoding(bad, 4),
    lambda bad: al.LearnedPositions(bad, 4),
    lambda bad: al.memory_efficient_attention(*make_qkv((), 2, 2, 2, 2), block_size=bad),
], ids=["scaler", "causal_mask", "padding_mask", "split_heads", "MultiHeadAttention", "sinusoidal_encoding",
        "LearnedPositions", "memory_efficient_attention"])
def test_a_size_that_is_not_an_int_is_a_type_error_and_a_negative_one_a_value_error(call):
    with pytest.raises(TypeError, match=r"must be an int, but got float \(4.0\)"):
        call(4.0)
    with pytest.raises(TypeError, match=r"must be an int, but got bool \(True\)"):
        call(True)
    with pytest.raises(ValueError, match=r"must be (positive|non-negative), but .*=-2"):
        call(-2)


@pytest.mark.parametrize("call", [
    lambda bad: calculate_attention(*make_qkv((), 2, 2, 2, 2), scale=bad),
    lambda bad: scaler(torch.ones(2, 2), 4, scale=bad),
    lambda bad: al.loop_attention(*make_qkv((), 2, 2, 2, 2), scale=bad),
    lambda bad: al.memory_efficient_attention(*make_qkv((), 2, 2, 2, 2), scale=bad),
], ids=["calculate_attention", "scaler", "loop_attention", "memory_efficient_attention"])
def test_a_scale_that_is_not_a_number_is_a_type_error_and_an_infinite_one_a_value_error(call):
    with pytest.raises(TypeError, match=r"scale must be a number, but got str"):
        call("0.5")
    with pytest.raises(ValueError, match=r"scale must be a finite number, but scale=inf"):
        call(math.inf)


@pytest.mark.parametrize("call", [
    lambda bad: calculate_attention(*make_qkv((), 2, 2, 2, 2), is_causal=bad),
    lambda bad: calculate_attention(*make_qkv((), 2, 2, 2, 2), need_weights=bad),
    lambda bad: al.memory_efficient_attention(*make_qkv((), 2, 2, 2, 2), is_causal=bad),
], ids=["is_causal", "need_weights", "memory_efficient_attention"])
def test_a_flag_that_is_not_a_bool_is_a_type_error(call):
    with pytest.raises(TypeError, match=r"must be True or False, but got (int|str)"):
        call(1)
    with pytest.raises(TypeError, match=r"must be True or False"):
        call("yes")


# -- bad input that used to get a raw error or a wrong answer ----------------------------------------------------------


@pytest.mark.parametrize("scale", [0.0, -0.0, -0.5])
def test_causal_fast_path_with_a_scale_that_is_not_positive_matches_the_recipe(scale):
    """SDPA's fused CPU kernel gives NaN for is_causal=True with scale <= 0 (torch 2.13): the fast path avoids it."""
    q, k, v = make_qkv((2,), 4, 4, 8, 3)
    fast, _ = calculate_attention(q, k, v, is_causal=True, scale=scale, need_weights=False)
    recipe, _ = calculate_attention(q, k, v, is_causal=True, scale=scale)
    assert bool(fast.isfinite().all())
    torch.testing.assert_close(fast, recipe)


@pytest.mark.parametrize("masked", [False, True])
def test_a_nan_in_one_query_is_nan_in_its_output_row_on_every_path(masked):
    """NaN in, NaN out, whichever path: the fused CPU kernel alone would give that row zeros."""
    q, k, v = make_qkv((2,), 3, 5, 4, 2, torch.float32)
    q[1, 2, 0] = float("nan")
    mask = torch.ones(3, 5, dtype=torch.bool).tril(2) if masked else None
    mha = al.MultiHeadAttention(4, 2)
    outputs = {"recipe": calculate_attention(q, k, v, attn_mask=mask)[0],
               "fast": calculate_attention(q, k, v, attn_mask=mask, need_weights=False)[0],
               "memory_efficient": al.memory_efficient_attention(q, k, v, attn_mask=mask),
               "multihead fast": mha(q, k.expand(2, 5, 4), k.expand(2, 5, 4), need_weights=False)[0],
               "multihead": mha(q, k.expand(2, 5, 4), k.expand(2, 5, 4))[0]}
    for name, out in outputs.items():
        assert bool(out[1, 2].isnan().all()), f"{name}: the NaN query's row should be NaN"
        assert bool(out[0].isfinite().all()), f"{name}: other rows stay finite"
        assert bool(out[1, :2].isfinite().all()), f"{name}: other rows stay finite"


@pytest.mark.parametrize("fn", [calculate_attention, al.memory_efficient_attention, al.loop_attention, al.hard_lookup])
def test_empty_query_and_key_vectors_are_refused_by_name(fn):
    q, k, v = torch.randn(2, 0), torch.randn(3, 0), torch.randn(3, 4)
    with pytest.raises(ValueError, match=r"query and key must have at least one feature \(E >= 1\)"):
        fn(q, k, v)


def test_hard_lookup_with_no_keys_copies_nothing():
    out, weights = al.hard_lookup(torch.randn(2, 3), torch.randn(0, 3), torch.randn(0, 4))
    assert out.shape == (2, 4)
    assert weights.shape == (2, 0)
    assert torch.equal(out, torch.zeros(2, 4))
    torch.testing.assert_close(out, calculate_attention(torch.randn(2, 3), torch.randn(0, 3), torch.randn(0, 4))[0])


def test_blend_checks_dtypes_and_batch_shapes():
    with pytest.raises(TypeError, match="all tensors must share one dtype"):
        al.blend(torch.rand(2, 3), torch.rand(3, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="batch dimensions .* of weights, value must broadcast"):
        al.blend(torch.rand(2, 2, 3), torch.rand(3, 3, 4))


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("kind", ["bool", "float", "causal"])
def test_a_masked_call_never_reads_a_value_back_to_the_host(need_weights, kind):
    """On the meta device nothing can be read back (``bool(t)`` raises): the masked path runs anyway, so it makes no
    host-device synchronisation, which on a GPU would stall every call."""
    q, k, v = (torch.empty(2, 4, s, 8, device="meta") for s in (3, 5, 5))
    mask = {"bool": torch.empty(3, 5, dtype=torch.bool, device="meta"),
            "float": torch.empty(3, 5, device="meta"), "causal": None}[kind]
    out, weights = calculate_attention(q, k, v, attn_mask=mask, is_causal=kind == "causal",
                                       need_weights=need_weights)
    assert out.shape == (2, 4, 3, 8)
    assert out.device.type == "meta"
    with pytest.raises(Exception, match="meta"):
        bool(out.sum())  # the probe works: reading a meta value back fails


def test_each_check_of_a_call_runs_once(monkeypatch):
    """One preparation checks query, key, value and the mask; the steps check only what is theirs. Common inputs
    pass the quick check and skip the full one; inputs that only broadcast take the full one, once."""
    import attention_lib.attention as attention
    counts = {}
    for name in ("_common_inputs", "check_qkv", "check_mask"):
        real = getattr(attention, name)
        spy = lambda *a, _r=real, _n=name, **kw: counts.update({_n: counts.get(_n, 0) + 1}) or _r(*a, **kw)
        monkeypatch.setattr(attention, name, spy)
    q, k, v = make_qkv((2,), 3, 5, 4, 2)
    for need_weights in (True, False):
        counts.clear()
        calculate_attention(q, k, v, attn_mask=torch.ones(3, 5, dtype=torch.bool), need_weights=need_weights)
        assert counts == {"_common_inputs": 1, "check_mask": 1}
        counts.clear()
        calculate_attention(q, k[:1], v[:1], attn_mask=torch.ones(3, 5, dtype=torch.bool), need_weights=need_weights)
        assert counts == {"_common_inputs": 1, "check_qkv": 1, "check_mask": 1}


def _mistaken_inputs():
    q, k, v = _qkv()
    return {"not a tensor": (q, [[1.0]], v), "integer": (q.long(), k, v), "one dimension": (torch.randn(4), k, v),
            "E differs": (q, torch.randn(2, 5, 7), v), "S differs": (q, k, torch.randn(2, 4, 6)),
            "batch": (torch.randn(2, 3, 4), torch.randn(3, 5, 4), torch.randn(3, 5, 6)), "dtype": (q, k.double(), v),
            "value dtype": (q, k, v.double()), "device": (q, k.to("meta"), v),
            "E = 0": (torch.randn(2, 0), torch.randn(3, 0), torch.randn(3, 4)),
            "a parameter": (torch.nn.Parameter(q), k, v), "fewer dimensions": (q[0], k, v)}


@pytest.mark.parametrize("case", list(_mistaken_inputs()))
def test_the_quick_check_of_inputs_lets_no_mistake_through(case):
    """What skips the full check is only what the full check passes: every mistake (and a tensor subclass, a batch
    that only broadcasts) goes to the full check."""
    from attention_lib.attention import _common_inputs
    from attention_lib.validation import check_qkv
    query, key, value = _mistaken_inputs()[case]
    assert not _common_inputs(query, key, value)
    if case not in ("a parameter", "fewer dimensions"):
        with pytest.raises((TypeError, ValueError)):
            check_qkv(query, key, value)


@pytest.mark.parametrize(("L", "S", "E", "Ev"), GRID)
def test_the_quick_check_passes_common_inputs(L, S, E, Ev):
    from attention_lib.attention import _common_inputs
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        q, k, v = make_qkv((2, 3), L, S, E, Ev, dtype)
        assert _common_inputs(q, k, v)


def _ops_of(fn, *args, **kwargs) -> set[str]:
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn(*args, **kwargs)
    return {e.name for e in prof.events()}


@pytest.mark.parametrize("options", [{}, {"is_causal": True}, {"attn_mask": "every row has a key"}])
def test_the_fast_path_pays_only_for_what_can_happen(options):
    """Without a NaN in the queries and with a key for every row, the fast path returns SDPA's output as it is: no
    row marked, no copy of the output (the edge rules cost one sum of the queries)."""
    for dtype in (torch.float32, torch.float64):  # the fused kernel, and the math one
        q, k, v = make_qkv((2, 2), 6, 6, 4, 3, dtype)
        if "attn_mask" in options:
            options = {"attn_mask": torch.ones(6, 6, dtype=torch.bool).tril(2)}
        sdpa = _ops_of(F.scaled_dot_product_attention, q, k, v, **options)
        ops = _ops_of(calculate_attention, q, k, v, need_weights=False, **options) - sdpa
        assert not ops & {"aten::where", "aten::masked_fill", "aten::amax", "aten::clone", "aten::copy_"}, ops
        q[1, 0, 2, 1] = float("nan")  # now the NaN rule has something to do
        assert "aten::where" in _ops_of(calculate_attention, q, k, v, need_weights=False, **options)


@pytest.mark.parametrize("nan", [False, True])
def test_the_fast_path_keeps_sdpa_backward(nan):
    """SDPA saves its output for the backward pass: the NaN rule writes a new tensor, never into that output. Rows
    without a NaN get SDPA's gradients."""
    q, k, v = (t.requires_grad_() for t in make_qkv((2, 2), 5, 6, 4, 3))
    if nan:
        with torch.no_grad():
            q[0, 1, 3, 2] = float("nan")
    out, _ = calculate_attention(q, k, v, need_weights=False)
    out.sum().backward()
    clean = (slice(1, None),)  # batch 1 holds no NaN
    q2, k2, v2 = (t.detach()[clean].requires_grad_() for t in (q, k, v))
    F.scaled_dot_product_attention(q2, k2, v2).sum().backward()
    torch.testing.assert_close(out[clean], F.scaled_dot_product_attention(q2, k2, v2))
    for mine, sdpa in zip((q, k, v), (q2, k2, v2), strict=True):
        torch.testing.assert_close(mine.grad[clean], sdpa.grad)
    assert bool(out[0, 1, 3].isnan().all()) == nan
