"""The trials every checker runs once an answer is right on its fixed inputs, one row per kind, each tried on a right
answer and a wrong one: an answer that remembers by shape or returns a reused buffer, one that changes the caller's
tensors, loud scores, rows whose allowed weights underflow, a non-contiguous view, a window as long as the sentence,
library shortcuts (``torch.masked``), and hints that say where and how the numbers differ.
"""

from __future__ import annotations

import functools
import math

import pytest
import torch

import attention_lib as al
from attention_lib.exercises import (
    check_calculate_attention,
    check_cross_attention,
    check_decoding_step,
    check_induction_score,
    check_log_softmax,
    check_masked_softmax,
    check_matchmaker,
    check_online_softmax_update,
    check_previous_token_score,
    check_reversal_target,
    check_scaled_scores,
    check_scores_shape,
    check_sinusoidal_encoding,
    check_soft_lookup,
    check_split_heads,
    check_tune_in,
    check_weights_no_loops,
    check_where_it_looks,
    check_window_mask,
    generation,
)
from attention_lib.exercises._again import Awkward, awkward_views, fresh_values, later_slip
from attention_lib.exercises._where import how_it_differs
from attention_lib.exercises.latent_and_paged.absorbed import check_absorbed_scores
from attention_lib.exercises.ring_attention.zigzag import check_zigzag_positions
from attention_lib.exercises.speculative_decoding import check_residual

sm = torch.softmax


def naive_softmax(s):
    e = s.exp()  # no max subtracted: inf / inf once a score passes ~88
    return e / e.sum(-1, keepdim=True)


def remembered(fn):
    """``fn`` with its results remembered by the inputs' shapes: right once per shape, never again."""
    seen = {}

    def by_shape(*args):
        key = tuple(tuple(a.shape) if isinstance(a, torch.Tensor) else a for a in args)
        if key not in seen:
            seen[key] = fn(*args)
        return seen[key]
    return by_shape


def in_one_buffer(fn):
    """``fn`` whose result is written into one buffer, reused by every call (each result a view of it)."""
    buffer = torch.zeros(4096)

    def shared(*args):
        out = fn(*args)
        view = buffer[:out.numel()].view(out.shape)
        return torch.mul(out, 1.0, out=view)
    return shared


def tune_in(x, focus):
    return sm(focus[:, None] * (x @ x.T), -1) @ x


def soft_lookup(q, k, v):
    return (sm((k @ q.unsqueeze(-1)).squeeze(-1) / math.sqrt(q.size(-1)), -1).unsqueeze(-2) @ v).squeeze(-2)


def matchmaker(q, k):
    return (q.unsqueeze(-2) * k.unsqueeze(-3)).sum(-1)


def matchmaker_through_view(q, k):
    flat = k.view(-1, k.shape[-1])  # needs the keys stored row by row
    return (q.unsqueeze(-2) * flat.reshape(k.shape).unsqueeze(-3)).sum(-1)


def scaled_scores(x, w_query, w_key):
    q, k = x @ w_query.T, x @ w_key.T
    return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))


def scaled_scores_transposing_in_place(x, w_query, w_key):
    w_query.t_()
    w_key.t_()
    q, k = x @ w_query, x @ w_key
    return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))


def log_softmax(s):
    t = s - s.amax(-1, keepdim=True)
    return t - t.exp().sum(-1, keepdim=True).log()


def log_softmax_cut_and_off(s):  # a clamp that cuts nothing, and a result off by one
    t = (s - s.amax(-1, keepdim=True)).clamp(min=-1e30)
    return t - t.exp().sum(-1, keepdim=True).log() + 1.0


def log_softmax_clamped(s):  # a clamp that cuts the scores: the slip the clamp hint is about
    t = s.clamp(-50.0, 50.0)
    return t - t.exp().sum(-1, keepdim=True).log()


def masked_softmax(s, m):
    return sm(s.masked_fill(~m, float("-inf")), -1).masked_fill(~m.any(-1, keepdim=True), 0.0)


def masked_softmax_renormalised(s, m):
    w = sm(s, -1) * m  # softmax first, then the blocked weights dropped and the rest renormalised
    total = w.sum(-1, keepdim=True)
    return torch.where(total > 0, w / total.clamp_min(1e-30), 0.0)


def masked_softmax_naive(s, m):
    return naive_softmax(s.masked_fill(~m, float("-inf"))).nan_to_num(0.0)


def window_mask(L, S, window):
    i, j = torch.arange(L)[:, None], torch.arange(S)[None, :]
    return (j <= i) & (j > i - window)


def window_mask_capped(L, S, window):  # right while the window is shorter than the sentence
    return window_mask(L, S, min(window, L - 1))


def cosine(q, k, temperature=0.1):
    unit = lambda x: x / x.norm(dim=-1, keepdim=True)  # noqa: E731
    return sm(unit(q) @ unit(k).transpose(-2, -1) / temperature, -1)


def cosine_naive(q, k, temperature=0.1):
    unit = lambda x: x / x.norm(dim=-1, keepdim=True)  # noqa: E731
    return naive_softmax(unit(q) @ unit(k).transpose(-2, -1) / temperature)


def attention_sequence_first(q, k, v):
    qb, kb, vb = (t.transpose(0, 1) for t in (q, k, v))
    w = sm(qb @ kb.transpose(-2, -1) / math.sqrt(q.size(-1)), -1)
    return (w @ vb).transpose(0, 1), w


def split_heads(x, h):
    return x.transpose(0, 1).reshape(x.shape[1], x.shape[0], h, -1).transpose(1, 2)


def sinusoidal_encoding(length, dim):
    angles = torch.arange(length, dtype=torch.float64)[:, None] / 10000.0 ** (torch.arange(0, dim, 2) / dim)
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2).float()


def cross_attention(q, s, lengths):
    return al.calculate_attention(q, s, s, attn_mask=al.padding_mask(lengths, s.shape[1]))


def cross_attention_changing_lengths(q, s, lengths):
    lengths.add_(1)  # the caller's lengths change
    return al.calculate_attention(q, s, s, attn_mask=al.padding_mask(lengths - 1, s.shape[1]))


def decoding_step(cache_k, cache_v, q, k, v):
    keys, values = torch.cat([cache_k, k], dim=-2), torch.cat([cache_v, v], dim=-2)
    return sm(q @ keys.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1) @ values, keys, values


def scores_shape(q, k):
    return (*q[:-1], k[-2])


def scores_shape_by_rank():
    """The shape remembered by the number of dimensions: right once per rank."""
    seen = {}

    def by_rank(q, k):
        if len(q) not in seen:
            seen[len(q)] = scores_shape(q, k)
        return seen[len(q)]
    return by_rank


def cosine_remembered_with_its_dtype():
    seen = {}

    def by_shape_and_dtype(q, k, temperature=0.1):
        key = (q.shape, k.shape, q.dtype, temperature)
        if key not in seen:
            seen[key] = cosine(q, k, temperature)
        return seen[key]
    return by_shape_and_dtype


def cosine_through_view(q, k, temperature=0.1):
    (N, L, E), S = q.shape, k.shape[1]
    unit = lambda x: x / x.norm(dim=-1, keepdim=True)  # noqa: E731
    q, k = unit(q.view(N * L, E)).view(N, L, E), unit(k.view(N * S, E)).view(N, S, E)
    return sm(q @ k.transpose(-2, -1) / temperature, -1)


def cosine_clamped(q, k, temperature=0.1):
    unit = lambda x: x / x.norm(dim=-1, keepdim=True)  # noqa: E731
    e = (unit(q) @ unit(k).transpose(-2, -1) / temperature).clamp(max=80.0).exp()
    return e / e.sum(-1, keepdim=True)


def masked_softmax_filled(s, m):  # -1e9 in place of -inf: right while every allowed score is above it
    return sm(s * m + -1e9 * ~m, -1).masked_fill(~m.any(-1, keepdim=True), 0.0)


def attention_sequence_first_root_in_float32(q, k, v):
    qb, kb, vb = (t.transpose(0, 1) for t in (q, k, v))
    w = sm(qb @ kb.transpose(-2, -1) / torch.tensor(q.size(-1)).sqrt(), -1)  # a float32 root, whatever the inputs
    return (w @ vb).transpose(0, 1), w


def decoding_step_by_identity():
    """Remembers each result by the tensors' ids: right on fresh tensors, wrong on the same ones refilled."""
    seen = {}

    def by_id(cache_k, cache_v, q, k, v):
        key = tuple(map(id, (cache_k, cache_v, q, k, v)))
        if key not in seen:
            seen[key] = decoding_step(cache_k, cache_v, q, k, v)
        return seen[key]
    return by_id


def decoding_step_in_float32(cache_k, cache_v, q, k, v):
    return tuple(t.float() for t in decoding_step(cache_k, cache_v, q, k, v))


def window_mask_cached():
    return functools.lru_cache(maxsize=None)(window_mask)  # one tensor per (L, S, window), handed out again


def residual(p, q):
    shortfall = (p - q).clamp(min=0)
    return shortfall / shortfall.sum(-1, keepdim=True)


def previous_token(w):
    return w.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=(0, -1))


def induction(w, k):
    return w.diagonal(offset=-(k - 1), dim1=-2, dim2=-1)[..., 1:k + 1].mean(dim=(0, -1))


def absorbed(q_nope, q_rope, latent, k_rope, w_uk, nope_scale=None, rope_scale=None):
    right = 1 / math.sqrt(q_nope.shape[-1] + q_rope.shape[-1])
    return ((q_nope @ w_uk) @ latent.transpose(-2, -1) * (nope_scale or right)
            + q_rope @ k_rope.transpose(-2, -1) * (rope_scale or right))


def absorbed_each_part_its_own_scale(q_nope, q_rope, latent, k_rope, w_uk):
    return absorbed(q_nope, q_rope, latent, k_rope, w_uk, 1 / math.sqrt(q_nope.shape[-1]),
                    1 / math.sqrt(q_rope.shape[-1]))


def removal_predicted(fn):
    from attention_lib.exercises.learning_to_attend import check_remove_attractors

    return check_remove_attractors(fn, 0.5)


def removal_every_row_renormalised(weights, verb, attractors):
    """Right: the verb row stripped of the attractors, then every row divided by its sum (a no-op elsewhere)."""
    is_verb = torch.nn.functional.one_hot(verb, weights.shape[1]).bool()[:, :, None]
    kept = weights.masked_fill(is_verb & attractors[:, None, :], 0.0)
    return kept / kept.sum(-1, keepdim=True)


def removal_by_shape():
    seen = {}
    return lambda w, v, a: seen.setdefault(tuple(w.shape), removal_every_row_renormalised(w, v, a))


def reversal_by_id():
    seen = {}
    return lambda d: seen.setdefault(id(d), d.flip(-1))  # Python gives a freed tensor's id to the next one


def online_update(running_max, running_sum, running_output, scores, value):
    new_max = torch.maximum(running_max, scores.amax(-1, keepdim=True))
    safe = torch.where(new_max.isinf(), 0.0, new_max)
    correction, p = (running_max - safe).exp(), (scores - safe).exp()
    return new_max, running_sum * correction + p.sum(-1, keepdim=True), running_output * correction + p @ value


def online_update_wrong_for_one_query(running_max, running_sum, running_output, scores, value):
    new_max, new_sum, blend = online_update(running_max, running_sum, running_output, scores, value)
    return new_max, new_sum, blend + (scores.shape[-2] == 1)  # a slip on the decoding case alone


def encoding_narrow(length, dim):
    table = sinusoidal_encoding(length, dim)
    return table * (torch.arange(dim) < 16)  # nothing past 16 features


def window_mask_by_sizes():
    seen = {}
    return lambda L, S, window: seen.setdefault((L, S), window_mask(L, S, window))  # the window left out of the key


def zigzag(n, world, rank):
    chunks = torch.arange(n).chunk(2 * world)
    return torch.cat([chunks[rank], chunks[2 * world - 1 - rank]])


def zigzag_by_sizes():
    seen = {}
    return lambda n, world, rank: seen.setdefault((n, world), zigzag(n, world, rank))  # the rank left out of the key


def zigzag_for_four_ranks(n, world, rank):
    chunks = torch.arange(n).chunk(2 * world)
    return torch.cat([chunks[rank], chunks[min(7 - rank, 2 * world - 1)]])  # 7 - r: written for 4 ranks


def decoding_step_scaling_q_in_place(cache_k, cache_v, q, k, v):
    q.mul_(2.0)  # the caller's new token, written into
    return decoding_step(cache_k, cache_v, q / 2.0, k, v)


def decoding_step_with_the_decoding_mask(cache_k, cache_v, q, k, v):
    keys, values = torch.cat([cache_k, k], dim=-2), torch.cat([cache_v, v], dim=-2)
    mask = al.causal_mask_lower_right(q.shape[-2], keys.shape[-2])
    return al.calculate_attention(q, keys, values, attn_mask=mask)[0], keys, values


def absorbed_through_the_matchmaker(q_nope, q_rope, latent, k_rope, w_uk):
    both = al.matchmaker(torch.cat([q_nope @ w_uk, q_rope], -1), torch.cat([latent, k_rope], -1))
    return both / math.sqrt(q_nope.shape[-1] + q_rope.shape[-1])


#: (checker, right answer, wrong answer, what the wrong answer's message says)
ROWS = [
    (check_tune_in, tune_in, remembered(tune_in), "the second call (the first input's shape, new values)"),
    (check_tune_in, tune_in, remembered(tune_in), "remembers an answer by the input's shape"),
    (check_soft_lookup, soft_lookup, in_one_buffer(soft_lookup), "changed after your function ran on other inputs"),
    (check_scaled_scores, scaled_scores, scaled_scores_transposing_in_place, "changed its input `w_query` in place"),
    (check_scaled_scores, scaled_scores, scaled_scores_transposing_in_place, ".t_()"),
    (check_split_heads, split_heads, remembered(split_heads), "remembers an answer by the input's shape"),
    (check_tune_in, tune_in, lambda x, f: naive_softmax(f[:, None] * (x @ x.T)) @ x, "not on loud scores"),
    (check_tune_in, tune_in, lambda x, f: naive_softmax(f[:, None] * (x @ x.T)) @ x, "subtract each row's max"),
    (check_soft_lookup, soft_lookup, lambda q, k, v: (naive_softmax((k @ q.unsqueeze(-1)).squeeze(-1) / math.sqrt(
        q.size(-1))).unsqueeze(-2) @ v).squeeze(-2), "inf / inf is NaN"),
    (check_weights_no_loops, cosine, cosine_naive, "at temperature=0.002"),
    (check_weights_no_loops, cosine, cosine_naive, "subtract each row's max"),
    (check_masked_softmax, masked_softmax, masked_softmax_naive, "not on loud scores"),
    (check_masked_softmax, masked_softmax, masked_softmax_renormalised, "rows whose allowed weights underflow"),
    (check_masked_softmax, masked_softmax, masked_softmax_renormalised, "the renormalisation is 0 / 0"),
    (check_masked_softmax, masked_softmax, lambda s, m: torch.masked.softmax(s, -1, mask=m).nan_to_num(0.0),
     "`torch.masked.softmax`"),
    (check_matchmaker, matchmaker, matchmaker_through_view, "on a non-contiguous view"),
    (check_matchmaker, matchmaker, matchmaker_through_view, ".reshape(...)"),
    (check_window_mask, window_mask, window_mask_capped, "a window as long as the sentence"),
    (check_window_mask, window_mask, window_mask_capped, "no key falls out of it"),
    (check_scaled_scores, scaled_scores, lambda x, wq, wk: scaled_scores(x, wq, wk) + 0.5,
     "for the inputs of shape (2, 6, 8), of shape (6, 8)"),
    (check_scaled_scores, scaled_scores, lambda x, wq, wk: scaled_scores(x, wq, wk) + 0.5,
     "each row of yours is the reference's plus a constant"),
    (check_calculate_attention, attention_sequence_first,
     lambda q, k, v: (attention_sequence_first(q, k, v)[0] * 0.9, attention_sequence_first(q, k, v)[1]),
     "the reference's times 0.9"),
    (check_log_softmax, log_softmax, log_softmax_clamped, "clamping the scores changes them"),
    (check_log_softmax, log_softmax, lambda s: (lambda e: (e / e.sum(-1, keepdim=True)).clamp(min=1e-30).log())(
        (s - s.amax(-1, keepdim=True)).exp()), "clamping the weights changes them"),
    (check_scores_shape, scores_shape, scores_shape_by_rank(), "another pair with 0 batch dimensions"),
    (check_scores_shape, scores_shape, lambda q, k: {2: (4, 5)}.get(len(q)) or scores_shape(q, k),
     "remember, or write in, an answer per number of dimensions"),
    (check_weights_no_loops, cosine, cosine_remembered_with_its_dtype(), "remembers an answer by the input's shape"),
    (check_weights_no_loops, cosine, cosine_through_view, "on a non-contiguous view"),
    (check_weights_no_loops, cosine, cosine_clamped, "clamping the scores changes them"),
    (check_window_mask, window_mask, lambda L, S, w: torch.ones(L, S, dtype=torch.bool).tril().triu(
        -(w - 1) if w <= min(L, S) else -(min(L, S) - 1)), "cap the window at nothing"),
    (check_sinusoidal_encoding, sinusoidal_encoding, lambda L, d: sinusoidal_encoding(64, d)[:L],
     "a table for a fixed maximum length"),
    (check_cross_attention, cross_attention, cross_attention_changing_lengths, "changed its input `lengths` in place"),
    (check_decoding_step, decoding_step, generation._reference, "the checker's own reference"),
    (check_masked_softmax, masked_softmax, masked_softmax_filled, "allowed scores far below zero (around -1e10"),
    (check_masked_softmax, masked_softmax, masked_softmax_filled, "a finite fill (-1e9"),
    (check_calculate_attention, attention_sequence_first, attention_sequence_first_root_in_float32,
     "torch.tensor(d_k).sqrt() is float32"),
    (check_decoding_step, decoding_step, decoding_step_by_identity(), "on the same tensors refilled with new numbers"),
    (check_decoding_step, decoding_step, decoding_step_by_identity(), "it remembers by the tensors themselves"),
    (check_decoding_step, decoding_step, decoding_step_in_float32, "for float64 inputs your function returned float32"),
    (check_window_mask, window_mask, window_mask_cached(), "your function hands out one tensor it keeps"),
    (check_previous_token_score, previous_token,
     lambda w: w.diagonal(offset=-2, dim1=-2, dim2=-1).mean(dim=(0, -1)), "queries 2 to 4 put on key i - 2"),
    (check_induction_score, induction, lambda w, k: w.diagonal(offset=-(k - 1), dim1=-2, dim2=-1)[..., 2:k + 2].mean(
        dim=(0, -1)), "queries 4 to 6 put on key i - 2"),
    (check_absorbed_scores, absorbed, absorbed_each_part_its_own_scale,
     "times 1 / sqrt(Dn) = 1 / sqrt(12), plus the rotary part (q_rope against k_rope) times 1 / sqrt(Dr)"),
    (check_online_softmax_update, online_update, online_update_wrong_for_one_query,
     "one query per row block (L = 1, as in decoding)"),
    (check_sinusoidal_encoding, sinusoidal_encoding, encoding_narrow, "a wide table"),
    (check_window_mask, window_mask, window_mask_by_sizes(), "remembers an answer by part of its arguments"),
    (check_zigzag_positions, zigzag, zigzag_by_sizes(), "your function returned its result for the fixed input"),
    (check_zigzag_positions, zigzag, zigzag_for_four_ranks, "right for every ring of 2 and 4 ranks and wrong for 3"),
    (check_decoding_step, decoding_step, decoding_step_scaling_q_in_place, "the caller's new token is no longer"),
    (check_decoding_step, decoding_step_with_the_decoding_mask, generation._only_new, "attended to itself alone"),
    (check_absorbed_scores, absorbed_through_the_matchmaker, lambda q_nope, q_rope, latent, k_rope, w_uk: absorbed(
        q_nope, q_rope, latent, k_rope, w_uk[:1].expand_as(w_uk)), "only head 0 is right"),
    (check_absorbed_scores, absorbed, lambda q_nope, q_rope, latent, k_rope, w_uk: absorbed(
        q_nope, q_rope, latent[:1], k_rope[:1], w_uk), "only the first sequence is right"),
    (check_soft_lookup, soft_lookup, lambda q, k, v: soft_lookup(q, k, k if k.shape == v.shape else v),
     "your result is the reference's with `key` in the place of `value`"),
    (check_log_softmax, log_softmax, lambda s: log_softmax(s / s.shape[-1] ** 0.5),
     "with `scores` multiplied by 1 / sqrt(4)"),
    (removal_predicted, removal_every_row_renormalised, removal_by_shape(), "the second call (the first input's shape"),
    (check_residual, residual, lambda p, q: residual(p, q) if p.shape[0] != p.shape[1] else (p - q).clamp(min=0) / (
        p - q).clamp(min=0).sum(-1), "as many rows as tokens"),
    (check_soft_lookup, soft_lookup, lambda q, k, v: soft_lookup(q, k, v) if k.shape[0] != k.shape[1] else soft_lookup(
        q, k.transpose(0, 1), v), "as many readers as keys"),
    (check_reversal_target, lambda d: d.flip(-1), reversal_by_id(), "for 5 digits your function returned its result"),
    (check_residual, residual, lambda p, q: (p - q).abs() / (p - q).abs().sum(-1, keepdim=True), "|p - q|"),
    (check_residual, residual, lambda p, q: residual(p, q) * (1 + 1e-5), "computes something slightly different"),
    (check_previous_token_score, previous_token, lambda w: w.diagonal(offset=-1, dim1=-2, dim2=-1)[0].mean(-1),
     "in the first sequence alone"),
    (check_window_mask, window_mask, lambda L, S, w: window_mask(L, S, w + 1) & ~window_mask(L, S, 1),
     "the query's own key is missing"),
    (check_residual, residual, lambda p, q: (p - q).clamp(min=0) / (p - q).clamp(min=0).sum(0),
     "the division used each column's sum"),
]


@pytest.mark.parametrize(("checker", "right", "wrong", "fragment"), ROWS)
def test_each_trial_passes_the_right_answer_and_names_the_wrong_ones_slip(checker, right, wrong, fragment):
    assert checker(right).status == "passed", checker(right).message
    result = checker(wrong)
    assert result.status in ("failed", "error"), result.message
    assert fragment in result.message


def test_a_clamp_that_cuts_nothing_gets_no_clamp_hint():
    message = check_log_softmax(log_softmax_cut_and_off).message
    assert "clamping the scores" not in message
    assert "plus a constant of its own" in message


def test_fresh_values_and_views_keep_the_shapes_and_numbers_where_they_should():
    x, lengths, mask = torch.randn(2, 3, 4), torch.tensor([3, 1]), torch.rand(2, 3) > 0.5
    fresh = fresh_values((x, lengths, mask, 7), 0.5)
    assert torch.equal(fresh[0], x * torch.tensor([0.5, 0.75, 0.5, 0.75]))  # a normalised row changes too
    assert torch.equal(fresh[1], lengths.flip(0))
    assert fresh[2] is mask
    assert fresh[3] == 7
    (name, view), (_, broadcast) = awkward_views((x,))
    assert "non-contiguous" in name
    assert not view[0].is_contiguous()
    assert torch.equal(view[0], x)
    assert broadcast[0].stride(0) == 0
    assert torch.equal(broadcast[0][1], x[0])


def test_a_later_trial_the_reference_cannot_run_is_left_out():
    def reference(x):
        return x.view(-1)  # raises on a transposed view
    trial = Awkward("a transposed view", (torch.ones(3, 2).T,))
    assert later_slip(reference, reference, [trial], [], name="f", allowed=None, atol=0, rtol=0) is None


@pytest.mark.parametrize(("got", "said"), [
    (torch.tensor([[2.0, 4.0], [6.0, 8.0]]), "times 2"),
    (torch.tensor([[-1.0, -2.0], [-3.0, -4.0]]), "opposite sign"),
    (torch.tensor([[1.0, 3.0], [2.0, 4.0]]), "last two dimensions swapped"),
    (torch.tensor([[1.0, 2.5], [3.0, 4.0]]), "only 1 of 2 rows differs"),
    (torch.tensor([[1.0, 2.0], [3.0, float("nan")]]), "look for exp of a large number"),
])
def test_how_it_differs_names_the_pattern(got, said):
    expected = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert said in how_it_differs(got, expected)
    assert how_it_differs(expected, expected) is None


def test_a_nan_without_any_exp_is_not_blamed_on_exp():
    expected, got = torch.tensor([[0.5, 0.5]]), torch.tensor([[0.5, float("nan")]])
    assert "look for exp of a large number" in how_it_differs(got, expected, {"exp", "div"})
    said = how_it_differs(got, expected, {"div", "sum"})
    assert "exp" not in said
    assert "0 / 0" in said


def test_a_result_just_outside_the_tolerance_is_said_to_be_close():
    expected = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert "close to the reference's but not within its tolerance" in how_it_differs(expected + 1e-6, expected)


def test_a_weight_predicted_as_a_percentage_is_told_so():
    from attention_lib.exercises import check_prediction

    assert "25 reads as a percentage" in check_prediction(25, 0.25, question="a weight", why="1 / 4.").message
    assert "percentage" not in check_prediction(0.2, 0.25, question="a weight", why="1 / 4.").message


def test_a_prediction_with_a_blank_or_in_a_dict_is_told_what_to_give():
    assert "positions are whole numbers, but got None" in check_where_it_looks([7, 6, 5, None, 3, 2, 1, 0]).message
    assert "as a list" in check_where_it_looks({i: 7 - i for i in range(8)}).message


def test_an_answer_wrong_when_called_again_on_the_same_numbers_keeps_results():
    from attention_lib.exercises._kept import kept_slip

    calls = []

    def stale_once(x):  # the first call after the fixed trials gets an old result, as an id() cache may
        calls.append(x)
        return 3 * x if len(calls) == 1 else 2 * x

    said = kept_slip(stale_once, lambda x: 2 * x, lambda trial: (torch.arange(3.0),), None, 1e-5, 1e-4)
    assert said.startswith("called again on the first input (the same numbers, in new tensors)")
