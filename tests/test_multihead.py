"""MultiHeadAttention, split_heads and merge_heads: equal to torch.nn.MultiheadAttention, gradients, errors."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import nn

from attention_lib import MultiHeadAttention, calculate_attention, merge_heads, split_heads


def make_pair(E=8, H=2, bias=True, kdim=None, vdim=None, seed=0, dtype=torch.float32):
    """A torch module with random weights (biases too) and our copy of it, both in eval mode."""
    torch.manual_seed(seed)
    theirs = nn.MultiheadAttention(E, H, bias=bias, kdim=kdim, vdim=vdim, batch_first=True, dtype=dtype)
    with torch.no_grad():
        for p in theirs.parameters():
            p.normal_(0.0, 0.5)  # torch starts biases at zero: make them count
    theirs.eval()
    return theirs, MultiHeadAttention.from_torch(theirs)


def inputs(N=2, L=3, S=5, E=8, kdim=None, vdim=None, seed=1, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(N, L, E, generator=g, dtype=dtype)
    k = torch.randn(N, S, kdim or E, generator=g, dtype=dtype)
    v = torch.randn(N, S, vdim or E, generator=g, dtype=dtype)
    return q, k, v


# --- split_heads and merge_heads -----------------------------------------------------------------------------

@given(N=st.integers(1, 3), L=st.integers(1, 5), H=st.integers(1, 4), Dh=st.integers(1, 4))
def test_split_heads_gives_each_head_its_own_slice_and_merge_undoes_it(N, L, H, Dh):
    x = torch.randn(N, L, H * Dh)
    heads = split_heads(x, H)
    assert heads.shape == (N, H, L, Dh)
    for h in range(H):
        torch.testing.assert_close(heads[:, h], x[..., h * Dh:(h + 1) * Dh])
    torch.testing.assert_close(merge_heads(heads), x)


def test_split_heads_is_not_a_plain_reshape():
    x = torch.arange(16.0).reshape(1, 4, 4)
    assert not torch.equal(split_heads(x, 2), x.reshape(1, 2, 4, 2))


@pytest.mark.parametrize(("call", "error", "match"), [
    (lambda: split_heads(torch.zeros(4, 6), 2), ValueError, r"expects x of shape \(N, L, E\).*unsqueeze\(0\)"),
    (lambda: split_heads(torch.zeros(1, 4, 6), 4), ValueError, r"E=6 and num_heads=4.*\[1, 2, 3, 6\]"),
    (lambda: split_heads(torch.zeros(1, 4, 6), 0), ValueError, "num_heads must be positive, but num_heads=0"),
    (lambda: split_heads(torch.zeros(1, 4, 6), 2.0), TypeError, "num_heads must be an int"),
    (lambda: split_heads([[1.0]], 1), TypeError, "must be a torch.Tensor"),
    (lambda: merge_heads(torch.zeros(1, 4, 6)), ValueError, r"expects x of shape \(N, H, L, Dh\)"),
])
def test_split_and_merge_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


# --- agreement with torch.nn.MultiheadAttention ---------------------------------------------------------------

@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize(("E", "H", "L", "S"), [(8, 2, 3, 3), (8, 4, 3, 5), (6, 3, 4, 2), (4, 1, 2, 6)])
def test_agrees_with_torch_outputs_and_per_head_weights(bias, E, H, L, S):
    theirs, ours = make_pair(E, H, bias=bias)
    q, k, v = inputs(L=L, S=S, E=E)
    expected, expected_w = theirs(q, k, v, average_attn_weights=False)
    out, w = ours(q, k, v)
    assert w.shape == (2, H, L, S)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w, expected_w, atol=1e-5, rtol=1e-5)


def test_self_attention_agrees_and_fast_path_gives_no_weights():
    theirs, ours = make_pair()
    x, _, _ = inputs(L=4)
    expected, _ = theirs(x, x, x, need_weights=False)
    out, w = ours(x, x, x, need_weights=False)
    assert w is None
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ours(x, x, x)[0], expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("need_weights", [True, False])
def test_causal_agrees_with_torch_inverted_mask(need_weights):
    theirs, ours = make_pair(H=4)
    x, _, _ = inputs(L=5)
    allowed = torch.ones(5, 5, dtype=torch.bool).tril()  # True = may attend
    expected, expected_w = theirs(x, x, x, attn_mask=~allowed, average_attn_weights=False)  # torch: True = blocked
    for kwargs in ({"is_causal": True}, {"attn_mask": allowed}):
        out, w = ours(x, x, x, need_weights=need_weights, **kwargs)
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
        if need_weights:
            torch.testing.assert_close(w, expected_w, atol=1e-5, rtol=1e-5)
            assert bool((w.triu(1) == 0).all())


def test_key_padding_agrees_with_torch():
    theirs, ours = make_pair(H=2)
    q, k, v = inputs(N=3, L=4, S=6)
    lengths = torch.tensor([6, 4, 1])
    padding = torch.arange(6) >= lengths[:, None]  # (N, S), torch's convention: True = padding (blocked)
    expected, expected_w = theirs(q, k, v, key_padding_mask=padding, average_attn_weights=False)
    out, w = ours(q, k, v, attn_mask=(~padding)[:, None, None, :])  # (N, 1, 1, S), True = may attend
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w, expected_w, atol=1e-5, rtol=1e-5)
    assert bool((w[2, :, :, 1:] == 0).all())


def test_float_mask_and_per_head_mask_agree_with_torch():
    theirs, ours = make_pair(H=2)
    q, k, v = inputs(N=2, L=3, S=4)
    float_mask = torch.randn(3, 4)
    expected, _ = theirs(q, k, v, attn_mask=float_mask)
    torch.testing.assert_close(ours(q, k, v, attn_mask=float_mask)[0], expected, atol=1e-5, rtol=1e-5)
    per_head = torch.randn(2, 2, 3, 4)  # (N, H, L, S); torch wants (N * H, L, S)
    expected, _ = theirs(q, k, v, attn_mask=per_head.reshape(4, 3, 4))
    torch.testing.assert_close(ours(q, k, v, attn_mask=per_head)[0], expected, atol=1e-5, rtol=1e-5)


def test_kdim_and_vdim_are_copied():
    theirs, ours = make_pair(E=8, H=2, kdim=5, vdim=3)
    q, k, v = inputs(E=8, kdim=5, vdim=3)
    torch.testing.assert_close(ours(q, k, v)[0], theirs(q, k, v)[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("need_weights", [True, False])
def test_composed_of_the_lessons_parts(monkeypatch, need_weights):
    """Projections, split_heads, calculate_attention, merge_heads, output projection: each called, in that order."""
    from attention_lib import multihead

    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 2).eval()
    calls = []
    for part in ("split_heads", "calculate_attention", "merge_heads"):
        real = getattr(multihead, part)
        monkeypatch.setattr(multihead, part, lambda *a, _real=real, _part=part, **kw: calls.append(_part)
                            or _real(*a, **kw))
    for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
        getattr(mha, name).register_forward_hook(lambda *_, _name=name: calls.append(_name))
    q, k, v = inputs()
    mha(q, k, v, is_causal=False, need_weights=need_weights)
    assert calls == ["q_proj", "k_proj", "v_proj", "split_heads", "split_heads", "split_heads",
                     "calculate_attention", "merge_heads", "out_proj"]


def test_built_from_calculate_attention_head_by_head():
    torch.manual_seed(0)
    mha = MultiHeadAttention(8, 4).eval()
    q, k, v = inputs(L=3, S=4)
    out, w = mha(q, k, v)
    heads = []
    for h in range(4):
        cols = slice(2 * h, 2 * h + 2)
        head_out, head_w = calculate_attention(mha.q_proj(q)[..., cols], mha.k_proj(k)[..., cols],
                                               mha.v_proj(v)[..., cols])
        torch.testing.assert_close(w[:, h], head_w)
        heads.append(head_out)
    torch.testing.assert_close(out, mha.out_proj(torch.cat(heads, dim=-1)))


def test_dropout_only_in_training():
    theirs, ours = make_pair()
    ours.dropout = 0.5
    x, _, _ = inputs()
    torch.testing.assert_close(ours(x, x, x)[0], theirs(x, x, x)[0], atol=1e-5, rtol=1e-5)  # eval: none
    ours.train()
    torch.manual_seed(0)
    _, w = ours(x, x, x)
    assert bool((w == 0).any())


def test_from_torch_keeps_training_mode_dtype_and_dropout():
    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(4, 2, dropout=0.25, batch_first=True, dtype=torch.float64)
    ours = MultiHeadAttention.from_torch(theirs)
    assert ours.training
    assert ours.dropout == 0.25
    assert ours.q_proj.weight.dtype == torch.float64


def test_gradcheck_float64():
    torch.manual_seed(0)
    mha = MultiHeadAttention(4, 2).double()
    q, k, v = (t.requires_grad_() for t in inputs(N=1, L=2, S=3, E=4, dtype=torch.float64))
    assert torch.autograd.gradcheck(lambda a, b, c: mha(a, b, c, is_causal=False)[0], (q, k, v))
    assert torch.autograd.gradcheck(lambda a, b, c: mha(a, b, c)[1], (q, k, v))
    params = tuple(mha.parameters())
    assert torch.autograd.gradcheck(lambda *p: torch.func.functional_call(
        mha, dict(zip(dict(mha.named_parameters()), p, strict=True)), (q, k, v))[0], params)


# --- errors a learner can act on ------------------------------------------------------------------------------

@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"embed_dim": 6, "num_heads": 4}, ValueError, r"divisible by num_heads.*embed_dim=6 and num_heads=4"),
    ({"embed_dim": 8, "num_heads": 0}, ValueError, "num_heads must be positive"),
    ({"embed_dim": 8.0, "num_heads": 2}, TypeError, "embed_dim must be an int"),
    ({"embed_dim": 8, "num_heads": 2, "dropout": 1.0}, ValueError, r"dropout must be in \[0, 1\)"),
    ({"embed_dim": 8, "num_heads": 2, "dropout": "0.1"}, TypeError, "dropout must be a number"),
    ({"embed_dim": 8, "num_heads": 2, "kdim": -1}, ValueError, "kdim must be positive"),
])
def test_constructor_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        MultiHeadAttention(**kwargs)


def test_divisibility_error_is_not_a_bare_assert():
    with pytest.raises(ValueError, match=r"pick num_heads among \[1, 2, 3, 6\]"):
        MultiHeadAttention(6, 4)


X = torch.zeros(2, 3, 8)


@pytest.mark.parametrize(("args", "kwargs", "error", "match"), [
    ((torch.zeros(3, 8), X, X), {}, ValueError, r"query must be 3-D.*query.unsqueeze\(0\)"),
    ((X, X, [[0.0]]), {}, TypeError, "value must be a torch.Tensor"),
    ((torch.zeros(2, 3, 6), X, X), {}, ValueError, r"query must have 8 features.*\(2, 3, 6\)"),
    ((X, torch.zeros(2, 3, 5), X), {}, ValueError, "key must have 8 features .the module's kdim"),
    ((X, X, torch.zeros(2, 4, 8)), {}, ValueError, "key and value S"),
    ((X, torch.zeros(1, 3, 8), torch.zeros(1, 3, 8)), {}, ValueError, "must share N"),
    ((X.double(), X, X), {}, TypeError, r"query.dtype=torch.float64 .*module.to\(torch.float64\)"),
    ((X, X, X), {"attn_mask": torch.ones(2, 3, 3, dtype=torch.bool)}, ValueError, r"mask.unsqueeze\(1\)"),
    ((X, X, X), {"attn_mask": torch.ones(2, 3, dtype=torch.bool)}, ValueError, "attn_mask must broadcast"),
    ((X, X, X), {"attn_mask": torch.ones(3, 3, dtype=torch.bool), "is_causal": True}, ValueError, "not both"),
])
def test_forward_errors(args, kwargs, error, match):
    mha = MultiHeadAttention(8, 2)
    with pytest.raises(error, match=match):
        mha(*args, **kwargs)


@pytest.mark.parametrize(("module", "error", "match"), [
    (nn.MultiheadAttention(4, 2), ValueError, r"batch_first=True.*module.batch_first = True"),
    (nn.MultiheadAttention(4, 2, add_bias_kv=True, batch_first=True), ValueError, "add_bias_kv"),
    (nn.MultiheadAttention(4, 2, add_zero_attn=True, batch_first=True), ValueError, "add_zero_attn"),
    (nn.Linear(4, 4), TypeError, "got Linear"),
])
def test_from_torch_errors(module, error, match):
    with pytest.raises(error, match=match):
        MultiHeadAttention.from_torch(module)


def test_from_torch_works_once_batch_first_is_set():
    theirs = nn.MultiheadAttention(4, 2).eval()
    theirs.batch_first = True  # what the error message suggests
    ours = MultiHeadAttention.from_torch(theirs)
    x = torch.randn(2, 3, 4)
    torch.testing.assert_close(ours(x, x, x)[0], theirs(x, x, x)[0], atol=1e-5, rtol=1e-5)


def test_multihead_attention_is_lesson_09s_module_only():
    mha = MultiHeadAttention(16, 4)
    assert {"q_proj", "k_proj", "v_proj", "out_proj", "num_heads", "head_dim"} <= set(vars(mha)) | set(mha._modules)
    for generation_option in ("num_kv_heads", "window", "rotary", "layer_idx"):
        with pytest.raises(TypeError, match="unexpected keyword"):
            MultiHeadAttention(16, 4, **{generation_option: 1})
    x = torch.zeros(1, 3, 16)
    with pytest.raises(TypeError, match="unexpected keyword"):
        mha(x, x, x, cache=None)
