"""The rows of the exercise table read by ``tests/test_exercises.py``: the :class:`Exercise` record, and the rows of
the checkers of lessons 00, 10, 11, 12, 13 and 14 and of the predict-then-check tasks (the rows of lessons 01-09 are in
``tests/test_exercises.py`` itself).

A checker that takes an answer rather than a function (a number, a list, a dict of predictions) has the answers
themselves in its row; a checker with more arguments gets a small adapter whose name names the row.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from attention_lib import calculate_attention, memory_efficient_attention, padding_mask, sinusoidal_encoding
from attention_lib.attention_only import all_head_scores, induction_score, previous_token_score
from attention_lib.exercises import (
    check_cross_attention,
    check_induction_score,
    check_online_softmax_update,
    check_prediction,
    check_previous_token_score,
    check_reversal_target,
    check_scores_shape,
    check_shuffle_predictions,
    check_sinusoidal_encoding,
    check_where_induction_looks,
    check_where_it_looks,
    memory_efficient,
    welcome,
)
from attention_lib.exercises.induction_heads import INDUCTION_MISTAKES, PREVIOUS_MISTAKES
from attention_lib.exercises.word_order import cross_attention, encoding, shuffles
from attention_lib.exercises.word_order.shuffles import EXPERIMENTS, OUTCOMES


def stub(*args):
    raise NotImplementedError


@dataclass(frozen=True)
class Exercise:
    checker: Callable
    correct: Sequence[Any]  # answers (usually functions) that pass
    wrong: Sequence[tuple[Any, str]]  # (wrong answer, fragment of its message); status "failed"
    crashes: Sequence[tuple[Callable, str]] = ()  # (answer that raises, fragment of its hint); status "error"
    mistakes: Sequence[tuple[Any, str]] = ()  # the checker's catalogue: every hint must be reached
    stubs: Sequence[Any] = (stub, lambda *args: None)  # unfinished answers: status "not attempted"
    not_attempted: str = "not attempted yet"  # what the message of each stub says
    passed_says: str = ""  # what the message of each correct answer says besides "✅"


# -- 00: scores_shape(query_shape, key_shape) -> shape ---------------------------------------------------------------
def scores_shape_if_elif(q, k):
    """Right for 0, 1 and 2 batch dimensions only."""
    if len(q) == 2:
        return (q[0], k[0])
    elif len(q) == 3:  # noqa: RET505 - the learner's if/elif, as written
        return (q[0], q[1], k[1])
    elif len(q) == 4:
        return (q[0], q[1], q[2], k[2])


SCORES_SHAPE = Exercise(
    check_scores_shape,
    correct=[lambda q, k: (*q[:-1], k[-2]), lambda q, k: torch.Size([*q[:-1], k[-2]]),
             lambda q, k: tuple(q[:-1]) + (k[-2],)],
    wrong=[*welcome.MISTAKES,
           (lambda q, k: tuple((torch.empty(q) @ torch.empty(k).transpose(-2, -1)).shape),
            "without computing the product: your function called `torch.empty`"),
           (lambda q, k: tuple(torch.linalg.matmul(torch.empty(q, device="meta"), torch.empty(k, device="meta").mT)
                               .shape), "without any tensor (not even an empty one, or one on the meta device)"),
           (lambda q, k: tuple((torch.empty(q, device="meta").unsqueeze(-2) * torch.empty(k, device="meta")
                                .unsqueeze(-3)).sum(-1).shape), "your function called `torch.empty`"),
           (scores_shape_if_elif, "returned None for the inputs (2, 2, 3, 4, 6), (2, 2, 3, 7, 6)"),
           (scores_shape_if_elif, "a branch (if/elif) or a loop misses this case"),
           (lambda q, k: tuple(torch.matmul(torch.empty(q, device="meta"), torch.empty(k, device="meta").mT).shape),
            "work out the shape from the two tuples alone"),
           # a shape of the wrong length is never "the right shape"; strings and floats are not sizes
           (lambda q, k: (*q[:-2], k[-2]), "returned (5,): 1 size, but the scores have as many dimensions as"),
           (lambda q, k: (*q[:-1], k[-2], 1), "3 sizes, but the scores have as many dimensions as the query, 2"),
           (lambda q, k: tuple(str(size) for size in (*q[:-1], k[-2])), "yours holds '4' (str)"),
           (lambda q, k: tuple(float(size) for size in (*q[:-1], k[-2])), "yours holds 4.0 (float)"),
           (lambda q, k: torch.zeros(*q[:-1], k[-2]), "your function called `torch.zeros`"),
           (lambda q, k: f"{q[:-1]}", "of type str"),
           (lambda q, k: (*q[:-1], k[-2] + 1), "size 1 (counting from 0) is wrong"),
           (lambda q, k: (*q[:-1], k[-2] + 1), "for query_shape (4, 8) and key_shape (5, 8)")],
    crashes=[(lambda q, k: q[5], "IndexError")],
    mistakes=welcome.MISTAKES,
    passed_says="4 fixed pairs of shapes, with 0, 1, 2 and 3 batch dimensions",
)


# -- 01, 04, 08: predict, then check (check_prediction with the question of one experiment) --------------------------
def predict_a_weight(guess):
    return check_prediction(guess, torch.tensor(0.25), question="a weight", why="1 / 4.")


PREDICTION = Exercise(
    predict_a_weight,
    correct=[0.25, 0.26, 1 / 4, torch.tensor(0.25)],
    wrong=[(0.5, "a weight"), (0.5, "you predicted 0.5, the measurement says 0.25"),
           (0.2, "you predicted 0.2, the measurement says 0.25"), (1 / 3, "you predicted 0.3333"),
           ("a quarter", "a weight"),
           ("a quarter", "a prediction is one finite number"), (float("nan"), "a weight"),
           (float("nan"), "one finite number"), (True, "a weight"), (True, "(bool)")],
    stubs=(None, ...),
    not_attempted="no prediction yet",
    passed_says="a weight",
)


# -- 10: online_softmax_update(running_max, running_sum, running_output, scores, value) -> the new three --------------
def online_update(running_max, running_sum, running_output, scores, value):
    new_max = torch.maximum(running_max, scores.amax(dim=-1, keepdim=True))
    shift = new_max.masked_fill(new_max == float("-inf"), 0.0)
    correction = torch.exp(running_max - shift)
    weights = torch.exp(scores - shift)
    new_sum = running_sum * correction + weights.sum(dim=-1, keepdim=True)
    new_output = running_output * correction + weights @ value  # (N, L, B) @ (N, B, Ev) -> (N, L, Ev)
    return new_max, new_sum, new_output


def slip(no_guard=False, no_correction=False, block_shift=False, old_max=False, softmax_block=False,
         output_not_corrected=False, divided=False, new_minus_old=False, value_transposed=False):
    def update(running_max, running_sum, running_output, scores, value):
        new_max = torch.maximum(running_max, scores.amax(dim=-1, keepdim=True))
        shift = new_max if no_guard else new_max.masked_fill(new_max == float("-inf"), 0.0)
        weights = torch.exp(scores - (scores.amax(dim=-1, keepdim=True) if block_shift else shift))
        if softmax_block:
            weights = torch.softmax(scores, dim=-1)
        correction = torch.exp(shift - running_max) if new_minus_old else torch.exp(running_max - shift)
        correction = 1.0 if no_correction else correction
        new_sum = running_sum * correction + weights.sum(-1, keepdim=True)
        blend = weights @ value.transpose(-2, -1) if value_transposed else weights @ value
        new_output = running_output * (1.0 if output_not_corrected else correction) + blend
        if divided:
            new_output = new_output / new_sum
        return (running_max if old_max else new_max), new_sum, new_output
    return update


def online_update_guarded_by_the_old_max(running_max, running_sum, running_output, scores, value):
    """Wrong on every query's first block: the old maximum is -inf there, and the shift becomes 0."""
    new_max = torch.maximum(running_max, scores.amax(dim=-1, keepdim=True))
    shift = new_max.masked_fill(running_max == float("-inf"), 0.0)
    correction = torch.exp(running_max - shift)
    weights = torch.exp(scores - shift)
    new_sum = running_sum * correction + weights.sum(-1, keepdim=True)
    return new_max, new_sum, running_output * correction + weights @ value


def online_update_in_place(running_max, running_sum, running_output, scores, value):
    """Right numbers, the running state updated in place: backward cannot run through it."""
    new_max = torch.maximum(running_max, scores.amax(dim=-1, keepdim=True))
    shift = new_max.masked_fill(new_max == float("-inf"), 0.0)
    correction = torch.exp(running_max - shift)
    weights = torch.exp(scores - shift)
    running_sum *= correction
    running_sum += weights.sum(-1, keepdim=True)
    running_output *= correction
    running_output += weights @ value
    return new_max, running_sum, running_output


_REMEMBERED: dict = {}


def online_update_remembered_by_shape(running_max, running_sum, running_output, scores, value):
    """Right on the first input of each shape, then the same result again for new numbers of that shape."""
    key = (running_max.shape, scores.shape, value.shape, scores.dtype)
    if key not in _REMEMBERED:
        _REMEMBERED[key] = online_update(running_max, running_sum, running_output, scores, value)
    return _REMEMBERED[key]


def online_update_then(change):
    return lambda *args: change(*online_update(*args))


#: Right steps, wrong results: each message names the result and its expected shape (and never says "unknown").
ONLINE_WRONG_RESULTS = [
    (online_update_then(lambda m, s, o: (m.squeeze(-1), s, o)),
     "the new max (result 1 of 3) should have shape (N, L, 1) = (2, 3, 1), but it has shape (2, 3)"),
    (online_update_then(lambda m, s, o: (m, s.squeeze(-1), o)), "the new sum (result 2 of 3) should have shape"),
    (online_update_then(lambda m, s, o: (m, s * 1.5, o)), "the new sum (result 2 of 3) is wrong: largest difference"),
    (online_update_then(lambda m, s, o: (m, s, o + 1)), "the new output (result 3 of 3) is wrong"),
    (online_update_then(lambda m, s, o: (m + 1, s, o)), "the new max (result 1 of 3) is wrong"),
    (online_update_then(lambda m, s, o: (m, s)),
     "expected a tuple of three tensors (new_max, new_sum, new_output), but got a tuple of 2"),
    (online_update_then(lambda m, s, o: (m, s.tolist(), o)), "stay in PyTorch: your function called `.tolist()`"),
    # Every result right, in the wrong order: the message says so (not "keepdim", not a largest difference).
    (online_update_then(lambda m, s, o: (s, m, o)), "in the wrong order: you returned (new_sum, new_max, new_output)"),
    (online_update_then(lambda m, s, o: (m, o, s)), "in the wrong order: you returned (new_max, new_output, new_sum)"),
    (online_update_then(lambda m, s, o: (o, s, m)), "Return (new_max, new_sum, new_output)"),
]

ONLINE_SOFTMAX_UPDATE = Exercise(
    check_online_softmax_update,
    correct=[online_update],
    wrong=[
        (lambda *state_and_block: memory_efficient._update(*state_and_block),
         "your function called `attention_lib.exercises.memory_efficient._update`"),
        (memory_efficient._update, "`attention_lib.exercises.memory_efficient._update` (the checker's own function)"),
        (memory_efficient.online_softmax_update, "not allowed here"),
        (lambda *args: memory_efficient.online_softmax_update(*args),
         "your function called `al.online_softmax_update`"),
        (lambda m, s, o, scores, v: (m, s, memory_efficient_attention(o, o, o)),
         "your function called `al.memory_efficient_attention`"),
        (online_update_guarded_by_the_old_max, "guard the shift by the new maximum, not the old one"),
        (online_update_in_place, "in place (*= or .mul_()"),
        (online_update_remembered_by_shape, "returned its result for the fixed input 2, which has the same shapes"),
        (online_update_remembered_by_shape, "remembers an answer by the input's shape"),
        (slip(no_guard=True), "-inf - (-inf) is NaN"),
        (slip(no_correction=True), "multiply both by torch.exp(running_max - new_max)"),
        (slip(block_shift=True), "not this block's own maximum"),
        (slip(old_max=True), "return the new maximum"),
        (slip(softmax_block=True), "do not normalise the block with a softmax"),
        (slip(output_not_corrected=True), "multiply running_output by the same correction"),
        (slip(divided=True), "not divided by the running sum"),
        (slip(new_minus_old=True), "the correction goes the other way: torch.exp(running_max - new_max)"),
        (slip(new_minus_old=True), "the correction is at most 1"),
        *ONLINE_WRONG_RESULTS,
        (lambda m, s, o, scores, v: o, "expected a tuple of three tensors (new_max, new_sum, new_output)"),
    ],
    crashes=[(lambda m, s, o, scores, v: scores @ scores, "RuntimeError"),
             # weights @ value.transpose(-2, -1): the hint says to remove the transpose, never to add one
             (slip(value_transposed=True), "Remove the .transpose(-2, -1) on value"),
             (slip(value_transposed=True, no_guard=True), "value is already (N, B, Ev)")],
    mistakes=memory_efficient._MISTAKES,
    passed_says="and on a first block from the initial state (-inf, 0, 0), the first again in float64, and backward "
                "through it",
)


# -- 11: sinusoidal_encoding(length, dim) -> (length, dim) -------------------------------------------------------------
def encoding_by_hand(length, dim):
    position = torch.arange(length).float()[:, None]  # (L, 1)
    frequency = 1.0 / 10000 ** (torch.arange(0, dim, 2).float() / dim)  # (E / 2,)
    enc = torch.zeros(length, dim)
    enc[:, 0::2] = torch.sin(position * frequency)
    enc[:, 1::2] = torch.cos(position * frequency)
    return enc


def encoding_with_loops(length, dim):
    return torch.tensor([[(math.sin if j % 2 == 0 else math.cos)(p / 10000 ** ((j // 2 * 2) / dim))
                          for j in range(dim)] for p in range(length)])


def angles(length, dim, exponent=lambda two_i, dim: two_i / dim, first=0):
    position = torch.arange(first, first + length, dtype=torch.float64)[:, None]  # (L, 1)
    two_i = torch.arange(0, dim, 2, dtype=torch.float64)  # (E / 2,)
    return position / 10000.0 ** exponent(two_i, dim)  # (L, E / 2)


def interleave(even, odd):
    return torch.stack([even, odd], dim=-1).flatten(-2).float()  # two (L, E / 2) -> (L, E / 2, 2) -> (L, E)


def own_column(length, dim):
    position = torch.arange(length, dtype=torch.float64)[:, None]
    angle = position / 10000.0 ** (torch.arange(dim, dtype=torch.float64) / dim)  # (L, E)
    out = torch.sin(angle)
    out[:, 1::2] = torch.cos(angle[:, 1::2])
    return out.float()


def integer_division_by_hand(length, dim):
    position = torch.arange(length)[:, None]  # (L, 1)
    i = torch.arange(dim // 2)  # (E / 2,): the pair numbers
    angle = position / 10000 ** (2 * i // dim)  # the slip: 2 * i // dim is 0 for every pair
    return interleave(torch.sin(angle), torch.cos(angle))


def encoding_in_place(length, dim):
    position = torch.arange(length, dtype=torch.float64)[:, None]  # (L, 1)
    two_i = torch.arange(0, dim, 2, dtype=torch.float64)  # (E / 2,)
    angle = position / 10000 ** (two_i / dim)  # (L, E / 2)
    pe = torch.zeros(length, dim, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(angle)
    return pe.float()  # the word vectors' dtype


SINUSOIDAL_ENCODING = Exercise(
    check_sinusoidal_encoding,
    correct=[encoding_by_hand, encoding_with_loops, encoding_in_place],
    wrong=[
        (lambda L, E: interleave(torch.cos(angles(L, E)), torch.sin(angles(L, E))), "sine and cosine are swapped"),
        (lambda L, E: torch.cat([torch.sin(angles(L, E)), torch.cos(angles(L, E))], -1).float(), "interleaves them"),
        (lambda L, E: interleave(torch.sin(a := angles(L, E, lambda t, d: t / 2 / d)), torch.cos(a)), "not i / dim"),
        (own_column, "share the frequency of the sine column"),
        (lambda L, E: interleave(torch.sin(a := angles(L, E, lambda t, d: -t / d)), torch.cos(a)),
         "divide the position"),
        (lambda L, E: interleave(torch.sin(a := angles(L, E, first=1)), torch.cos(a)), "positions count from 0"),
        (lambda L, E: encoding_by_hand(L, E).T, "If you got (dim, length)"),
        (lambda L, E: interleave(torch.sin(a := angles(L, E) * 10.0 ** (torch.arange(0, E, 2) / E)), torch.cos(a)),
         "the base is 10000 (ten thousand), not 1000"),
        (sinusoidal_encoding, "your function called `al.sinusoidal_encoding`, which is the answer itself"),
        (lambda L, E: sinusoidal_encoding(L, E, dtype=torch.float64), "not allowed here"),
        (lambda L, E: interleave(torch.sin(a := angles(L, E, lambda t, d: t // d)), torch.cos(a)),
         "2 * i // dim is integer (floor) division"),
        (integer_division_by_hand, "Use true division, 2 * i / dim"),
    ],
    crashes=[(lambda L, E: torch.zeros(L, E)[:, None] @ torch.zeros(3), "A @ B needs the last size of A")],
    mistakes=encoding.SINUSOIDAL_MISTAKES,
    passed_says="three fixed sizes",
)


# -- 11: cross_attention(question (N, L, E), sentences (N, S, E), lengths (N,)) -> (output, weights (N, L, S)) -----
def pad(lengths, S, extra=0):
    return (torch.arange(S)[None, :] < lengths[:, None] + extra)[:, None, :]  # (N, 1, S), True = a real word


def cross(q, s, n):
    return calculate_attention(q, s, s, attn_mask=padding_mask(n, s.shape[-2]))


def cross_by_hand(question, sentences, lengths, *, divisor=None, dim=-1, after=False, values=None,
                  empty_rows_zero=False):
    scores = question @ sentences.transpose(-2, -1)  # (N, L, E) @ (N, E, S) -> (N, L, S)
    scores = scores / (divisor if divisor is not None else math.sqrt(question.shape[-1]))
    mask = pad(lengths, sentences.shape[-2])
    weights = torch.softmax(scores if after else scores.masked_fill(~mask, float("-inf")), dim=dim)
    weights = weights.masked_fill(~mask, 0.0) if after else weights
    weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0) if empty_rows_zero else weights
    return weights @ (sentences if values is None else values), weights  # (N, L, S) @ (N, S, E) -> (N, L, E)


def cross_in_place(question, sentences, lengths):
    """Right numbers, the empty sentences' NaN zeroed in place: backward cannot run through it."""
    output, weights = cross_by_hand(question, sentences, lengths)
    weights[weights.isnan()] = 0.0
    output[output.isnan()] = 0.0
    return output, weights


def values_from_the_question(q, s, n):
    return calculate_attention(q, s, q, attn_mask=padding_mask(n, s.shape[-2]))


CROSS_ATTENTION = Exercise(
    check_cross_attention,
    correct=[cross, lambda q, s, n: cross_by_hand(q, s, n, empty_rows_zero=True),
             lambda q, s, n: [torch.nn.functional.scaled_dot_product_attention(q, s, s, attn_mask=pad(n, s.shape[-2])),
                              cross_by_hand(q, s, n, empty_rows_zero=True)[1]],
             lambda q, s, n: calculate_attention(q, s, s, attn_mask=torch.zeros(
                 pad(n, s.shape[-2]).shape, dtype=q.dtype).masked_fill(~pad(n, s.shape[-2]), float("-inf")))],
    wrong=[
        (lambda q, s, n: calculate_attention(q, s, s, attn_mask=torch.zeros(pad(n, s.size(-2)).shape).masked_fill(
            ~pad(n, s.size(-2)), -1e9)), "-1e9 gives (lesson 08)"),
        (cross_by_hand, "a sentence of length 0"),  # the -inf version by hand: NaN where a sentence is empty
        (cross_by_hand, "give it exact zeros"),
        (cross_in_place, "in place (x[...] = ...)"),
        # an additive mask made in float32: right in float32, and a crash on float64 inputs
        (lambda q, s, n: calculate_attention(q, s, s, attn_mask=torch.zeros(pad(n, s.shape[-2]).shape)
                                             .masked_fill(~pad(n, s.shape[-2]), float("-inf"))),
         "in float64 your function raised DtypeMismatchError"),
        (lambda q, s, n: calculate_attention(q, s, s), "the sentences' padding got weight"),
        (lambda q, s, n: calculate_attention(q, s, s, attn_mask=~pad(n, s.shape[-2])), "True and False are swapped"),
        (lambda q, s, n: calculate_attention(q, s, s, attn_mask=pad(n, s.shape[-2], extra=1)),
         "one padding key too many"),
        (lambda q, s, n: cross_by_hand(q, s, n, after=True), "mask *before* the softmax"),
        (lambda q, s, n: calculate_attention(s, q, q), "queries and keys/values are swapped"),
        (lambda q, s, n: calculate_attention(q, q, q), "self-attention on the question"),
        (lambda q, s, n: calculate_attention(s, s, s, attn_mask=padding_mask(n, s.shape[-2])),
         "self-attention on the sentences"),
        (lambda q, s, n: cross_by_hand(q, s, n, divisor=1.0), "divide the scores by sqrt(E)"),
        (lambda q, s, n: cross_by_hand(q, s, n, divisor=math.sqrt(s.shape[-2])), "not by sqrt(S)"),
        (lambda q, s, n: cross_by_hand(q, s, n, divisor=math.sqrt(q.shape[-2])), "not by sqrt(L)"),
        (lambda q, s, n: cross_by_hand(q, s, n, dim=-2), "the softmax runs over the keys"),
        (lambda q, s, n: cross(q, s, n)[0], "return two tensors, (output, weights)"),
        (lambda q, s, n: cross(q, s, n)[1], "return two tensors, (output, weights)"),
        (lambda q, s, n: tuple(cross(q, s, n)) + (q,), "return two tensors, (output, weights)"),
        (lambda q, s, n: (cross(q, s, n)[0], cross(q, s, n)[1].transpose(-2, -1)), "the weights should be (N, L, S)"),
        (lambda q, s, n: (cross(q, s, n)[0].transpose(-2, -1), cross(q, s, n)[1]), "the output should be (N, L, E)"),
        (lambda q, s, n: (cross(q, s, n)[0], cross(q, s, n)[1] * 2),
         "result 2 of 2 differs from the reference"),
        (lambda q, s, n: calculate_attention(q, s * padding_mask(n, s.shape[-2]).transpose(-2, -1), s * padding_mask(
            n, s.shape[-2]).transpose(-2, -1)), "the padding vectors were set to zero, not masked"),
    ],
    crashes=[(values_from_the_question, "every key needs exactly one value"),
             (lambda q, s, n: calculate_attention(q, s, s, attn_mask=padding_mask(n, s.shape[-2]).squeeze(1)),
              "the mask needs a dimension for the queries"),
             (lambda q, s, n: calculate_attention(q, s, s, attn_mask=padding_mask(n, q.shape[-2])),
              "its last size is S = sentences.size(-2), not the question's L"),
             (lambda q, s, n: cross_by_hand(q, s, n, values=q), "blend the sentences' values"),
             (lambda q, s, n: cross_by_hand(q, s, n, values=q), "The shapes that met in `matmul (@)`")],
    mistakes=cross_attention.CROSS_MISTAKES,
    passed_says="four fixed padded batches (L != S, sentences of different lengths, one of length 0), the first "
                "again in float64, and backward through it",
)


# -- 11: predict what shuffling does (a dict of predictions) ---------------------------------------------------------
SHUFFLES_RIGHT = {"causal self-attention": "changed", "question shuffled": "shuffled",
                  "positions on the question": "same", "positions travel": "shuffled"}

_SHUFFLE_REASONS = {"causal self-attention": "a sense of order of its own",
                    "question shuffled": "Shuffling them shuffles those rows",
                    "positions on the question": "only the queries carry positions",
                    "positions travel": "each word carries its position vector with it"}

SHUFFLE_PREDICTIONS = Exercise(
    check_shuffle_predictions,
    correct=[SHUFFLES_RIGHT, {k: f" {v.upper()}" for k, v in SHUFFLES_RIGHT.items()}],
    wrong=[
        *[({**SHUFFLES_RIGHT, experiment: outcome}, fragment)
          for experiment in EXPERIMENTS for outcome in OUTCOMES if outcome != SHUFFLES_RIGHT[experiment]
          for fragment in (f"{experiment!r} is not {outcome!r}", _SHUFFLE_REASONS[experiment], "3 of 4 right")],
        # every verdict is given, not only the first wrong one
        ({**SHUFFLES_RIGHT, "causal self-attention": "same", "positions travel": "changed"}, "2 of 4 right"),
        ({**SHUFFLES_RIGHT, "causal self-attention": "same", "positions travel": "changed"},
         "✔ 'question shuffled': right."),
        ({**SHUFFLES_RIGHT, "causal self-attention": "same", "positions travel": "changed"},
         "'positions travel' is not 'changed'"),
        ({**SHUFFLES_RIGHT, "question shuffled": "reversed"}, "choose one of ['same', 'shuffled', 'changed']"),
        ({**SHUFFLES_RIGHT, "question shuffled": 1}, "choose one of"),
        ({**SHUFFLES_RIGHT, "attention": "same"}, "unknown experiments ['attention']"),
        (["same", "shuffled"], "expected a dict"),
    ],
    mistakes=list(shuffles._HINTS.items()),
    stubs=(dict.fromkeys(EXPERIMENTS, ...), {**SHUFFLES_RIGHT, "question shuffled": ...},
           {k: v for k, v in SHUFFLES_RIGHT.items() if k != "positions travel"}, {}),
)


# -- 12: reversal_target(digits (N, L)) -> (N, L), and where the trained model looks (8 positions) ---------------------
def reversed_in_place(d):
    d[:] = d.flip(-1).clone()  # the batch's inputs are reversed too
    return d


REVERSAL_TARGET = Exercise(
    check_reversal_target,
    correct=[lambda d: d.flip(-1), lambda d: d[:, torch.arange(d.shape[1] - 1, -1, -1)]],
    wrong=[
        (lambda d: d.flip(0), "flip the last dimension"),
        (lambda d: d, "the input itself"),
        (lambda d: d.sort(-1, descending=True).values, "sorts the digits"),
        (lambda d: d.flip(-1)[:, :-1], "expected shape"),
        (lambda d: d[:, [7 - i for i in range(8)]], "assumes every input has 8 digits"),
        (lambda d: torch.stack([d[:, 7 - i] for i in range(d.shape[1])], dim=1), "a hard-coded 7 - i"),
        (reversed_in_place, "your function overwrote its input"),
        (lambda d: d.flip(-1).float(), "right digits, but as float32"),
        (lambda d: d.copy_(d.flip(-1)), "`.copy_()`"),
        (lambda d: d.copy_(d.flip(-1)), "writes into `digits` in place"),
    ],
    crashes=[(lambda d: 1 / 0, "ZeroDivisionError"), (lambda d: d[:, ::-1], "negative steps such as ::-1"),
             (lambda d: d[..., ::-1], "reverse a dimension with .flip")],
    passed_says="correct on fixed batches of 8, 5, 4 and 3 digits",
)

WHERE_IT_LOOKS = Exercise(
    check_where_it_looks,
    correct=[[7, 6, 5, 4, 3, 2, 1, 0], torch.arange(7, -1, -1), [7.0, 6, 5, 4, 3, 2, 1, 0]],  # 7.0 is a whole number
    wrong=[
        (list(range(8)), "diagonal"),
        ([8, 7, 6, 5, 4, 3, 2, 1], "off by one"),
        ([7, 6, 5], "give 8 positions"),
        ([0, 6, 5, 4, 3, 2, 1, 7], "position 0 looks elsewhere"),
        ([-1, 6, 5, 4, 3, 2, 1, 0], "positions run from 0 to 7, but got -1"),
        ([-1, 6, 5, 4, 3, 2, 1, 0], "it is position 7"),
        ([7, 6, 5, 4, 3, 2, 1, 9], "positions run from 0 to 7, but got 9"),
        ("abc", "whole numbers"),
        ([7.5, 6, 5, 4, 3, 2, 1, 0], "positions are whole numbers, but got 7.5"),
        (torch.tensor([7.5, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0, 0.0]), "there is no position 7.5"),
    ],
    stubs=(..., None),
)


# -- 13: previous_token_score(weights (N, H, L, L)) -> (H,), induction_score(weights, k) -> (H,), where it looks ------
PREVIOUS_TOKEN_SCORE = Exercise(
    check_previous_token_score,
    correct=[lambda w: w.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=(0, -1)),
             lambda w: torch.stack([w[:, :, i, i - 1] for i in range(1, w.shape[-1])], -1).mean(dim=(0, -1))],
    wrong=[
        (lambda w: w.diagonal(dim1=-2, dim2=-1).mean(dim=(0, -1)), "that is the diagonal"),
        (lambda w: w.diagonal(offset=-1, dim1=-2, dim2=-1).sum(dim=(0, -1)) / (w.shape[0] * w.shape[-1]),
         "you divided by L"),
        (lambda w: w.diagonal(offset=-1, dim1=-2, dim2=-1).sum(dim=(0, -1)), "that is a sum"),
        (lambda w: w[:, :, 1:, 0].mean(dim=(0, -1)), "the weight on the first position"),
        (lambda w: w.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=-1), "expected shape"),
        (lambda w: w.diagonal(offset=-1, dim1=-2, dim2=-1).mean(), "expected shape"),
        (previous_token_score, "called the package's `previous_token_score`, which is the answer itself"),
        (lambda w: all_head_scores((w,), 1)["previous token"][0], "called the package's"),
        # the lesson's shortcut cell measures 15 positions back: copied unchanged, an empty diagonal on short maps
        (lambda w: w.diagonal(offset=-15, dim1=-2, dim2=-1).mean(dim=(0, -1)), "the diagonal you took is empty"),
        (lambda w: w.diagonal(offset=1, dim1=-2, dim2=-1).mean(dim=(0, -1)), "offset=+1 is above the diagonal"),
        (lambda w: w.diagonal(offset=-1, dim1=-1, dim2=-2).mean(dim=(0, -1)), "dim1=-1, dim2=-2 swaps the rows"),
        (lambda w: torch.diagonal(w, -1, 3, 2).mean(dim=(0, -1)), "with them the sign of the offset"),
        (lambda w: (w.argmax(-1) == torch.arange(w.shape[-1]) - 1)[..., 1:].float().mean(dim=(0, -1)),
         "how often the previous position is a query's strongest key"),
        (lambda w: (w.argmax(-1) == torch.arange(w.shape[-1]) - 1)[..., 2:].float().mean(dim=(0, -1)),
         "your function used argmax"),
        (lambda w: w.diagonal(offset=-1, dim1=-2, dim2=-1).amax(dim=(0, -1)), "the largest weight on the previous"),
        (lambda w: w.tril(-1).sum(dim=-1)[..., 1:].mean(dim=(0, -1)), "that is every weight below the diagonal"),
        (lambda w: w.diagonal(offset=-2, dim1=-2, dim2=-1).mean(dim=(0, -1)), "queries 2 to 4 put on key i - 2"),
        (lambda w: w.diagonal(offset=-1, dim1=-2, dim2=-1)[..., 1:].mean(dim=(0, -1)),
         "queries 2 to 4 put on key i - 1, over every sequence; the score is the mean of the weights queries 1 to 4"),
    ],
    crashes=[(lambda w: w[:, :, :, :-1] @ w, "RuntimeError")],
    mistakes=PREVIOUS_MISTAKES,
    passed_says="three fixed causal maps of 5, 6 and 7 positions",
)


def stripe(w, k, first):
    return w.diagonal(offset=-(k - 1), dim1=-2, dim2=-1)[..., first:first + k].mean(dim=(0, -1))


INDUCTION_SCORE = Exercise(
    check_induction_score,
    correct=[lambda w, k: stripe(w, k, 1),
             lambda w, k: torch.stack([w[:, :, i, i - k + 1] for i in range(k, 2 * k)], -1).mean(dim=(0, -1))],
    wrong=[
        (lambda w, k: w.diagonal(offset=-(k - 1), dim1=-2, dim2=-1)[..., 1:].mean(dim=(0, -1)),
         "you went to the end of the stripe"),
        (lambda w, k: (lambda K: w[..., torch.arange(K, 2 * K), torch.arange(1, K + 1)].mean(dim=(0, -1)))(
            w.size(-1) // 2), "you took k as half the sequence"),
        (lambda w, k: w.diagonal(offset=-k, dim1=-2, dim2=-1)[..., :k].mean(dim=(0, -1)), "the earlier copy"),
        (lambda w, k: w.diagonal(offset=-(k - 1), dim1=-2, dim2=-1).mean(dim=(0, -1)), "only the queries of the copy"),
        (lambda w, k: stripe(w, k, 0), "skip its first entry"),
        (lambda w, k: w.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=(0, -1)), "the previous-token score"),
        (lambda w, k: stripe(w, k, 1) * 2, "the values differ from the reference"),
        (lambda w, k: w.diagonal(offset=-(k - 1), dim1=-2, dim2=-1)[..., 1:k + 1].mean(-1), "expected shape"),
        (lambda w, k: w.diagonal(offset=-(k - 1), dim1=-2, dim2=-1)[
            ..., 1:k].mean(dim=(0, -1)), "the last one too"),
        (lambda w, k: w.diagonal(offset=-(k - 1), dim1=-2, dim2=-1)[..., 1:k + 1].amax(dim=(0, -1)),
         "the largest weight on the stripe"),
        (lambda w, k: w.diagonal(offset=-(k - 1), dim1=-2, dim2=-1)[..., 1:k + 1].sum(dim=(0, -1)) / k,
         "you divided the sum by k alone"),
        (lambda w, k: stripe(w, k, 2), "queries 4 to 6 put on key i - 2"),
        (induction_score, "called the package's `induction_score`, which is the answer itself"),
        (lambda w, k: all_head_scores((w,), k)["induction"][0], "called the package's"),
    ],
    crashes=[(lambda w, k: w[:, :, k + 100], "IndexError")],
    mistakes=INDUCTION_MISTAKES,
    passed_says="k = 3, 4 and 5 in sequences of 8, 11 and 14 positions",
)


def where_induction_looks(guess):
    return check_where_induction_looks(guess, text="qmxbtzkqmxbtzk", position=10)


WHERE_INDUCTION_LOOKS = Exercise(
    where_induction_looks,
    correct=[4, torch.tensor(4), 4.0, torch.tensor(4.0)],  # one rule for a whole number: 4.0 is one
    wrong=[
        (3, "the earlier copy of the current token itself"),
        (3, "the model puts its largest weight, 0.9"),
        (9, "a previous-token head"),
        (12, "cannot see the future"),
        (0, "move one step to the right"),
        ("four", "a prediction is one position"),
        (4.5, "a whole number"),
        (True, "a whole number"),
    ],
    stubs=(..., None),
    not_attempted="no prediction yet",
    passed_says="on position 4 ('t')",
)

ROWS = [SCORES_SHAPE, PREDICTION, ONLINE_SOFTMAX_UPDATE, SINUSOIDAL_ENCODING, CROSS_ATTENTION, SHUFFLE_PREDICTIONS,
        REVERSAL_TARGET, WHERE_IT_LOOKS, PREVIOUS_TOKEN_SCORE, INDUCTION_SCORE, WHERE_INDUCTION_LOOKS]


# -- 14: the inner loop of the Triton attention kernel (a triton.jit kernel; run in the interpreter on a CPU) ---------
def kernel_with(*changes: tuple[str, str]):
    """The package's attention kernel with some lines changed (each ``(old, new)`` must occur), as a Triton kernel.

    Triton reads a kernel's source from its file, so each variant is written to a module of its own.
    """
    import importlib.util
    import inspect
    import tempfile
    from pathlib import Path

    from attention_lib.memory_efficient import triton_kernel

    triton = triton_kernel.import_triton()
    source = inspect.getsource(triton_kernel.fold_tile.fn) + "\n\n" + inspect.getsource(
        triton_kernel.attention_forward_kernel)
    for old, new in changes:
        assert old in source, old
        source = source.replace(old, new)
    path = Path(tempfile.mkdtemp(prefix="kernel_variant_")) / "variant.py"
    path.write_text("from __future__ import annotations\n\nimport triton\nimport triton.language as tl\n\n\n" + source
                    + "\n\nfold_tile = triton.jit(fold_tile)\n")
    spec = importlib.util.spec_from_file_location(f"kernel_variant_{abs(hash(source))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return triton.jit(module.attention_forward_kernel)


def kernel_rows() -> list[Exercise]:
    """The rows of the two kernel exercises, or none where triton is not installed."""
    try:
        from attention_lib.exercises import check_attention_kernel, check_causal_kernel
        from attention_lib.exercises import triton_kernel as kernel_exercise
        from attention_lib.memory_efficient.triton_kernel import attention_forward_kernel, import_triton

        import_triton()
    except ImportError:
        return []
    no_rescale = [("running_sum * correction +", "running_sum +"),
                  ("running_output * correction[:, None] +", "running_output +")]
    ragged_mask = "tl.where(cols[None, :] < S, scores, float(\"-inf\"))"
    causal_mask = "scores = tl.where(cols[None, :] <= rows[:, None], scores, float(\"-inf\"))"
    every_tile_masked = ("running_output, False, IS_CAUSAL", "running_output, True, IS_CAUSAL")  # one masked loop
    key_end = "key_end = tl.minimum(S, (block + 1) * BLOCK_L)"
    v_with_head_dim = ("v_ptrs = V + cols[:, None] * v_stride_s + value_dims[None, :]",
                       "v_ptrs = V + cols[:, None] * v_stride_s + dims[None, :]")
    ev_is_e = [("tl.arange(0, VALUE_DIM)", "tl.arange(0, HEAD_DIM)"),  # every value-sized block made E wide
               ("tl.zeros((BLOCK_L, VALUE_DIM), tl.float32)", "tl.zeros((BLOCK_L, HEAD_DIM), tl.float32)")]
    q_rows_dense = ("rows[:, None] * q_stride_l", "rows[:, None] * HEAD_DIM")  # rows assumed E apart
    k_rows_dense = ("cols[:, None] * k_stride_s", "cols[:, None] * HEAD_DIM")
    full_end_unbounded = ("full_end = tl.minimum(full_end, block * BLOCK_L // BLOCK_S * BLOCK_S)",
                          "full_end = block * BLOCK_L // BLOCK_S * BLOCK_S")
    non_causal_all_masked = ("    key_end = S\n", "    key_end = S\n    if not IS_CAUSAL:\n        full_end = 0\n")
    attention = Exercise(
        check_attention_kernel,
        correct=[kernel_with(), kernel_with(("tl.exp2(", "tl.math.exp2(")), kernel_with(every_tile_masked)],
        wrong=[
            (kernel_with(*no_rescale), "the maximum grows"),
            (kernel_with(no_rescale[1]), "multiply running_sum and running_output by correction"),
            (kernel_with(("return new_max, running_sum", "return running_max, running_sum")), "wrong log-sum-exp"),
            (kernel_with(("(running_max + tl.log2(running_sum)) * 0.6931471805599453",
                          "running_max + tl.log2(running_sum)")), "1.44 times too large"),
            (kernel_with((ragged_mask, "scores")), "runs past S"),
            (kernel_with(("k = tl.load(k_ptrs, mask=cols[:, None] < S, other=0.0)", "k = tl.load(k_ptrs)"),
                         ("v = tl.load(v_ptrs, mask=cols[:, None] < S, other=0.0)", "v = tl.load(v_ptrs)")),
             "read past the end of key or value"),
            (kernel_with(every_tile_masked, (ragged_mask, "tl.where(cols[None, :] < S, float(\"-inf\"), scores)")),
             "upside down it gives every score -inf"),
            (kernel_with((ragged_mask, "tl.where(cols[None, :] < S - 1, scores, float(\"-inf\"))")),
             "leaves out the last key, S - 1"),
            (kernel_with(("    key_end = S\n", "    key_end = S - 1\n")), "leaves out the last key, S - 1"),
            (kernel_with(("output = running_output / running_sum[:, None]", "output = running_output")),
             "not yet divided by the sum of the weights"),
            (kernel_with(("K_head, V_head = K + bh * k_stride_bh, V + bh * v_stride_bh", "K_head, V_head = K, V")),
             "your heads all read head 0's keys and values"),
            (kernel_with(("K_head, V_head = K + bh * k_stride_bh, V + bh * v_stride_bh",
                          "K_head, V_head = K + bh * S * HEAD_DIM, V + bh * S * VALUE_DIM")),
             "every pointer needs that head's offset"),
            (kernel_with(("K_head, V_head = K + bh * k_stride_bh, V + bh * v_stride_bh",
                          "K_head, V_head = K, V + bh * v_stride_bh")), "your heads all read head 0's keys:"),
            (kernel_with(("tl.store(Out + bh * out_stride_bh +", "tl.store(Out +")), "every pointer needs that head's"),
            (kernel_with(("for start in range(0, full_end, BLOCK_S):", "for start in range(0, full_end, BLOCK_L):")),
             "queries come in blocks of BLOCK_L"),
            (kernel_with(("weights = tl.exp2(scores - new_max[:, None])", "weights = scores - new_max[:, None]")),
             "the update is lesson 10's"),
            (kernel_with(("mask=rows[:, None] < L)", ")")),
             "stored numbers outside the Out tensor. Hint: store with mask"),
            (kernel_with(*ev_is_e), "Ev = VALUE_DIM numbers per position"),  # was told "store with mask=rows < L"
            (kernel_with(*ev_is_e), "on E = 32, Ev = 16"),
            (kernel_with(q_rows_dense), "views into packed buffers"),
            (kernel_with(k_rows_dense), "on packed rows: q's 48, k's 40 and v's 24 numbers apart"),
            (kernel_with(k_rows_dense), "Step from row to row with each tensor's own stride"),
            (kernel_with(("k = tl.load(k_ptrs, mask=cols[:, None] < S, other=0.0)", "k = tl.load(k_ptrs)")),
             "read outside the key tensor"),
            (kernel_with(("mask=rows[:, None] < L, other=0.0)", ")")), "read outside the query tensor"),
            (kernel_with(("mask=rows[:, None] < L, other=0.0)", ")")), "into the padding after it"),
            (attention_forward_kernel, "put @triton.jit on the line above"),
            # the blind tester's kernels: each names its own slip (or the places it may hide), none another's
            (kernel_with(("tl.exp2(running_max - new_max)", "tl.exp2(new_max - running_max)")),
             "the correction, old minus new, tl.exp2(running_max - new_max)"),
            (kernel_with(("new_max = tl.maximum(running_max, tl.max(scores, axis=1))",
                          "new_max = tl.max(scores, axis=1)")), "the larger of the running one and this tile's"),
            (kernel_with(("for start in range(0, full_end, BLOCK_S):", "for start in range(0, full_end - BLOCK_S, "
                          "BLOCK_S):")), "the loop, range(0, S, BLOCK_S), which visits every tile"),
            (kernel_with(("tl.store(Lse + bh * L + rows", "tl.store(Lse + rows")), "lands in the same place"),
            (kernel_with(("tl.dot(weights.to(v.dtype), v", "tl.dot(weights.to(tl.float16).to(v.dtype), v")),
             "a step loses precision, such as weights cast to float16"),
            (kernel_with(("q, K_head, V_head, k_stride_s, v_stride_s", "q, K_head, V_head, q_stride_l, v_stride_s")),
             "each tensor's own stride"),  # every case but the packed one has equal row strides for q and k
            (kernel_with(("rows[:, None] * out_stride_l", "rows[:, None] * q_stride_l")),
             "stored numbers outside the Out tensor. Hint: every store must land inside its own tensor"),
            # the output's rows assumed VALUE_DIM apart: the packed case's Out has gaps between its rows
            (kernel_with(("rows[:, None] * out_stride_l", "rows[:, None] * VALUE_DIM")),
             "on packed rows: q's 48, k's 40 and v's 24 numbers apart, your kernel stored numbers outside the Out"),
            (kernel_with(("rows[:, None] * out_stride_l", "rows[:, None] * VALUE_DIM")),
             "never rows[:, None] * VALUE_DIM"),
        ],
        crashes=[(kernel_with(("tl.sum(weights, axis=1)", "tl.sum(weights, axis=2)")), "fixed shape"),
                 (kernel_with(v_with_head_dim), "value_dims = tl.arange(0, VALUE_DIM)")],
        mistakes=kernel_exercise.MISTAKES,
        stubs=(kernel_with(("    cols = start + tl.arange",
                            "    raise NotImplementedError\n    cols = start + tl.arange")),),
        passed_says="is checked only when the kernel runs compiled on a GPU",
    )
    causal = Exercise(
        check_causal_kernel,
        correct=[kernel_with(), kernel_with(("tl.exp2(", "tl.math.exp2("))],
        wrong=[
            # the causal tl.where on every tile, full ones too, changes no number: the checker sees the selects
            (kernel_with(("        if IS_CAUSAL:\n            scores = tl.where(cols[None, :] <= rows[:, None]",
                          "    if IS_CAUSAL:\n        scores = tl.where(cols[None, :] <= rows[:, None]")),
             "masks the scores (tl.where) in"),
            (kernel_with((causal_mask, "pass")), "in the tiles on the diagonal mask the others"),
            (kernel_with(("cols[None, :] <= rows[:, None]", "cols[None, :] < rows[:, None]")), "lost every key"),
            (kernel_with(("(block + 1) * BLOCK_L", "block * BLOCK_L")), "lost every key"),
            (kernel_with((key_end, "key_end = S")), "must be skipped"),
            (kernel_with(("(block + 1) * BLOCK_L", "(block + 2) * BLOCK_L")), "must be skipped"),
            (kernel_with((key_end, "key_end = tl.minimum(S, (block + 1) * BLOCK_S)")), "counted in BLOCK_L"),
            (kernel_with(("block * BLOCK_L // BLOCK_S * BLOCK_S", "(block + 1) * BLOCK_L // BLOCK_S * BLOCK_S")),
             "in the tiles on the diagonal mask the others"),
            (kernel_with(every_tile_masked), "the full tiles (every key exists and, with IS_CAUSAL, comes before"),
            (kernel_with(full_end_unbounded), "more queries than keys (L > S)"),
            (kernel_with(full_end_unbounded), "on causal, 64 queries, 40 keys (L > S)"),
            (kernel_with(non_causal_all_masked),
             "on one tile of 16 keys, right, but your kernel loads 1 of its 1 tiles"),
            (kernel_with(*ev_is_e), "Ev = VALUE_DIM numbers per position"),
            (kernel_with(("block * BLOCK_L // BLOCK_S * BLOCK_S", "block * BLOCK_L")), "visit some keys twice"),
            (kernel_with(("block * BLOCK_L // BLOCK_S * BLOCK_S", "block * BLOCK_S")), "visit some keys twice"),
            (kernel_with(("(block + 1) * BLOCK_L)", "block * BLOCK_L + 1)")), "not at the block's first query"),
            # with L > S the last blocks' loop runs on past S, over tiles with no key: the numbers stay right
            (kernel_with((key_end, "key_end = (block + 1) * BLOCK_L")),
             "on causal, 64 queries, 40 keys (L > S), but your kernel loaded 2 tiles of keys wholly past the last"),
            (kernel_with((key_end, "key_end = (block + 1) * BLOCK_L")),
             "stop it at the smaller of the two, key_end = tl.minimum(S, (block + 1) * BLOCK_L)"),
        ],
        mistakes=kernel_exercise.CAUSAL_MISTAKES,
        stubs=(kernel_with(("    if IS_CAUSAL:  # and every key", "    if IS_CAUSAL:\n"
                            "        raise NotImplementedError\n    if IS_CAUSAL:  # and every key")),),
        passed_says="in every case the future tiles skipped and only the edge tiles loaded with a mask",
    )
    return [attention, causal]


ROWS += kernel_rows()


# -- 00-13: answers a tester wrote without reading the checkers, each failing with its own hint (or passing) ---------
def _blind_rows() -> list[Exercise]:
    import numpy as np

    from attention_lib.exercises import (
        check_calculate_attention,
        check_induction_score,
        check_log_softmax,
        check_matchmaker,
        check_merge_heads,
        check_soft_lookup,
        check_split_heads,
        check_weights_no_loops,
    )

    ninf = float("-inf")

    def log_softmax(s, detach_lse=False, detach_max=False):
        shifted = s - (s.amax(-1, keepdim=True).detach() if detach_max else s.amax(-1, keepdim=True))
        lse = shifted.exp().sum(-1, keepdim=True).log()
        return shifted - (lse.detach() if detach_lse else lse)

    def attention(q, k, v, part=None):  # (N, L, E) and the rest, with one part cut off from autograd
        k, v = (k.detach() if part == "key" else k), (v.detach() if part == "value" else v)
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), -1)
        return (w.detach() if part == "weights" else w) @ v, w

    def online(m, s, o, sc, v, slip=None):
        new = torch.maximum(m, sc.amax(-1, keepdim=True))
        if slip == "nan_to_num":  # the forward pass is right, its backward holds NaN
            correction, w = torch.exp(m - new).nan_to_num(0.0), torch.exp(sc - new).nan_to_num(0.0)
        else:
            shift = new.masked_fill(new == ninf, 0.0)
            correction, w = torch.exp(m - shift), torch.exp(sc - shift)
            w = w.detach() if slip == "detach" else w
        new = new.clamp_min(-1e30) if slip == "clamp" else new
        return new, s * correction + w.sum(-1, keepdim=True), o * correction + w @ v

    def cross(q, s, n, slip=None):
        mask = padding_mask(n, s.size(-2))
        if slip == "-1e9":
            return calculate_attention(q, s, s, attn_mask=torch.zeros(mask.shape, dtype=q.dtype).masked_fill(~mask,
                                                                                                            -1e9))
        keys = s.detach() if slip == "detach" else s
        return calculate_attention(q, keys, keys, attn_mask=mask, is_causal=slip == "causal")

    def cosine(q, k, temperature=0.1, eps=0.0, ignore=False):
        q, k = q / (q.norm(dim=-1, keepdim=True) + eps), k / (k.norm(dim=-1, keepdim=True) + eps)
        return torch.softmax(q @ k.transpose(-2, -1) / (0.1 if ignore else temperature), -1)

    def lookup(q, k, v, dim=-1, squeeze=(-2,)):
        w = torch.softmax(q.unsqueeze(-2) @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim)
        return (w @ v).squeeze(*squeeze)

    def split(x, h):
        return x.reshape(*x.shape[:2], h, -1).permute(1, 2, 0, 3)

    def stripe(w, k, end=None):
        K = w.size(-1) // 2 if end == "half" else k
        return w[..., torch.arange(K, w.size(-1) if end == "L" else 2 * K),
                 torch.arange(1, (w.size(-1) - K if end == "L" else K) + 1)].mean(dim=(0, -1))

    def cosine_in_place(q, k, temperature=0.1):  # right numbers, but the caller's queries are normalised
        q.div_(q.norm(dim=-1, keepdim=True))
        return cosine(q, k, temperature)

    def split_in_place(x, h):  # (L, N, E): the caller's tensor comes back transposed
        x.transpose_(0, 1)
        return x.reshape(*x.shape[:2], h, -1).transpose(1, 2)

    def online_in_place(m, s, o, sc, v):  # right numbers, but the caller's running state is overwritten
        new = torch.maximum(m, sc.amax(-1, keepdim=True))
        shift = new.masked_fill(new == ninf, 0.0)
        correction, w = torch.exp(m - shift), torch.exp(sc - shift)
        s.mul_(correction).add_(w.sum(-1, keepdim=True))
        return new, s, o * correction + w @ v

    return [
        Exercise(check_log_softmax, correct=[lambda s: log_softmax(s, detach_max=True)], stubs=(),
                 wrong=[(lambda s: log_softmax(s, detach_lse=True), "the gradient with respect to `scores` differs")]),
        Exercise(check_calculate_attention, correct=[], stubs=(),
                 wrong=[(lambda q, k, v, part=part: (lambda o, w: (o.transpose(0, 1), w))(*attention(
                     q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), part)), f"with respect to `{said}`")
                        for part, said in (("key", "key"), ("value", "value"), ("weights", "query"))]),
        Exercise(check_online_softmax_update, correct=[online], stubs=(),
                 wrong=[(lambda *a: online(*a, slip="detach"), "detach nothing"),
                        (lambda *a: online(*a, slip="nan_to_num"), "the gradient with respect to `running_max` is NaN"),
                        (lambda *a: online(*a, slip="clamp"), "yours is -1e+30 and the reference's -inf"),
                        (online_in_place, "changed its input `running_sum` in place")]),
        Exercise(check_cross_attention, correct=[cross], stubs=(),
                 wrong=[(lambda q, s, n: cross(q, s, n, "detach"), "the gradient with respect to `sentences`"),
                        (lambda q, s, n: cross(q, s, n, "-1e9"), "-1e9 gives (lesson 08)")],
                 crashes=[(lambda q, s, n: cross(q, s, n, "causal"), "cross-attention has no causal mask")]),
        Exercise(check_weights_no_loops, correct=[cosine], stubs=(),
                 wrong=[(lambda q, k, temperature=0.1: cosine(q, k, ignore=True),
                         "it ignores its `temperature` argument"),
                        (lambda q, k: cosine(q, k, eps=1e-8), "a small constant added to a norm"),
                        (cosine_in_place, "changed its input `query` in place")],
                 passed_says="at the temperatures 0.1, 0.5 and 0.002"),
        Exercise(check_soft_lookup, correct=[lookup], stubs=(),
                 wrong=[(lambda q, k, v: lookup(q, k, v, squeeze=()), "drops every dimension of size 1"),
                        (lambda q, k, v: lookup(q, k, v, dim=0), "dim=0 runs over the first dimension")],
                 passed_says="one with a single reader, one with values of one feature"),
        Exercise(check_sinusoidal_encoding, correct=[], stubs=(),
                 wrong=[(lambda n, d: encoding_in_place(n, d).double(), "your table is float64")]),
        Exercise(check_split_heads, correct=[split], stubs=(), passed_says="the first again in float64",
                 wrong=[(lambda x, h: split(x.float(), h), "for float64 inputs your function returned float32"),
                        (split_in_place, "changed its input `x` in place")]),
        Exercise(check_merge_heads, correct=[], stubs=(),
                 wrong=[(lambda x: x.float().permute(2, 0, 1, 3).flatten(2), "your function returned float32")]),
        Exercise(check_scores_shape, correct=[], stubs=(),
                 wrong=[(lambda q, k: [*q[:-1], k[-2]], "your function returned a list"),
                        (lambda q, k: tuple(np.int64(x) for x in (*q[:-1], k[-2])), "not a Python int"),
                        (lambda q, k: (*torch.broadcast_shapes(q[:-2], k[:-2]), q[-2], k[-2]),
                         "your function called `torch.broadcast_shapes`")]),
        Exercise(check_matchmaker, stubs=(),
                 correct=[lambda q, k: torch.stack(torch.broadcast_tensors(q.unsqueeze(-2), k.unsqueeze(-3))).prod(0)
                          .sum(-1),
                          lambda q, k: torch.ops.aten.sum.dim_IntList(torch.ops.aten.mul(q.unsqueeze(-2),
                                                                                         k.unsqueeze(-3)), [-1])],
                 wrong=[(lambda q, k: torch.ops.aten.matmul(q, k.transpose(-2, -1)),
                         "your function called `torch.ops.aten.matmul`")]),
        Exercise(check_induction_score, correct=[stripe], stubs=(),
                 wrong=[(lambda w, k: stripe(w, k, "half"), "you took k as half the sequence"),
                        (lambda w, k: stripe(w, k, "L"), "you went to the end of the stripe")]),
    ]


ROWS += _blind_rows()


# -- 15: one decoding step with a cache, and what each cache bug does to the grammar ---------------------------------
def _generation_rows():
    import math

    from attention_lib.exercises import generation as generation_exercise
    from attention_lib.exercises.generation import check_bug_predictions, check_decoding_step

    def step(cache_k, cache_v, q, k, v):
        keys, values = torch.cat([cache_k, k], dim=-2), torch.cat([cache_v, v], dim=-2)
        return calculate_attention(q, keys, values)[0], keys, values

    def by_hand(cache_k, cache_v, q, k, v):
        keys, values = torch.cat((cache_k, k), 2), torch.cat((cache_v, v), 2)
        scores = (q @ keys.mT) / math.sqrt(q.shape[-1])
        return scores.softmax(-1) @ values, keys, values

    def features(cache_k, cache_v, q, k, v):  # appended along the features: the matmul cannot work
        keys, values = torch.cat([cache_k, k], dim=-1), torch.cat([cache_v, v], dim=-1)
        return calculate_attention(q, keys, values)[0], keys, values

    def causal(cache_k, cache_v, q, k, v):
        keys, values = torch.cat([cache_k, k], dim=-2), torch.cat([cache_v, v], dim=-2)
        return calculate_attention(q, keys, values, is_causal=True)[0], keys, values

    def output_only(cache_k, cache_v, q, k, v):
        return step(cache_k, cache_v, q, k, v)[0]

    def query_as_output(cache_k, cache_v, q, k, v):  # three things of the wrong shapes: a shape error, said as one
        return q, cache_k, cache_v

    def keys_not_kept_whole(cache_k, cache_v, q, k, v):
        out, keys, values = step(cache_k, cache_v, q, k, v)
        return out, keys[..., 1:, :], values

    def doubled(cache_k, cache_v, q, k, v):
        out, keys, values = step(cache_k, cache_v, q, k, v)
        return 2 * out, keys, values

    def zeroes_the_cache(cache_k, cache_v, q, k, v):  # right numbers, and the caller's cache wiped
        out, keys, values = step(cache_k, cache_v, q, k, v)
        cache_k.mul_(0)
        return out, keys, values

    def in_float64(cache_k, cache_v, q, k, v):
        return tuple(t.double() for t in step(cache_k, cache_v, q, k, v))

    def checkers_attend(cache_k, cache_v, q, k, v):  # the checker's own helper, imported: refused by name
        keys, values = torch.cat([cache_k, k], dim=-2), torch.cat([cache_v, v], dim=-2)
        return generation_exercise._attend(q, keys, values), keys, values

    gallery = {"no bug": {"well-formed": 1.0, "agreeing": 1.0}, "top-left mask while decoding": {"agreeing": 0.0},
               "top-left mask in a chunked prefill": {"agreeing": 0.3}, "no mask in the prefill": {"agreeing": 0.85},
               "positions not offset": {"agreeing": 0.43}, "positions one off": {"agreeing": 1.0}}
    right = {"top-left mask while decoding": "none", "top-left mask in a chunked prefill": "some",
             "no mask in the prefill": "most", "positions not offset": "some", "positions one off": "all"}

    def predict(predictions):
        return check_bug_predictions(predictions, gallery)

    predict.__name__ = "check_bug_predictions"
    mistakes = generation_exercise.MISTAKES
    return [
        Exercise(check_decoding_step, correct=[step, by_hand],
                 wrong=[*((fn, hint[:40]) for fn, hint in mistakes),
                        (causal, "that is the top-left causal mask"),
                        (output_only, "return three things, (output, keys, values)"),
                        (query_as_output, "the output has the wrong shape: expected (1, 2, 1, 3)"),
                        (keys_not_kept_whole, "the keys have the wrong shape: expected (1, 2, 5, 4)"),
                        (doubled, "every shape is right, but the output differs from the reference (largest"),
                        (zeroes_the_cache, "your function changed its input `cache_k` in place (*= or .mul_())"),
                        (in_float64, "for float32 inputs your result is float64"),
                        (checkers_attend, "your function called `attention_lib.exercises.generation._attend`")],
                 crashes=[(features, "")], mistakes=mistakes, passed_says="correct on 3"),
        Exercise(predict, correct=[right, {bug: word.capitalize() for bug, word in right.items()},
                                   {bug: f" {word.upper()} " for bug, word in right.items()}],
                 wrong=[({**right, "no mask in the prefill": "all"}, "4 of 5 right"),
                        ({**right, "positions not offset": "none"}, "measured 43% ('some')"),
                        ({**right, "top-left mask while decoding": "a few"}, "a prediction is one of"),
                        ({**right, "positions one off": "Most"}, "you said 'most', measured 100% ('all')"),
                        ({"positions not offset": "some"}, "predict every bug first")],
                 stubs=(None, {}, dict.fromkeys(right, ...)), not_attempted="no predictions yet"),
    ]


ROWS += _generation_rows()


# -- 12: remove_attractors(weights (N, L, S), verb (N,), attractors (N, S)) -> (N, L, S), predicted first -------------
def _remove_attractors_rows() -> list[Exercise]:
    from attention_lib.exercises.learning_to_attend import check_remove_attractors
    from attention_lib.interventions import remove_keys, zero_rows

    def verb_rows(w, v):
        return (torch.arange(w.shape[1]) == v[:, None])[..., None]

    def by_hand(w, v, a):
        kept = w.masked_fill(a[:, None], 0.0)
        return torch.where(verb_rows(w, v), kept / kept.sum(-1, keepdim=True), w)

    def with_a_loop(w, v, a):
        out = w.clone()
        for n in range(w.shape[0]):
            row = out[n, v[n]].masked_fill(a[n], 0.0)
            out[n, v[n]] = row / row.sum()
        return out

    def in_place(w, v, a):
        for n in range(w.shape[0]):
            row = w[n, v[n]]
            row[a[n]] = 0.0
            row /= row.sum()
        return w

    def function_checked(fn):  # with a prediction close to what the intervention measures
        return check_remove_attractors(fn, 0.95)

    function_checked.__name__ = "check_remove_attractors"

    def prediction_checked(prediction):  # with a right intervention
        return check_remove_attractors(by_hand, prediction)

    prediction_checked.__name__ = "check_remove_attractors_prediction"
    def every_verb_of_every_sentence(w, v, a):
        out = w.clone()
        rows = w[:, v].masked_fill(a[:, None], 0.0)  # (N, N, S): every sentence's verb row in every sentence
        out[:, v] = rows / rows.sum(-1, keepdim=True)
        return out

    def spread_evenly(w, v, a):
        kept = w.masked_fill(a[:, None], 0.0)
        share = (w - kept).sum(-1, keepdim=True) / (~a[:, None]).sum(-1, keepdim=True)
        return torch.where(verb_rows(w, v), kept + share * (~a[:, None]), w)

    def on_key_0(w, v, a):
        kept = w.masked_fill(a[:, None], 0.0)
        kept[..., 0] += (w - kept).sum(-1)
        return torch.where(verb_rows(w, v), kept, w)

    def rows_masked(w, v, a):  # attractors[:, :, None] lines them up with the queries
        kept = w.masked_fill(a[:, :, None], 0.0)
        return torch.where(verb_rows(w, v), kept / kept.sum(-1, keepdim=True), w)

    def over_dim_1(w, v, a):
        kept = w.masked_fill(a[:, None], 0.0)
        return torch.where(verb_rows(w, v), kept / kept.sum(1, keepdim=True), w)

    from attention_lib.exercises._removal import removal_mistakes

    return [
        Exercise(function_checked, correct=[by_hand, with_a_loop],
                 wrong=[(lambda w, v, a: torch.where(verb_rows(w, v), w.masked_fill(a[:, None], 0.0), w),
                         "no longer sums to 1"),
                        (lambda w, v, a: by_hand(w, torch.zeros_like(v), a), "values differ from the reference"),
                        (lambda w, v, a: remove_keys(w, rows=None, keys=a), "not allowed here"),
                        (lambda w, v, a: zero_rows(w, rows=v), "not allowed here"),
                        (lambda w, v, a: w.masked_fill(a[:, None], 0.0) / w.masked_fill(a[:, None], 0.0).sum(
                            -1, keepdim=True), "you changed every row"),
                        (lambda w, v, a: torch.where(verb_rows(w, v), 0.0, w), "you zeroed the whole verb row"),
                        (lambda w, v, a: by_hand(w, v, ~a), "you kept only the attractors"),
                        (lambda w, v, a: torch.where(verb_rows(w, v), w.masked_fill(a[:, None], float("-inf"))
                                                     .softmax(-1), w), "a softmax of weights"),
                        (lambda w, v, a: by_hand(w.transpose(1, 2), v, a).transpose(1, 2), "the verb's column"),
                        (lambda w, v, a: by_hand(w, v, a)[:, :, 1:], "expected shape"),
                        (in_place, "changed the weights it was given (in place)"),
                        (every_verb_of_every_sentence, "weights[:, verb] picks, in every sentence"),
                        (rows_masked, "attractors[:, :, None] is (N, S, 1)"),
                        (lambda w, v, a: by_hand(w, v - 1, a), "you changed the row before the verb"),
                        (over_dim_1, "you divided by the sums over dim 1"),
                        (spread_evenly, "you shared the removed weight out evenly"),
                        (on_key_0, "you put all the removed weight on key 0")],
                 crashes=[(lambda w, v, a: w @ a, "")],
                 mistakes=removal_mistakes(remove_keys),
                 passed_says="correct on 3 fixed test inputs (the first again in float64), and you predicted 0.95"),
        Exercise(prediction_checked, correct=[0.99, 1.0, torch.tensor(0.9)],
                 wrong=[(99, "a share, not a percentage"), ("most", "a share between 0 and 1")],
                 stubs=(..., None), not_attempted="predict first"),
        # A right function with an honest wrong prediction: the function passes, the prediction is said to be off.
        Exercise(prediction_checked, correct=[0.36, 0.5], wrong=[], stubs=(),
                 passed_says="your function is correct on 3 fixed test inputs (the first again in float64). 🔮 Your "
                             "prediction was off"),
    ]


ROWS += _remove_attractors_rows()


# -- 17: absorbed_scores(q_nope, q_rope, latent, k_rope, w_uk) -> (N, H, L, S); read_through_table(store, table,
# length) -> (Hkv, S, Dh); what each latent or paged bug does --------------------------------------------------------
def _latent_and_paged_rows() -> list[Exercise]:
    from attention_lib.exercises import latent_and_paged as lesson17
    from attention_lib.exercises.latent_and_paged.absorbed import MISTAKES as absorbed_mistakes

    def by_hand(store, table, length):
        B = store.shape[1]
        return torch.stack([store[table[p // B], p % B] for p in range(length)], dim=1)  # (Hkv, S, Dh)

    def through_python_numbers(store, table, length):  # the table as a list, as the package's cache keeps it
        B, blocks = store.shape[1], table.tolist()
        return torch.stack([store[blocks[p // B], p % B] for p in range(length)], dim=1)

    def through_the_package(store, table, length):
        from attention_lib.paged import read_blocks

        return read_blocks(store, table[None], length)[0]

    def whole_blocks(store, table, length):  # every slot of every block, the part-full last one too
        return store[table].flatten(0, 1).transpose(0, 1)

    def heads_last(store, table, length):
        return store[table].flatten(0, 1)[:length]

    def float_index(store, table, length):
        return store[table.float()]

    def block_size_guessed(store, table, length):  # right whenever length / blocks, rounded up, happens to be B
        B = -(-length // len(table))
        return torch.stack([store[table[p // B], p % B] for p in range(length)], dim=1)

    def one_short(store, table, length):
        return store[table].flatten(0, 1)[:length - 1].transpose(0, 1)

    def full_blocks_only(store, table, length):
        return store[table[:length // store.shape[1]]].flatten(0, 1).transpose(0, 1)

    def writes_into_the_store(store, table, length):  # the right keys, then a slot of the pool overwritten
        keys = store[table].flatten(0, 1)[:length].transpose(0, 1).clone()
        store[0] = 0.0
        return keys

    def writes_the_store(store, table, length):  # the right keys, then the pool overwritten
        keys = store[table].flatten(0, 1)[:length].transpose(0, 1).clone()
        store.zero_()
        return keys

    gallery = {"latent rotated, not the rotary key": {"right logits": 0.0},
               "block table off by one block": {"right logits": 0.0},
               "copy-on-write forgotten": {"right logits": 0.7}}
    right = {"latent rotated, not the rotary key": "none", "block table off by one block": "none",
             "copy-on-write forgotten": "most"}

    def predict(predictions):
        return lesson17.check_gallery_predictions(predictions, gallery)

    predict.__name__ = "check_gallery_predictions"
    def as_float32(store, table, length):  # every store of the lesson is float32; a pool may hold another dtype
        return store[table].flatten(0, 1)[:length].transpose(0, 1).float()

    def scales_the_table(store, table, length):  # the caller's table changed in place
        B = store.shape[1]
        rows = (table.mul_(B)[:, None] + torch.arange(B)).flatten()[:length]
        return store.flatten(0, 1)[rows].transpose(0, 1)

    def the_checkers_helper(store, table, length):
        from attention_lib.exercises.latent_and_paged import block_table

        return block_table._end_to_end(store, table, length)

    def block_size_from_heads(store, table, length):  # B read from store.shape[2], Hkv
        B, p = store.shape[2], torch.arange(length)
        return store[table[(p // B).clamp(max=len(table) - 1)], p % B].transpose(0, 1)

    kept = {}

    def remembers_by_shape(store, table, length):
        if store.shape not in kept:
            kept[store.shape] = store[table].flatten(0, 1)[:length].transpose(0, 1).clone()
        return kept[store.shape]

    def view_not_reshape(store, table, length):  # fails on a transposed store
        return store[table].view(-1, *store.shape[2:])[:length].transpose(0, 1)

    def scores(q_nope, q_rope, latent, k_rope, w_uk):  # (N, H, L, S)
        both = q_nope @ w_uk @ latent.transpose(-2, -1) + q_rope @ k_rope.transpose(-2, -1)
        return both / (q_nope.shape[-1] + q_rope.shape[-1]) ** 0.5

    def by_einsum(q_nope, q_rope, latent, k_rope, w_uk):
        folded = torch.einsum("nhld,hdr->nhlr", q_nope, w_uk)
        both = torch.einsum("nhlr,nxsr->nhls", folded, latent) + torch.einsum("nhld,nxsd->nhls", q_rope, k_rope)
        return both * (q_nope.shape[-1] + q_rope.shape[-1]) ** -0.5

    def side_by_side(q_nope, q_rope, latent, k_rope, w_uk):  # one key [c, k_rope], as the package reads the cache
        q = torch.cat([q_nope @ w_uk, q_rope], dim=-1)
        return q @ torch.cat([latent, k_rope], dim=-1).transpose(-2, -1) / (q_nope.shape[-1] + q_rope.shape[-1]) ** 0.5

    def w_uk_transposed(q_nope, q_rope, latent, k_rope, w_uk):
        return scores(q_nope, q_rope, latent, k_rope, w_uk.transpose(-2, -1))

    def expanded(q_nope, q_rope, latent, k_rope, w_uk):  # every head's keys rebuilt
        k_nope = latent @ w_uk.transpose(-2, -1)  # (N, H, S, Dn)
        both = q_nope @ k_nope.transpose(-2, -1) + q_rope @ k_rope.transpose(-2, -1)
        return both / (q_nope.shape[-1] + q_rope.shape[-1]) ** 0.5

    remembered = {}

    def remembers_scores(*args):
        if args[0].shape not in remembered:
            remembered[args[0].shape] = scores(*args)
        return remembered[args[0].shape]

    def divides_in_place(q_nope, q_rope, latent, k_rope, w_uk):
        q_nope /= (q_nope.shape[-1] + q_rope.shape[-1]) ** 0.5
        return q_nope @ w_uk @ latent.transpose(-2, -1) + q_rope @ k_rope.transpose(-2, -1) / (
            q_nope.shape[-1] + q_rope.shape[-1]) ** 0.5

    def doubled_rope(q_nope, q_rope, latent, k_rope, w_uk):
        return scores(q_nope, 2 * q_rope, latent, k_rope, w_uk)

    def through_sdpa(q_nope, q_rope, latent, k_rope, w_uk):
        return torch.nn.functional.scaled_dot_product_attention(q_nope, q_nope, q_nope)

    def scores_helper(*args):
        from attention_lib.exercises.latent_and_paged import absorbed

        return absorbed._reference(*args)

    def in_float32(*args):
        return scores(*args).float()

    def bfloat16_upcast(*args):  # right in float32 and float64, float32 out for bfloat16 in
        return scores(*(a.float() if a.dtype == torch.bfloat16 else a for a in args))

    return [
        Exercise(lesson17.check_absorbed_scores, correct=[scores, by_einsum, side_by_side],
                 wrong=[*((fn, hint[:40]) for fn, hint in absorbed_mistakes),
                        (w_uk_transposed, "You used it transposed"),
                        (expanded, "that is the expanded form"),
                        (remembers_scores, "the scores of an earlier input of the same shapes"),
                        (divides_in_place, "changed its input `q_nope` in place"),
                        (doubled_rope, "not quite (on a prefill of 4 queries over 7 tokens (N=2, H=3, L=4, S=7, "
                                       "r=24, Dn=12, Dr=6)). Hint: your scores are the folded part"),
                        (doubled_rope, "plus the rotary part (q_rope against k_rope) times 0.4714"),
                        (through_sdpa, "F.scaled_dot_product_attention"),
                        (scores_helper, "a helper of the checker itself"),
                        (in_float32, "for float64 inputs your function returned float32"),
                        (bfloat16_upcast, "for bfloat16 inputs your result is float32")],
                 mistakes=absorbed_mistakes,
                 passed_says="correct on 5 inputs where r, Dn and Dr differ, the first again in float64 and in "
                             "bfloat16"),
        Exercise(lesson17.check_read_through_table, correct=[by_hand, through_python_numbers],
                 wrong=[*((fn, hint[:40]) for fn, hint in lesson17.MISTAKES),
                        (whole_blocks, "keep the first length = 10 positions only"),
                        (heads_last, "transpose to (Hkv, S, Dh) at the end"),
                        (block_size_guessed, "read it from the store, B = store.shape[1]"),
                        (one_short, "you returned 9 positions, one short"),
                        (full_blocks_only, "you kept the 2 full blocks only: the last block is part-full"),
                        (writes_the_store, "your function called `.zero_()`"),
                        (writes_into_the_store, "changed its input `store` in place (x[...] = ...)"),
                        (through_the_package, "which reads the block table for you"),
                        (as_float32, "for float64 inputs your result is float32"),
                        (scales_the_table, "changed its input `table` in place"),
                        (the_checkers_helper, "a helper of the checker itself"),
                        (block_size_from_heads, "the store's Hkv (store.shape[2]): the block size is store.shape[1]"),
                        (remembers_by_shape, "the keys of an earlier input of the same shapes")],
                 crashes=[(float_index, ""), (view_not_reshape, "use .reshape")], mistakes=lesson17.MISTAKES,
                 passed_says="correct on 8 inputs"),
        Exercise(predict, correct=[right],
                 wrong=[({**right, "copy-on-write forgotten": "none"}, "2 of 3 right"),
                        ({**right, "block table off by one block": "a few"}, "a prediction is one of"),
                        ({**right, "block table off by one block": ["none"]}, "a prediction is one of"),
                        (["none", "none", "most"], "give the predictions as a dict"),
                        ({"copy-on-write forgotten": "most"}, "predict every bug first")],
                 stubs=(None, {}, dict.fromkeys(right, ...)), not_attempted="no predictions yet"),
    ]


ROWS += _latent_and_paged_rows()


# -- 16: the zigzag positions of ring attention, and the ring's bug gallery predicted --------------------------------
def _ring_rows():
    from attention_lib.exercises import ring_attention as ring_exercise
    from attention_lib.exercises.ring_attention import check_ring_bug_predictions, check_zigzag_positions
    from attention_lib.ring_attention import chunk_positions

    def zigzag(n, world, rank):
        c = n // (2 * world)
        return torch.cat([torch.arange(rank * c, (rank + 1) * c), torch.arange((2 * world - 1 - rank) * c,
                                                                               (2 * world - rank) * c)])

    def by_chunks(n, world, rank):
        chunks = torch.arange(n).reshape(2 * world, -1)  # (2P, c): row i is chunk i
        return chunks[[rank, 2 * world - 1 - rank]].flatten()

    measured = {"forgets to rescale": [1, 2, 3], "skips the last hop": [3], "masks with local positions": [0, 1, 2, 3]}

    def predict(predictions):
        return check_ring_bug_predictions(predictions, measured)

    predict.__name__ = "check_ring_bug_predictions"
    return [
        Exercise(check_zigzag_positions, correct=[zigzag, by_chunks],
                 wrong=[*((fn, hint[:40]) for fn, hint in ring_exercise.MISTAKES),
                        (lambda n, world, rank: chunk_positions(n, world, rank, "zigzag"), "your function called"),
                        (lambda n, world, rank: zigzag(n, world, rank)[:-1], "rank r holds n // world positions"),
                        (lambda n, world, rank: zigzag(n, world, rank).tolist(), "stay in PyTorch"),
                        (lambda n, world, rank: zigzag(n, world, rank).double(), "return torch.int64"),
                        (lambda n, world, rank: zigzag(n, world, rank).int(), "of dtype torch.int32"),
                        (lambda n, world, rank: {(16, 4, 1): zigzag(16, 4, 1), (24, 3, 2): zigzag(24, 3, 2),
                                                 (8, 2, 0): zigzag(8, 2, 0)}.get((n, world, rank), zigzag(n, 1, 0)),
                         "expected shape"),
                        (ring_exercise.zigzag._negative_slice, "rank 0's slice ends at -0, which is 0"),
                        (lambda n, world, rank: torch.cat([torch.arange(n).chunk(2 * world)[rank],
                                                           torch.arange(n).chunk(2 * world)[-rank]]),
                         "chunks[-r] is chunk 2 * world - r, one too far"),
                        (lambda n, world, rank, seen={}: seen.setdefault((n, world), zigzag(n, world, rank)),
                         "First wrong for n = 16, world = 4, rank = 2"),
                        (lambda n, world, rank: zigzag(n, world, rank)[torch.tensor([1, 0, *range(2, n // world)])],
                         "First wrong for n = 16, world = 4, rank = 1")],
                 crashes=[(lambda n, world, rank: torch.arange(n)[rank.start], "")],
                 mistakes=ring_exercise.MISTAKES, passed_says="and for one more ring the checker drew"),
        Exercise(predict, correct=[measured, {bug: list(reversed(r)) for bug, r in measured.items()}],
                 wrong=[({**measured, "skips the last hop": []}, "2 of 3 right"),
                        ({**measured, "forgets to rescale": [0, 1, 2, 3]}, "the ring measured [1, 2, 3]"),
                        ({**measured, "skips the last hop": "3"}, "a prediction is a list of ranks 0-3"),
                        ({**measured, "forgets to rescale": [True, 2, 3]}, "ints, not True/False"),
                        ({**measured, "skips the last hop": [3, 3]}, "you listed a rank twice")],
                 stubs=(None, {}, dict.fromkeys(measured, ...)), not_attempted="no predictions yet"),
    ]


ROWS += _ring_rows()


# -- 18: the residual distribution of speculative sampling, and the greedy loop's bug gallery --------------------------
def _speculative_decoding_rows() -> list[Exercise]:
    from attention_lib.exercises import speculative_decoding as lesson18
    from attention_lib.speculative import output_distribution, residual_distribution

    def residual(p, q):
        shortfall = (p - q).clamp(min=0)
        return shortfall / shortfall.sum(dim=-1, keepdim=True)

    def with_relu(p, q):
        return torch.relu(p - q) / torch.relu(p - q).sum(dim=-1, keepdim=True)

    def with_where(p, q):
        shortfall = torch.where(p > q, p - q, torch.zeros_like(p))
        return shortfall / shortfall.sum(-1, keepdim=True)

    def in_place(p, q):
        p.sub_(q).clamp_(min=0)
        return p / p.sum(-1, keepdim=True)

    def to_float32(p, q):
        return residual(p, q).float()

    gallery = {"no bug": {"same text": 1.0}, "draft cache not rolled back": {"same text": 1.0},
               "bonus token forgotten": {"same text": 1.0}, "top-left mask in the verify pass": {"same text": 0.0}}
    right = {"draft cache not rolled back": "all", "bonus token forgotten": "all",
             "top-left mask in the verify pass": "none"}

    def predict(predictions):
        return lesson18.check_gallery_predictions(predictions, gallery)

    predict.__name__ = "check_gallery_predictions"
    return [
        Exercise(lesson18.check_residual, correct=[residual, with_relu, with_where],
                 wrong=[*((fn, hint[:40]) for fn, hint in lesson18.MISTAKES),
                        (residual_distribution, "which computes it for you"),
                        (output_distribution, "your function called `output_distribution`"),
                        (in_place, "changed its input `p` in place"),
                        (to_float32, "for float64 inputs your function returned float32"),
                        (lambda p, q: residual(p, q)[:1], "(rows, vocab)")],
                 mistakes=lesson18.MISTAKES, passed_says="the first again in float64"),
        Exercise(predict, correct=[right],
                 wrong=[({**right, "bonus token forgotten": "most"}, "2 of 3 right"),
                        ({**right, "bonus token forgotten": "half"}, "a prediction is one of"),
                        (["all", "all", "none"], "give the predictions as a dict"),
                        ({"bonus token forgotten": "all"}, "predict every bug first")],
                 stubs=(None, {}, dict.fromkeys(right, ...)), not_attempted="no predictions yet"),
    ]


ROWS += _speculative_decoding_rows()


# -- 19: one step of the gated delta rule, and which task linear attention loses -----------------------------------
def _linear_attention_rows() -> list[Exercise]:
    from attention_lib import recurrent_gated_delta_rule
    from attention_lib.exercises import linear_attention as lesson19

    def step(state, q, k, v, g, beta):
        state = state * g.exp()[..., None, None]
        stored = (k.unsqueeze(-2) @ state).squeeze(-2)
        state = state + k.unsqueeze(-1) * (beta[..., None] * (v - stored)).unsqueeze(-2)
        return (q.unsqueeze(-2) @ state).squeeze(-2), state

    def with_einsum(state, q, k, v, g, beta):
        state = state * torch.exp(g)[..., None, None]
        stored = torch.einsum("nhk,nhkv->nhv", k, state)
        state = state + torch.einsum("nhk,nhv->nhkv", k, beta[..., None] * (v - stored))
        return torch.einsum("nhk,nhkv->nhv", q, state), state

    def in_place(state, q, k, v, g, beta):
        state.mul_(g.exp()[..., None, None])
        return step(state, q, k, v, torch.zeros_like(g), beta)

    def transposed_state(*args):
        out, state = step(*args)
        return out, state.transpose(-2, -1)

    def to_float32(*args):
        return tuple(x.float() for x in step(*args))

    def head_by_head(state, q, k, v, g, beta):
        outs, states = [], []
        for h in range(g.shape[1]):
            out, new = step(state[:, h:h + 1], q[:, h:h + 1], k[:, h:h + 1], v[:, h:h + 1], g[:, h:h + 1],
                            beta[:, h:h + 1])
            outs.append(out)
            states.append(new)
        return torch.cat(outs, dim=1), torch.cat(states, dim=1)

    def beta_capped(state, q, k, v, g, beta):
        return step(state, q, k, v, g, beta.clamp(max=0.95))

    def normalised_key(state, q, k, v, g, beta):
        return step(state, q, k / k.norm(dim=-1, keepdim=True), v, g, beta)

    def with_the_library(state, q, k, v, g, beta):
        out, new = recurrent_gated_delta_rule(q[..., None, :], k[..., None, :], v[..., None, :], g[..., None],
                                              beta[..., None], initial_state=state, scale=1.0)
        return out[..., 0, :], new

    losses = {"agreement": False, "copying": True}

    def predict(prediction):
        return lesson19.check_which_task(prediction, losses)

    predict.__name__ = "check_which_task"
    return [
        Exercise(lesson19.check_gated_delta_step, correct=[step, with_einsum],
                 wrong=[*((fn, hint[:40]) for fn, hint in lesson19.MISTAKES),
                        (in_place, "changed its input `state` in place"),
                        (transposed_state, "The state is (Dk, Dv) per head"),
                        (to_float32, "for float64 inputs your function returned float32"),
                        (with_the_library, "your function called `al.recurrent_gated_delta_rule`"),
                        (recurrent_gated_delta_rule, "is the package's answer"),
                        (lambda *args: step(*args)[0], "return two things, (output, new_state)"),
                        (head_by_head, "it loops over the texts or heads"),
                        (beta_capped, "differs from the reference"),
                        (normalised_key, "the step uses k as it comes, without normalising it")],
                 mistakes=lesson19.MISTAKES, passed_says="the first again in float64"),
        Exercise(predict, correct=["copying", " Copying "],
                 wrong=[("agreement", "the measurement says 'copying'"), ("both", "you said 'both'"),
                        ("linear", "a prediction is one of"), (3, "a prediction is one of")],
                 stubs=(None, ...), not_attempted="no prediction yet"),
    ]


ROWS += _linear_attention_rows()


# -- 20: document_window(document_id, window) -> mask_mod ----------------------------------------------------------
def _flex_attention_rows() -> list[Exercise]:
    from torch.nn.attention.flex_attention import and_masks

    from attention_lib.exercises import flex_attention as lesson20
    from attention_lib.flex import causal_mod, document_mod, sliding_window_mod

    def rule(keep):
        """A learner's answer from ``keep(document_id, window, q_idx, kv_idx)``."""
        return lambda d, w: (lambda b, h, q_idx, kv_idx: keep(d, w, q_idx, kv_idx))

    def same(d, q, kv):
        return d[q] == d[kv]

    right = rule(lambda d, w, q, kv: same(d, q, kv) & (q - kv >= 0) & (q - kv < w))
    with_where = rule(lambda d, w, q, kv: torch.where(same(d, q, kv), (kv <= q) & (kv > q - w), False))

    def composed(d, w):
        return and_masks(causal_mod, document_mod(d), sliding_window_mod(w))

    def stub_inside(d, w):
        def mask_mod(b, h, q_idx, kv_idx):
            raise NotImplementedError

        return mask_mod

    notebook_ids = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2])  # the lesson's own packing, not the checker's

    def notebooks_ids(d, w):
        return lambda b, h, q, kv: (notebook_ids[q] == notebook_ids[kv]) & (q >= kv) & (q - kv < w)

    def with_if(d, w):
        def mask_mod(b, h, q_idx, kv_idx):
            if q_idx >= kv_idx:
                return same(d, q_idx, kv_idx)
            return False

        return mask_mod

    return [Exercise(
        lesson20.check_document_window, correct=[right, with_where, composed],
        wrong=[(rule(lambda d, w, q, kv: same(d, q, kv) & (q >= kv) & (q - kv <= w)), "one key too many"),
               (rule(lambda d, w, q, kv: same(d, q, kv) & (q >= kv) & (q - kv < w - 1)), "one key too few"),
               (rule(lambda d, w, q, kv: same(d, kv, q) & (kv >= q) & (kv - q < w)), "q_idx and kv_idx are swapped"),
               (rule(lambda d, w, q, kv: (q >= kv) & (q - kv < w)), "documents leak across their boundary"),
               (rule(lambda d, w, q, kv: (d[kv] <= d[q]) & (q >= kv) & (q - kv < w)), "documents leak"),
               (rule(lambda d, w, q, kv: same(d, q, kv) & ((q - kv).abs() < w)), "your window reaches both ways"),
               (rule(lambda d, w, q, kv: same(d, q, kv) & (q >= kv)), "with no window"),
               (rule(lambda d, w, q, kv: ~(same(d, q, kv) & (q >= kv) & (q - kv < w))), "True and False are swapped"),
               (rule(lambda d, w, q, kv: same(d, q, kv) & (q - kv > 0) & (q - kv <= w)), "counts the query itself"),
               (rule(lambda d, w, q, kv: (same(d, q, kv) & (q >= kv) & (q - kv < w)).int()), "not .int() or .float()"),
               (rule(lambda d, w, q, kv: same(d, q, kv) & (q >= kv) & (q - kv < min(w, 4))),
                "inputs of shape (16,), 6"),  # a window capped at the small windows' size
               (lambda d, w: torch.ones(len(d), len(d), dtype=torch.bool), "return the mask_mod itself")],
        mistakes=lesson20.MISTAKES,
        crashes=[(with_if, "never with if"), (notebooks_ids, "index the `document_id` your function is given")],
        stubs=(stub, lambda *args: None, stub_inside),
        passed_says="five packings of documents")]


ROWS += _flex_attention_rows()
