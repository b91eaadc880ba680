"""The exercise of ``notebooks/20_flex_attention.ipynb``: a sliding window inside each of several packed documents.

The learner writes ``document_window(document_id, window)``, which returns a mask_mod ``(b, h, q_idx, kv_idx) ->
bool``: ``True`` where key ``kv_idx`` is in the same document as query ``q_idx``, not after it, and fewer than
``window`` positions back. The lesson writes the documents and the window apart, never together. The checker turns
the learner's rule into its tensor with PyTorch's own ``create_mask`` (as FlexAttention does: ``torch.vmap`` over
every position), on five packings of documents and windows, and names the usual slips: a window one key off, ``q_idx``
and ``kv_idx`` swapped, documents that leak across their boundary.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..flex.mask_mods import causal_mod, document_mod, sliding_window_mod
from ..flex.reference import dense_mask
from ._again import Awkward
from ._checker import CheckResult, check_function

#: ``(document lengths, window)`` per trial: documents longer and shorter than the window, a window of one key, and
#: a wide window inside long documents.
_PACKINGS = (((5, 3, 4), 3), ((2, 6), 2), ((4, 4, 1, 3), 4), ((3, 3), 1), ((9, 7), 6))


def _inputs(trial: int) -> tuple[torch.Tensor, int]:
    lengths, window = _PACKINGS[trial % len(_PACKINGS)]
    ids = torch.cat([torch.full((n,), d, dtype=torch.long) for d, n in enumerate(lengths)])  # (S,)
    return ids, window


def _tensor(rule: Callable, S: int) -> torch.Tensor:
    """A rule's ``(S, S)`` mask, made the way FlexAttention makes it."""
    from torch.nn.attention.flex_attention import create_mask

    return create_mask(rule, 1, 1, S, S, device="cpu")[0, 0]


def document_window(document_id: torch.Tensor, window: int):
    """The reference: the package's rules for the documents, the causal mask and the window, all three at once.

    Example:
        >>> document_window(torch.tensor([0, 0, 0, 1]), 2)(0, 0, torch.tensor([[0], [1], [2], [3]]),
        ...                                                torch.arange(4)).int()
        tensor([[1, 0, 0, 0],
                [1, 1, 0, 0],
                [0, 1, 1, 0],
                [0, 0, 0, 1]], dtype=torch.int32)
    """
    same, window_rule = document_mod(document_id), sliding_window_mod(window)

    def rule(b, h, q_idx, kv_idx):
        return same(b, h, q_idx, kv_idx) & window_rule(b, h, q_idx, kv_idx)  # causal: inside the window rule

    return rule


def _reference(document_id: torch.Tensor, window: int) -> torch.Tensor:
    S = document_id.numel()
    return dense_mask(document_window(document_id, window), 1, 1, S, S)[0, 0]


def _wrong(keep: Callable[[torch.Tensor, int, torch.Tensor, torch.Tensor], torch.Tensor]) -> Callable:
    """A mistake written as ``keep(document_id, window, q_idx, kv_idx)``, made into an ``(S, S)`` mask."""
    def mask(document_id, window):
        S = document_id.numel()
        return dense_mask(lambda b, h, q, kv: keep(document_id, window, q, kv), 1, 1, S, S)[0, 0]

    return mask


def _same(d, q, kv):
    return d[q] == d[kv]


def _back(q, kv):
    return q - kv  # how far back the key is


WINDOW_WIDE = ("one key too many: a window of `window` keys is the query's own key and the window - 1 keys before "
               "it, 0 <= q_idx - kv_idx < window. Yours also lets a query see the key `window` positions back.")
WINDOW_NARROW = ("one key too few: a window of `window` keys is the query's own key and the window - 1 keys before "
                 "it, 0 <= q_idx - kv_idx < window (for window = 1, the query's own key alone).")
SWAPPED = ("q_idx and kv_idx are swapped: your rule lets each query see the keys after it, the future, and none "
           "before. The query is q_idx, the key kv_idx; the key must be at or before the query: kv_idx <= q_idx, "
           "and q_idx - kv_idx < window.")
LEAKS = ("documents leak across their boundary: near the start of a document, your window reaches back into the "
         "previous one. Add the document rule: document_id[q_idx] == document_id[kv_idx], combined with & (or "
         "and_masks).")
WITHOUT_ITSELF = ("the window counts the query itself (as in lesson 08): a window of `window` keys is the query's own "
                  "key and the window - 1 keys before it, 0 <= q_idx - kv_idx < window. Yours leaves out the query's "
                  "own key and reaches one key further back.")
NOT_CAUSAL = ("your window reaches both ways: each query also sees the keys after it in its document. Keep the keys "
              "at or before the query, kv_idx <= q_idx, as well as fewer than `window` back.")
NO_WINDOW = ("that is causal attention inside each document, with no window: a query sees its whole document so "
             "far. Keep only the keys fewer than `window` positions back: q_idx - kv_idx < window.")
FLIPPED = ("True and False are swapped: a mask_mod returns True where the query may attend (SDPA's convention), "
           "inside the window and the document, and False everywhere else.")

MISTAKES = [
    (_wrong(lambda d, w, q, kv: _same(d, q, kv) & (_back(q, kv) >= 0) & (_back(q, kv) <= w)), WINDOW_WIDE),
    (_wrong(lambda d, w, q, kv: _same(d, q, kv) & (_back(q, kv) >= 0) & (_back(q, kv) < w - 1)), WINDOW_NARROW),
    (_wrong(lambda d, w, q, kv: _same(d, q, kv) & (_back(q, kv) > 0) & (_back(q, kv) <= w)), WITHOUT_ITSELF),
    (_wrong(lambda d, w, q, kv: _same(d, q, kv) & (_back(kv, q) >= 0) & (_back(kv, q) < w)), SWAPPED),
    (_wrong(lambda d, w, q, kv: (_back(q, kv) >= 0) & (_back(q, kv) < w)), LEAKS),
    (_wrong(lambda d, w, q, kv: _same(d, q, kv) & (_back(q, kv).abs() < w)), NOT_CAUSAL),
    (_wrong(lambda d, w, q, kv: _same(d, q, kv) & causal_mod(0, 0, q, kv)), NO_WINDOW),
    (_wrong(lambda d, w, q, kv: ~(_same(d, q, kv) & (_back(q, kv) >= 0) & (_back(q, kv) < w))), FLIPPED),
]

PYTHON_BOOL = ("your rule asked a tensor for one True or False (Python's `if`, `and`, `or`, `not`, or bool(...)). A "
               "mask_mod gets its positions as tensors and must answer with tensor operations: combine conditions "
               "with & and |, negate with ~, choose with torch.where, never with if.")
NOT_BOOL = ("a mask_mod returns a bool tensor (comparisons combined with &, | and ~), not .int() or .float(): "
            "create_block_mask refuses anything else (\"mask.dtype must be torch.bool\").")
OUTSIDE_INDEX = ("index the `document_id` your function is given, not a tensor from the notebook: the checker passes "
                 "packings of its own, of other lengths.")
NOT_A_RULE = ("return the mask_mod itself, the inner function (`return mask_mod`), not its result and not a tensor: "
              "FlexAttention calls it with the positions.")


def check_document_window(fn: Callable[[torch.Tensor, int], Callable]) -> CheckResult:
    """Check a learner's ``document_window(document_id, window)``: a mask_mod for a sliding window inside documents.

    Built step by step in ``notebooks/20_flex_attention.ipynb``. The rule it returns must give ``True`` (**may
    attend**) where ``document_id[q_idx] == document_id[kv_idx]`` and ``0 <= q_idx - kv_idx < window``. It is made
    into its mask with ``create_mask``, as FlexAttention would, on five packings (documents longer and shorter than
    the window, a window of one key, a window of six), then twice more on new packings; it must return a bool
    tensor, as ``create_block_mask`` requires.

    Args:
        fn: ``(document_id (S,) integer tensor, window int) -> mask_mod (b, h, q_idx, kv_idx) -> bool``.

    Returns:
        A :class:`~attention_lib.exercises.CheckResult` with a hint for typical mistakes (a window one key off,
        ``q_idx`` and ``kv_idx`` swapped, documents that leak across their boundary, a window that reaches both
        ways or leaves out the query itself, no window, ``True`` and ``False`` swapped, a result that is not a
        function or not bool, a ``document_id`` from outside the function).

    Example:
        >>> def answer(document_id, window):
        ...     def mask_mod(b, h, q_idx, kv_idx):
        ...         back = q_idx - kv_idx
        ...         return (document_id[q_idx] == document_id[kv_idx]) & (back >= 0) & (back < window)
        ...     return mask_mod
        >>> check_document_window(answer).status
        'passed'
        >>> def leaky(document_id, window):
        ...     return lambda b, h, q_idx, kv_idx: (q_idx >= kv_idx) & (q_idx - kv_idx < window)
        >>> print(check_document_window(leaky))
        ❌ document window: not quite. Hint: documents leak across their boundary: ...
    """
    name = "document window"
    try:
        rule = fn(*_inputs(0))
    except Exception:  # noqa: BLE001 - the stub, or a crash: check_function names it below
        rule = None
    if rule is not None and not callable(rule):
        return CheckResult("failed", f"❌ {name}: your function returned a {type(rule).__name__}. Hint: {NOT_A_RULE}")
    if rule is not None:
        try:
            _tensor(rule, _inputs(0)[0].numel())
        except RuntimeError as error:  # vmap's "data-dependent control flow", or "Boolean value of Tensor"
            said = str(error)
            if "data-dependent" in said or "Boolean value" in said:
                first = said.strip().splitlines()[0][:200]
                return CheckResult("error", f"💥 {name}: your rule raised RuntimeError.\nHint: {PYTHON_BOOL}\n"
                                            f"PyTorch said: {first}")
        except IndexError as error:  # a document_id of the notebook's own, shorter than the checker's packing
            first = str(error).strip().splitlines()[0][:200]
            return CheckResult("error", f"💥 {name}: your rule raised IndexError.\nHint: {OUTSIDE_INDEX}\n"
                                        f"PyTorch said: {first}")
        except Exception:  # noqa: BLE001 - any other crash is explained by check_function, with its line
            pass

    def as_mask(document_id: torch.Tensor, window: int) -> torch.Tensor:
        made = fn(document_id, window)
        if made is None:
            return None
        return _tensor(made, document_id.numel())

    result = check_function(as_mask, _reference, _inputs, name=name, mistakes=MISTAKES, trials=len(_PACKINGS),
                            shape_hint="the mask is (S, S): one row per query, one column per key.",
                            inputs_said="five packings of documents (longer and shorter than the window, a window of "
                                        "one key, a window of six)",
                            awkward=[Awkward("documents of one token each, (document_id, window) = (0, 1, 2, 3, 4), "
                                             "3", (torch.arange(5), 3), LEAKS)])
    if result.passed and as_mask(*_inputs(0)).dtype != torch.bool:
        return CheckResult("failed", f"❌ {name}: the pattern is right, but your rule returns "
                                     f"{as_mask(*_inputs(0)).dtype}. Hint: {NOT_BOOL}")
    return result
