"""Checkers for ``notebooks/15_generation.ipynb``: one step of decoding with a cache, and predictions of what each
cache bug does to the grammar.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import torch

from ..attention import calculate_attention
from ..masks import causal_mask, causal_mask_lower_right, decoding_mask, padding_mask, sliding_window_mask
from ._again import loud
from ._allowed import PLAIN, PLAIN_SAID, PRODUCTS, SOFTMAX, Allowed
from ._checker import CheckResult, check_function
from ._compare import which_part_differs
from ._hints import HINTS
from ._running import checkers_own, run_learner
from .predictions import AMOUNTS, grade_amounts

#: (N, H, S, D, Dv) per trial: S cached tokens, and Dv != D so that a slip between keys and values shows.
_SIZES = ((1, 2, 4, 4, 3), (2, 3, 6, 2, 5), (1, 1, 1, 3, 2))


def _step_inputs(seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(1500 + seed)
    N, H, S, D, Dv = _SIZES[seed % len(_SIZES)]
    return (torch.randn(N, H, S, D, generator=g), torch.randn(N, H, S, Dv, generator=g),  # the cache
            torch.randn(N, H, 1, D, generator=g), torch.randn(N, H, 1, D, generator=g),  # the new q and k
            torch.randn(N, H, 1, Dv, generator=g))  # the new v


def _attend(q, keys, values):
    weights = torch.softmax(q @ keys.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)  # (N, H, 1, S + 1)
    return weights @ values  # (N, H, 1, Dv)


def _reference(cache_k, cache_v, q, k, v):
    keys, values = torch.cat([cache_k, k], dim=-2), torch.cat([cache_v, v], dim=-2)  # (N, H, S + 1, D or Dv)
    return _attend(q, keys, values), keys, values


def _prepended(cache_k, cache_v, q, k, v):
    keys, values = torch.cat([k, cache_k], dim=-2), torch.cat([v, cache_v], dim=-2)
    return _attend(q, keys, values), keys, values


def _not_appended(cache_k, cache_v, q, k, v):
    return _attend(q, cache_k, cache_v), *_reference(cache_k, cache_v, q, k, v)[1:]


def _not_kept(cache_k, cache_v, q, k, v):
    return _reference(cache_k, cache_v, q, k, v)[0], cache_k, cache_v


def _only_new(cache_k, cache_v, q, k, v):
    return _attend(q, k, v), *_reference(cache_k, cache_v, q, k, v)[1:]


def _top_left(cache_k, cache_v, q, k, v):
    out, keys, values = _reference(cache_k, cache_v, q, k, v)
    return values[..., :1, :].clone(), keys, values  # causal_mask(1, S + 1): key 0 alone


def _unscaled(cache_k, cache_v, q, k, v):
    out, keys, values = _reference(cache_k, cache_v, q, k, v)
    return torch.softmax(q @ keys.transpose(-2, -1), dim=-1) @ values, keys, values


def _scaled_by_value_size(cache_k, cache_v, q, k, v):
    out, keys, values = _reference(cache_k, cache_v, q, k, v)
    return torch.softmax(q @ keys.transpose(-2, -1) / math.sqrt(v.shape[-1]), dim=-1) @ values, keys, values


def _softmax_over_queries(cache_k, cache_v, q, k, v):
    out, keys, values = _reference(cache_k, cache_v, q, k, v)
    return torch.softmax(q @ keys.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-2) @ values, keys, values


def _values_not_appended(cache_k, cache_v, q, k, v):
    keys = torch.cat([cache_k, k], dim=-2)
    return _attend(q, keys[..., :-1, :], cache_v), keys, cache_v


#: The slips of one decoding step, each with the hint that names it.
MISTAKES: list[tuple[Callable, str]] = [
    (_not_appended, "the new token attended over the cache without its own key and value: append them first "
                    "(torch.cat along the positions, dim=-2), then attend over everything; a token always sees "
                    "itself."),
    (_not_kept, "the output is right, but the cache you return is the old one: return the keys and values with the "
                "new ones appended, or the next step will have lost this token."),
    (_prepended, "the new key and value went first: append them at the end, torch.cat([cache_k, k], dim=-2), so that "
                 "position i of the cache stays token i."),
    (_only_new, "the new token attended to itself alone: its query must be compared with every key in the cache "
                "(and its own), not just with k."),
    (_top_left, "every weight went to the first key: that is the top-left causal mask (causal_mask(1, S) or "
                "is_causal=True) for one query over S keys. The newest query sits at the end: it may see every "
                "key, so it needs no mask at all."),
    (_unscaled, "the scores were not scaled: divide q @ keys.transpose(-2, -1) by sqrt(d_k) before the softmax."),
    (_scaled_by_value_size, "the scores were divided by the square root of the values' size, Dv: the scale is "
                            "sqrt(d_k), the size of the queries and keys (q.shape[-1]), which the product sums over."),
    (_softmax_over_queries, "the softmax ran over the queries (dim=-2), and there is only one: run it over the keys, "
                            "dim=-1, so the new token's weights sum to 1."),
    (_values_not_appended, "the values were not appended: the new token's value must join the cache as its key "
                           "does (torch.cat([cache_v, v], dim=-2))."),
]


#: The tools of the step: torch.cat, the course's attention (or SDPA) and plain PyTorch; never the checker's own code.
ALLOWED = Allowed(PLAIN | PRODUCTS | SOFTMAX | {"scaled_dot_product_attention"}, said=PLAIN_SAID + ", "
                  "al.calculate_attention and its masks", functions=frozenset({
                      calculate_attention, causal_mask, causal_mask_lower_right, decoding_mask, padding_mask,
                      sliding_window_mask}),
                  library_hint="write the step yourself, from torch.cat and al.calculate_attention (or plain PyTorch "
                               "operations); your function called {call}, which this exercise does not use.",
                  own_helpers=False)


#: What each of the three results is, for the messages.
_PARTS = (("output", "(N, H, 1, Dv): one output per new query"),
          ("keys", "(N, H, S + 1, D): the cached keys, then the new one"),
          ("values", "(N, H, S + 1, Dv): the cached values, then the new one"))


def _explain_step(got, expected, args) -> str | None:
    """Say which of ``(output, keys, values)`` is off: a shape error as a shape error, else the largest difference."""
    return which_part_differs(_PARTS, got, expected,
                              lambda part, mine, right: f" (the cache held S = {args[0].shape[-2]} tokens).",
                              has=lambda part: "has" if part == "output" else "have")


def check_decoding_step(fn: Callable) -> CheckResult:
    """Check ``fn(cache_k, cache_v, q, k, v)``: one step of decoding with a key/value cache.

    Built step by step in ``notebooks/15_generation.ipynb``. The cache holds ``S`` tokens, ``cache_k (N, H, S, D)``
    and ``cache_v (N, H, S, Dv)``; the new token brings ``q``, ``k`` ``(N, H, 1, D)`` and ``v (N, H, 1, Dv)``.
    ``fn`` must return ``(output (N, H, 1, Dv), keys (N, H, S + 1, D), values (N, H, S + 1, Dv))``: the new token's
    attention over every key so far, its own included, and the cache with the new key and value appended. Three
    fixed inputs are tried, of 4, 6 and 1 cached tokens, with ``Dv != D``, the first again in float64; then loud
    scores, views, and the same tensors refilled with new numbers (a result remembered by the tensors' ids fails).

    Example:
        >>> def step(cache_k, cache_v, q, k, v):
        ...     keys, values = torch.cat([cache_k, k], dim=-2), torch.cat([cache_v, v], dim=-2)
        ...     weights = torch.softmax(q @ keys.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
        ...     return weights @ values, keys, values
        >>> check_decoding_step(step).status
        'passed'
        >>> check_decoding_step(_reference).message[:43]
        '❌ one decoding step: not allowed here. Hint'
        >>> check_decoding_step(_top_left).message[:60]
        '❌ one decoding step: not quite. Hint: every weight went to t'
    """
    name = "one decoding step"
    own = checkers_own(fn.__code__) if hasattr(fn, "__code__") else None
    if own is not None and fn not in [wrong for wrong, _ in MISTAKES]:
        return CheckResult("failed", f"❌ {name}: not allowed here. Hint: your function is `{own}`, the checker's own "
                           f"reference: write the step yourself, from torch.cat and the course's attention.")
    run = run_learner(fn, _step_inputs(0))
    got = run.result
    if run.error is None and got is not None and got is not Ellipsis and not (
            isinstance(got, tuple | list) and len(got) == 3):
        found = f"a tuple of {len(got)}" if isinstance(got, tuple | list) else f"one {type(got).__name__}"
        return CheckResult("failed", f"❌ {name}: return three things, (output, keys, values): the new token's "
                           f"output and the cache with its key and value appended; but got {found}.")
    result = check_function(fn, _reference, _step_inputs, name=name, mistakes=MISTAKES, atol=1e-5, rtol=1e-4,
                            awkward=[loud(_step_inputs(1), 40.0, 2, hint=HINTS["naive_exp"])],
                            explain=_explain_step, allowed=ALLOWED, float64=True)
    if result.status == "passed":  # right numbers: the caller's cache and the new token must come back unchanged
        changed = _changed_input(fn)
        if changed is not None:
            return CheckResult("failed", f"❌ {name}: right numbers, but {changed}")
    return result


def _changed_input(fn: Callable) -> str | None:
    """Which input ``fn`` changed in place (the caller's cache), said as a hint, or ``None``."""
    for trial in range(len(_SIZES)):
        args = _step_inputs(trial)
        before = [a.clone() for a in args]
        run = run_learner(fn, args, copy=False)
        for arg, a, was in zip(("cache_k", "cache_v", "q", "k", "v"), args, before, strict=True):
            if not torch.equal(a, was):
                ops = ", ".join(dict.fromkeys(run.in_place)) or "an in-place operation"
                whose = ("the caller's cache is no longer what it was, and the next step would read it wiped"
                         if arg.startswith("cache") else "the caller's new token is no longer what it was (a model "
                         "reuses its q, k and v: its layer's output, a residual)")
                return (f"your function changed its input `{arg}` in place ({ops}): {whose}. Make each step a new "
                        f"tensor (q = q * scale, not q.mul_(scale)); torch.cat already makes new tensors: return "
                        f"those, and leave the inputs as they are.")
    return None


#: How much of the writing stays right, in words, and the share of agreeing sentences each word stands for.
#: Why each bug does what it does to the grammar.
WHY = {
    "top-left mask while decoding": "each new token sees the first key alone (<bos>): it writes as if nothing had "
                                    "been said, so no sentence survives.",
    "top-left mask in a chunked prefill": "query i of a later chunk sees keys 0..i, the start of the prompt, and "
                                          "misses its own chunk, itself included: its words were cached as if "
                                          "they stood at the start; only a prompt that fits in one chunk is read "
                                          "right.",
    "no mask in the prefill": "each prompt word also saw the words after it, which training never showed; the "
                              "shipped model's sentences stay well-formed, but some verbs agree with the wrong noun "
                              "(other seeds of the recipe break some sentences too).",
    "positions not offset": "each new token is turned as if at position 0, so every distance between it and the "
                            "cached keys is wrong; the prompt's own keys are right, and some of the shipped model's "
                            "sentences survive that, others do not.",
    "positions one off": "each new token is turned as if one position further on: its distances to the prompt's keys "
                         "are one too long (those to the keys the steps wrote are right). The grammar checker passes "
                         "the sentences, yet many of them are not the words a correct decode writes (the gallery's "
                         "'text changed'); the checker reads only structure and agreement, not which noun, adjective "
                         "or phrase was chosen. Compared with one whole pass, the logits show it ('logits off').",
}


def check_bug_predictions(predictions: Mapping[str, str] | None, gallery: Mapping[str, Mapping[str, float]]
                          ) -> CheckResult:
    """Check predictions, made before measuring, of how many sentences each cache bug leaves right.

    Built step by step in ``notebooks/15_generation.ipynb``. ``predictions[bug]`` is ``"all"`` (90 % or more of the
    sentences well-formed and agreeing), ``"most"`` (50-90 %), ``"some"`` (10-50 %) or ``"none"`` (under 10 %);
    ``gallery`` is what :func:`attention_lib.experiments.bug_gallery` measured. The measurements and the reasons
    are shown once every bug has a prediction.

    Example:
        >>> gallery = {"no bug": {"agreeing": 1.0}, "positions not offset": {"agreeing": 0.4}}
        >>> check_bug_predictions({"positions not offset": "some"}, gallery).status
        'passed'
    """
    name = "what each bug does"
    shares = {bug: measured["agreeing"] for bug, measured in gallery.items() if bug != "no bug"}
    return grade_amounts(name, predictions, shares, WHY, f"📝 {name}: no predictions yet. Fill in `my_predictions` "
                         f"with one of {list(AMOUNTS)} for each bug, run it, then run this cell again.")
