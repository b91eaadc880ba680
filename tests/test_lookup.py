"""The hard lookup of lesson 02: one-hot weights on the best key, and the limit of a sharp soft lookup."""

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from attention_lib import calculate_attention, hard_lookup
from attention_lib.toy_data import random_qkv, toy_sentence


def test_picks_the_value_of_the_best_matching_key():
    key = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.6, 0.6]])
    value = torch.tensor([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0]])
    query = torch.tensor([[1.0, 0.1], [0.1, 1.0], [1.0, 1.0]])  # best keys: 0, 1, 2
    output, weights = hard_lookup(query, key, value)
    torch.testing.assert_close(weights, torch.eye(3))
    torch.testing.assert_close(output, value)


def test_toy_sentence_purred_finds_cat():
    s = toy_sentence()
    _, weights = hard_lookup(s.query, s.key, s.value)
    assert s.tokens[int(weights[s.tokens.index("purred")].argmax())] == "cat"


def test_tie_goes_to_the_first_best_key():
    key = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    _, weights = hard_lookup(torch.tensor([[1.0, 0.0]]), key, torch.randn(3, 2))
    torch.testing.assert_close(weights, torch.tensor([[1.0, 0.0, 0.0]]))


@pytest.mark.parametrize("batch", [(), (2,), (2, 3)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_shapes_dtype_and_one_hot_rows(batch, dtype):
    q, k, v = random_qkv(*batch, L=3, S=5, E=4, Ev=6, seed=1, dtype=dtype)
    output, weights = hard_lookup(q, k, v)
    assert output.shape == (*batch, 3, 6)
    assert weights.shape == (*batch, 3, 5)
    assert weights.dtype == dtype
    torch.testing.assert_close(weights.sum(-1), torch.ones(*batch, 3, dtype=dtype))
    assert set(weights.unique().tolist()) <= {0.0, 1.0}
    torch.testing.assert_close(output, weights @ v)


def test_batch_dimensions_broadcast():
    q, _, _ = random_qkv(2, L=3, E=4, seed=2)
    _, k, v = random_qkv(L=3, S=5, E=4, Ev=2, seed=3)
    output, weights = hard_lookup(q, k, v)  # one library (S, E) shared by both sentences
    assert output.shape == (2, 3, 2)
    torch.testing.assert_close(output[1], hard_lookup(q[1], k, v)[0])


@given(seed=st.integers(0, 10_000), L=st.integers(1, 5), S=st.integers(1, 6), E=st.integers(1, 6))
def test_a_very_sharp_soft_lookup_becomes_the_hard_lookup(seed, L, S, E):
    q, k, v = random_qkv(L=L, S=S, E=E, Ev=3, seed=seed, dtype=torch.float64)
    scores = q @ k.transpose(-2, -1)
    top2 = scores.topk(min(2, S), dim=-1).values
    gap = (top2[..., 0] - top2[..., -1]).min() if S > 1 else torch.tensor(1.0)
    assume(gap >= 0.05)  # on a near tie the soft lookup rightly splits the weight between the best keys
    hard_out, hard_weights = hard_lookup(q, k, v)
    soft_out, soft_weights = calculate_attention(q, k, v, scale=1000.0)
    torch.testing.assert_close(soft_weights, hard_weights, atol=1e-6, rtol=0)
    torch.testing.assert_close(soft_out, hard_out, atol=1e-5, rtol=0)


def test_errors_say_what_to_fix():
    q, k, v = random_qkv(L=3, S=5, E=4, Ev=2)
    with pytest.raises(ValueError, match="share the last dimension d_k"):
        hard_lookup(q[:, :3], k, v)
    with pytest.raises(ValueError, match="same number of positions S"):
        hard_lookup(q, k, v[:4])
    with pytest.raises(TypeError, match="floating-point"):
        hard_lookup(q.long(), k, v)
