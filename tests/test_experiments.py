"""The lesson experiments: each computes through the package's own steps, and rejects bad input clearly."""

import pytest
import torch

import attention_lib as al
from attention_lib.experiments import (
    MASK_KINDS,
    batch_mask,
    detective_projections,
    detective_team,
    scaler_weights,
    temperature_weights,
)
from attention_lib.toy_data import toy_sentence


def test_temperature_one_is_plain_attention():
    s = toy_sentence()
    torch.testing.assert_close(temperature_weights(1.0), al.calculate_attention(s.query, s.key, s.value)[1])


def test_temperature_matches_sdpa_scale():
    s = toy_sentence()
    eye = torch.eye(4)
    expected = torch.nn.functional.scaled_dot_product_attention(s.query, s.key, eye, scale=1 / (0.5 * 2.0))
    torch.testing.assert_close(temperature_weights(0.5), expected)


@pytest.mark.parametrize(("bad", "error", "message"), [
    (0, ValueError, "temperature must be positive, but temperature=0; use 1.0 for plain softmax"),
    (-1.0, ValueError, "temperature must be positive, but temperature=-1.0"),
    (float("inf"), ValueError, "temperature must be a finite number"),
    (True, TypeError, r"temperature must be a number, but got bool \(True\)"),
    ("1", TypeError, "temperature must be a number, but got str"),
])
def test_temperature_errors(bad, error, message):
    with pytest.raises(error, match=message):
        temperature_weights(bad)


def test_scaler_weights_saturate_without_scaling():
    assert scaler_weights(1024, scaled=False).amax(-1).mean() > 0.9
    assert scaler_weights(1024, scaled=True).amax(-1).mean() < 0.5


@pytest.mark.parametrize("kind", MASK_KINDS)
def test_batch_mask_entry_by_entry(kind):
    """[n, i, j]: word i of sentence n may attend to word j when j is not in its future and is a real word."""
    lengths, S = torch.tensor([3, 1, 4]), 4
    mask = batch_mask(kind, lengths, S)
    assert mask.shape == (3, S, S)
    for n, length in enumerate(lengths.tolist()):
        for i in range(S):
            for j in range(S):
                allowed = (j <= i or "causal" not in kind) and (j < length or "padding" not in kind)
                assert bool(mask[n, i, j]) == allowed, (kind, n, i, j)


def test_detective_team_matches_the_lesson_by_hand():
    x = toy_sentence().embeddings.unsqueeze(0)  # (1, L, E)
    W_q, W_k, W_v, W_o = detective_projections()
    q, k, v = (al.split_heads(x @ W.T, 2) for W in (W_q, W_k, W_v))  # (1, H, L, Dh) each
    out, weights = al.calculate_attention(q, k, v)
    output, team = detective_team()
    torch.testing.assert_close(team, weights[0])
    torch.testing.assert_close(output, (al.merge_heads(out) @ W_o.T)[0])


def test_one_head_is_the_lone_detective():
    x = toy_sentence().embeddings
    W_q, W_k, W_v, _ = detective_projections()
    _, lone = al.calculate_attention(x @ W_q.T, x @ W_k.T, x @ W_v.T)
    torch.testing.assert_close(detective_team(num_heads=1)[1][0], lone)


def test_the_clue_is_a_key_projection():
    W_k = detective_projections(("grammar", "gentle"))[1]
    assert W_k[:2].argmax(dim=-1).tolist() == [3, 3]
    assert W_k[2:].argmax(dim=-1).tolist() == [2, 2]


@pytest.mark.parametrize(("kwargs", "match"), [({"clues": ("animal",)}, "clues must be two of"),
                                               ({"clues": ("animal", "size")}, "clues must be two of"),
                                               ({"loudness": -2.0}, "loudness must be at least 0, but loudness=-2.0")])
def test_detective_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        detective_projections(**kwargs)


# -- 07: one call of the matrix version taken apart ------------------------------------------------------------------
def test_timing_breakdown_times_the_three_versions_at_each_length():
    from attention_lib.experiments import timing_breakdown

    threads = torch.get_num_threads()
    rows = timing_breakdown([8, 32], repeats=3, warmup=1)
    assert torch.get_num_threads() == threads  # one thread while it measures, then as before
    assert [row.L for row in rows] == [8, 32]
    assert [row.flops for row in rows] == [2 * 8 * 8 * 128, 2 * 32 * 32 * 128]
    for row in rows:
        assert 0.0 <= row.products
        assert 0.0 <= row.reused
        assert 0.0 < row.whole
        assert row.faults is None or row.faults >= 0.0
        # the plain version's faults are counted and returned whenever the system counts faults at all
        assert (row.faults_plain is None) == (row.faults is None)
        assert row.faults_plain is None or row.faults_plain >= 0.0


@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"lengths": [0]}, ValueError, r"L must be positive, but L=0; pass sentence lengths such as \[128, 256\]"),
    ({"lengths": [2.5]}, TypeError, r"L must be an int, but got float \(2.5\)"),
    ({"lengths": [8], "repeats": 0}, ValueError, "repeats must be positive, but repeats=0"),
    ({"lengths": [8], "warmup": -1}, ValueError, "warmup must be non-negative, but warmup=-1"),
])
def test_timing_breakdown_rejects_bad_arguments(kwargs, error, message):
    from attention_lib.experiments import timing_breakdown

    with pytest.raises(error, match=message):
        timing_breakdown(**kwargs)
