"""Checkers for ``notebooks/13_induction_heads.ipynb``: write the previous-token score and the induction score,
and predict where the trained induction head looks before looking.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..attention_only import induction_score, previous_token_score
from ._allowed import PLAIN, PRODUCTS, Allowed
from ._checker import CheckResult, check_function
from ._compare import whole_number
from ._running import run_learner


def _causal_weights(seed: int, L: int) -> torch.Tensor:
    """Random causal attention weights ``(N, H, L, L)``: each row a softmax over keys ``0..i``."""
    g = torch.Generator().manual_seed(1300 + seed)
    N, H = int(torch.randint(2, 5, (1,), generator=g)), int(torch.randint(1, 4, (1,), generator=g))
    scores = torch.randn(N, H, L, L, generator=g) * 2
    allowed = torch.ones(L, L, dtype=torch.bool).tril()  # True = may attend
    return torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)


def _weights(seed: int) -> tuple[torch.Tensor]:
    return (_causal_weights(seed, 5 + seed),)


#: What the checkers' fixed inputs are, for their messages.
PREVIOUS_INPUTS = "three fixed causal maps of 5, 6 and 7 positions, with 1 to 3 heads, the first again in float64"
INDUCTION_INPUTS = ("three fixed causal maps, k = 3, 4 and 5 in sequences of 8, 11 and 14 positions, the first again "
                    "in float64")
#: Tensor operations (torch.diagonal, indexing, mean, ...); the package's own scores are the answer itself.
ALLOWED = Allowed(PLAIN | PRODUCTS, said="tensor operations (torch.diagonal, indexing, mean, ...)",
                  library_hint="write it with tensor operations (torch.diagonal, indexing, mean); your function called "
                               "the package's {call}, which is the answer itself.", own_helpers=False)
#: A score that counts strongest keys instead of averaging weights.
ARGMAX_HINT = ("your function used argmax, which counts how often a key is a query's strongest; the score is the "
               "mean weight the queries put on that key.")
#: Why a score is NaN: the mean of no numbers, from a diagonal that lies outside the checker's short maps.
EMPTY_DIAGONAL_HINT = ("your result is NaN, the mean of no numbers: the diagonal you took is empty on these maps "
                       "({inputs}). A diagonal with offset -d exists only when a map has more than d positions; the "
                       "previous token of query i is key i - 1, one step below the main diagonal: offset=-1.")


def _weights_and_k(seed: int) -> tuple[torch.Tensor, int]:
    k = 3 + seed
    return _causal_weights(seed, 2 * k + 2 + seed), k


#: The hint for ``diagonal(offset=+1)``, which is also what ``diagonal(offset=-1)`` with the dims swapped gives.
ABOVE_THE_DIAGONAL = ("offset=+1 is above the diagonal, key i + 1, the next token, which the causal mask hides (every "
                      "weight there is 0); the previous token is below it: offset=-1.")
SWAPPED_DIMS = ("dim1=-1, dim2=-2 swaps the rows and the columns, and with them the sign of the offset: offset=-1 "
                "then takes the stripe above the diagonal, key i + 1, which the causal mask hides (every weight there "
                "is 0). Keep dim1=-2 (the queries, rows) and dim2=-1 (the keys, columns): diagonal(offset=-1, "
                "dim1=-2, dim2=-1).")


def _dims_swapped(run) -> bool:
    """Whether a run called ``diagonal`` with ``dim1`` after ``dim2`` (counted on 4-D weights)."""
    for args, kwargs in run.arguments.get("diagonal", []):
        named = dict(zip(("offset", "dim1", "dim2"), args, strict=False)) | kwargs  # the tensor itself is not recorded
        dim1, dim2 = named.get("dim1", 0), named.get("dim2", 1)
        if isinstance(dim1, int) and isinstance(dim2, int) and dim1 % 4 > dim2 % 4:
            return True
    return False


#: Typical wrong previous-token scores and their hints (also used by the tests).
PREVIOUS_MISTAKES = [
    (lambda w: w.diagonal(dim1=-2, dim2=-1).mean(dim=(0, -1)), "that is the diagonal, each position on itself; "
     "the previous token is one column to the left: diagonal(offset=-1, dim1=-2, dim2=-1)."),
    (lambda w: w.diagonal(offset=-1, dim1=-2, dim2=-1).sum(dim=(0, -1)) / (w.shape[0] * w.shape[-1]),
     "you divided by L, but only L - 1 queries have a previous token (query 0 has none): take the mean over them."),
    (lambda w: w.diagonal(offset=-1, dim1=-2, dim2=-1).sum(dim=(0, -1)), "that is a sum; the score is a mean, "
     "between 0 and 1."),
    (lambda w: w[:, :, 1:, 0].mean(dim=(0, -1)), "that is the weight on the first position, not on the previous one."),
    (lambda w: w.diagonal(offset=1, dim1=-2, dim2=-1).mean(dim=(0, -1)), ABOVE_THE_DIAGONAL),
    (lambda w: w.tril(-1).sum(dim=-1)[..., 1:].mean(dim=(0, -1)), "that is every weight below the diagonal, on all "
     "the earlier keys; the previous-token score takes only key i - 1, the stripe just below it: "
     "diagonal(offset=-1, dim1=-2, dim2=-1)."),
    (lambda w: w.diagonal(offset=-1, dim1=-2, dim2=-1).amax(dim=(0, -1)), "that is the largest weight on the "
     "previous token, one query's; the score is the mean weight over every query that has one (and every sequence)."),
    (lambda w: (w.argmax(-1) == torch.arange(w.shape[-1]) - 1)[..., 1:].float().mean(dim=(0, -1)),
     "that is how often the previous position is a query's strongest key; the score is the mean weight the "
     "queries put on it."),
]

#: Typical wrong induction scores and their hints (also used by the tests).
INDUCTION_MISTAKES = [
    (lambda w, k: w.diagonal(offset=-k, dim1=-2, dim2=-1)[..., :k].mean(dim=(0, -1)),
     "that is the earlier copy of the current token itself (position i - k); an induction head looks one step "
     "after it, at i - k + 1."),
    (lambda w, k: w.diagonal(offset=-(k - 1), dim1=-2, dim2=-1).mean(dim=(0, -1)), "only the queries of the copy "
     "count, positions k to 2k - 1; you averaged the stripe over the whole sequence."),
    (lambda w, k: w.diagonal(offset=-(k - 1), dim1=-2, dim2=-1)[..., :k].mean(dim=(0, -1)), "the queries of the "
     "copy start at position k: the stripe i - k + 1 starts at row k - 1, so skip its first entry."),
    (lambda w, k: w.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=(0, -1)), "that is the previous-token score."),
    (lambda w, k: w.diagonal(offset=-(k - 1), dim1=-2, dim2=-1)[..., 1:k + 1].amax(dim=(0, -1)), "that is the "
     "largest weight on the stripe, one query's; the score is the mean weight of the k queries of the copy (over "
     "every sequence)."),
    (lambda w, k: w.diagonal(offset=-(k - 1), dim1=-2, dim2=-1)[..., 1:k + 1].sum(dim=(0, -1)) / k, "you divided "
     "the sum by k alone, but it runs over every sequence too: take the mean over both, .mean(dim=(0, -1)) (the "
     "sum divided by N * k)."),
    (lambda w, k: w.diagonal(offset=-(k - 1), dim1=-2, dim2=-1)[..., 1:k].mean(dim=(0, -1)), "the score counts all k "
     "queries of the copy, k to 2k - 1: the last one too, although the token after it is random."),
    (lambda w, k: w.diagonal(offset=-(k - 1), dim1=-2, dim2=-1)[..., 1:].mean(dim=(0, -1)), "you went to the end of "
     "the stripe: only the k queries of the copy count, positions k to 2k - 1, and the sequence goes on after the "
     "copy. Stop there: [..., 1:k + 1]."),
    (lambda w, k: (lambda K: w[..., torch.arange(K, 2 * K), torch.arange(1, K + 1)].mean(dim=(0, -1)))(w.size(-1) // 2),
     "you took k as half the sequence, L // 2, but the sequences are longer than the two copies (tokens follow the "
     "copy): use the k the function is given, the length of the repeated block."),
]


def _stripe(got, weights: torch.Tensor) -> tuple[int, int, int, str] | None:
    """``(offset, first query, last query, how)`` when ``got`` is the mean (or the sum, the largest, the first
    sequence's mean) of the weights those queries ``i`` put on key ``i + offset``, head by head; else ``None``.
    Offsets nearest the diagonal first."""
    if not isinstance(got, torch.Tensor) or got.shape != weights.shape[1:2] or not got.is_floating_point():
        return None
    L, got = weights.shape[-1], got.detach().to(weights.dtype)
    for offset in sorted(range(1 - L, L), key=lambda d: (abs(d), d > 0)):
        stripe = weights.diagonal(offset=offset, dim1=-2, dim2=-1)  # (N, H, L - |offset|): query j - min(offset, 0)
        n = stripe.shape[-1]
        for length in range(n, 0, -1):
            for start in range(n - length + 1):
                part = stripe[..., start:start + length]
                for how, value in (("mean", part.mean(dim=(0, -1))), ("sum", part.sum(dim=(0, -1))),
                                   ("largest", part.amax(dim=-1).mean(dim=0)), ("largest", part.amax(dim=(0, -1))),
                                   ("first sequence's mean", part[0].mean(dim=-1))):
                    if torch.allclose(got, value, atol=1e-5, rtol=1e-4):
                        first = start - min(offset, 0)
                        return offset, first, first + length - 1, how
    return None


def _stripe_said(got, weights: torch.Tensor, right: str) -> str | None:
    """A hint naming the stripe of ``weights`` whose mean (or sum) ``got`` is, beside the ``right`` one."""
    found = _stripe(got, weights)
    if found is None:
        return None
    offset, first, last, how = found
    key = "i" if offset == 0 else f"i {'+' if offset > 0 else '-'} {abs(offset)}"
    where = " (the future, which the causal mask hides: every weight there is 0)" if offset > 0 else ""
    over = {"largest": " (the largest of them, not their mean)", "first sequence's mean": " in the first sequence "
            "alone"}.get(how, ", over every sequence")
    said = (f"your score is the {how.split()[-1]} of the weights queries {first} to {last} put on key {key}{where}"
            f"{over}; the score is the mean of the weights {right}, over every sequence.")
    return f"not quite (on maps of {weights.shape[-1]} positions). Hint: {said[0].upper()}{said[1:]}"


def _with_inputs(result: CheckResult, inputs: str) -> CheckResult:
    """Say what the checker's inputs are when it passes (they are fixed, not random)."""
    if not result.passed:
        return result
    name = result.message.removeprefix("✅ ").split(":")[0]
    return CheckResult("passed", f"✅ {name}: correct on {inputs}. Well done!")


def check_previous_token_score(fn: Callable[[torch.Tensor], torch.Tensor]) -> CheckResult:
    """Check ``fn(weights)``: ``weights (N, H, L, L)`` -> ``(H,)``, each head's mean weight on the previous position.

    Built step by step in ``notebooks/13_induction_heads.ipynb``; the reference is
    :func:`attention_lib.attention_only.previous_token_score`, which the learner's function may not call.

    Example:
        >>> check_previous_token_score(lambda w: w.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=(0, -1))).status
        'passed'
        >>> check_previous_token_score(previous_token_score).message[:52]
        '❌ the previous-token score: not allowed here. Hint: '
        >>> check_previous_token_score(lambda w: w.diagonal(dim1=-2, dim2=-1).mean(dim=(0, -1))).message[:44]
        '❌ the previous-token score: not quite. Hint:'
    """
    name = "the previous-token score"
    first = run_learner(fn, _weights(0), ALLOWED)
    got = first.result
    if (first.error is None and first.refused is None and "diagonal" in first.ops and isinstance(got, torch.Tensor)
            and got.is_floating_point() and bool(got.isnan().any())):
        hint = EMPTY_DIAGONAL_HINT.format(inputs=PREVIOUS_INPUTS)
        return CheckResult("failed", f"❌ {name}: not quite. Hint: {hint}")
    result = check_function(fn, previous_token_score, _weights, name=name, mistakes=PREVIOUS_MISTAKES,
                            allowed=ALLOWED, clues={"argmax": ARGMAX_HINT}, keep_inputs=True, float64=True,
                            explain=lambda got, expected, args: _stripe_said(
                                got, args[0], f"queries 1 to {args[0].shape[-1] - 1} (every query with a previous "
                                              f"token) put on key i - 1"),
                            shape_hint="one score per head: average over the sequences (dim 0) and the queries.")
    if ABOVE_THE_DIAGONAL in result.message and _dims_swapped(first):
        return CheckResult("failed", result.message.replace(ABOVE_THE_DIAGONAL, SWAPPED_DIMS))
    return _with_inputs(result, PREVIOUS_INPUTS)


def check_induction_score(fn: Callable[[torch.Tensor, int], torch.Tensor]) -> CheckResult:
    """Check ``fn(weights, k)``: ``weights (N, H, L, L)`` of sequences whose first ``k`` tokens are repeated at
    ``k..2k-1`` -> ``(H,)``, the mean weight of queries ``k..2k-1`` on position ``i - k + 1``.

    Built step by step in ``notebooks/13_induction_heads.ipynb``; the reference is
    :func:`attention_lib.attention_only.induction_score`, which the learner's function may not call.

    Example:
        >>> def stripe(w, k):
        ...     return w.diagonal(offset=-(k - 1), dim1=-2, dim2=-1)[..., 1:k + 1].mean(dim=(0, -1))
        >>> check_induction_score(stripe).status
        'passed'
        >>> check_induction_score(induction_score).status
        'failed'
    """
    def explain(got, expected, args):
        weights, k = args
        return _stripe_said(got, weights, f"the queries of the copy, {k} to {2 * k - 1} (k to 2k - 1, k = {k}), put "
                                          f"on key i - {k - 1} (i - k + 1: the token after the earlier copy)")

    return _with_inputs(check_function(fn, induction_score, _weights_and_k, name="the induction score",
                                       mistakes=INDUCTION_MISTAKES, allowed=ALLOWED, clues={"argmax": ARGMAX_HINT},
                                       keep_inputs=True, explain=explain, float64=True,
                                       shape_hint="one score per head: average over the sequences and the k "
                                       "queries of the copy."), INDUCTION_INPUTS)


def _strongest_key(text: str, position: int, layer: int, head: int, model) -> tuple[int, float]:
    from ..training.induction_heads import encode, load_induction

    model = load_induction(2)[0] if model is None else model
    with torch.no_grad():
        row = model(encode(text).unsqueeze(0)).attentions[layer][0, head, position]  # (L,)
    return int(row.argmax()), float(row.max())


def check_where_induction_looks(prediction, *, text: str, position: int, layer: int = 1, head: int = 0,
                                model=None) -> CheckResult:
    """Check a prediction, made before looking, of the key an induction head attends to most from ``position``.

    Built for the predict-then-check task of ``notebooks/13_induction_heads.ipynb``. Runs the model (default: the
    shipped two-layer one) on ``text`` and shows the measured key and its weight, right or wrong.

    Args:
        prediction: one position (an int), counted from 0.
        text: the sequence (one character per token).
        position: the query position asked about.
        layer, head: the head.
        model: the model to measure (default: :func:`attention_lib.training.induction_heads.load_induction`).

    Example:
        >>> check_where_induction_looks(None, text="abcdefabcdef", position=8).status
        'not attempted'
    """
    name = f"where layer {layer}, head {head} looks from position {position}"
    if prediction is None or prediction is Ellipsis:
        return CheckResult("not attempted", f"📝 {name}: no prediction yet. Write a position (a whole number) in "
                           f"`my_prediction`, then run this cell.")
    if whole_number(prediction) is None:
        return CheckResult("failed", f"❌ {name}: a prediction is one position, a whole number from 0 to {position} "
                           f"(a query sees only itself and the positions before it), but got {prediction!r}.")
    prediction = whole_number(prediction)
    key, weight = _strongest_key(text, position, layer, head, model)
    chars = [c for c in text if not c.isspace()]
    shown = (f"you predicted {prediction} ({chars[prediction] if 0 <= prediction < len(chars) else 'no such token'}), "
             f"the model puts its largest weight, {weight:.2f}, on position {key} ('{chars[key]}').")
    if prediction == key:
        return CheckResult("passed", f"✅ {name}: {shown} Right: it looks at the token that followed the earlier "
                           f"'{chars[position]}', the one to predict next.")
    earlier = [j for j in range(position) if chars[j] == chars[position]]
    if earlier and prediction == earlier[-1]:
        hint = "that is the earlier copy of the current token itself; the head looks one step after it."
    elif prediction == position - 1:
        hint = "that is where a previous-token head looks (layer 0); the induction head looks further back."
    elif prediction > position:
        hint = "a query cannot see the future: the causal mask blocks every position after it."
    else:
        hint = "find the earlier copy of the current token, then move one step to the right."
    return CheckResult("failed", f"❌ {name}: {shown} Hint: {hint}")
