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
import attention_lib.exercises as al_exercises
from attention_lib.exercises import (
    blend,
    check_calculate_attention,
    check_function,
    check_log_softmax,
    check_masked_softmax,
    check_matchmaker,
    check_merge_heads,
    check_prediction,
    check_scaled_scores,
    check_soft_lookup,
    check_split_heads,
    check_tune_in,
    check_weights_no_loops,
    check_window_mask,
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
from attention_lib.exercises._allowed import ELEMENTWISE, LAYOUT, METADATA, PLAIN, PRODUCTS, Allowed
from attention_lib.exercises.word_order.shuffles import measure_shuffles

sm = torch.softmax
INF = float("-inf")


def T(x):  # noqa: N802 - the transpose every exercise needs
    return x.transpose(-2, -1)


# -- 01: tune_in(x (L, E), focus (L,)) -> (L, E), one focus per listener ---------------------------------------
def tune_in(x, focus):
    return sm(focus[:, None] * (x @ x.T), dim=-1) @ x  # (L, L) @ (L, E) -> (L, E)


def tune_in_by_rows(x, focus):
    return torch.stack([(sm(focus[i] * (x @ x[i]), dim=0)[:, None] * x).sum(0) for i in range(x.shape[0])])


TUNE_IN = Exercise(
    check_tune_in,
    correct=[tune_in, tune_in_by_rows, lambda x, f: sm(f.unsqueeze(-1) * x @ x.mT, dim=-1) @ x,
             lambda x, f: sm(torch.diag(f) @ x @ x.T, dim=-1) @ x],
    wrong=[
        (lambda x, f: sm(f * (x @ x.T), dim=-1) @ x, "`focus * scores` lines the (L,) focus up with the last"),
        (lambda x, f: sm(f[None, :] * (x @ x.T), dim=-1) @ x, "the columns (the speakers)"),
        (lambda x, f: (f[:, None] * x @ x.T) @ x, "turn the scores into weights with torch.softmax"),
        (lambda x, f: sm(f[:, None] * x @ x.T, dim=0) @ x, "dim=0 runs over the first dimension"),
        (lambda x, f: sm(x @ x.T, dim=-1) @ x, "multiply the scores by `focus` before the softmax"),
        (lambda x, f: sm(x @ x.T / f[:, None], dim=-1) @ x, "don't divide"),
        (lambda x, f: f[:, None] * (sm(x @ x.T, dim=-1) @ x), "inside the softmax"),
        (lambda x, f: sm(x @ x.T / math.sqrt(x.size(-1)), dim=-1) @ x, "the focus replaces the 1/√E"),
        (lambda x, f: sm(f[:, None] * x @ x.T / math.sqrt(x.size(-1)), dim=-1) @ x, "and also divided by √E"),
        (lambda x, f: sm(f.mean() * (x @ x.T), dim=-1) @ x, "the same focus, the average"),
        (lambda x, f: sm(f[:, None] * x @ x.T, dim=-1), "(L, L) is the weights"),
        (lambda x, f: sm(f[:, None, None] * (x @ x.T), dim=-1) @ x, "a dimension too many"),
        (lambda x, f: tune_in(x, f) + 0.5, "largest difference 0.5"),
        # the library's attention does it for you, even with each query scaled by its own focus
        (lambda x, f: al.calculate_attention(f[:, None] * x, x, x, scale=1.0)[0],
         "your function called `al.calculate_attention`"),
        (lambda x, f: F.scaled_dot_product_attention(f[:, None] * x, x, x, scale=1.0),
         "write it yourself, with plain PyTorch operations"),
        (lambda x, f: sm(f[:, None] * (x @ x.T), dim=-1).T @ x, "the weights were transposed before the blend"),
    ],
    crashes=[(lambda x, f: sm(f * x @ x.T, dim=-1) @ x, "`focus` (4,) has one number per row of (4, 3)"),
             (lambda x, f: sm(f * x @ x.T, dim=-1) @ x, "focus[:, None]"),
             (lambda x, f: sm(f[:, None] * x @ x, dim=-1) @ x, "flip the second with .transpose(-2, -1)"),
             (lambda x, f: sm(f[:, None] * x @ x.T, dim=-1) @ x.T, "`x` needs no flip here"),
             (lambda x, f: sm(f[:, None] * x @ x.T, dim=-1) @ x.T, "Drop the .T")],
    mistakes=cocktail_party.MISTAKES,
    passed_says="each with a different focus for every word",
)


# -- 02: soft_lookup(query (N, E), key (N, S, E), value (N, S, Ev)) -> (N, Ev): one question per library --------
def soft_lookup(q, k, v):
    scores = (k @ q.unsqueeze(-1)).squeeze(-1)  # (N, S, E) @ (N, E, 1) -> (N, S)
    return (sm(scores / math.sqrt(q.size(-1)), dim=-1).unsqueeze(-2) @ v).squeeze(-2)  # (N, Ev)


def lookup_scaled(divisor):
    return lambda q, k, v: (sm((k * q[:, None]).sum(-1) / divisor(q, k, v), dim=-1)[:, None] @ v)[:, 0]


def every_library(q, k, v):
    return sm(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1) @ v  # (N, E) @ (N, E, S) -> (N, N, S)


SOFT_LOOKUP = Exercise(
    check_soft_lookup,
    correct=[soft_lookup, lookup_scaled(lambda q, k, v: math.sqrt(q.size(-1))),
             lambda q, k, v: torch.einsum("ns,nsv->nv", sm(torch.einsum("ne,nse->ns", q, k) * q.shape[-1] ** -0.5,
                                                                -1), v),
             lambda q, k, v: torch.stack([sm(k[n] @ q[n] / math.sqrt(q.size(-1)), dim=-1) @ v[n]
                                          for n in range(q.size(0))])],
    wrong=[
        (lambda q, k, v: (sm((k * q[:, None]).sum(-1) / math.sqrt(q.size(-1)), dim=0)[:, None] @ v)[:, 0],
         "dim=0 runs over the first dimension"),
        (lambda q, k, v: (sm((k * q[:, None]).sum(-1) / math.sqrt(q.size(-1)), dim=-1)[:, None] @ k)[:, 0],
         "you mixed the keys"),
        (lookup_scaled(lambda q, k, v: 1.0), "divide the scores by √d_k"),
        (lookup_scaled(lambda q, k, v: q.size(-1)), "not by d_k itself"),
        (lookup_scaled(lambda q, k, v: q.size(-1) ** -0.5), "you multiplied"),
        (lookup_scaled(lambda q, k, v: q.size(-1) ** 1 / 2), "** binds tighter than /"),
        (lambda q, k, v: (sm((k * q[:, None]).sum(-1) / q.size(-1) ** 1 / 2, dim=-1)[:, None] @ v)[:, 0],
         "is even (scores / d_k) / 2"),
        (lookup_scaled(lambda q, k, v: math.sqrt(k.size(-2))), "divide by √E, not √S"),
        (lookup_scaled(lambda q, k, v: math.sqrt(v.size(-1))), "divide by √E, not √Ev"),
        (lookup_scaled(lambda q, k, v: math.sqrt(q.size(0))), "divide by √E, not √N"),
        (lambda q, k, v: ((k * q[:, None]).sum(-1) / math.sqrt(q.size(-1)))[:, None] @ v,
         "drop the size-1 dimension with .squeeze(-2)"),
        (lambda q, k, v: (((k * q[:, None]).sum(-1) / math.sqrt(q.size(-1)))[:, None] @ v)[:, 0],
         "turn the scores into weights"),
        (lambda q, k, v: v[torch.arange(q.size(0)), (k * q[:, None]).sum(-1).argmax(-1)], "that is the hard lookup"),
        (every_library, "each reader's question met every library"),
        (lambda q, k, v: sm((k * q[:, None]).sum(-1), dim=-1), "those are the weights, (N, S)"),
        # the library's recipe does it for you
        (lambda q, k, v: al.calculate_attention(q[:, None], k, v)[0][:, 0],
         "your function called `al.calculate_attention`"),
        (lambda q, k, v: F.scaled_dot_product_attention(q[:, None], k, v)[:, 0], "write it yourself"),
    ],
    crashes=[(lambda q, k, v: sm(k @ q / math.sqrt(q.size(-1)), dim=-1) @ v, "(2, 4, 3) and (2, 3)"),
             (lambda q, k, v: sm(k @ q / math.sqrt(q.size(-1)), dim=-1) @ v, "query.unsqueeze(-1) is (2, 3, 1)"),
             (lambda q, k: k @ q, "with 3 arguments, (query, key, value)")],
    mistakes=library_search.MISTAKES,
    passed_says="5 fixed queues of readers",
)


# -- 03: my_matchmaker(query (N, ..., L, E), key (N, ..., S, E)) -> (N, ..., L, S), without @ -----------------
def broadcast(q, k):
    return (q.unsqueeze(-2) * k.unsqueeze(-3)).sum(dim=-1)  # (..., L, 1, E) * (..., 1, S, E) -> (..., L, S)


def by_loops(q, k):
    return torch.stack([torch.stack([(q[..., i, :] * k[..., j, :]).sum(-1) for j in range(k.shape[-2])], dim=-1)
                        for i in range(q.shape[-2])], dim=-2)


def scores_over_lists(q, k):
    """Python loops over .tolist(): only 6 PyTorch calls, whatever the size."""
    def pairs(a, b):
        if isinstance(a[0][0], float):
            return [[sum(x * y for x, y in zip(row, col, strict=True)) for col in b] for row in a]
        return [pairs(x, y) for x, y in zip(a, b, strict=True)]
    return torch.tensor(pairs(q.tolist(), k.tolist()))


def raises_value_error(*args):
    raise ValueError("oops")


MATCHMAKER = Exercise(
    check_matchmaker,
    correct=[broadcast, lambda q, k: (q[..., :, None, :] * k[..., None, :, :]).sum(-1),
             lambda q, k: torch.mul(q.unsqueeze(-2), k.unsqueeze(-3)).sum(dim=-1, keepdim=False)],
    wrong=[
        (lambda q, k: q @ T(k), "without a matrix product, and your function called `@ (torch.matmul)`"),
        (lambda q, k: torch.matmul(q, k.transpose(-1, -2)), "without a matrix product"),
        (lambda q, k: torch.einsum("...le,...se->...ls", q, k), "your function called `torch.einsum`"),
        (lambda q, k: F.linear(q, k), "your function called `F.linear`"),
        (lambda q, k: torch.bmm(q, T(k)), "your function called `torch.bmm`"),
        (lambda q, k: q @ k, "your function called `@ (torch.matmul)`"),  # refused before it can crash
        (al.matchmaker, "your function called `al.matchmaker`"),
        (lambda q, k: torch.linalg.matmul(q, k.mT), "without a matrix product, and your function called "
                                                    "`torch.linalg.matmul`"),
        (lambda q, k: torch.linalg.vecdot(q.unsqueeze(-2), k.unsqueeze(-3)), "your function called "
                                                                              "`torch.linalg.vecdot`"),
        (scores_over_lists, "stay in PyTorch: your function called `.tolist()`"),
        (lambda q, k: torch.from_numpy(q.numpy() @ k.numpy().swapaxes(-1, -2)), "your function called `.numpy()`"),
        (lambda q, k: torch.tensor(__import__("numpy").asarray(q) @ __import__("numpy").asarray(k).swapaxes(-1, -2)),
         "your function called `__array__"),
        (by_loops, "no Python loops"),
        (lambda q, k: sum(q[..., :, None, e] * k[..., None, :, e] for e in range(q.shape[-1])),
         "so it loops in Python (over words, sentences or features)"),  # a loop over features, not words
        (by_loops, "query.unsqueeze(-2) (..., L, 1, E)"),
        (lambda q, k: (q.unsqueeze(-3) * k.unsqueeze(-2)).sum(-1), "Yours are flipped, (..., S, L)"),
        (lambda q, k: broadcast(q, k) / q.size(-1) ** 0.5, "the scaler's job"),
        (lambda q, k: (q.unsqueeze(-2) * k.unsqueeze(-3)).mean(-1), ".mean(dim=-1) also divides them by E"),
        (lambda q, k: (q * k).sum(-1), "multiplies query i with key i only"),
        (lambda q, k: (q.unsqueeze(-2) * k.unsqueeze(-3)).sum(-2), "you added up over the words"),
        (lambda q, k: q.unsqueeze(-2) * k.unsqueeze(-3), "those are the products"),
        (lambda q, k: broadcast(q, k) + 1e-3, "largest difference 0.001"),
        (lambda q, k: (q.unsqueeze(-2) * k.unsqueeze(-2)).sum(-1), "in front of their words, key.unsqueeze(-3)"),
    ],
    crashes=[
        (lambda q, k: (q[:, :, None] * k[:, None]).sum(-1), "elementwise operations line shapes up"),
        (raises_value_error, "print the shape of each tensor"),
    ],
    mistakes=matchmaker.MISTAKES,
    passed_says="one square and one with two batch dimensions",
)


# -- 04: scaled_scores(x (N, L, d_model), w_query, w_key (d_k, d_model)) -> (N, L, L) ---------------------------
def scaled_by(divisor):
    def scaled(x, wq, wk):
        q, k = x @ wq.T, x @ wk.T  # (N, L, d_k)
        return q @ T(k) / divisor(q, k, x)
    return scaled


SCALED_SCORES = Exercise(
    check_scaled_scores,
    correct=[scaled_by(lambda q, k, x: math.sqrt(q.size(-1))),
             lambda x, wq, wk: F.linear(x, wq) @ T(F.linear(x, wk)) / math.sqrt(wq.size(0)),
             lambda x, wq, wk: (x @ wq.T * wq.shape[0] ** -0.5) @ (x @ wk.T).mT,
             lambda x, wq, wk: torch.einsum("nld,ed,nmd->nlm", x @ wq.T, torch.eye(wq.size(0)),
                                            x @ wk.T) / wq.size(0) ** 0.5],
    wrong=[
        (scaled_by(lambda q, k, x: math.sqrt(x.size(-1))), "not by √d_model = x.size(-1)"),
        (scaled_by(lambda q, k, x: 1.0), "divide the scores by √d_k"),
        (scaled_by(lambda q, k, x: q.size(-1)), "not by d_k itself"),
        (scaled_by(lambda q, k, x: q.size(-1) ** -0.5), "you multiplied"),
        (scaled_by(lambda q, k, x: q.size(-1) ** 1 / 2), "** binds tighter than /"),
        (lambda x, wq, wk: (x @ wq.T) @ T(x @ wk.T) / wq.size(0) ** 1 / 2, "is even (scores / d_k) / 2"),
        (scaled_by(lambda q, k, x: math.sqrt(q.size(-2) * q.size(-1))), "√(L·d_k)"),
        (scaled_by(lambda q, k, x: math.sqrt(q[0].numel())), "√(L·d_k)"),
        (scaled_by(lambda q, k, x: math.sqrt(q.size(-2))), "divide by √E, not √L"),
        (scaled_by(lambda q, k, x: math.sqrt(q.size(0))), "divide by √E, not √N"),
        (lambda x, wq, wk: (x @ wq.T) @ (x @ wk.T) / math.sqrt(wq.size(0)), "flip the key sideways"),
        (lambda x, wq, wk: (x @ wk.T) @ T(x @ wq.T) / math.sqrt(wq.size(0)), "is (..., S, L), the scores flipped"),
        (lambda x, wq, wk: sm(scaled_by(lambda q, k, x: math.sqrt(q.size(-1)))(x, wq, wk), dim=-1),
         "stop before the softmax"),
        (lambda x, wq, wk: scaled_by(lambda q, k, x: math.sqrt(q.size(-1)))(x, wq, wq),
         "you used w_query for the keys"),
        (lambda x, wq, wk: scaled_by(lambda q, k, x: math.sqrt(q.size(-1)))(x, wk, wk),
         "you used w_key for the queries"),
        (lambda x, wq, wk: x @ wq.T, "those are the projected queries"),
        (lambda x, wq, wk: T(x @ wq.T) @ (x @ wk.T) / math.sqrt(wq.size(0)), "the words meet, not the features"),
        (lambda x, wq, wk: al.scaler(al.matchmaker(x @ wq.T, x @ wk.T), wq.size(0)),
         "your function called `al.matchmaker`"),
        (lambda x, wq, wk: scaled_by(lambda q, k, x: math.sqrt(q.size(-1)))(x, wq, wk) + 0.5,
         "the values differ from the reference"),
    ],
    crashes=[(lambda x, wq, wk: (x @ wq) @ T(x @ wk) / math.sqrt(wq.size(0)), "flip the second with .transpose"),
             (scaled_by(lambda q, k, x: torch.sqrt(q.size(-1))), "torch.sqrt takes a tensor"),
             (scaled_by(lambda q, k, x: torch.sqrt(q.size(-1))), "use math.sqrt(...)"),
             (lambda x, wq, wk: torch.mm(x, wq.T), "torch.mm and torch.mv take plain matrices"),
             (lambda x, wq, wk: (x @ wq.T) @ (x @ wk.T).transpose(0, 1), "with dimensions 0 and 1 swapped"),
             (lambda x, wq, wk: (x @ wq.T) @ (x @ wk.T).T, "with every dimension reversed")],
    mistakes=scaler.MISTAKES,
    passed_says="each with d_model different from d_k",
)


# -- 05: stable_log_softmax(scores (N, L, S)) -> (N, L, S), by hand --------------------------------------------------
def log_by_hand(shift=lambda s: s.amax(dim=-1, keepdim=True), dim=-1, keepdim=True, add_back=True):
    def log_softmax(s):
        shifted = s - shift(s)
        return (shifted if add_back else s) - shifted.exp().sum(dim=dim, keepdim=keepdim).log()
    return log_softmax


def stable_softmax(s):
    e = (s - s.amax(dim=-1, keepdim=True)).exp()
    return e / e.sum(dim=-1, keepdim=True)


def log_in_place(s):
    s -= s.amax(dim=-1, keepdim=True)
    return s - s.exp().sum(dim=-1, keepdim=True).log()


LOG_SOFTMAX = Exercise(
    check_log_softmax,
    correct=[log_by_hand(), log_by_hand(lambda s: s.max(dim=-1, keepdim=True).values),
             lambda s: (lambda m: s - m - torch.log(torch.sum(torch.exp(s - m), dim=-1, keepdim=True)))(
                 s.amax(-1, keepdim=True))],
    wrong=[
        (lambda s: torch.log(stable_softmax(s)), "the log of a weight that rounded to 0 is -inf"),
        (lambda s: stable_softmax(s).log(), "Never compute the weights"),
        (lambda s: stable_softmax(s.double()).log(), "cannot be fixed afterwards"),  # float64 does not save it
        (log_by_hand(lambda s: 0.0), "Subtract each row's max m first"),
        (lambda s: log_by_hand(lambda t: 0.0)(s.double()), "709 in float64"),  # float64 does not save it either
        (log_by_hand(add_back=False), "you subtracted the max inside the sum but not from the scores"),
        (log_by_hand(lambda s: s.max()), "not the max of the whole tensor"),
        (log_by_hand(lambda s: s.amax(dim=-2, keepdim=True)), "not each column's (dim=-2)"),
        (log_by_hand(lambda s: s.amin(dim=-1, keepdim=True)), "not its min or its mean"),
        (log_by_hand(lambda s: s.mean(dim=-1, keepdim=True)), "not its min or its mean"),
        (log_by_hand(lambda s: s.amax(dim=-1)), "is (..., L, 1)"),
        (log_by_hand(keepdim=False), "keep the reduced dimension when you sum"),
        (log_by_hand(dim=-2), "A sum over dim=-2 adds up each column"),
        (log_by_hand(lambda s: s.amax(dim=-2, keepdim=True), dim=-2), "not each column (dim=-2)"),
        (stable_softmax, "those are the weights"),
        (log_by_hand(lambda s: s - s.clamp(max=80.0)), "clamping the scores changes them"),
        (log_in_place, "your function changes a tensor in place (-= or .sub_())"),
        (log_in_place, "autograd then cannot run backward through it"),
        (lambda s: torch.log_softmax(s, dim=-1), "your function called `torch.log_softmax`"),
        (lambda s: F.log_softmax(s, dim=-1), "builds the log of the weights by hand"),
        (lambda s: s.log_softmax(dim=-1), "builds the log of the weights by hand"),
        (lambda s: torch.softmax(s, dim=-1).log(), "your function called `torch.softmax`"),
        (lambda s: torch.nn.LogSoftmax(dim=-1)(s), "builds the log of the weights by hand"),
        (lambda s: s - torch.logsumexp(s, dim=-1, keepdim=True), "your function called `torch.logsumexp`"),
        (lambda s: s - s.logsumexp(-1, keepdim=True), "your function called `.logsumexp()`"),
        (lambda s: s - s.logcumsumexp(-1)[..., -1:], "your function called `.logcumsumexp()`"),
        (lambda s: torch._safe_softmax(s, -1).log(), "your function called `torch._safe_softmax`"),
        (lambda s: log_by_hand()(s.float()), "for float64 inputs your result is float32"),
        (lambda s: log_by_hand()(s.float()).to(s.dtype), "somewhere it computes in float32"),
        (lambda s: al.percentages(s).log(), "your function called `al.percentages`"),
        (lambda s: F.scaled_dot_product_attention(s, torch.eye(s.size(-1), dtype=s.dtype),
                                                  torch.eye(s.size(-1), dtype=s.dtype), scale=1.0).log(),
         "your function called `F.scaled_dot_product_attention`"),  # the identity trick of lessons 03 to 05
        (lambda s: log_by_hand()(s).sum(dim=-1), "the same shape as the scores"),
    ],
    crashes=[(lambda s: s - (s - s.max(dim=-1, keepdim=True)).exp().sum(-1, keepdim=True).log(),
              "returns two things, the values and their indices")],
    mistakes=percentages.MISTAKES,
    passed_says="in float32 and float64",
)


def naive_softmax(s):
    return s.exp() / s.exp().sum(dim=-1, keepdim=True)  # fine for small scores, NaN from about 88.7 up


# -- 06: my_calculate_attention(query (L, N, E), key (S, N, E), value (S, N, Ev)) -> (output (L, N, Ev), (N, L, S)) ---
def from_steps(q, k, v):
    q, k, v = (t.transpose(0, 1) for t in (q, k, v))
    weights = al.percentages(al.scaler(al.matchmaker(q, k), q.size(-1)))
    return al.blend(weights, v).transpose(0, 1), weights


def attention(scores=lambda q, k: q @ T(k), divisor=lambda q, k, v: math.sqrt(q.size(-1)), dim=-1,
              softmax=True, blend=lambda w, s, k, v: w @ v, move=True, back=True):
    def attend(q, k, v):
        if move:
            q, k, v = (t.transpose(0, 1) for t in (q, k, v))  # batch first: (N, L, E), (N, S, E), (N, S, Ev)
        scaled = scores(q, k) / divisor(q, k, v)
        weights = sm(scaled, dim=dim) if softmax else scaled
        output = blend(weights, scaled, k, v)
        return (output.transpose(0, 1) if move and back else output), weights
    return attend


def softmax_in_place(s):
    e = (s - s.amax(dim=-1, keepdim=True)).exp()
    e /= e.sum(dim=-1, keepdim=True)
    return e


def moved_by_reshape(q, k, v, back="reshape"):
    L, N, E = q.shape
    qb, kb, vb = (t.reshape(t.size(1), t.size(0), t.size(2)) for t in (q, k, v))  # reshape, not transpose
    weights = sm(qb @ T(kb) / math.sqrt(E), dim=-1)
    output = weights @ vb
    return (output.reshape(L, N, -1) if back == "reshape" else output.transpose(0, 1)), weights


def permuted(q, k, v):
    weights = sm(torch.einsum("lne,sne->nls", q, k) / math.sqrt(q.size(-1)), dim=-1)  # (N, L, S)
    return torch.einsum("nls,snv->lnv", weights, v), weights


CALCULATE_ATTENTION = Exercise(
    check_calculate_attention,
    correct=[attention(), lambda q, k, v: list(attention()(q, k, v)), permuted,
             lambda q, k, v: (lambda w: ((w @ v.transpose(0, 1)).transpose(0, 1), w))(
                 sm(q.permute(1, 0, 2) @ k.permute(1, 2, 0) * q.size(-1) ** -0.5, dim=-1))],
    wrong=[
        (lambda q, k, v: al.calculate_attention(q, k, v), "your function called `al.calculate_attention`"),
        (lambda q, k, v: (lambda o, w: (o.transpose(0, 1), w))(
            *al.calculate_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1))),
         "write the five steps with plain PyTorch"),
        (from_steps, "your function called `al.matchmaker`"),
        (lambda q, k, v: (al.memory_efficient_attention(*(t.transpose(0, 1) for t in (q, k, v))).transpose(0, 1),
                          attention()(q, k, v)[1]), "your function called `al.memory_efficient_attention`"),
        (lambda q, k, v: (F.scaled_dot_product_attention(*(t.transpose(0, 1) for t in (q, k, v))).transpose(0, 1),
                          attention()(q, k, v)[1]), "your function called `F.scaled_dot_product_attention`"),
        (lambda q, k, v: (torch.nn.MultiheadAttention(q.size(-1), 1, bias=False)(q, k, v)[0], None),
         "not allowed here"),
        (attention(move=False), "in this layout the batch is dimension 1"),
        (attention(scores=lambda q, k: q @ k), "flip the key sideways"),
        (attention(scores=lambda q, k: k @ T(q)), "is (..., S, L), the scores flipped"),
        (attention(scores=lambda q, k: q @ k.T), "x.T reverses every dimension"),
        (attention(scores=lambda q, k: q @ k.T, move=False), "x.T reverses every dimension"),  # runs when square
        (attention(softmax=False, scores=lambda q, k: softmax_in_place(q @ T(k) / math.sqrt(q.size(-1))),
                   divisor=lambda q, k, v: 1.0), "changes a tensor in place (/= or .div_())"),
        (moved_by_reshape, "reshape keeps the numbers in memory order"),
        (lambda q, k, v: moved_by_reshape(q, k, v, back="transpose"), "swap the dimensions: query.transpose(0, 1)"),
        (attention(divisor=lambda q, k, v: 1.0), "divide the scores by √d_k"),
        (attention(divisor=lambda q, k, v: q.size(-1)), "not by d_k itself"),
        (attention(divisor=lambda q, k, v: q.size(-1) ** 1 / 2), "** binds tighter than /"),
        (attention(scores=lambda q, k: q @ T(k) / q.size(-1) ** 1 / 2, divisor=lambda q, k, v: 1.0),
         "is even (scores / d_k) / 2"),
        (attention(divisor=lambda q, k, v: math.sqrt(q.size(-2))), "divide by √E, not √L"),
        (attention(divisor=lambda q, k, v: math.sqrt(k.size(-2))), "divide by √E, not √S"),
        (attention(divisor=lambda q, k, v: math.sqrt(v.size(-1))), "divide by √E, not √Ev"),
        (attention(divisor=lambda q, k, v: math.sqrt(q.size(0))), "divide by √E, not √N"),
        (attention(divisor=lambda q, k, v: q.size(-1) ** -0.5), "you multiplied"),
        (attention(dim=-2), "not each column (dim=-2)"),
        (attention(dim=0), "dim=0 runs over the first dimension"),
        (attention(softmax=False), "turn the scores into weights"),
        (lambda q, k, v: attention(softmax=False)(q, k, v)[::-1][::-1], "turn the scores into weights"),
        (attention(scores=lambda q, k: naive_softmax(q @ T(k) / math.sqrt(q.size(-1))) * math.sqrt(q.size(-1)),
                   softmax=False), "subtract each row's max first"),
        (attention(blend=lambda w, s, k, v: s @ v), "not with the scaled scores"),
        (attention(blend=lambda w, s, k, v: w @ k), "you mixed the keys"),
        (attention(blend=lambda w, s, k, v: w / math.sqrt(k.size(-1)) @ v, ), "values differ"),
        (lambda q, k, v: (lambda o, w: (o, w / math.sqrt(q.size(-1))))(
            *attention(divisor=lambda q, k, v: 1.0)(q, k, v)), "scale the scores before the softmax"),
        (lambda q, k, v: attention()(q, k, v)[::-1], "in the order (output, weights)"),
        (attention(back=False), "that is the output batch first, (N, L, Ev)"),
        (lambda q, k, v: (attention()(q, k, v)[0], attention()(q, k, v)[1].transpose(0, 1)),
         "the weights come back batch first, (N, L, S)"),
        (lambda q, k, v: attention()(q, k, v)[0], "a single Tensor"),
        (lambda q, k, v: (*attention()(q, k, v), 0), "a tuple of 3 items"),
        (lambda q, k, v: (torch.zeros(*q.shape[:-1], v.shape[-1]), torch.zeros(q.shape[1], q.shape[0], k.shape[0])),
         "values differ"),
    ],
    crashes=[(attention(blend=lambda w, s, k, v: w @ v.T), "`v.T` in your line flips `v`"),
             (lambda q, k, v: (q.reshape(-1) @ k, None), "A @ B needs the last size of A")],
    mistakes=blend.MISTAKES,
    passed_says="one of them square",
)


# -- 07: weights_no_loops(query (N, L, E), key (N, S, E)) -> (N, L, S): cosine attention, no loops ------------------
def unit(x, dim=-1):
    return x / x.norm(dim=dim, keepdim=True)


def cosine(q, k, dim=-1, temperature=0.1):
    return sm(unit(q) @ T(unit(k)) / temperature, dim=dim)  # (N, L, E) @ (N, E, S) -> (N, L, S)


def loop_over_sentences(q, k):
    return torch.stack([cosine(q[n], k[n]) for n in range(q.shape[0])])


def loop_over_words(q, k):
    return torch.stack([cosine(q[:, i:i + 1], k)[:, 0] for i in range(q.shape[1])], dim=1)


def loop_over_features(q, k):
    qu, ku = unit(q), unit(k)
    return sm(sum(qu[..., e, None] * ku[..., None, :, e] for e in range(q.shape[-1])) / 0.1, dim=-1)


def loop_in_plain_python(q, k):
    """Right numbers, and a Python loop with no PyTorch call in it: only the lines of Python grow."""
    ones = [1.0 for _ in range(q.shape[1])]  # one per query
    return cosine(q, k) * torch.tensor(ones)[:, None]


def loop_over_lists(q, k):
    rows = []
    for qn, kn in zip(q.tolist(), k.tolist(), strict=True):
        rows.append([[sum(a * b for a, b in zip(qi, kj, strict=True)) for kj in kn] for qi in qn])
    return sm(torch.tensor(rows) / (q.norm(dim=-1, keepdim=True) * T(k.norm(dim=-1, keepdim=True))) / 0.1, dim=-1)


def loop_over_numpy(q, k):
    import numpy as np

    qn, kn = np.asarray(q), np.asarray(k)
    scores = np.zeros((qn.shape[0], qn.shape[1], kn.shape[1]), dtype=np.float32)
    for n in range(qn.shape[0]):
        for i in range(qn.shape[1]):
            for j in range(kn.shape[1]):
                scores[n, i, j] = qn[n, i] @ kn[n, j] / np.linalg.norm(qn[n, i]) / np.linalg.norm(kn[n, j])
    return sm(torch.from_numpy(scores) / 0.1, dim=-1)


def weights_from_sdpa(q, k):
    eye = torch.eye(k.shape[-2]).expand(k.shape[0], -1, -1)  # value = identity: the output is the weights
    return F.scaled_dot_product_attention(unit(q), unit(k), eye, scale=10.0)


WEIGHTS_NO_LOOPS = Exercise(
    check_weights_no_loops,
    correct=[cosine, lambda q, k: sm(F.normalize(q, dim=-1) @ T(F.normalize(k, dim=-1)) * 10, dim=-1),
             lambda q, k: sm(F.cosine_similarity(q[:, :, None], k[:, None], dim=-1) / 0.1, dim=-1),
             lambda q, k: sm(q @ T(k) / (q.norm(dim=-1, keepdim=True) * T(k.norm(dim=-1, keepdim=True))) / 0.1, -1)],
    wrong=[
        (lambda q, k: sm(q @ T(k) / 0.1, dim=-1), "divide by the lengths too"),
        (lambda q, k: sm(unit(q) @ T(k) / 0.1, dim=-1), "by the queries' lengths only"),
        (lambda q, k: sm(q @ T(unit(k)) / 0.1, dim=-1), "by the keys' lengths only"),
        (lambda q, k: sm(unit(q, -2) @ T(unit(k, -2)) / 0.1, dim=-1), "dim=-2 runs across the words"),
        (lambda q, k: sm(q @ T(k) / (q.norm(dim=-1, keepdim=True) * k.norm(dim=-1, keepdim=True)) / 0.1, dim=-1),
         "the key lengths belong to the columns"),
        (lambda q, k: cosine(q, k, temperature=10.0), "you multiplied"),
        (lambda q, k: cosine(q, k, temperature=1.0), "divide the cosines by the temperature, 0.1, before"),
        (lambda q, k: cosine(q, k, temperature=0.1 * math.sqrt(q.size(-1))), "there is no √d_k here"),
        (lambda q, k: sm(q @ T(k) / math.sqrt(q.size(-1)), dim=-1), "the scaled dot product of lessons 03 to 06"),
        (lambda q, k: unit(q) @ T(unit(k)) / 0.1, "turn the scores into weights"),
        (lambda q, k: cosine(q, k, dim=-2), "not each column (dim=-2)"),
        (lambda q, k: cosine(q, k, dim=0), "dim=0 runs over the first dimension"),
        (lambda q, k: sm(unit(q) @ unit(k) / 0.1, dim=-1), "flip the key sideways"),
        (loop_over_sentences, "so it loops in Python"),
        (loop_over_sentences, "PyTorch operations on the smallest input"),
        (loop_over_words, "so it loops in Python"),
        (loop_over_features, "so it loops in Python"),
        (loop_in_plain_python, "lines of Python on the smallest input"),
        (loop_over_lists, "your function called `.tolist()`, which turns the tensor into Python lists"),
        (loop_over_numpy,
         "your function called `__array__ (NumPy's np.asarray or np.array)`, which turns the tensor into a NumPy "
         "array"),
        (lambda q, k: torch.from_numpy(cosine(q, k).numpy()), "stay in PyTorch"),
        (weights_from_sdpa, "your function called `F.scaled_dot_product_attention`"),
        (lambda q, k: al.calculate_attention(unit(q), unit(k), unit(k), scale=10.0)[1],
         "your function called `al.calculate_attention`"),
        (lambda q, k: al.percentages(unit(q) @ T(unit(k)) / 0.1), "your function called `al.percentages`"),
        (lambda q, k: al.loop_attention(unit(q), unit(k), unit(k), scale=10.0)[1],
         "your function called `al.loop_attention`"),
        (lambda q, k: cosine(q[0], k[0]), "one row per query, one column per key, for every sentence"),
        (lambda q, k: sm(q @ T(k) / (q.pow(2).sum(-1, keepdim=True) * T(k.pow(2).sum(-1, keepdim=True))) / 0.1, -1),
         "you divided by the squared lengths"),
    ],
    crashes=[(lambda q, k: torch.mm(q, k.T), "torch.mm and torch.mv take plain matrices"),
             (lambda q, k: sm(q @ T(k) / (q.norm(dim=-1) * k.norm(dim=-1)) / 0.1, dim=-1),
              "without keepdim=True drops the dimension"),
             (lambda q, k: cosine(q, k, dim=3), "dim=3 counts from the front"),
             (lambda query, key: sm(unit(query) @ unit(key).T / 0.1, dim=-1), "with every dimension reversed")],
    mistakes=no_loops.MISTAKES,
    passed_says="with no Python loop",
)


# -- 08: window_mask(L, S, window) and masked_softmax(scores, mask) -------------------------------------------------
def ones(L, S):
    return torch.ones(L, S, dtype=torch.bool)


def band(L, S, lowest, highest):
    offset = torch.arange(S)[None, :] - torch.arange(L)[:, None]  # (L, S): j - i
    return (offset >= lowest) & (offset <= highest)


WINDOW_MASK = Exercise(
    check_window_mask,
    correct=[lambda L, S, w: ones(L, S).tril() & ones(L, S).triu(1 - w),
             lambda L, S, w: ones(L, S).tril() & ~ones(L, S).tril(-w),
             lambda L, S, w: (torch.arange(S)[None, :] <= torch.arange(L)[:, None])
             & (torch.arange(S)[None, :] > torch.arange(L)[:, None] - w),
             lambda L, S, w: al.causal_mask(L, S) & ones(L, S).triu(1 - w),
             lambda L, S, w: torch.ones(L, S).tril().triu(1 - w).bool()],
    wrong=[
        (lambda L, S, w: ones(L, S).tril(), "that is the causal mask"),
        (lambda L, S, w: al.causal_mask(L, S), "that is the causal mask"),
        (lambda L, S, w: band(L, S, -w, 0), "one key too many"),
        (lambda L, S, w: band(L, S, 2 - w, 0), "one key too few"),
        (lambda L, S, w: band(L, S, 1 - w, -1), "a word cannot see itself"),
        (lambda L, S, w: band(L, S, 0, w - 1), "that window looks ahead"),
        (lambda L, S, w: (ones(S, L).tril() & ones(S, L).triu(1 - w)).T, "that window looks ahead"),
        (lambda L, S, w: (torch.arange(S)[None, :] - torch.arange(L)[:, None]).abs() < w, "reaches both ways"),
        (lambda L, S, w: ones(L, S).triu(1 - w), "the future included"),
        (lambda L, S, w: ~(ones(L, S).tril() & ones(L, S).triu(1 - w)), "True and False are swapped"),
        (lambda L, S, w: band(L, S, 1 - w + S - L, S - L), "Align it top-left"),
        (lambda L, S, w: torch.zeros(L, S).masked_fill(~band(L, S, 1 - w, 0), INF), "the additive form"),
        (lambda L, S, w: ones(S, L).tril() & ones(S, L).triu(1 - w), "you returned (S, L) = (7, 4)"),
        (lambda L, S, w: ones(S, L).tril() & ones(S, L).triu(1 - w), "the mask transposed"),
        (lambda L, S, w: ones(L, L).tril() & ones(L, L).triu(1 - w), "Did you use L for both sizes?"),
        (lambda L, S, w: ones(S, S).tril() & ones(S, S).triu(1 - w), "Did you use S for both sizes?"),
        (lambda L, S, w: (ones(L, S).tril() & ones(L, S).triu(1 - w)).float(), "return a bool tensor"),
        (lambda L, S, w: ones(L, S), "the values differ from the reference"),
        (lambda L, S, w: band(L, S, -w, -1), "the query's own key is missing (j < i)"),
    ],
    crashes=[(lambda L, S, w: torch.ones(L).tril(), "print the shape of each tensor")],
    mistakes=masking.WINDOW_MISTAKES,
    passed_says="four fixed sizes",
)


def masked(s, m, fill=INF, dim=-1):
    return sm(s.masked_fill(~m, fill), dim=dim)


def zero_empty_rows(weights, m):
    return weights.masked_fill(~m.any(dim=-1, keepdim=True), 0.0)


def weights_from_identity_values(s, m):
    eye = torch.eye(s.size(-1), dtype=s.dtype).expand(s.size(0), -1, -1)  # keys and values = identity
    return al.memory_efficient_attention(s, eye, eye, attn_mask=m, scale=1.0)


def nan_rows_zeroed_in_place(s, m):
    w = masked(s, m)
    w[w.isnan()] = 0
    return w


def empty_rows_zeroed_in_place(s, m):
    w = masked(s, m)
    w[~m.any(-1)] = 0
    return w


MASKED_SOFTMAX = Exercise(
    check_masked_softmax,
    correct=[lambda s, m: masked(s, m).nan_to_num(0.0), lambda s, m: zero_empty_rows(masked(s, m), m),
             lambda s, m: masked(s, m, fill=torch.finfo(s.dtype).min) * m.any(dim=-1, keepdim=True)],
    wrong=[
        (lambda s, m: masked(s, m, fill=-1e9) * m.any(dim=-1, keepdim=True), "a finite fill (-1e9"),
        (lambda s, m: zero_empty_rows(sm(s - 1e9 * ~m, dim=-1), m), "around -1e10"),
        (lambda s, m: sm(s.masked_fill(m, INF), dim=-1), "you blocked the allowed keys"),
        (lambda s, m: sm(s.masked_fill(m, INF), dim=-1).nan_to_num(0.0), "you blocked the allowed keys"),
        (lambda s, m: zero_empty_rows(sm(s.masked_fill(m, INF), dim=-1), m), "you blocked the allowed keys"),
        (lambda s, m: sm(s, dim=-1).masked_fill(~m, 0.0), "mask *before* the softmax"),
        (lambda s, m: zero_empty_rows(sm(s, dim=-1).masked_fill(~m, 0.0), m).nan_to_num(0.0),
         "mask *before* the softmax"),
        (lambda s, m: sm(s, dim=-1) * m, "mask *before* the softmax"),
        (lambda s, m: sm(s * m, dim=-1), "e^0 = 1 still gets weight"),
        (lambda s, m: sm(s.masked_fill(~m, 0.0), dim=-1), "a blocked score set to 0 (by masked_fill(~mask, 0.0)"),
        (lambda s, m: zero_empty_rows(sm(s.masked_fill(~m, 0.0), dim=-1), m), "e^0 = 1 still gets weight"),
        (lambda s, m: masked(s, m, dim=-2), "not each column (dim=-2)"),
        (lambda s, m: masked(s, m, dim=-2).nan_to_num(0.0), "not each column (dim=-2)"),
        (masked, "its softmax is 0 / 0 = NaN"),
        (lambda s, m: masked(s, m, fill=-1e9), "got a uniform average, 1/S on every key it must not see"),
        (lambda s, m: masked(s, m, fill=torch.finfo(s.dtype).min),
         "got a uniform average, 1/S on every key it must not see"),
        (lambda s, m: al.percentages(s, attn_mask=m), "your function called `al.percentages`"),
        (lambda s, m: torch._safe_softmax(s.masked_fill(~m, INF), -1), "your function called `torch._safe_softmax`"),
        (weights_from_identity_values, "your function called `al.memory_efficient_attention`"),
        (nan_rows_zeroed_in_place, "changes a tensor in place (x[...] = ...)"),
        (empty_rows_zeroed_in_place, "autograd then cannot run backward through it"),
        (lambda s, m: torch.where(m.any(dim=-1, keepdim=True), masked(s, m), 1 / s.size(-1)),
         "got a uniform average, 1/S on every key it must not see (that is what a large negative fill"),
        (lambda s, m: al.calculate_attention(s, s, s, attn_mask=m)[1] * 0 + al.percentages(s, attn_mask=m),
         "not allowed here"),
        (lambda s, m: F.scaled_dot_product_attention(torch.eye(s.shape[-1])[None, :s.shape[-2]].expand(2, -1, -1),
                                                     torch.eye(s.shape[-1])[None].expand(2, -1, -1),
                                                     torch.eye(s.shape[-1])[None].expand(2, -1, -1), attn_mask=m),
         "your function called `F.scaled_dot_product_attention`"),
        (lambda s, m: sm(s, dim=-1), "the values differ from the reference"),
        (lambda s, m: s[m], "the weights have the scores' shape"),
    ],
    crashes=[(lambda s, m: sm(s.masked_fill(1 - m, INF), dim=-1), "invert it with ~mask"),
             (lambda s, m: sm(s.masked_fill(~m.float(), INF), dim=-1), "invert it with ~mask")],
    mistakes=masking.MASKED_SOFTMAX_MISTAKES,
    passed_says="in two, a query has every key blocked",
)


# -- 09: split_heads(x (L, N, E), num_heads) -> (N, H, L, Dh) and merge_heads, words first ----------------------------
SPLIT_HEADS = Exercise(
    check_split_heads,
    correct=[lambda x, h: x.reshape(x.shape[0], x.shape[1], h, -1).permute(1, 2, 0, 3),
             lambda x, h: x.view(x.shape[0], x.shape[1], h, -1).permute(1, 2, 0, 3),
             lambda x, h: x.transpose(0, 1).reshape(x.shape[1], x.shape[0], h, -1).transpose(1, 2),
             lambda x, h: torch.stack(x.chunk(h, dim=-1), dim=0).permute(2, 0, 1, 3),
             lambda x, h: x.unflatten(-1, (h, -1)).permute(1, 2, 0, 3).contiguous()],
    wrong=[
        (lambda x, h: x.reshape(x.shape[0], x.shape[1], h, -1).transpose(1, 2), "you got (L, H, N, Dh)"),
        (lambda x, h: x.reshape(x.shape[0], x.shape[1], h, -1).transpose(1, 2),
         ".transpose(1, 2) is the move for batch-first (N, L, E) inputs"),
        (lambda x, h: x.reshape(x.shape[1], h, x.shape[0], -1), "reads the numbers in memory order"),
        (lambda x, h: x.reshape(x.shape[1], x.shape[0], h, -1).transpose(1, 2), "x is (L, N, E), words first"),
        (lambda x, h: x.reshape(x.shape[0], x.shape[1], -1, h).permute(1, 3, 0, 2), "not every H-th feature"),
        (lambda x, h: x.transpose(0, 1).reshape(x.shape[1], h, x.shape[0], -1), "you put the sentences first"),
        (lambda x, h: x.reshape(x.shape[0], x.shape[1], h, -1), "the last step is missing: .permute(1, 2, 0, 3)"),
        (lambda x, h: x.reshape(x.shape[0], x.shape[1], h, -1).permute(2, 1, 0, 3), "you got (H, N, L, Dh)"),
        (lambda x, h: x.reshape(x.shape[0], x.shape[1], h, -1).permute(1, 0, 2, 3), "the heads must come before"),
        (lambda x, h: x.reshape(x.shape[0], x.shape[1], h, -1).permute(1, 2, 0, 3) * 2, "the values differ"),
        (lambda x, h: x.tolist(), "stay in PyTorch: your function called `.tolist()`"),
        (lambda x, h: al.split_heads(x.transpose(0, 1), h), "your function called the library's `al.split_heads`"),
    ],
    crashes=[(lambda x, h: x.reshape(x.shape[0], x.shape[1], h, x.shape[2] / h), "use integer division"),
             (lambda x, h: x.reshape(x.shape[0], 7, h, -1), "exactly as many numbers as the old one")],
    mistakes=detective_team.SPLIT_MISTAKES,
    passed_says="L, N and H all different",
)

MERGE_HEADS = Exercise(
    check_merge_heads,
    correct=[lambda x: x.permute(2, 0, 1, 3).flatten(2), lambda x: torch.cat(x.unbind(dim=1), dim=-1).transpose(0, 1),
             lambda x: x.transpose(1, 2).reshape(x.shape[0], x.shape[2], -1).transpose(0, 1)],
    wrong=[
        (lambda x: x.transpose(1, 2).reshape(x.shape[0], x.shape[2], -1), "the batch-first layout"),
        (lambda x: x.reshape(x.shape[2], x.shape[0], -1), "mixes sentences, heads and words"),
        (lambda x: x.transpose(1, 2).reshape(x.shape[2], x.shape[0], -1), "after .transpose(1, 2) the tensor is"),
        (lambda x: x.permute(2, 0, 3, 1).flatten(2), "not interleaved"),
        (lambda x: x.permute(2, 0, 1, 3), "finish with .reshape(L, N, H * Dh)"),
        (lambda x: x.permute(2, 0, 1, 3).flatten(2) + 1, "the values differ"),
        (lambda x: x.flip(1).permute(2, 0, 1, 3).flatten(2), "the heads are in reversed order"),
        (lambda x: torch.cat(x.unbind(dim=1)[::-1], dim=-1).transpose(0, 1), "the heads are in reversed order"),
        (lambda x: x.sum(dim=1).transpose(0, 1), "the heads were added up"),
        (lambda x: x.mean(dim=1), "the heads were added up (or averaged)"),
        (lambda x: al.merge_heads(x).transpose(0, 1), "your function called the library's `al.merge_heads`"),
    ],
    crashes=[(lambda x: x.permute(2, 0, 1, 3).view(x.shape[2], x.shape[0], -1), "use .reshape(...)")],
    mistakes=detective_team.MERGE_MISTAKES,
    passed_says="L, N and H all different",
)

EXERCISES = [TUNE_IN, SOFT_LOOKUP, MATCHMAKER, SCALED_SCORES, LOG_SOFTMAX, CALCULATE_ATTENTION, WEIGHTS_NO_LOOPS,
             WINDOW_MASK, MASKED_SOFTMAX, SPLIT_HEADS, MERGE_HEADS, *ROWS]


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
    (lambda q, k: torch.einsum("nle,nse->nls", q[None], k[None]), "Write ... for the dimensions in front"),
    (lambda q, k: torch.einsum("nle,nse->nls", q[None], k[None]), "'nle,nse->nls' fits only inputs"),
    (lambda q, k: torch.einsum("...le,...es->...ls", q, k), "'e' stands for 4 in one operand and 5 in another"),
    (lambda q, k: q @ T(k) / torch.sqrt(q.size(-1)), "torch.sqrt takes a tensor, but got a plain Python int"),
    (lambda q, k: q @ T(k) / torch.sqrt(q.size(-1)), "use math.sqrt(...) for a number (or d_k ** 0.5)"),
    (lambda q, k: torch.softmax(q.size(-1), dim=-1), "torch.softmax takes a tensor"),
])
def test_crash_causes_are_recognised(crash, fragment):
    result = check_function(crash, al.matchmaker, qk, name="scores")
    assert result.status == "error"
    assert "\nHint: " in result.message
    assert fragment in result.message


def test_a_mistake_is_named_only_when_it_agrees_on_every_input():
    """On a square input, √(L·E) is E: the slip agrees with "divide by d_k" there and only there. It gets the hint
    of the mistake it makes everywhere, or none, never the one it matches by chance."""
    def sizes(seed):
        L, E = ((4, 4), (3, 5), (2, 6))[seed]
        g = torch.Generator().manual_seed(seed)
        return torch.randn(2, L, E, generator=g), torch.randn(2, 5, E, generator=g)

    def scaled(divisor):
        return lambda q, k: q @ T(k) / divisor(q)

    by_d_k = (scaled(lambda q: q.size(-1)), "not by d_k itself")
    reference = scaled(lambda q: math.sqrt(q.size(-1)))
    slip = scaled(lambda q: math.sqrt(q.size(-2) * q.size(-1)))
    assert "not by d_k itself" not in check_function(slip, reference, sizes, name="s", mistakes=[by_d_k]).message
    assert check_function(by_d_k[0], reference, sizes, name="s", mistakes=[by_d_k]).message.endswith(by_d_k[1])


def test_a_refused_call_is_named_even_when_the_answer_then_crashes():
    def crashes_after_a_shortcut(q, k):
        return al.matchmaker(q, k) @ k  # (2, 3, 5) @ (2, 5, 4) runs; then the shape is wrong
    crash = lambda q, k: al.matchmaker(q, k) @ q  # noqa: E731 - (2, 3, 5) @ (2, 3, 4) raises
    allowed = Allowed(PLAIN | PRODUCTS, said="products", library_hint="no shortcut: {call}")
    for answer in (crashes_after_a_shortcut, crash):
        result = check_function(answer, al.matchmaker, qk, name="scores", allowed=allowed)
        assert result.message == "❌ scores: not allowed here. Hint: no shortcut: `al.matchmaker`"


@pytest.mark.parametrize(("answer", "call"), [
    (lambda q, k: torch.linalg.matmul(q, k.mT), "`torch.linalg.matmul`"),
    (lambda q, k: torch.linalg.vecdot(q.unsqueeze(-2), k.unsqueeze(-3)), "`torch.linalg.vecdot`"),
    (lambda q, k: torch.cdist(q, k), "`torch.cdist`"),
    (lambda q, k: q.logcumsumexp(-1)[..., :5] * 0 + k.sum(), "`.logcumsumexp()`"),
    (lambda q, k: torch.tensor(q.tolist()) @ k.mT, "`.tolist()`"),
    (lambda q, k: torch.from_numpy(q.numpy() @ k.numpy().swapaxes(-1, -2)), "`.numpy()`"),
    (lambda q, k: q @ k.mT * float(q[0, 0, 0]), "`float(tensor)`"),
    (lambda q, k: q @ k.mT * q[0, 0, 0].item(), "`.item()`"),
])
def test_anything_outside_the_allowed_operations_is_refused_by_name(answer, call):
    """An allowlist, not a list of shortcuts: a call nobody listed (a new spelling) is refused, and named."""
    allowed = Allowed(METADATA | LAYOUT | ELEMENTWISE | {"sum", "matmul"}, said="products and sums")
    result = check_function(answer, al.matchmaker, qk, name="scores", allowed=allowed)
    assert result.status == "failed"
    assert f"your function called {call}" in result.message


def test_the_package_is_refused_as_a_whole_and_allowed_function_by_function():
    """Every public function of the package is refused by its name, even through a helper; a function the exercise
    allows runs with whatever it calls inside."""
    from attention_lib.exercises._running import _library_name

    for name in al.__all__:
        obj = getattr(al, name)
        # a class's own forward (one inherited from a private base shared by two classes has one code for both)
        function = vars(obj).get("forward") if isinstance(obj, type) else obj
        if hasattr(function, "__code__"):
            assert _library_name(function.__code__) in (f"al.{name}", f"al.{name.split('.')[0]}"), name
    via_helper = lambda q, k: (lambda a, b: al.matchmaker(a, b))(q, k)  # noqa: E731
    refused = check_function(via_helper, al.matchmaker, qk, name="s", allowed=Allowed(PLAIN, said="x"))
    assert "`al.matchmaker`" in refused.message
    allowed = Allowed(frozenset(), said="nothing", functions=frozenset({al.matchmaker}))
    assert check_function(via_helper, al.matchmaker, qk, name="s", allowed=allowed).passed


def test_backward_names_an_in_place_step_and_a_change_to_the_callers_tensor():
    from attention_lib.exercises._trials import backward_slip

    def normalised_in_place(s):
        e = (s - s.amax(dim=-1, keepdim=True)).exp()
        e /= e.sum(dim=-1, keepdim=True)
        return e

    def changes_its_input(s):
        s.mul_(2.0)
        return s

    scores = (torch.randn(2, 3, 4),)
    assert "changes a tensor in place (/= or .div_())" in backward_slip(normalised_in_place, scores, None, ["s"])
    assert "changed its input `s` in place (*= or .mul_())" in backward_slip(changes_its_input, scores, None, ["s"])
    assert "cut off from its inputs" in backward_slip(lambda s: s.detach() * 2, scores, None, ["s"])
    assert backward_slip(lambda s: torch.softmax(s, dim=-1), scores, None, ["s"]) is None


def test_float64_in_float64_out_and_float64_accurate():
    inputs = lambda seed: (torch.randn(3, 4, generator=torch.Generator().manual_seed(seed)),)  # noqa: E731
    reference = lambda x: x.exp()  # noqa: E731
    lossy = check_function(lambda x: x.float().exp().to(x.dtype), reference, inputs, name="e", float64=True)
    assert "somewhere it computes in float32" in lossy.message
    fixed = check_function(lambda x: x.float().exp(), reference, inputs, name="e", float64=True)
    assert "for float64 inputs your function returned float32" in fixed.message
    crash = check_function(lambda x: x.exp() @ torch.eye(4), reference, lambda seed: (torch.eye(4),), name="e",
                           float64=True)
    assert "in float64 your function raised RuntimeError" in crash.message
    assert check_function(reference, reference, inputs, name="e", float64=True).message.endswith(
        "inputs, the first again in float64. Well done!")


def test_a_tuple_with_a_wrong_shape_is_a_shape_error_not_values():
    pair = lambda x: (x * 2, x.sum(-1))  # noqa: E731
    inputs = lambda seed: (torch.ones(2, 3),)  # noqa: E731
    message = check_function(lambda x: (x * 2, x.sum(-1, keepdim=True)), pair, inputs, name="p").message
    assert "result 2 of 2 should have shape (2,), but it has shape (2, 1)" in message
    assert "unknown" not in message
    assert "result 1 of 2 differs" in check_function(lambda x: (x * 3, x.sum(-1)), pair, inputs, name="p").message


def test_a_batched_dot_T_is_named_whatever_the_shape_says():
    square = lambda seed: (torch.randn(4, 4, 4), torch.randn(4, 4, 4))  # noqa: E731 - .T runs, and is wrong
    message = check_function(lambda q, k: q @ k.T, al.matchmaker, square, name="scores").message
    assert "x.T reverses every dimension of a batched tensor" in message


def test_a_dot_T_undone_by_another_is_no_slip_and_a_shared_shape_is_not_named():
    square = lambda seed: (torch.randn(4, 4, 4), torch.randn(4, 4, 4))  # noqa: E731
    message = check_function(lambda q, k: q @ k.T.T.mT + 1, al.matchmaker, square, name="scores").message
    assert "x.T reverses" not in message
    assert "values differ" in message
    same = lambda seed: (torch.randn(2, 3, 4), torch.randn(2, 3, 4))  # noqa: E731
    crash = check_function(lambda q, k: q @ (k * 2).T, al.matchmaker, same, name="scores").message
    assert "`x` (2, 3, 4) with every dimension reversed" in crash
    assert "`query`" not in crash


def test_a_whole_number_is_one_rule():
    from attention_lib.exercises._compare import whole_number

    assert [whole_number(x) for x in (4, 4.0, torch.tensor(4), torch.tensor(4.0))] == [4, 4, 4, 4]
    assert all(whole_number(x) is None for x in (4.5, True, "4", float("nan"), float("inf"), torch.ones(2)))


def test_a_difference_is_told_with_assert_close_report_in_a_few_words():
    from attention_lib.exercises._compare import difference

    assert difference(torch.ones(2, 3), torch.ones(2, 3)) is None
    assert difference(torch.ones(2, 3, dtype=torch.float64), torch.ones(2, 3)) is None  # any float dtype
    assert difference(torch.tensor([0.0, 1.0, 2.0]), torch.tensor([0.0, 1.5, 2.0])) == (
        "1 of 3 numbers differ, largest difference 0.5 at index (1,)")
    assert difference(torch.tensor([float("nan")]), torch.tensor([float("nan")])) is None
    assert difference((4, 5), (4, 5, 6)) == "2 items where 3 are expected"
    for not_sizes in (("4", "5"), (4.0, 5), (True, 5)):
        assert difference(not_sizes, (4, 5)) is not None


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


@pytest.mark.parametrize("trial", [0, 1, 2])
def test_the_log_softmax_inputs_break_each_shortcut(trial):
    """Every input has weights that round to 0 (so log(softmax) is -inf) and scores beyond exp's range, in float32
    and in float64 (trial 2), so that moving to float64 rescues neither; the stable version stays finite."""
    (scores,) = percentages._inputs(trial)
    assert scores.dtype == (torch.float64 if trial == 2 else torch.float32)
    assert bool(torch.log(stable_softmax(scores)).isinf().any())
    for shift in (0.0, scores.amin(dim=-1, keepdim=True), scores.mean(dim=-1, keepdim=True)):
        assert not bool(log_by_hand(lambda s, shift=shift: shift)(scores).isfinite().all())
    assert bool(log_by_hand()(scores).isfinite().all())
    if trial < 2:  # the float32 inputs: float64 would rescue a naive softmax on them, the float64 one does not
        assert bool(log_by_hand(lambda s: 0.0)(scores.double()).isfinite().all())


EXERCISE_INPUTS = {cocktail_party: 3, library_search: 3, matchmaker: 3, scaler: 3, percentages: 3, blend: 3}


@pytest.mark.parametrize("module", list(EXERCISE_INPUTS), ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_the_inputs_tell_every_pair_of_listed_mistakes_apart(module):
    """A hint is given only when the answer equals a mistake on every input where both run: so no two mistakes of
    one exercise may agree on all of its inputs, or the second could never be named."""
    from attention_lib.exercises._compare import difference

    inputs = [module._inputs(trial) for trial in range(EXERCISE_INPUTS[module])]

    def answers(fn):
        out = []
        for args in inputs:
            try:
                out.append(fn(*args))
            except Exception:  # noqa: BLE001 - a slip that crashes on this input
                out.append(None)
        return out

    table = [(hint, answers(fn)) for fn, hint in module.MISTAKES]
    for i, (hint_a, a) in enumerate(table):
        for hint_b, b in table[i + 1:]:
            apart = any((x is None) != (y is None) or (x is not None and difference(x, y) is not None)
                        for x, y in zip(a, b, strict=True))  # one raises where the other runs, or they differ
            assert apart, (hint_a[:50], hint_b[:50])


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


# -- the no-loops rule ----------------------------------------------------------------------------------------------
def _sizes_inputs():
    return [(torch.ones(2, 3),), (torch.ones(5, 3),)]


@pytest.mark.parametrize(("fn", "what"), [
    (lambda x: torch.stack([row.sum() for row in x]), "PyTorch operations"),  # a loop over tensors
    (lambda x: torch.tensor([sum(row) for row in x.tolist()]), "lines of Python"),  # over a list: no op in it
    (lambda x: x.sum(dim=-1) * torch.tensor([1.0 for _ in range(x.shape[0])]), "lines of Python"),
])
def test_a_loop_is_seen_in_what_grows(fn, what):
    from attention_lib.exercises._running import loop_growth

    grown, smallest, largest = loop_growth(fn, _sizes_inputs())
    assert grown == what
    assert smallest < largest


def test_code_without_a_loop_runs_the_same_counts_on_every_input():
    from attention_lib.exercises._running import loop_growth

    assert loop_growth(lambda x: x.sum(dim=-1), _sizes_inputs()) is None
    assert loop_growth(lambda x: torch.vmap(lambda row: row.sum())(x), _sizes_inputs()) is None
    assert loop_growth(lambda x: [x.sum() for _ in range(2)][0], _sizes_inputs()) is None  # a fixed count is no loop


def test_counting_lines_leaves_the_trace_function_as_it_was():
    import sys

    from attention_lib.exercises._running import run_learner

    def tracer(frame, event, arg):
        return None

    sys.settrace(tracer)
    try:
        run = run_learner(lambda x: x + 1, (torch.ones(2),), count_lines=True)
        assert sys.gettrace() is tracer
    finally:
        sys.settrace(None)
    assert run.lines == 1


@pytest.mark.parametrize(("fn", "call"), [(lambda x: torch.tensor(x.tolist()), "`.tolist()`"),
                                          (lambda x: torch.from_numpy(x.numpy()), "`.numpy()`"),
                                          (lambda x: torch.tensor(__import__("numpy").asarray(x)), "`__array__"),
                                          (lambda x: x * x[0].item(), "`.item()`"),
                                          (lambda x: x * float(x[0]), "`float(tensor)`")])
def test_leaving_torch_is_named(fn, call):
    from attention_lib.exercises._running import run_learner

    run = run_learner(fn, (torch.ones(2),), Allowed(PLAIN | {"tensor", "from_numpy"}, said="tensor operations"))
    assert call in run.refused
    assert "stay in PyTorch" in run.refused


# -- wrong answers written after the allowlist redesign, as a learner would; each gets its own hint or a generic one --
def fresh_tune_in_after(x, f):  # the focus after the softmax, renormalised: it cancels out
    w = sm(x @ T(x), -1) * f[:, None]
    return (w / w.sum(-1, keepdim=True)) @ x


def fresh_lookup_softmax_over_readers(q, k, v):
    s = (k * q.unsqueeze(-2)).sum(-1) / math.sqrt(q.size(-1))
    return (sm(s, 0).unsqueeze(-2) @ v).squeeze(-2)


def fresh_lookup_scaled_by_N(q, k, v):
    s = (k * q.unsqueeze(-2)).sum(-1) / math.sqrt(q.size(0))
    return (sm(s, -1).unsqueeze(-2) @ v).squeeze(-2)


def fresh_scaled_projected_on_the_wrong_side(x, wq, wk):
    q, k = wq @ T(x), wk @ T(x)  # (N, d_k, L): features first
    return q @ T(k) / math.sqrt(wq.size(0))


def fresh_log_without_the_log(s):
    t = s - s.amax(-1, keepdim=True)
    return t - t.exp().sum(-1, keepdim=True)


def fresh_log_sub_in_place(s):
    s.sub_(s.amax(-1, keepdim=True))
    return s - s.exp().sum(-1, keepdim=True).log()


def fresh_log_without_gradients(s):
    with torch.no_grad():
        t = s - s.amax(-1, keepdim=True)
        return t - t.exp().sum(-1, keepdim=True).log()


def fresh_blend_values_left_in_place(q, k, v):
    qb, kb = q.transpose(0, 1), k.transpose(0, 1)
    w = sm(qb @ T(kb) / math.sqrt(q.size(-1)), -1)
    return (w @ v).transpose(0, 1), w


def fresh_blend_scaled_by_S(q, k, v):
    qb, kb, vb = (t.transpose(0, 1) for t in (q, k, v))
    w = sm(qb @ T(kb) / math.sqrt(k.size(0)), -1)
    return (w @ vb).transpose(0, 1), w


def fresh_online_shift_by_the_old_max(m, s, o, scores, v):
    new = torch.maximum(m, scores.amax(-1, keepdim=True))
    c, w = torch.exp(m - new), torch.exp(scores - m)
    return new, s * c + w.sum(-1, keepdim=True), o * c + w @ v


def fresh_online_correction_on_the_new_block(m, s, o, scores, v):
    new = torch.maximum(m, scores.amax(-1, keepdim=True))
    safe = new.masked_fill(new == INF, 0.0)
    c, w = torch.exp(m - safe), torch.exp(scores - safe)
    return new, s + w.sum(-1, keepdim=True) * c, o + (w @ v) * c


def fresh_cross_with_multihead_attention(q, s, n):
    mha = torch.nn.MultiheadAttention(q.size(-1), 1, batch_first=True)
    return mha(q, s, s, key_padding_mask=torch.arange(s.size(-2))[None, :] >= n[:, None])


FRESH_WRONG = [
    (check_tune_in, fresh_tune_in_after, "multiply the scores by `focus` before the softmax"),
    (check_tune_in, lambda x, f: sm(f[:, None] * (x @ T(x)) / x.size(-1), -1) @ x,
     "with `focus` multiplied by 1 / 3 (3 is the size of `x`'s dimension -1)"),
    (check_tune_in, lambda x, f: sm(f[:, None] * (x @ T(x)), -1, dtype=torch.float32) @ x.float(),
     "for float64 inputs your function returned float32"),
    (check_tune_in, lambda x, f: sm(f[:, None] * (x @ T(x)), -1, dtype=torch.float32) @ x,
     "in float64 your function raised RuntimeError"),
    (check_soft_lookup, fresh_lookup_softmax_over_readers, "dim=0 runs over the first dimension"),
    (check_soft_lookup, fresh_lookup_scaled_by_N, "divide by √E, not √N"),
    (check_matchmaker, lambda q, k: (q.unsqueeze(-2) * k.unsqueeze(-3)).mean(-1), ".mean(dim=-1) also divides"),
    (check_matchmaker, lambda q, k: torch.cosine_similarity(q.unsqueeze(-2), k.unsqueeze(-3), dim=-1),
     "your function called `torch.cosine_similarity`"),
    (check_scaled_scores, lambda x, wq, wk: (x @ wq.T) @ T(x @ wk.T) / math.sqrt(wq.size(1)), "not by √d_model"),
    (check_scaled_scores, fresh_scaled_projected_on_the_wrong_side, "the words meet, not the features"),
    (check_log_softmax, fresh_log_without_the_log, "the values differ"),
    (check_log_softmax, fresh_log_sub_in_place, "changes a tensor in place (-= or .sub_())"),
    (check_log_softmax, fresh_log_without_gradients, "your function turns gradients off (torch.no_grad()"),
    (check_log_softmax, lambda s: log_by_hand()(s.data), "your function used x.data"),
    (check_masked_softmax, lambda s, m: zero_empty_rows(masked(s, m).detach(), m), "cut off from its inputs"),
    (check_calculate_attention, fresh_blend_values_left_in_place, "A @ B needs the last size of A"),
    (check_calculate_attention, fresh_blend_scaled_by_S, "divide by √E, not √S"),
    (check_weights_no_loops, lambda q, k: sm(q @ T(k) / (q.norm() * k.norm()) / 0.1, -1), "the values differ"),
    (check_weights_no_loops, lambda q, k: sm(F.normalize(q, dim=-2) @ T(F.normalize(k, dim=-2)) / 0.1, -1),
     "dim=-2 runs across the words"),
    (check_weights_no_loops, lambda q, k: sm((1 - torch.cdist(F.normalize(q, dim=-1), F.normalize(k, dim=-1)) ** 2
                                              / 2) / 0.1, -1), "your function called `torch.cdist`"),
    (check_window_mask, lambda L, S, w: ones(L, S).tril() & ones(L, S).triu(-w), "one key too many"),
    (check_window_mask, lambda L, S, w: al.sliding_window_mask(L, S, w), "called `al.sliding_window_mask`"),
    (check_masked_softmax, lambda s, m: sm(s.masked_fill(m == False, INF), -1), "its softmax is 0 / 0 = NaN"),  # noqa: E712
    (check_masked_softmax, lambda s, m: sm(torch.where(m, s, torch.tensor(-1e4)), -1), "got a uniform average"),
    (check_split_heads, lambda x, h: x.reshape(*x.shape[:2], h, -1).permute(1, 2, 3, 0), "with Dh = E // num_heads"),
    (check_merge_heads, lambda x: x.permute(2, 0, 1, 3).reshape(x.shape[0], x.shape[2], -1), "the batch-first layout"),
    (al_exercises.check_online_softmax_update, fresh_online_shift_by_the_old_max,
     "the new sum (result 2 of 3) is wrong"),
    (al_exercises.check_online_softmax_update, fresh_online_correction_on_the_new_block, "the new sum (result 2 of 3)"),
    (al_exercises.check_cross_attention, lambda q, s, n: al.calculate_attention(
        q, s, s, attn_mask=torch.arange(s.size(-2))[None, :] < n[:, None]),
     "the mask needs a dimension for the queries"),
    (al_exercises.check_cross_attention, fresh_cross_with_multihead_attention, "`nn.MultiheadAttention (its"),
    (al_exercises.check_reversal_target, lambda d: d.roll(1, -1), "that rolls the digits by one place"),
    (al_exercises.check_previous_token_score, lambda w: w.diagonal(offset=-1, dim1=2, dim2=3).mean(dim=(0, 1)),
     "one score per head: average over the sequences"),
    (al_exercises.check_induction_score, lambda w, k: w.diagonal(offset=-(k + 1), dim1=-2, dim2=-1)[..., :k].mean(
        dim=(0, -1)), "queries 4 to 6 put on key i - 4"),
    (al_exercises.check_scores_shape, lambda q, k: (q[0], q[-2], k[-2]), "3 sizes, but the scores have as many"),
]


@pytest.mark.parametrize(("checker", "answer", "fragment"), FRESH_WRONG,
                         ids=[f"{c.__name__}-{i}" for i, (c, _, _) in enumerate(FRESH_WRONG)])
def test_fresh_wrong_answers_fail_with_their_own_hint(checker, answer, fragment):
    result = checker(answer)
    assert result.status in ("failed", "error"), result.message
    assert fragment in result.message
