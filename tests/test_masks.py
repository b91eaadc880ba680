"""causal_mask and padding_mask: their values, their broadcasting, and agreement with SDPA and is_causal."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from attention_lib import calculate_attention, causal_mask, padding_mask
from attention_lib.toy_data import sentence_batch
from conftest import TOL, make_qkv

FLOAT32 = TOL[torch.float32]


# -- causal_mask ------------------------------------------------------------------------------------------


def test_causal_mask_values():
    expected = torch.tensor([[True, False, False], [True, True, False], [True, True, True]])
    assert torch.equal(causal_mask(3), expected)
    assert causal_mask(3).dtype == torch.bool


@given(st.integers(0, 9), st.one_of(st.none(), st.integers(0, 9)))
def test_causal_mask_is_tril_of_ones(L, S):
    mask = causal_mask(L, S)
    S = L if S is None else S
    assert mask.shape == (L, S)
    for i in range(L):
        for j in range(S):
            assert bool(mask[i, j]) == (j <= i), (i, j)


def test_causal_mask_accepts_numpy_ints_and_a_device():
    mask = causal_mask(np.int64(2), np.int32(3), device="cpu")
    assert mask.shape == (2, 3)
    assert mask.device.type == "cpu"


@pytest.mark.parametrize(("L", "S"), [(4, 4), (3, 6), (6, 3), (1, 5), (5, 1)])
@pytest.mark.parametrize("batch", [(), (2,), (2, 3)])
def test_causal_mask_equals_is_causal_and_sdpa(L, S, batch):
    q, k, v = make_qkv(batch, L, S, 4, 3, torch.float32, seed=L * 10 + S)
    out, weights = calculate_attention(q, k, v, attn_mask=causal_mask(L, S))
    out_causal, weights_causal = calculate_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(out, out_causal)
    torch.testing.assert_close(weights, weights_causal)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(L, S)), **FLOAT32)
    if L <= S:  # every query keeps at least key 0, so SDPA's is_causal is well defined
        torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True), **FLOAT32)
    # no query ever gives weight to a future key
    assert bool((weights.masked_select(~causal_mask(L, S).expand_as(weights)) == 0).all())


def test_inverted_causal_mask_is_what_multihead_attention_wants():
    torch.manual_seed(0)
    L, E = 5, 4
    mha = torch.nn.MultiheadAttention(E, num_heads=1, batch_first=True, bias=False)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.eye(E).repeat(3, 1))
        mha.out_proj.weight.copy_(torch.eye(E))
    x = torch.randn(2, L, E)
    expected, _ = calculate_attention(x, x, x, attn_mask=causal_mask(L))
    got, _ = mha(x, x, x, attn_mask=~causal_mask(L))  # nn.MultiheadAttention: True = blocked
    torch.testing.assert_close(got, expected, **FLOAT32)


@pytest.mark.parametrize(("L", "S", "error", "match"), [
    (2.0, None, TypeError, "L must be an int"),
    (True, None, TypeError, "L must be an int"),
    (3, "4", TypeError, "S must be an int"),
    (torch.tensor(3), None, TypeError, "got Tensor"),
    (-1, None, ValueError, "L must be non-negative, but L=-1; pass sizes such as query.size"),
    (3, -2, ValueError, "but S=-2; pass sizes such as query.size"),
])
def test_causal_mask_errors(L, S, error, match):
    with pytest.raises(error, match=match):
        causal_mask(L, S)


# -- padding_mask -----------------------------------------------------------------------------------------


def test_padding_mask_values_and_shape():
    mask = padding_mask(torch.tensor([4, 2, 0]), S=4)
    expected = torch.tensor([[[True, True, True, True]], [[True, True, False, False]],
                             [[False, False, False, False]]])
    assert mask.dtype == torch.bool
    assert torch.equal(mask, expected)
    assert torch.equal(padding_mask([4, 2, 0], 4), expected)
    assert torch.equal(padding_mask((4, 2, 0), 4), expected)


@given(st.lists(st.integers(0, 6), min_size=0, max_size=5), st.integers(0, 3))
def test_padding_mask_counts_real_tokens(lengths, extra):
    S = max(lengths, default=0) + extra
    mask = padding_mask(lengths, S)
    assert mask.shape == (len(lengths), 1, S)
    assert mask.sum(dim=(-2, -1)).tolist() == lengths
    # the real tokens come first: each row is True then False, never False then True
    assert bool((mask[..., 1:] <= mask[..., :-1]).all())


def test_padding_mask_device_argument():
    assert padding_mask([1, 2], 3, device="cpu").device.type == "cpu"
    assert padding_mask(torch.tensor([1, 2], dtype=torch.int32), 3).shape == (2, 1, 3)


def test_padding_mask_broadcasts_and_matches_sdpa_and_sentence_batch():
    x, lengths = sentence_batch()  # (N, S, 4), sentences of lengths 4, 3, 3
    N, S, _ = x.shape
    mask = padding_mask(lengths, S)  # (N, 1, S)
    out, weights = calculate_attention(x, x, x, attn_mask=mask)
    assert weights.shape == (N, S, S)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(x, x, x, attn_mask=mask), **FLOAT32)
    # padding gets no weight, and each real query sees exactly what the unpadded sentence would give
    for n, length in enumerate(lengths.tolist()):
        assert bool((weights[n, :, length:] == 0).all())
        alone, _ = calculate_attention(x[n, :length], x[n, :length], x[n, :length])
        torch.testing.assert_close(out[n, :length], alone)


def test_padding_mask_with_heads_and_combined_with_causal():
    N, H, L = 3, 2, 5
    lengths = torch.tensor([5, 3, 1])
    q, k, v = make_qkv((N, H), L, L, 4, 3, torch.float32, seed=7)
    mask = padding_mask(lengths, L).unsqueeze(1)  # (N, 1, 1, S) for (N, H, L, S) scores
    assert mask.shape == (N, 1, 1, L)
    out, _ = calculate_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), **FLOAT32)
    both = causal_mask(L) & padding_mask(lengths, L)  # (L, S) & (N, 1, S) -> (N, L, S)
    assert both.shape == (N, L, L)
    out, weights = calculate_attention(q, k, v, attn_mask=both.unsqueeze(1))
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=both.unsqueeze(1)), **FLOAT32)
    assert bool((weights[2, :, :, 1:] == 0).all())  # the 1-token sentence only ever sees its first token


def test_inverted_padding_mask_is_multihead_attentions_key_padding_mask():
    torch.manual_seed(0)
    E = 4
    mha = torch.nn.MultiheadAttention(E, num_heads=1, batch_first=True, bias=False)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.eye(E).repeat(3, 1))
        mha.out_proj.weight.copy_(torch.eye(E))
    x, lengths = sentence_batch()
    mask = padding_mask(lengths, x.shape[1])
    expected, expected_weights = calculate_attention(x, x, x, attn_mask=mask)
    got, got_weights = mha(x, x, x, key_padding_mask=~mask.squeeze(1))  # True = padding, blocked
    torch.testing.assert_close(got, expected, **FLOAT32)
    torch.testing.assert_close(got_weights, expected_weights, **FLOAT32)
    wrong, _ = mha(x, x, x, key_padding_mask=mask.squeeze(1))  # our convention passed as is: wrong keys
    assert not torch.allclose(wrong, expected, atol=1e-3)


@pytest.mark.parametrize(("lengths", "S", "error", "match"), [
    ([2, 5], 4, ValueError, r"at most the padded length S=4, but lengths=\[2, 5\]"),
    (torch.tensor([-1, 2]), 4, ValueError, r"non-negative, but lengths=\[-1, 2\]"),
    (torch.tensor([[1, 2]]), 4, ValueError, r"must be 1-D.*lengths.shape=\(1, 2\)"),
    ([[1], [2]], 4, ValueError, r"must be 1-D.*lengths.shape=\(2, 1\)"),
    (torch.tensor(3), 4, ValueError, r"must be 1-D.*lengths.shape=\(\)"),
    (torch.tensor([1.0, 2.0]), 4, TypeError, r"integers.*lengths.dtype=torch.float32; convert it with lengths.long"),
    ([1.5, 2], 4, TypeError, "must hold integers"),
    ([True, False], 4, TypeError, "lengths.dtype=torch.bool"),
    (["a"], 4, TypeError, "must be a list of ints"),
    ("34", 4, TypeError, "1-D integer tensor or a list of ints, but got str"),
    ([1, 2], 4.0, TypeError, "S must be an int"),
    ([1, 2], -1, ValueError, "S must be non-negative, but S=-1; pass the padded length"),
])
def test_padding_mask_errors(lengths, S, error, match):
    with pytest.raises(error, match=match):
        padding_mask(lengths, S)
