"""One catalogue of typical mistakes and their hints, shared by every exercise where the mistake is possible.

A hint that one lesson gives (say "divide by √E, not √S") reads the same in every exercise where a learner can
make that slip. :data:`HINTS` holds the texts; :func:`recipe` computes the attention recipe with one slip
switched on, and :func:`recipe_mistakes` turns a list of slips into the ``(wrong function, hint)`` pairs that
:func:`~attention_lib.exercises._checker.check_function` recognises.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from types import SimpleNamespace

import torch

_ROW = "each query's row of weights must add up to 1"

#: Mistake -> hint. Keys name the mistake; the hints for an error raised inside the learner's code are
#: :data:`~attention_lib.exercises._crashes.CRASH_HINTS`.
HINTS: dict[str, str] = {
    # Lesson 01's focus multiplies the scores; lesson 02's hard lookup takes the single best value.
    "focus_missing": "multiply the scores by `focus` before the softmax.",
    "focus_divided": "multiply the scores by `focus`, don't divide: a larger focus should make the weights "
                     "sharper.",
    "focus_outside": "the focus goes inside the softmax (on the scores), not on the result.",
    "focus_and_scale": "here the focus replaces the 1/√E of the full recipe: multiply the scores by `focus` and "
                       "nothing else.",
    "focus_extra_scale": "you multiplied by `focus` and also divided by √E. Here the focus replaces the 1/√E of "
                         "the full recipe (lesson 04 brings it back): multiply the scores by `focus` and nothing "
                         "else.",
    "hard_lookup": "that is the hard lookup: it takes the single best value. The soft lookup mixes all the "
                   "values, each weighted by the softmax of its score.",
    # The matchmaker: scores = query @ keyᵀ.
    "no_transpose": "flip the key sideways: query @ key.transpose(-2, -1), so that (..., L, E) @ (..., E, S) -> "
                    "(..., L, S). Without the transpose, square inputs still run but give the wrong numbers.",
    "reversed_scores": "rows are queries and columns are keys: query @ key.transpose(-2, -1) is (..., L, S); "
                       "key @ query.transpose(-2, -1) is (..., S, L), the scores flipped.",
    "dot_T": "x.T reverses every dimension of a batched tensor ((N, S, E) becomes (E, S, N)); flip only the last "
             "two with key.transpose(-2, -1) (or key.mT).",
    "scaled_in_matchmaker": "the matchmaker only multiplies: dividing by √d_k is the scaler's job (lesson 04).",
    # The scaler: divide by √d_k, d_k = E = query.size(-1).
    "no_scale": "divide the scores by √d_k, math.sqrt(query.size(-1)), before the softmax.",
    "scale_by_d_k": "divide by the square root of d_k, math.sqrt(d_k), not by d_k itself.",
    "scale_multiplied": "divide by √d_k; you multiplied by it.",
    "scale_by_S": "divide by √E, not √S: d_k = query.size(-1) is the size of each query and key vector, not the "
                  "number of keys S = key.size(-2).",
    "scale_by_L": "divide by √E, not √L: d_k = query.size(-1) is the size of each query vector, not the number "
                  "of queries L = query.size(-2).",
    "scale_by_Ev": "divide by √E, not √Ev: d_k is the size of the query and key vectors, query.size(-1), not the "
                   "size of the value vectors.",
    "scale_by_N": "divide by √E, not √N: d_k is the last dimension, query.size(-1); size(0) is the batch size.",
    "scale_half": "`d_k ** 1/2` is not √d_k: ** binds tighter than /, so it is (d_k ** 1) / 2, and "
                  "`scores / d_k ** 1/2` is even (scores / d_k) / 2. Write d_k ** 0.5 or math.sqrt(d_k).",
    "scale_by_numel": "divide by √d_k, the size of one query vector (its last dimension), not by the square root of "
                      "all the numbers of a sentence's queries, √(L·d_k).",
    "scale_after_softmax": "scale the scores before the softmax, not the weights after it: scaled weights no "
                           "longer add up to 1.",
    "scaled_then_softmax": "stop before the softmax: this exercise returns the scaled scores, query @ "
                           "key.transpose(-2, -1) / √d_k. Turning them into weights is the next step (lesson 05).",
    # The percentages: a softmax over the keys (dim=-1).
    "no_softmax": "turn the scores into weights with torch.softmax(scores, dim=-1): raw scores can be negative "
                  "and do not add up to 1.",
    "softmax_dim_-2": f"take the softmax over the keys, the last dimension (dim=-1): {_ROW}, not each column "
                      f"(dim=-2).",
    "softmax_dim_0": f"take the softmax over the keys, the last dimension (dim=-1): {_ROW}. dim=0 runs over the "
                     f"first dimension instead (with a batch, it mixes different sentences).",
    "naive_exp": "exp of a large score overflows to inf, and inf / inf is NaN: subtract each row's max first, "
                 "scores - scores.amax(dim=-1, keepdim=True).",
    "global_max": "subtract each row's own max, scores.amax(dim=-1, keepdim=True), not the max of the whole "
                  "tensor: rows far below it underflow to 0 / 0.",
    "column_max": "subtract each row's max (dim=-1, over the keys), not each column's (dim=-2): a row far below "
                  "its column's max underflows to 0 / 0.",
    "row_min": "subtract each row's max, not its min: after subtracting the min every exponent is >= 0, and a "
               "row with a large spread overflows to inf again.",
    "row_mean": "subtract each row's max, not its mean: the largest score can still lie more than 88 above the "
                "mean, where exp overflows in float32.",
    "clamp": "clamping the scores changes them (every score above the cap ends up equal); subtract each row's "
             "max instead, which changes nothing mathematically.",
    "max_no_keepdim": "keep the reduced dimension: scores.amax(dim=-1, keepdim=True) is (..., L, 1) and lines up "
                      "with each row.",
    "sum_no_keepdim": "keep the reduced dimension when you sum: e.sum(dim=-1, keepdim=True).",
    "sum_dim_-2": f"divide by each row's sum, e.sum(dim=-1, keepdim=True): {_ROW}. A sum over dim=-2 adds up "
                  f"each column instead.",
    "no_normalise": f"divide by each row's sum, e.sum(dim=-1, keepdim=True): {_ROW}.",
    # The blend: output = weights @ value.
    "blend_scores": "blend with the percentages (the softmax weights), not with the scaled scores: "
                    "output = weights @ value.",
    "blend_keys": "you mixed the keys. The keys only decide the weights (what you search by); the answer is a mix "
                  "of the values (what you take away): weights @ value.",
    "swap_pair": "return the pair in the order (output, weights), like attention_lib.calculate_attention.",
    "python_loop": "no Python loops: your function ran {few} PyTorch operations on the smallest input and {many} "
                   "on the largest, so it loops over words or sentences. Replace the loops by one "
                   "query @ key.transpose(-2, -1) and one softmax over dim=-1 (they handle every batch "
                   "dimension).",
    "library_shortcut": "this exercise asks you to write it yourself, with plain PyTorch operations; your "
                        "function called {call}, which does it for you.",
    "library_call": "build it from reshape and transpose; your function called the library's {call}, which is "
                    "the answer itself.",
    "recipe_call": "write the five steps with plain PyTorch operations (@, transpose, math.sqrt, torch.softmax); "
                   "your function called {call}, which does them for you.",
    "shape_computed": "work out the shape from the two tuples alone, without any tensor (not even an empty one, or "
                      "one on the meta device) and without computing the product: your function called {call}. "
                      "The batch dimensions in front stay, and (L, E) @ (E, S) -> (L, S).",
    # Multi-head attention: split and merge the heads.
    "split_reshape_only": "reshaping straight to (N, H, L, Dh) reads the numbers in memory order, so a head gets "
                          "pieces of several words. Reshape to (N, L, H, Dh) first (each word's features cut into "
                          "H slices), then swap L and H with .transpose(1, 2).",
    "split_interleaved": "each head should get a contiguous slice of Dh features (head 0: the first Dh), not every "
                         "H-th feature: reshape to (N, L, H, Dh), not (N, L, Dh, H).",
    "split_transpose_first": "reshape first, then transpose. x.transpose(1, 2) is (N, E, L), and reshaping that "
                             "to (N, H, L, Dh) cuts across the features of different words. Reshape to "
                             "(N, L, H, Dh), then .transpose(1, 2).",
    "split_wrong_swap": "you got (N, L, Dh, H) = {got}: the transpose swapped the last two dimensions (H and Dh). "
                        "Swap the words and the heads instead: x.reshape(N, L, H, Dh).transpose(1, 2) is "
                        "(N, H, L, Dh).",
    "merge_reshape_only": "reshaping (N, H, L, Dh) straight to (N, L, E) mixes words and heads. First bring each "
                          "word's heads together with .transpose(1, 2) -> (N, L, H, Dh), then "
                          ".reshape(N, L, H * Dh).",
    "merge_interleaved": "the heads should sit side by side (head 0's Dh features, then head 1's, ...), not "
                         "interleaved: transpose to (N, L, H, Dh), not (N, L, Dh, H), before the reshape.",
    "merge_reversed": "the heads are in reversed order: head 0's Dh features come first, then head 1's, and so "
                      "on. x.transpose(1, 2).reshape(N, L, H * Dh) keeps their order.",
    "merge_summed": "you got (N, L, Dh) = {got}: the heads were added up (or averaged). Merging puts them side by "
                    "side, so that each word gets H * Dh = E features: x.transpose(1, 2).reshape(N, L, H * Dh).",
    # Masks: True = may attend, as in SDPA.
    "mask_additive": "that is the additive form (0 / -inf). This exercise asks for the bool form: True where a "
                     "query may attend, False where it may not.",
    "mask_triu": "that is the upper triangle (triu): each word would see itself and the future. Keep the lower "
                 "triangle with .tril().",
    "mask_swapped": "True and False are swapped. In SDPA's convention True means 'may attend', so the past and "
                    "the diagonal are True (nn.MultiheadAttention uses the opposite).",
    "mask_no_diagonal": "the diagonal is False, so a word cannot see itself (and the first word sees nothing). "
                        "Use .tril() with the default diagonal=0.",
    "mask_bottom_right": "the mask is aligned at the bottom-right corner. Align it top-left like SDPA's "
                         "is_causal: query i sees keys 0..i, whatever L and S.",
    "mask_float": "return a bool tensor, e.g. torch.ones(L, S, dtype=torch.bool).tril().",
    "mask_fill_allowed": "you blocked the allowed keys. True means 'may attend' (SDPA's convention), so fill the "
                         "places where the mask is False: scores.masked_fill(~mask, float('-inf')).",
    "mask_after_softmax": "mask *before* the softmax. Zeroing weights afterwards leaves rows that no longer add "
                          "up to 1.",
    "mask_multiplied": "a blocked score set to 0 (by masked_fill(~mask, 0.0) or by multiplying by the mask) is "
                       "still an ordinary score, and e^0 = 1 still gets weight. Fill blocked scores with "
                       "float('-inf'): scores.masked_fill(~mask, float('-inf')).",
    "fully_masked_nan": "a query whose keys are all blocked has -inf everywhere, and its softmax is 0 / 0 = NaN. "
                        "Such a query has nothing to look at: give it exact zeros, e.g. "
                        "weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0).",
    "fully_masked_finite": "a query whose keys are all blocked got a uniform average, 1/S on every key it must not "
                           "see (that is what a large negative fill such as -1e9 instead of -inf gives, or setting "
                           "such rows to 1/S). Such a query has nothing to look at: fill with float('-inf'), then "
                           "give the rows without any allowed key exact zeros, e.g. "
                           "weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0).",
}


def recipe(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor | None = None, *,
           slip: str | None = None) -> SimpleNamespace:
    """The attention recipe with one typical slip (a key of :data:`HINTS`) switched on.

    Args:
        query: ``(N, ..., L, E)``; key: ``(N, ..., S, E)``; value: ``(N, ..., S, Ev)`` or ``None`` (no blend).
        slip: the mistake to make, or ``None`` for the correct recipe.

    Returns:
        A namespace with ``scores (N, ..., L, S)``, ``scaled``, ``weights`` and ``output (N, ..., L, Ev)`` (or
        ``None`` without ``value``), each computed the way a learner making ``slip`` would.

    Example:
        >>> q, k = torch.ones(1, 2, 4), torch.ones(1, 3, 4)
        >>> recipe(q, k, slip="scale_by_d_k").scaled[0, 0]
        tensor([1., 1., 1.])
    """
    if slip == "no_transpose":
        scores = query @ key  # (N, L, E) @ (N, S, E): runs only when E == S
    elif slip == "reversed_scores":
        scores = key @ query.transpose(-2, -1)  # (N, S, E) @ (N, E, L) -> (N, S, L)
    elif slip == "dot_T":
        scores = query @ key.permute(*range(key.dim() - 1, -1, -1))  # what the deprecated key.T does
    else:
        scores = query @ key.transpose(-2, -1)  # (N, L, E) @ (N, E, S) -> (N, L, S)
    if slip == "scaled_in_matchmaker":
        scores = scores / math.sqrt(query.size(-1))
    sizes = {"E": query.size(-1), "S": key.size(-2), "L": query.size(-2), "N": query.size(0),
             "Ev": value.size(-1) if value is not None else query.size(-1)}
    divisor = {"no_scale": 1.0, "scale_by_d_k": sizes["E"], "scale_multiplied": 1 / math.sqrt(sizes["E"]),
               "scale_by_S": math.sqrt(sizes["S"]), "scale_by_L": math.sqrt(sizes["L"]),
               "scale_by_Ev": math.sqrt(sizes["Ev"]), "scale_by_N": math.sqrt(sizes["N"]),
               "scale_half": sizes["E"] / 2, "scale_half_inline": 2 * sizes["E"],
               "scale_by_numel": math.sqrt(sizes["L"] * sizes["E"]),
               "scale_after_softmax": 1.0}.get(slip, math.sqrt(sizes["E"]))
    scaled = scores / divisor
    dim = {"softmax_dim_-2": -2, "softmax_dim_0": 0}.get(slip, -1)
    weights = scaled if slip == "no_softmax" else torch.softmax(scaled, dim=dim)
    if slip == "naive_exp":  # a softmax by hand that forgot lesson 05: NaN once a score passes ~88.7
        weights = scaled.exp() / scaled.exp().sum(dim=-1, keepdim=True)
    if slip == "scale_after_softmax":
        weights = weights / math.sqrt(sizes["E"])
    output = None
    if value is not None:  # (N, L, S) @ (N, S, Ev) -> (N, L, Ev)
        output = {"blend_scores": scaled @ value, "blend_keys": weights @ key}.get(slip, weights @ value)
    return SimpleNamespace(scores=scores, scaled=scaled, weights=weights, output=output)


#: Slips that share another slip's hint: ``scores / d_k ** 1/2`` written in one line is (scores / d_k) / 2.
SAME_HINT = {"scale_half_inline": "scale_half"}


def recipe_mistakes(slips: Sequence[str], result: Callable[[SimpleNamespace], object],
                    inputs: Callable[..., tuple] = lambda *args: args) -> list[tuple[Callable, str]]:
    """``(wrong function, hint)`` pairs for the given slips of :func:`recipe`.

    Args:
        slips: keys of :data:`HINTS` that :func:`recipe` knows.
        result: picks the exercise's answer from the recipe, e.g. ``lambda r: r.weights``.
        inputs: turns the exercise's arguments into ``(query, key[, value])`` for :func:`recipe`.

    Returns:
        A list for the ``mistakes`` argument of :func:`~attention_lib.exercises._checker.check_function`.
    """
    return [(lambda *args, s=slip: result(recipe(*inputs(*args), slip=s)), HINTS[SAME_HINT.get(slip, slip)])
            for slip in slips]
