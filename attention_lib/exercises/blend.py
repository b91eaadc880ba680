"""The exercise of ``notebooks/06_blend.ipynb``: the whole five-step recipe, for inputs laid out sequence first.

The lesson chains the package's five steps on inputs laid out ``(N, ..., L, E)``, batch first. The exercise asks
for the recipe in plain PyTorch on the layout ``torch.nn.MultiheadAttention`` uses by default
(``batch_first=False``): ``query (L, N, E)``, ``key (S, N, E)`` and ``value (S, N, Ev)``, returning the pair
``(output (L, N, Ev), weights (N, L, S))``, the layouts ``nn.MultiheadAttention`` returns. Every step must find
its dimensions again: which are the words, which the batch, and which meet in the blend.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..attention import calculate_attention
from ._allowed import PLAIN, PLAIN_SAID, PRODUCTS, SOFTMAX, Allowed
from ._checker import CheckResult, also_checked, check_function
from ._hints import HINTS, SAME_HINT, recipe
from ._running import Run, run_learner

#: Trial 0 is square (L = S = N = E = Ev) so that the recipe applied without moving the batch still runs, and so
#: does a missing transpose, and both earn their hints; the others are not square, and their sizes tell each
#: slip apart. E = 5 in the first, which also runs in float64: its square root is not a float32 number, so a root
#: taken in float32 (torch.tensor(E).sqrt()) shows there.
_SHAPES = ((5, 5, 5, 5, 5), (5, 7, 3, 6, 2), (3, 6, 2, 8, 5))  # (L, S, N, E, Ev)

#: How much larger than the keys the queries are, per trial: in the last, scores reach the hundreds, where exp
#: overflows float32, so a softmax written by hand must subtract each row's max first (lesson 05).
_LOUDNESS = (1.0, 1.0, 100.0)


def _inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    L, S, n, E, Ev = _SHAPES[seed % len(_SHAPES)]
    g = torch.Generator().manual_seed(1000 + seed)
    query = _LOUDNESS[seed % 3] * torch.randn(L, n, E, generator=g)  # (L, N, E)
    return query, torch.randn(S, n, E, generator=g), torch.randn(S, n, Ev, generator=g)  # (S, N, E), (S, N, Ev)


def _batch_first(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return tuple(t.transpose(0, 1) for t in tensors)  # (L, N, E) -> (N, L, E)


def _reference(query, key, value):
    output, weights = calculate_attention(*_batch_first(query, key, value))  # (N, L, Ev), (N, L, S)
    return output.transpose(0, 1), weights  # (L, N, Ev), (N, L, S)


def _slip(name: str) -> Callable:
    """The recipe with one slip, on inputs moved batch first, and the output moved back."""
    def wrong(query, key, value):
        r = recipe(*_batch_first(query, key, value), slip=name)
        return r.output.transpose(0, 1), r.weights
    return wrong


def _not_moved(query, key, value):
    """The batch-first recipe on sequence-first inputs: @ takes the words for a batch, and the sentences meet."""
    r = recipe(query, key, value)  # (L, N, E) @ (L, E, N): runs only when L == S
    return r.output, r.weights


def _reshaped(back: str) -> Callable:
    """The recipe on inputs reshaped (not transposed) to batch first, the output moved back by ``back``."""
    def wrong(query, key, value):
        r = recipe(*(t.reshape(t.size(1), t.size(0), t.size(2)) for t in (query, key, value)))
        output = r.output.reshape(query.size(0), query.size(1), -1) if back == "reshape" else r.output.transpose(0, 1)
        return output, r.weights
    return wrong


RESHAPED = ("reshape keeps the numbers in memory order and only cuts them differently, so query.reshape(N, L, E) "
            "hands each 'sentence' words of several sentences. To move the batch to the front, swap the dimensions: "
            "query.transpose(0, 1) is (N, L, E) (and the output goes back with .transpose(0, 1)).")

MIXES_SENTENCES = ("in this layout the batch is dimension 1: query is (L, N, E). @ treats every dimension but the "
                   "last two as a batch, so query @ key.transpose(-2, -1) here lets the sentences meet each other, "
                   "word by word, and never the words of one sentence. Move the batch to the front first: "
                   "query.transpose(0, 1) is (N, L, E).")

OUTPUT_BATCH_FIRST = ("that is the output batch first, (N, L, Ev); hand it back in the layout of the inputs, "
                      "(L, N, Ev): .transpose(0, 1).")
WEIGHTS_BATCH_FIRST = ("the weights come back batch first, (N, L, S), as nn.MultiheadAttention returns them: one "
                       "(L, S) map per sentence.")

#: Typical wrong answers, each as the pair (output, weights): the batch left in place, every slip of the recipe,
#: the output left batch first, and the pair swapped.
MISTAKES = [
    (_not_moved, MIXES_SENTENCES),
    *((_slip(s), HINTS[SAME_HINT.get(s, s)]) for s in (
        "no_transpose", "dot_T", "reversed_scores", "no_scale", "scale_by_d_k", "scale_multiplied", "scale_half",
        "scale_half_inline", "scale_by_S", "scale_by_L", "scale_by_Ev", "scale_by_N", "softmax_dim_-2", "softmax_dim_0",
        "blend_scores", "blend_keys", "no_softmax", "scale_after_softmax", "naive_exp")),
    (_reshaped("reshape"), RESHAPED),
    (_reshaped("transpose"), RESHAPED),
    (lambda q, k, v: _reference(q, k, v)[::-1], HINTS["swap_pair"]),
    (lambda q, k, v: (_reference(q, k, v)[0].transpose(0, 1), _reference(q, k, v)[1]), OUTPUT_BATCH_FIRST),
    (lambda q, k, v: (_reference(q, k, v)[0], _reference(q, k, v)[1].transpose(0, 1)), WEIGHTS_BATCH_FIRST),
]


#: Plain PyTorch operations; the package's steps and recipe, PyTorch's fused attention and nn.MultiheadAttention
#: do the work for you.
ALLOWED = Allowed(PLAIN | PRODUCTS | SOFTMAX, said=PLAIN_SAID, library_hint=HINTS["recipe_call"],
                  instead=dict.fromkeys(("scaled_dot_product_attention", "multi_head_attention_forward"),
                                        HINTS["recipe_call"]), own_helpers=False)


def _pick(fn: Callable, index: int) -> Callable:
    """``fn`` reduced to one item of the pair it returns (0: output, 1: weights)."""

    def picked(query, key, value):
        result = fn(query, key, value)
        return result if result is None or result is Ellipsis else result[index]

    return picked


def _not_a_pair(run: Run) -> str | None:
    """What the learner's function returned instead of a pair of tensors, or ``None`` if it returned a pair (or
    failed to run: the checker reports errors and "not attempted" itself)."""
    result = run.result
    if run.error is not None or result is None or result is Ellipsis:
        return None
    if isinstance(result, tuple | list):
        if len(result) == 2 and all(isinstance(t, torch.Tensor) for t in result):
            return None
        return f"a {type(result).__name__} of {len(result)} items"
    return f"a single {type(result).__name__}"


def _output_hint(args: tuple, got: tuple | None) -> str:
    query, key, value = args
    L, N = query.shape[:2]
    if got == (N, L, value.size(-1)):
        return OUTPUT_BATCH_FIRST
    return "the output is (L, N, Ev), in the layout of the inputs: one blended value per word and sentence."


def _weights_hint(args: tuple, got: tuple | None) -> str:
    query, key, _ = args
    L, N = query.shape[:2]
    S = key.size(0)
    if got == (L, N, S):
        return WEIGHTS_BATCH_FIRST
    if got == (L, N, N):
        return MIXES_SENTENCES
    return ("the weights are (N, L, S): one row per query and one column per key, for each sentence. Move the batch "
            "to the front first, query.transpose(0, 1) (N, L, E), then scores = query @ key.transpose(-2, -1).")


def check_calculate_attention(fn: Callable) -> CheckResult:
    """Check a hand-written ``calculate_attention(query, key, value) -> (output, weights)``, sequence first.

    The exercise of ``notebooks/06_blend.ipynb``. The inputs are laid out as ``torch.nn.MultiheadAttention``'s
    default (``batch_first=False``): ``query (L, N, E)``, ``key (S, N, E)``, ``value (S, N, Ev)``; the answer is
    ``(output (L, N, Ev), weights (N, L, S))``. Three fixed inputs, the first square (``L = S = N = E = Ev``),
    the others with every size different; the weights are checked first (steps 1 to 4), then the output
    (step 5); the first input runs again in float64, and backward runs through both (an in-place step that breaks
    autograd, such as ``e /= e.sum(...)``, fails). Typical slips (the batch left in place, a missing transpose, no
    scaler, √S or √Ev in place of
    √E, softmax over the wrong dimension, blending the keys, ...) get their own hint. The library's functions
    (its steps, its recipe, ``memory_efficient_attention``, ...) and PyTorch's ``scaled_dot_product_attention``
    fail the check.

    Args:
        fn: ``(query (L, N, E), key (S, N, E), value (S, N, Ev)) -> (output (L, N, Ev), weights (N, L, S))``.

    Returns:
        A :class:`~attention_lib.exercises._checker.CheckResult` (shows "✅ ..." when correct).

    Example:
        >>> import math
        >>> def by_hand(query, key, value):
        ...     q, k, v = (t.transpose(0, 1) for t in (query, key, value))  # batch first: (N, L, E), ...
        ...     weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)  # (N, L, S)
        ...     return (weights @ v).transpose(0, 1), weights  # (L, N, Ev), (N, L, S)
        >>> check_calculate_attention(by_hand).status
        'passed'
        >>> import attention_lib as al
        >>> print(check_calculate_attention(lambda q, k, v: al.memory_efficient_attention(q, k, v)).message)
        ❌ calculate_attention: not allowed here. Hint: ... `al.memory_efficient_attention`, ...
    """
    run = run_learner(fn, _inputs(1), ALLOWED)
    if run.refused is not None:
        return CheckResult("failed", f"❌ calculate_attention: not allowed here. Hint: {run.refused}")
    found = _not_a_pair(run)
    if found is not None:
        return CheckResult("failed", f"❌ calculate_attention: expected the pair (output, weights), but your "
                           f"function returned {found}. End it with `return output, weights`.")
    for index, part, shape_hint in ((1, "weights", _weights_hint), (0, "output", _output_hint)):
        result = check_function(
            _pick(fn, index), _pick(_reference, index), _inputs, name=f"calculate_attention ({part})",
            mistakes=[(_pick(wrong, index), hint) for wrong, hint in MISTAKES], shape_hint=shape_hint,
            allowed=ALLOWED, float64=True, backward=True, keep_inputs=True,
        )
        if not result.passed:
            return result
    return CheckResult("passed", f"✅ calculate_attention: output and weights correct on {len(_SHAPES)} fixed test "
                       f"inputs, one of them square{also_checked(True, True)}. Well done!")
