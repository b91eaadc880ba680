"""Every exercise checker, from one table: correct answers pass, the stub is "not attempted", each typical wrong
answer gets its own hint, and each crash inside the learner's code is explained with a hint.

To add a checker, add one :class:`~exercise_rows.Exercise` row to ``EXERCISES`` (or to ``exercise_rows.ROWS``,
the rows of lessons 00 and 10-12 and of the predict-then-check tasks): its correct answers, its stubs, the wrong
answers it catches (with a fragment of the hint each must get), the crashes it explains, and the module's
``MISTAKES`` list (every hint in it must be reached by one of the wrong answers).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from exercise_rows import (
    CROSS_ATTENTION,
    ONLINE_SOFTMAX_UPDATE,
    ONLINE_WRONG_RESULTS,
    ROWS,
    SHUFFLES_RIGHT,
    Exercise,
    values_from_the_question,
)

import attention_lib as al
from attention_lib.exercises import (
    blend,
    check_calculate_attention,
    check_causal_mask,
    check_function,
    check_masked_softmax,
    check_matchmaker,
    check_merge_heads,
    check_prediction,
    check_scaled_scores,
    check_soft_lookup,
    check_split_heads,
    check_stable_softmax,
    check_tune_in,
    check_weights_no_loops,
    cocktail_party,
    detective_team,
    library_search,
    masking,
    matchmaker,
    memory_efficient,
    no_loops,
    percentages,
    scaler,
)
from attention_lib.exercises.word_order.shuffles import measure_shuffles

sm = torch.softmax
INF = float("-inf")


def T(x):  # noqa: N802 - the transpose every exercise needs
    return x.transpose(-2, -1)


# -- 01: tune_in(x (L, E), focus) -> (L, E) -------------------------------------------------------------------
def tune_in(x, focus):
    return sm(focus * x @ x.T, dim=-1) @ x  # (L, L) @ (L, E) -> (L, E)


def tune_in_by_rows(x, focus):
    return torch.stack([(sm(focus * (x @ x[i]), dim=0)[:, None] * x).sum(0) for i in range(x.shape[0])])


TUNE_IN = Exercise(
    check_tune_in, correct=[tune_in, tune_in_by_rows, lambda x, f: al.calculate_attention(x, x, x, scale=f)[0]],
    wrong=[
        (lambda x, f: (f * x @ x.T) @ x, "turn the scores into weights with torch.softmax"),
        (lambda x, f: sm(f * x @ x.T, dim=0) @ x, "dim=0 runs over the first dimension"),
        (lambda x, f: sm(x @ x.T, dim=-1) @ x, "multiply the scores by `focus` before the softmax"),
        (lambda x, f: sm(x @ x.T / f, dim=-1) @ x, "don't divide"),
        (lambda x, f: f * (sm(x @ x.T, dim=-1) @ x), "inside the softmax"),
        (lambda x, f: sm(x @ x.T / math.sqrt(x.size(-1)), dim=-1) @ x, "the focus replaces the 1/√E"),
        (lambda x, f: sm(f * x @ x.T / math.sqrt(x.size(-1)), dim=-1) @ x, "and also divided by √E"),
        (lambda x, f: sm(f * x @ x.T, dim=-1), "expected shape (4, 3), but got (4, 4)"),
        (lambda x, f: tune_in(x, f) + 0.5, "largest difference 0.5"),
    ],
    crashes=[(lambda x, f: sm(f * x @ x, dim=-1) @ x, "(4, 3) and (4, 3)"),
             (lambda x, f: sm(f * x @ x, dim=-1) @ x, "flip the second with .transpose(-2, -1)"),
             (lambda x, f: sm(f * x @ x.T, dim=-1) @ x.T, "`x` needs no flip here"),
             (lambda x, f: sm(f * x @ x.T, dim=-1) @ x.T, "Drop the .T")],
    mistakes=cocktail_party.MISTAKES,
)


# -- 02: soft_lookup(query (E,), key (S, E), value (S, Ev)) -> (Ev,) --------------------------------------------
def soft_lookup(q, k, v):
    return sm(k @ q / math.sqrt(q.size(-1)), dim=-1) @ v  # (S,) @ (S, Ev) -> (Ev,)


def lookup_scaled(divisor):
    return lambda q, k, v: sm(k @ q / divisor(q, k, v), dim=-1) @ v


SOFT_LOOKUP = Exercise(
    check_soft_lookup,
    correct=[soft_lookup, lambda q, k, v: al.calculate_attention(q[None], k, v)[0][0],
             lambda q, k, v: sm(q @ k.T * q.shape[-1] ** -0.5, dim=-1) @ v],
    wrong=[
        (lambda q, k, v: sm(k @ q / math.sqrt(q.size(-1)), dim=-1) @ k, "you mixed the keys"),
        (lookup_scaled(lambda q, k, v: 1.0), "divide the scores by √d_k"),
        (lookup_scaled(lambda q, k, v: q.size(-1)), "not by d_k itself"),
        (lookup_scaled(lambda q, k, v: q.size(-1) ** -0.5), "you multiplied"),
        (lookup_scaled(lambda q, k, v: math.sqrt(k.size(0))), "divide by √E, not √S"),
        (lookup_scaled(lambda q, k, v: math.sqrt(v.size(-1))), "divide by √E, not √Ev"),
        (lambda q, k, v: (k @ q / math.sqrt(q.size(-1))) @ v, "turn the scores into weights"),
        (lambda q, k, v: v[(k @ q).argmax()], "that is the hard lookup"),
        (lambda q, k, v: sm(k @ q / math.sqrt(q.size(-1)), dim=-1), "weights (S,) @ value (S, Ev)"),
    ],
    crashes=[(lambda q, k, v: sm(q @ k / math.sqrt(q.size(-1)), dim=-1) @ v, "(3,) and (4, 3)"),
             (lambda q, k: k @ q, "with 3 arguments, (query, key, value)")],
    mistakes=library_search.MISTAKES,
)


# -- 03: matchmaker(query (N, ..., L, E), key (N, ..., S, E)) -> (N, ..., L, S) -----------------------------------
def rectangles_without_transpose(q, k):
    return q @ T(k) if q.shape[-2] == k.shape[-2] == q.shape[-1] else q @ k  # right only on the square trial


def raises_value_error(*args):
    raise ValueError("oops")


MATCHMAKER = Exercise(
    check_matchmaker,
    correct=[al.matchmaker, lambda q, k: q @ T(k), lambda q, k: q @ k.mT,
             lambda q, k: torch.matmul(q, k.transpose(-1, -2)), lambda q, k: torch.einsum("...le,...se->...ls", q, k)],
    wrong=[
        (lambda q, k: q @ k, "flip the key sideways"),
        (lambda q, k: k @ T(q), "is (..., S, L), the scores flipped"),
        (lambda q, k: q @ k.T, "x.T reverses every dimension"),
        (lambda q, k: q @ T(k) / q.size(-1) ** 0.5, "the scaler's job"),
        (lambda q, k: (q * k[..., : q.shape[-2], :]).sum(-1), "one row per query and one column per key"),
    ],
    crashes=[
        (lambda q, k: q @ k.transpose(1, 2), "is `key` (3, 2, 4, 5) with dimensions 1 and 2 swapped"),
        (lambda q, k: torch.bmm(q, T(k)), "torch.bmm takes exactly 3-D tensors"),
        (lambda q, k: q @ k.t(), "x.t() only flips 2-D tensors"),
        (lambda q, k: q @ k.permute(0, 2, 1), "permute(...) names every dimension"),
        (rectangles_without_transpose, "(2, 3, 6) and (2, 5, 6)"),
        (rectangles_without_transpose, "flip the second with .transpose(-2, -1)"),
        (raises_value_error, "print the shape of each tensor"),
    ],
    mistakes=matchmaker.MISTAKES,
)


# -- 04: scaled_scores(query (N, L, E), key (N, S, E)) -> (N, L, S) -----------------------------------------------
def scaled_by(divisor):
    return lambda q, k: q @ T(k) / divisor(q, k)


SCALED_SCORES = Exercise(
    check_scaled_scores,
    correct=[scaled_by(lambda q, k: math.sqrt(q.size(-1))), lambda q, k: al.scaler(al.matchmaker(q, k), q.size(-1)),
             lambda q, k: q @ T(k) * q.shape[-1] ** -0.5],
    wrong=[
        (lambda q, k: q @ T(k), "divide the scores by √d_k"),
        (scaled_by(lambda q, k: q.size(-1)), "not by d_k itself"),
        (scaled_by(lambda q, k: q.size(-1) ** -0.5), "you multiplied"),
        (scaled_by(lambda q, k: math.sqrt(k.size(-2))), "divide by √E, not √S"),
        (scaled_by(lambda q, k: math.sqrt(q.size(-2))), "divide by √E, not √L"),
        (scaled_by(lambda q, k: math.sqrt(q.size(0))), "divide by √E, not √N"),
        (lambda q, k: q @ k / math.sqrt(q.size(-1)), "flip the key sideways"),
        (lambda q, k: k @ T(q) / math.sqrt(q.size(-1)), "is (..., S, L), the scores flipped"),
        (lambda q, k: sm(q @ T(k) / math.sqrt(q.size(-1)), dim=-1), "stop before the softmax"),
    ],
    crashes=[(lambda q, k: q @ k.transpose(0, 1) / math.sqrt(q.size(-1)), "with dimensions 0 and 1 swapped"),
             (lambda q, k: torch.mm(q, k.T), "torch.mm and torch.mv take plain matrices"),
             (lambda q, k: q @ k.T / math.sqrt(q.size(-1)), "is `k` (2, 5, 5) with every dimension reversed"),
             (lambda query, key: query @ key.T, "key.transpose(-2, -1)")],
    mistakes=scaler.MISTAKES,
)


# -- 05: stable_softmax(scores (N, L, S)) -> (N, L, S), by hand ----------------------------------------------------
def by_hand(shift=lambda s: s.amax(dim=-1, keepdim=True), dim=-1, keepdim=True, normalise=True):
    def softmax(s):
        e = (s - shift(s)).exp()
        return e / e.sum(dim=dim, keepdim=keepdim) if normalise else e
    return softmax


def in_place(s):
    s -= s.amax(dim=-1, keepdim=True)
    s.exp_()
    s /= s.sum(dim=-1, keepdim=True)
    return s


STABLE_SOFTMAX = Exercise(
    check_stable_softmax,
    correct=[by_hand(), in_place, by_hand(lambda s: s.max(dim=-1, keepdim=True).values),
             lambda s: (s - torch.logsumexp(s, dim=-1, keepdim=True)).exp()],
    wrong=[
        (by_hand(lambda s: 0.0), "subtract each row's max first"),
        (by_hand(lambda s: s.max()), "not the max of the whole tensor"),
        (by_hand(lambda s: s.amax(dim=-2, keepdim=True)), "not each column's (dim=-2)"),
        (by_hand(lambda s: s.amin(dim=-1, keepdim=True)), "not its min"),
        (by_hand(lambda s: s.mean(dim=-1, keepdim=True)), "not its mean"),
        (by_hand(lambda s: s.amax(dim=-1)), "is (..., L, 1)"),
        (by_hand(normalise=False), "divide by each row's sum"),
        (by_hand(keepdim=False), "keep the reduced dimension when you sum"),
        (by_hand(dim=-2), "A sum over dim=-2 adds up each column"),
        (by_hand(lambda s: s.amax(dim=-2, keepdim=True), dim=-2), "not each column (dim=-2)"),
        (by_hand(lambda s: s.amax(dim=0, keepdim=True), dim=0), "dim=0 runs over the first dimension"),
        (by_hand(lambda s: s - s.clamp(max=80.0)), "clamping the scores changes them"),
        (lambda s: torch.softmax(s, dim=-1), "your function called `softmax`"),
        (lambda s: F.softmax(s, dim=-1), "builds the softmax by hand"),
        (lambda s: s.softmax(dim=-1), "builds the softmax by hand"),
        (lambda s: s.log_softmax(dim=-1).exp(), "your function called `log_softmax`"),
        (lambda s: torch.nn.Softmax(dim=-1)(s), "builds the softmax by hand"),
        (al.percentages, "through a helper such as al.percentages"),
        (lambda s: by_hand()(s).sum(dim=-1), "same shape as the scores"),
    ],
    crashes=[(lambda s: (s - s.max(dim=-1, keepdim=True)).exp(), "returns two things, the values and their indices")],
    mistakes=percentages.MISTAKES,
)


def naive_softmax(s):
    return s.exp() / s.exp().sum(dim=-1, keepdim=True)  # fine for small scores, NaN from about 88.7 up


# -- 06: calculate_attention(query, key, value) -> (output, weights) -----------------------------------------------
def from_steps(q, k, v):
    weights = al.percentages(al.scaler(al.matchmaker(q, k), q.size(-1)))
    return al.blend(weights, v), weights


def attention(scores=lambda q, k: q @ T(k), divisor=lambda q, k, v: math.sqrt(q.size(-1)), dim=-1,
              softmax=True, blend=lambda w, s, k, v: w @ v):
    def attend(q, k, v):
        scaled = scores(q, k) / divisor(q, k, v)
        weights = sm(scaled, dim=dim) if softmax else scaled
        return blend(weights, scaled, k, v), weights
    return attend


CALCULATE_ATTENTION = Exercise(
    check_calculate_attention,
    correct=[attention(), lambda q, k, v: list(attention()(q, k, v)),
             lambda q, k, v: (lambda w: (w @ v, w))(sm(q @ k.mT * q.size(-1) ** -0.5, dim=-1))],
    wrong=[
        (al.calculate_attention, "your function called `calculate_attention`"),
        (lambda q, k, v: list(al.calculate_attention(q, k, v)), "write the five steps with plain PyTorch"),
        (from_steps, "your function called `matchmaker`"),
        (lambda q, k, v: (F.scaled_dot_product_attention(q, k, v), attention()(q, k, v)[1]),
         "your function called `scaled_dot_product_attention`"),
        (attention(scores=lambda q, k: q @ k), "flip the key sideways"),
        (attention(scores=lambda q, k: k @ T(q)), "is (..., S, L), the scores flipped"),
        (attention(divisor=lambda q, k, v: 1.0), "divide the scores by √d_k"),
        (attention(divisor=lambda q, k, v: q.size(-1)), "not by d_k itself"),
        (attention(divisor=lambda q, k, v: math.sqrt(q.size(-2))), "divide by √E, not √L"),
        (attention(divisor=lambda q, k, v: math.sqrt(k.size(-2))), "divide by √E, not √S"),
        (attention(divisor=lambda q, k, v: math.sqrt(v.size(-1))), "divide by √E, not √Ev"),
        (attention(divisor=lambda q, k, v: math.sqrt(q.size(0))), "divide by √E, not √N"),
        (attention(divisor=lambda q, k, v: q.size(-1) ** -0.5), "you multiplied"),
        (attention(dim=-2), "not each column (dim=-2)"),
        (attention(dim=0), "dim=0 runs over the first dimension"),
        (attention(softmax=False), "turn the scores into weights"),
        (attention(softmax=False, blend=lambda w, s, k, v: (s.exp() / s.exp().sum(-1, keepdim=True)) @ v),
         "turn the scores into weights"),
        (lambda q, k, v: (lambda w: (w @ v, w))(naive_softmax(q @ T(k) / math.sqrt(q.size(-1)))),
         "subtract each row's max first"),
        (attention(blend=lambda w, s, k, v: s @ v), "not with the scaled scores"),
        (attention(blend=lambda w, s, k, v: w @ k), "you mixed the keys"),
        (lambda q, k, v: (lambda w: (w @ v, w))(sm(q @ T(k), dim=-1) / math.sqrt(q.size(-1))),
         "scale the scores before the softmax"),
        (lambda q, k, v: attention()(q, k, v)[::-1], "in the order (output, weights)"),
        (lambda q, k, v: attention()(q, k, v)[0], "a single Tensor"),
        (lambda q, k, v: (*attention()(q, k, v), 0), "a tuple of 3 items"),
        (lambda q, k, v: attention()(q[0], k[0], v[0]), "weights are (N, L, S)"),
        (lambda q, k, v: (torch.zeros(*q.shape[:-1], v.shape[-1]), torch.zeros(*q.shape[:-1], k.shape[-2])),
         "values differ"),
    ],
    crashes=[(attention(blend=lambda w, s, k, v: w @ v.T), "`v.T` in your line flips `v` (2, 4, 4) into (4, 4, 2)"),
             (attention(blend=lambda w, s, k, v: w @ v.T), "`v` needs no flip here"),
             (attention(scores=lambda q, k: q @ k.T), "is `k` (2, 4, 4) with every dimension reversed"),
             (lambda q, k, v: (q.view(-1) @ k, None), "A @ B needs the last size of A")],
    mistakes=blend.MISTAKES,
)


# -- 07: weights_no_loops(query (N, L, E), key (N, S, E)) -> (N, L, S) ---------------------------------------------
def loop_over_sentences(q, k):
    return torch.stack([sm(q[n] @ k[n].T / math.sqrt(q.size(-1)), dim=-1) for n in range(q.shape[0])])


def loop_over_words(q, k):
    return torch.stack([sm(q[:, i:i + 1] @ T(k) / math.sqrt(q.size(-1)), dim=-1)[:, 0] for i in range(q.shape[1])],
                       dim=1)


WEIGHTS_NO_LOOPS = Exercise(
    check_weights_no_loops,
    correct=[lambda q, k: sm(q @ T(k) / math.sqrt(q.size(-1)), dim=-1),
             lambda q, k: al.percentages(al.scaler(al.matchmaker(q, k), q.size(-1)))],
    wrong=[
        (lambda q, k: sm(q @ k / math.sqrt(q.size(-1)), dim=-1), "flip the key sideways"),
        (lambda q, k: sm(k @ T(q) / math.sqrt(q.size(-1)), dim=-1), "is (..., S, L), the scores flipped"),
        (lambda q, k: sm(q @ T(k), dim=-1), "divide the scores by √d_k"),
        (lambda q, k: sm(q @ T(k) / q.size(-1), dim=-1), "not by d_k itself"),
        (lambda q, k: sm(q @ T(k) * math.sqrt(q.size(-1)), dim=-1), "you multiplied"),
        (lambda q, k: sm(q @ T(k) / math.sqrt(q.size(-2)), dim=-1), "divide by √E, not √L"),
        (lambda q, k: sm(q @ T(k) / math.sqrt(k.size(-2)), dim=-1), "divide by √E, not √S"),
        (lambda q, k: sm(q @ T(k) / math.sqrt(q.size(0)), dim=-1), "divide by √E, not √N"),
        (lambda q, k: sm(q @ T(k) / math.sqrt(q.size(-1)), dim=-2), "not each column (dim=-2)"),
        (lambda q, k: sm(q @ T(k) / math.sqrt(q.size(-1)), dim=0), "dim=0 runs over the first dimension"),
        (lambda q, k: q @ T(k) / math.sqrt(q.size(-1)), "turn the scores into weights"),
        (lambda q, k: naive_softmax(q @ T(k) / math.sqrt(q.size(-1))), "subtract each row's max first"),
        (lambda q, k: sm(q @ T(k), dim=-1) / math.sqrt(q.size(-1)), "scale the scores before the softmax"),
        (loop_over_sentences, "no Python loops"),
        (loop_over_words, "no Python loops"),
        (lambda q, k: al.loop_attention(q[0], k[0], k[0])[1], "handles the batch dimension N"),
    ],
    crashes=[(lambda q, k: torch.mm(q, k.T), "torch.mm and torch.mv take plain matrices"),
             (lambda q, k: sm(q @ T(k) / math.sqrt(q.size(-1)), dim=3), "dim=3 counts from the front"),
             (lambda q, k: sm(q @ k.T / math.sqrt(q.size(-1)), dim=-1), "with every dimension reversed")],
    mistakes=no_loops.MISTAKES,
)


# -- 08: causal_mask(L, S) and masked_softmax(scores, mask) --------------------------------------------------------
CAUSAL_MASK = Exercise(
    check_causal_mask,
    correct=[al.causal_mask, lambda L, S: torch.ones(L, S, dtype=torch.bool).tril(),
             lambda L, S: torch.tril(torch.ones(L, S)).bool(),
             lambda L, S: torch.arange(S)[None, :] <= torch.arange(L)[:, None],
             lambda L, S: ~torch.ones(L, S, dtype=torch.bool).triu(diagonal=1)],
    wrong=[
        (lambda L, S: torch.ones(L, S, dtype=torch.bool).triu(), "upper triangle (triu)"),
        (lambda L, S: ~al.causal_mask(L, S), "True and False are swapped"),
        (lambda L, S: torch.ones(L, S, dtype=torch.bool).triu(diagonal=1), "True and False are swapped"),
        (lambda L, S: torch.ones(L, S, dtype=torch.bool).tril(diagonal=-1), "a word cannot see itself"),
        (lambda L, S: torch.ones(L, S, dtype=torch.bool).tril(diagonal=S - L), "Align it top-left"),
        (lambda L, S: torch.zeros(L, S).masked_fill(~al.causal_mask(L, S), INF), "the additive form"),
        (lambda L, S: torch.ones(L, L, dtype=torch.bool).tril(), "Did you use L for both sizes?"),
        (lambda L, S: torch.ones(L, S).tril(), "return a bool tensor"),
        (lambda L, S: torch.ones(L, S, dtype=torch.bool), "the values differ from the reference"),
    ],
    crashes=[(lambda L, S: torch.ones(L).tril(), "print the shape of each tensor")],
    mistakes=masking.CAUSAL_MISTAKES,
)


def masked(s, m, fill=INF, dim=-1):
    return sm(s.masked_fill(~m, fill), dim=dim)


MASKED_SOFTMAX = Exercise(
    check_masked_softmax,
    correct=[lambda s, m: al.percentages(s, attn_mask=m), lambda s, m: masked(s, m).nan_to_num(0.0),
             lambda s, m: masked(s, m).masked_fill(~m.any(dim=-1, keepdim=True), 0.0),
             lambda s, m: masked(s, m, fill=-1e9) * m.any(dim=-1, keepdim=True)],
    wrong=[
        (lambda s, m: sm(s.masked_fill(m, INF), dim=-1), "you blocked the allowed keys"),
        (lambda s, m: sm(s, dim=-1).masked_fill(~m, 0.0), "mask *before* the softmax"),
        (lambda s, m: sm(s, dim=-1) * m, "mask *before* the softmax"),
        (lambda s, m: sm(s * m, dim=-1), "e^0 = 1 still gets weight"),
        (lambda s, m: sm(s.masked_fill(~m, 0.0), dim=-1), "a blocked score set to 0 (by masked_fill(~mask, 0.0)"),
        (lambda s, m: masked(s, m, dim=-2), "not each column (dim=-2)"),
        (masked, "its softmax is 0 / 0 = NaN"),
        (lambda s, m: masked(s, m, fill=-1e9), "a uniform average over keys it must not see"),
        (lambda s, m: masked(s, m, fill=torch.finfo(s.dtype).min), "a uniform average over keys it must not see"),
        (lambda s, m: sm(s, dim=-1), "the values differ from the reference"),
        (lambda s, m: s[m], "the weights have the scores' shape"),
    ],
    crashes=[(lambda s, m: sm(s.masked_fill(1 - m, INF), dim=-1), "invert it with ~mask"),
             (lambda s, m: sm(s.masked_fill(~m.float(), INF), dim=-1), "invert it with ~mask")],
    mistakes=masking.MASKED_SOFTMAX_MISTAKES,
)


# -- 09: split_heads(x (N, L, E), num_heads) -> (N, H, L, Dh) and merge_heads -----------------------------------------
SPLIT_HEADS = Exercise(
    check_split_heads,
    correct=[lambda x, h: x.view(x.shape[0], x.shape[1], h, -1).permute(0, 2, 1, 3),
             lambda x, h: torch.stack(x.chunk(h, dim=-1), dim=1),
             lambda x, h: x.unflatten(-1, (h, -1)).transpose(1, 2).contiguous()],
    wrong=[
        (lambda x, h: x.reshape(x.shape[0], h, x.shape[1], -1), "reads the numbers in memory order"),
        (lambda x, h: x.reshape(x.shape[0], x.shape[1], -1, h).permute(0, 3, 1, 2), "not every H-th feature"),
        (lambda x, h: x.reshape(x.shape[0], x.shape[1], h, -1), "the last step is missing: .transpose(1, 2)"),
        (lambda x, h: x.transpose(1, 2).reshape(x.shape[0], h, x.shape[1], -1), "reshape first, then transpose"),
        (lambda x, h: x.reshape(x.shape[0], x.shape[1], h, -1).transpose(2, 3),
         "the transpose swapped the last two dimensions (H and Dh)"),
        (lambda x, h: x.reshape(x.shape[0], x.shape[1], h, -1).transpose(1, 2) * 2, "the values differ"),
        (lambda x, h: x.tolist(), "expected a torch.Tensor"),
        (al.split_heads, "your function called the library's `split_heads`"),
        (lambda x, h: al.split_heads(x.clone(), h) + 0, "your function called the library's `split_heads`"),
    ],
    crashes=[(lambda x, h: x.reshape(x.shape[0], x.shape[1], h, x.shape[2] / h), "use integer division"),
             (lambda x, h: x.reshape(x.shape[0], 7, h, -1), "exactly as many numbers as the old one")],
    mistakes=detective_team.SPLIT_MISTAKES,
)

MERGE_HEADS = Exercise(
    check_merge_heads,
    correct=[lambda x: x.permute(0, 2, 1, 3).flatten(2), lambda x: torch.cat(x.unbind(dim=1), dim=-1)],
    wrong=[
        (lambda x: x.reshape(x.shape[0], x.shape[2], -1), "mixes words and heads"),
        (lambda x: x.permute(0, 2, 3, 1).flatten(2), "not interleaved"),
        (lambda x: x.transpose(1, 2), "finish with .reshape(N, L, H * Dh)"),
        (lambda x: x.transpose(1, 2).flatten(2) + 1, "the values differ"),
        (lambda x: x.flip(1).transpose(1, 2).flatten(2), "the heads are in reversed order"),
        (lambda x: torch.cat(x.unbind(dim=1)[::-1], dim=-1), "the heads are in reversed order"),
        (lambda x: x.sum(dim=1), "the heads were added up"),
        (lambda x: x.mean(dim=1), "the heads were added up (or averaged)"),
        (al.merge_heads, "your function called the library's `merge_heads`"),
    ],
    crashes=[(lambda x: x.transpose(1, 2).view(x.shape[0], x.shape[2], -1), "use .reshape(...)")],
    mistakes=detective_team.MERGE_MISTAKES,
)

EXERCISES = [TUNE_IN, SOFT_LOOKUP, MATCHMAKER, SCALED_SCORES, STABLE_SOFTMAX, CALCULATE_ATTENTION, WEIGHTS_NO_LOOPS,
             CAUSAL_MASK, MASKED_SOFTMAX, SPLIT_HEADS, MERGE_HEADS, *ROWS]


def rows(field: str):
    """One pytest parameter per (exercise, item of ``field``), named after the checker."""
    return [pytest.param(ex, *(item if isinstance(item, tuple) else (item,)), id=f"{ex.checker.__name__}-{i}")
            for ex in EXERCISES for i, item in enumerate(getattr(ex, field))]


@pytest.mark.parametrize(("exercise", "answer"), rows("correct"))
def test_correct_answers_pass(exercise: Exercise, answer):
    result = exercise.checker(answer)
    assert result.status == "passed", result.message
    assert result.message.startswith("✅")
    assert exercise.passed_says in result.message
    assert bool(result)


@pytest.mark.parametrize(("exercise", "unfinished"), rows("stubs"))
def test_stub_is_not_attempted(exercise: Exercise, unfinished):
    result = exercise.checker(unfinished)
    assert result.status == "not attempted", result.message
    assert "📝" in result.message
    assert exercise.not_attempted in result.message
    assert not result


@pytest.mark.parametrize(("exercise", "wrong", "fragment"), rows("wrong"))
def test_wrong_answers_get_their_hint(exercise: Exercise, wrong, fragment):
    result = exercise.checker(wrong)
    assert result.status == "failed", result.message
    assert fragment in result.message


@pytest.mark.parametrize(("exercise", "crash", "fragment"), rows("crashes"))
def test_crashes_are_explained_with_a_hint(exercise: Exercise, crash, fragment):
    result = exercise.checker(crash)
    assert result.status == "error", result.message
    assert result.message.startswith("💥")
    explanation, said = result.message.rsplit("\n", 1)  # our words, then the error's own
    assert "\nHint: " in explanation
    assert fragment in explanation
    assert said.startswith(("PyTorch said: ", "The error says: "))


@pytest.mark.parametrize("exercise", [ex for ex in EXERCISES if ex.mistakes], ids=lambda ex: ex.checker.__name__)
def test_every_listed_mistake_is_reached_by_a_wrong_answer(exercise):
    messages = [exercise.checker(wrong).message for wrong, _ in exercise.wrong]
    for _, hint in exercise.mistakes:
        assert any(hint in message for message in messages), f"no wrong answer in the table reaches: {hint}"


# -- the machinery shared by every checker --------------------------------------------------------------------------
def qk(seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(2, 3, 4, generator=g), torch.randn(2, 5, 4, generator=g)


@pytest.mark.parametrize(("crash", "fragment"), [
    (lambda q, k: q @ k, "The shapes that met in `matmul (@)`: (2, 3, 4) and (2, 5, 4)."),
    (lambda q, k: q @ k.T, "is `k` (2, 5, 4) with every dimension reversed"),
    (lambda q, k: torch.exp(q.max(dim=-1)), "returns two things"),
    (lambda q, k: q - q.min(dim=-1).values, "without keepdim=True drops the dimension"),
    (lambda q, k: q + k, "(2, 3, 4) and (2, 5, 4) are not"),
    (lambda q, k: q @ T(k).double(), "the same dtype"),
    (lambda q, k: torch.mv(q, k), "torch.mm and torch.mv take plain matrices"),
    (lambda q, k: q.sum(dim=5), "dim=5 counts from the front"),
    (lambda q: q, "with 2 arguments, (query, key)"),
    (lambda q, k: undefined_name, "NameError"),  # noqa: F821 - the learner's typo
])
def test_crash_causes_are_recognised(crash, fragment):
    result = check_function(crash, al.matchmaker, qk, name="scores")
    assert result.status == "error"
    assert "\nHint: " in result.message
    assert fragment in result.message


def test_a_flipped_tensor_is_named_as_the_learners_line_names_it():
    """Query and key share a shape here: the hint names the tensor flipped in the line, not the first match."""
    same = lambda seed: (torch.randn(2, 4, 3), torch.randn(2, 4, 3))  # noqa: E731

    def scores(query, key):
        return query @ key.T

    def scores_the_other_way(query, key):
        return key @ query.T

    assert "`key` (2, 4, 3) with every dimension reversed" in check_function(scores, al.matchmaker, same,
                                                                               name="scores").message
    message = check_function(scores_the_other_way, al.matchmaker, same, name="scores").message
    assert "`query` (2, 4, 3) with every dimension reversed" in message
    assert "`key` (2, 4, 3)" not in message


def test_a_needless_flip_of_the_values_says_drop_it():
    def blend(weights, value):
        return weights @ value.transpose(-2, -1)

    inputs = lambda seed: (torch.softmax(torch.randn(2, 3, 5), dim=-1), torch.randn(2, 5, 4))  # noqa: E731
    message = check_function(blend, lambda w, v: w @ v, inputs, name="blend").message
    assert "`value` needs no flip here" in message
    assert "Drop the .transpose" in message
    assert "flip the second" not in message


def test_the_learners_line_is_quoted():
    def scores(query, key):
        product = query @ key  # the line that fails
        return product

    result = check_function(scores, al.matchmaker, qk, name="scores")
    assert "raised RuntimeError at `product = query @ key  # the line that fails`." in result.message


def test_only_the_stubs_own_not_implemented_error_means_not_attempted():
    """PyTorch raises NotImplementedError itself for some operations (a view of a sparse tensor; `1 - mask` on a
    bool mask since torch 2.14): that is a crash to explain, not an exercise left untouched."""
    def double(x):
        return x.to_sparse().view(-1) * 2  # view is not implemented for sparse tensors

    def stub(x):
        raise NotImplementedError

    inputs = lambda seed: (torch.ones(2, 2),)  # noqa: E731
    assert check_function(stub, lambda x: 2 * x, inputs, name="double").status == "not attempted"
    crash = check_function(double, lambda x: 2 * x, inputs, name="double")
    assert crash.status == "error"
    assert "NotImplementedError" in crash.message


def test_the_learners_function_gets_copies_of_the_inputs():
    def check(mutate):
        return check_function(mutate, lambda x: 2 * x, lambda seed: (torch.ones(3),), name="double",
                              mistakes=[(lambda x: 4 * x, "in place")])

    assert check(lambda x: x.mul_(2)).passed
    assert check(lambda x: x.mul_(2) * 2).message.endswith("in place")


def test_the_fully_masked_row_is_in_the_inputs():
    _, mask = masking._scores_and_mask(1)
    assert not bool(mask.any(dim=-1).all())


def test_the_stable_softmax_inputs_break_each_shortcut():
    (scores,) = percentages._inputs(0)
    for shift in (0.0, scores.amin(dim=-1, keepdim=True), scores.mean(dim=-1, keepdim=True)):
        e = (scores - shift).exp()
        assert bool((e / e.sum(dim=-1, keepdim=True)).isnan().any())
    assert bool(by_hand()(scores).isfinite().all())


# -- what the table cannot say --------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_the_shuffle_answers_are_measured_not_stored(seed):
    assert measure_shuffles(seed) == SHUFFLES_RIGHT


PREDICTING_LESSONS = ["01_cocktail_party", "04_scaler", "05_percentages", "08_masking", "09_detective_team"]


@pytest.mark.parametrize("lesson", PREDICTING_LESSONS)
def test_a_stored_lesson_shows_no_answer_before_its_prediction_is_checked(lesson):
    """The prediction cell is followed directly by its check, whose stored output reveals nothing yet."""
    import nbformat

    path = Path(__file__).parents[1] / "notebooks" / f"{lesson}.ipynb"
    code = [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    asks = [i for i, c in enumerate(code) if c.source.startswith("my_prediction = None")]
    assert len(asks) == 1, "one predict-then-check task per lesson"
    ask, check = code[asks[0]], code[asks[0] + 1]
    assert not ask.outputs
    assert "check_prediction(my_prediction," in check.source
    shown = "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for o in check.outputs)
    assert "no prediction yet" in shown
    assert "measurement says" not in shown
    assert "Why:" not in shown


def test_a_prediction_always_shows_both_numbers_and_the_reason():
    result = check_prediction(256.0, 266.2, question="var(q·k)", why="variances add up.")
    assert result.status == "passed"  # within 20 %
    assert "266.2" in result.message
    assert "variances add up." in result.message
    wrong = check_prediction(16.0, 266.2, question="var(q·k)", why="variances add up.")
    assert wrong.status == "failed"
    assert "you predicted 16" in wrong.message
    assert "variances add up." in wrong.message


def test_cross_attention_values_from_the_question_pass_on_the_error_that_says_why():
    result = CROSS_ATTENTION.checker(values_from_the_question)
    assert result.status == "error"
    assert "every key needs exactly one value" in result.message


@pytest.mark.parametrize(("wrong", "_"), ONLINE_WRONG_RESULTS)
def test_the_wrong_online_result_is_named_not_unknown(wrong, _):
    assert "unknown" not in ONLINE_SOFTMAX_UPDATE.checker(wrong).message


def test_the_online_softmax_inputs_exercise_every_case():
    running_max, _, _, scores, _ = memory_efficient._inputs(1)
    assert bool((running_max[:, 0] == float("-inf")).all())  # a query whose keys are all masked ...
    assert bool((scores[:, 0] == float("-inf")).all())  # ... in both blocks
    moved = scores.amax(-1, keepdim=True) > running_max
    assert bool(moved[:, 1:-1].any())  # the max moves in some rows ...
    assert not bool(moved[:, -1].any())  # ... and not in the last
