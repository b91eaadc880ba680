"""The typical slips of lesson 12's third exercise, ``remove_attractors(weights, verb, attractors)``, each with its
hint, and what the exercise may use; the checker is
:func:`~attention_lib.exercises.learning_to_attend.check_remove_attractors`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ._allowed import CREATION, ELEMENTWISE, LAYOUT, METADATA, PRODUCTS, REDUCTIONS, SOFTMAX, Allowed

#: Tensor operations, and none of the package's functions: `remove_keys` is the answer itself.
REMOVAL_ALLOWED = Allowed(METADATA | LAYOUT | CREATION | ELEMENTWISE | REDUCTIONS | PRODUCTS | SOFTMAX | {"one_hot"},
                           said="tensor operations (indexing, masked_fill, where, sums)",
                           library_hint="write it yourself: your function called {call}, the package's answer.",
                           own_helpers=False)


def _verb_rows(w: torch.Tensor, verb: torch.Tensor) -> torch.Tensor:
    """``(N, L, 1)``: True on each sentence's verb row."""
    return (torch.arange(w.shape[1]) == verb[:, None])[..., None]


def removal_mistakes(remove_keys: Callable) -> list[tuple[Callable, str]]:
    """The typical slips of the removal, each with its hint."""
    def renormalised(kept, dim=-1):
        return kept / kept.sum(dim, keepdim=True)

    def on_verb_row(w, v, new):
        return torch.where(_verb_rows(w, v), new, w)

    def every_verb_of_every_sentence(w, v, a):  # out[:, v] = ...: w[:, v] is (N, N, S)
        out = w.clone()
        out[:, v] = renormalised(w[:, v].masked_fill(a[:, None], 0.0))
        return out

    def spread_evenly(w, v, a):
        kept = w.masked_fill(a[:, None], 0.0)
        removed = (w - kept).sum(-1, keepdim=True)
        others = (~a[:, None]).sum(-1, keepdim=True)
        return on_verb_row(w, v, kept + removed / others * (~a[:, None]))

    def on_key_0(w, v, a):
        kept = w.masked_fill(a[:, None], 0.0)
        first = torch.zeros_like(w)
        first[..., 0] = 1.0
        return on_verb_row(w, v, kept + (w - kept).sum(-1, keepdim=True) * first)

    keep = lambda w, a: w.masked_fill(a[:, None], 0.0)  # noqa: E731 - the keys taken out of every row
    return [
        (lambda w, v, a: on_verb_row(w, v, w.masked_fill(a[:, None], 0.0)),
         "the verb row no longer sums to 1: after taking the attractors' weight away, divide the row by what is "
         "left, row / row.sum(-1, keepdim=True), so the weight it took from them goes to the other keys."),
        (lambda w, v, a: remove_keys(w, rows=None, keys=a), "you changed every row; only the verb's row is read "
                                                            "for the answer, so change only weights[n, verb[n]]."),
        (lambda w, v, a: remove_keys(w, rows=v, keys=~a), "you kept only the attractors: `attractors` is True on "
                                                          "the keys to remove, so mask where it is True."),
        (lambda w, v, a: torch.where(_verb_rows(w, v), 0.0, w), "you zeroed the whole verb row; keep its weight on "
                                                                "the other keys, renormalised."),
        (lambda w, v, a: on_verb_row(w, v, w.masked_fill(a[:, None], float("-inf")).softmax(-1)),
         "a softmax of weights is not a renormalisation: the weights are already percentages, so divide the kept "
         "ones by their sum instead of taking exp again."),
        (lambda w, v, a: remove_keys(w.transpose(1, 2), rows=v, keys=a).transpose(1, 2),
         "you changed the verb's column (what others take from the verb); a row is a query: weights[n, verb[n], :]."),
        (every_verb_of_every_sentence,
         "weights[:, verb] picks, in every sentence, the rows at every sentence's verb position ((N, N, S)), so "
         "each sentence's row at another sentence's verb changed too. Pair each sentence with its own verb: "
         "weights[torch.arange(N), verb] is (N, S), or mark the rows with torch.arange(L) == verb[:, None]."),
        (lambda w, v, a: on_verb_row(w, v, renormalised(w.masked_fill(a[:, :, None], 0.0))),
         "attractors[:, :, None] is (N, S, 1): it lines the attractors up with the rows (the queries), so it blanks "
         "whole rows, not keys. The attractors are keys, the columns: attractors[:, None, :] is (N, 1, S)."),
        (lambda w, v, a: on_verb_row(w, v - 1, renormalised(keep(w, a))),
         "you changed the row before the verb: verb[n] is the verb's own position (counting from 0), so its row is "
         "weights[n, verb[n]], with no - 1."),
        (lambda w, v, a: on_verb_row(w, v, keep(w, a) / keep(w, a).sum(1, keepdim=True)),
         "you divided by the sums over dim 1, the queries (each column's sum): a row's weights are spread over the "
         "keys, the last dimension, so divide the kept weights by their row's sum, .sum(-1, keepdim=True)."),
        (spread_evenly,
         "you shared the removed weight out evenly over the other keys; renormalising gives each of them a share "
         "in proportion to the weight it already had: divide the kept row by its sum, row / row.sum(-1, "
         "keepdim=True)."),
        (on_key_0,
         "you put all the removed weight on key 0; renormalising gives each kept key a share in proportion to the "
         "weight it already had: divide the kept row by its sum, row / row.sum(-1, keepdim=True)."),
    ]
