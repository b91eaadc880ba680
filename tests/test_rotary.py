"""Rotary positions (RoPE): the relative-position property, rotations that keep lengths, offsets, the same numbers
as transformers' Llama, and errors."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attention_lib import RotaryPositions


def vectors(n=2, dim=8, seed=0, dtype=torch.float64):
    return torch.randn(n, dim, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def test_score_of_q_at_5_and_k_at_2_equals_q_at_40_and_k_at_37():
    rope = RotaryPositions(16)
    q, k = vectors(1, 16, seed=1)[0], vectors(1, 16, seed=2)[0]
    near = rope(q[None], offset=5) @ rope(k[None], offset=2).T
    far = rope(q[None], offset=40) @ rope(k[None], offset=37).T
    torch.testing.assert_close(near, far)
    other = rope(q[None], offset=40) @ rope(k[None], offset=36).T  # 4 apart: another score
    assert not torch.allclose(near, other)


@given(st.integers(0, 200), st.integers(0, 200), st.integers(0, 100))
def test_a_score_depends_only_on_the_distance(m, n, shift):
    rope = RotaryPositions(8, base=100.0)
    q, k = vectors(2, 8, seed=3).split(1)  # (1, 8) each
    score = (rope(q, m) * rope(k, n)).sum()
    shifted = (rope(q, m + shift) * rope(k, n + shift)).sum()
    torch.testing.assert_close(score, shifted, atol=1e-9, rtol=1e-9)


def test_rotation_keeps_lengths_and_position_zero_is_unchanged():
    rope = RotaryPositions(8)
    x = vectors(5, 8)
    turned = rope(x)
    torch.testing.assert_close(turned.norm(dim=-1), x.norm(dim=-1))
    torch.testing.assert_close(turned[0], x[0])  # angle 0
    assert not torch.allclose(turned[1], x[1])


def test_the_first_pair_turns_by_one_radian_per_position():
    rope = RotaryPositions(4)
    x = torch.tensor([[1.0, 0.0, 0.0, 0.0]], dtype=torch.float64)  # feature 0, paired with feature 2
    turned = rope(x, offset=3)
    torch.testing.assert_close(turned, torch.tensor([[math.cos(3), 0.0, math.sin(3), 0.0]], dtype=torch.float64))


@given(st.integers(0, 30), st.integers(1, 6))
def test_an_offset_continues_the_positions(offset, L):
    rope = RotaryPositions(8)
    x = vectors(offset + L, 8, seed=4)
    torch.testing.assert_close(rope(x[offset:], offset=offset), rope(x)[offset:])


def test_heads_and_batches_share_the_angles():
    rope = RotaryPositions(4)
    x = vectors(3, 4).reshape(1, 1, 3, 4).expand(2, 3, 3, 4)  # (N, H, L, Dh)
    torch.testing.assert_close(rope(x), rope(x[0, 0]).expand(2, 3, 3, 4))


def test_the_papers_interleaved_pairs_are_the_same_rotation_in_another_feature_order():
    rope = RotaryPositions(8)
    half_split = torch.tensor([0, 4, 1, 5, 2, 6, 3, 7])  # paper's pair (2i, 2i + 1) = our pair (i, i + 4)
    x = vectors(6, 8, seed=5)
    paper = x.clone()  # the paper: rotate (x[2i], x[2i + 1]) by pos * theta_i
    theta = 10000.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    for pos in range(6):
        for i in range(4):
            a, b = x[pos, 2 * i], x[pos, 2 * i + 1]
            c, s = math.cos(pos * theta[i]), math.sin(pos * theta[i])
            paper[pos, 2 * i], paper[pos, 2 * i + 1] = a * c - b * s, a * s + b * c
    ours = rope(x[:, half_split.argsort()])[:, half_split]  # into our order, rotate, back
    torch.testing.assert_close(ours, paper)


def test_same_rotation_as_transformers_llama():
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    config = LlamaConfig(hidden_size=64, num_attention_heads=4, rope_parameters={"rope_type": "default",
                                                                                  "rope_theta": 500.0})
    q, k = (torch.randn(2, 4, 7, 16, generator=torch.Generator().manual_seed(s)) for s in (0, 1))  # (N, H, L, Dh)
    positions = torch.arange(3, 10)[None].expand(2, 7)
    cos, sin = LlamaRotaryEmbedding(config)(q, positions)
    theirs_q, theirs_k = apply_rotary_pos_emb(q, k, cos, sin)
    rope = RotaryPositions(16, base=500.0)
    torch.testing.assert_close(rope(q, offset=3), theirs_q, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(rope(k, offset=3), theirs_k, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("call", "error", "match"), [
    (lambda: RotaryPositions(7), ValueError, "dim must be even"),
    (lambda: RotaryPositions(0), ValueError, "dim must be positive"),
    (lambda: RotaryPositions(8.0), TypeError, "dim must be an int"),
    (lambda: RotaryPositions(8, base=-1.0), ValueError, "base must be positive"),
    (lambda: RotaryPositions(8)(torch.zeros(3, 6)), ValueError, r"E = dim = 8.*RotaryPositions\(Dh\)"),
    (lambda: RotaryPositions(8)(torch.zeros(8)), ValueError, r"\(N, ..., L, E\)"),
    (lambda: RotaryPositions(8)(torch.zeros(3, 8, dtype=torch.long)), TypeError, "floating-point"),
    (lambda: RotaryPositions(8)(torch.zeros(3, 8), offset=-2), ValueError, "offset must be non-negative"),
    (lambda: RotaryPositions(8)([[0.0] * 8]), TypeError, "must be a torch.Tensor"),
])
def test_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_repr_names_its_size():
    assert repr(RotaryPositions(8, base=500.0)) == "RotaryPositions(dim=8, base=500)"
