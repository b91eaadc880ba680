"""The masks of decoding: causal aligned to the end of the keys (not top-left, as SDPA's is_causal), and the
sliding window; their values, their agreement with SDPA's causal_lower_right, and their errors."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from torch.nn.attention.bias import causal_lower_right

from attention_lib import calculate_attention, causal_mask, causal_mask_lower_right, sliding_window_mask
from attention_lib.exercises.masking import window_mask
from attention_lib.masks import decoding_mask, resolve_causal_bias
from conftest import make_qkv


@given(st.integers(0, 9), st.integers(0, 9))
def test_query_i_of_L_sees_keys_up_to_S_minus_L_plus_i(L, S):
    mask = causal_mask_lower_right(L, S)
    assert mask.shape == (L, S)
    for i in range(L):
        for j in range(S):
            assert bool(mask[i, j]) == (j <= S - L + i), (i, j)


@pytest.mark.parametrize("S", [1, 5, 9])
def test_one_new_query_sees_every_key_where_the_top_left_mask_sees_only_the_first(S):
    assert bool(causal_mask_lower_right(1, S).all())
    assert causal_mask(1, S).tolist() == [[True] + [False] * (S - 1)]  # is_causal's alignment: key 0 alone


@given(st.integers(1, 8))
def test_both_alignments_agree_when_L_equals_S(L):
    assert torch.equal(causal_mask_lower_right(L), causal_mask(L))
    assert torch.equal(causal_mask_lower_right(L, L), causal_mask(L, L))


@pytest.mark.parametrize(("L", "S"), [(1, 6), (3, 7), (4, 4)])
def test_attention_with_it_equals_sdpa_with_causal_lower_right(L, S):
    q, k, v = make_qkv((2, 3), L, S, 4, 5)
    out, weights = calculate_attention(q, k, v, attn_mask=causal_mask_lower_right(L, S))
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(L, S)))
    assert bool((weights[..., -1, :] > 0).all())  # the newest query reads every key


def test_decoding_a_token_with_the_cache_equals_the_last_row_of_the_whole_pass():
    q, k, v = make_qkv((1,), 6, 6, 4, 4)
    full, _ = calculate_attention(q, k, v, is_causal=True)
    last, _ = calculate_attention(q[:, -1:], k, v, attn_mask=causal_mask_lower_right(1, 6))
    torch.testing.assert_close(last, full[:, -1:])
    wrong, _ = calculate_attention(q[:, -1:], k, v, attn_mask=causal_mask(1, 6))  # top-left: key 0 only
    torch.testing.assert_close(wrong, v[:, :1])


@given(st.integers(0, 8), st.integers(0, 8), st.integers(1, 6), st.sampled_from(["upper_left", "lower_right"]))
def test_sliding_window_keeps_the_last_window_keys_of_each_alignment(L, S, window, align):
    mask = sliding_window_mask(L, S, window=window, align=align)
    assert mask.shape == (L, S)
    for i in range(L):
        p = i if align == "upper_left" else S - L + i  # the query's own position
        assert [j for j in range(S) if mask[i, j]] == [j for j in range(max(0, p - window + 1), p + 1) if j < S]


def test_the_two_alignments_differ_when_L_differs_from_S_and_lesson_08_uses_the_one_mask():
    top_left = sliding_window_mask(4, 7, window=3, align="upper_left")
    end = sliding_window_mask(4, 7, window=3, align="lower_right")
    assert not torch.equal(top_left, end)
    assert torch.equal(window_mask(4, 7, 3), top_left)  # lesson 08's reference is the package's mask
    assert torch.equal(sliding_window_mask(5, window=2, align="upper_left"),
                       sliding_window_mask(5, window=2, align="lower_right"))


def test_a_window_as_wide_as_the_keys_is_the_causal_mask():
    assert torch.equal(sliding_window_mask(3, 7, window=7, align="lower_right"), causal_mask_lower_right(3, 7))
    assert torch.equal(sliding_window_mask(3, 7, window=7, align="upper_left"), causal_mask(3, 7))
    assert torch.equal(sliding_window_mask(4, window=1, align="lower_right"), torch.eye(4, dtype=torch.bool))


def test_causal_lower_right_resolves_to_the_one_end_aligned_mask():
    mask, is_causal = resolve_causal_bias(causal_lower_right(2, 5), 2, 5)
    assert torch.equal(mask, causal_mask_lower_right(2, 5))
    assert not is_causal


@given(st.integers(1, 6), st.integers(0, 5), st.one_of(st.none(), st.integers(1, 8)))
def test_decoding_mask_is_the_end_aligned_mask_or_none_when_it_allows_everything(L, extra, window):
    S = L + extra
    mask = decoding_mask(L, S, window)
    full = causal_mask_lower_right(L, S) if window is None else sliding_window_mask(L, S, window=window,
                                                                                    align="lower_right")
    if mask is None:
        assert bool(full.all())
        assert L == 1
    else:
        assert torch.equal(mask, full)


@pytest.mark.parametrize(("call", "error", "match"), [
    (lambda: causal_mask_lower_right(-1, 3), ValueError, "L must be non-negative"),
    (lambda: causal_mask_lower_right(2, 3.0), TypeError, r"S must be an int.*cached \+ new"),
    (lambda: sliding_window_mask(2, 3, window=0, align="lower_right"), ValueError, "window must be positive"),
    (lambda: sliding_window_mask(2, 3, window=2.0, align="upper_left"), TypeError, "window must be an int"),
    (lambda: sliding_window_mask(2, 3, window=2), TypeError, "missing 1 required keyword-only argument: 'align'"),
    (lambda: sliding_window_mask(2, 3, window=2, align="end"), ValueError,
     r"align must be one of \['upper_left', 'lower_right'\].*is_causal's alignment"),
    (lambda: sliding_window_mask(2, 3, window=2, align=1), TypeError, "align must be a string"),
])
def test_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()
