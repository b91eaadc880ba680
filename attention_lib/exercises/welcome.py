"""The exercise of lesson 00: predict the shape of ``query @ key.transpose(-2, -1)`` from the input shapes.

The learner writes ``scores_shape(query_shape, key_shape)`` without computing any product: the batch
dimensions in front stay, and ``(L, E) @ (E, S)`` gives ``(L, S)``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..validation import is_int
from ._again import Awkward
from ._allowed import Allowed
from ._checker import CheckResult, check_function
from ._hints import HINTS

#: The (query shape, key shape) of each trial: 0, 1, 2 and 3 batch dimensions, with L, S and E all different.
_TRIALS = (((4, 8), (5, 8)), ((2, 3, 7), (2, 6, 7)), ((2, 3, 4, 8), (2, 3, 5, 8)), ((2, 2, 3, 4, 6), (2, 2, 3, 7, 6)))


def _inputs(trial: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    return _TRIALS[trial % len(_TRIALS)]


def _reference(query_shape, key_shape) -> tuple[int, ...]:
    query, key = torch.empty(query_shape, device="meta"), torch.empty(key_shape, device="meta")
    return tuple((query @ key.transpose(-2, -1)).shape)  # (..., L, E) @ (..., E, S) -> (..., L, S)


#: Typical wrong answers and the hint each deserves.
MISTAKES = [
    (lambda q, k: (q[-2], k[-2]),
     "keep the batch dimensions in front: only the last two dimensions take part in the matrix product."),
    (lambda q, k: (*q[:-1], k[-1]),
     "after the transpose the keys are (..., E, S), so the last size of the result is the number of keys "
     "S = key_shape[-2], not E."),
    (lambda q, k: (*q[:-2], k[-2], q[-2]),
     "rows are queries and columns are keys: the result is (..., L, S), with L = query_shape[-2] first."),
    (lambda q, k: (*q[:-2], q[-1], q[-1]),
     "the inner size E disappears in a matrix product: (L, E) @ (E, S) -> (L, S)."),
]


#: The exercise asks for the shape from the two tuples alone: no PyTorch operation at all (a product, a broadcast
#: or an empty tensor, on any device, even ``meta``) is allowed.
ALLOWED = Allowed(frozenset(), said="the two tuples alone", default=HINTS["shape_computed"], own_helpers=False)


def _explain(got, expected: tuple[int, ...], args: tuple) -> str:
    """What is wrong with a shape that matches no listed mistake: its kind, its length, or one of its sizes."""
    query_shape, key_shape = args
    on = f"for query_shape {query_shape} and key_shape {key_shape}, your function returned {got!r}"
    if isinstance(got, torch.Tensor):
        return (f"{on}: a tensor. Return the shape itself, a tuple of ints such as (2, 4, 5), without building "
                f"any tensor.")
    if not isinstance(got, tuple | list):
        return f"{on}, of type {type(got).__name__}. Return a tuple of ints such as (2, 4, 5)."
    odd = next((size for size in got if not is_int(size)), None)
    if odd is not None:
        return (f"{on}. A shape holds ints, as torch.Size does, but yours holds {odd!r} ({type(odd).__name__}). "
                f"The sizes in query_shape and key_shape are ints already: take them as they are.")
    if len(got) != len(expected):
        sizes = f"{len(got)} size" + ("" if len(got) == 1 else "s")
        return (f"{on}: {sizes}, but the scores have as many dimensions as the query, {len(expected)} "
                f"here. Hint: the batch dimensions in front stay, and the last two become (L, S).")
    wrong = next(i for i, (a, b) in enumerate(zip(got, expected, strict=True)) if a != b)
    return (f"{on}, which is not the shape of the scores: size {wrong} (counting from 0) is wrong. Hint: "
            f"(N, ..., L, E) @ (N, ..., E, S) -> (N, ..., L, S).")


#: A second pair of shapes for each number of batch dimensions, tried once the fixed pairs are right.
_AGAIN = (((3, 6), (7, 6)), ((2, 5, 3), (2, 9, 3)), ((1, 2, 3, 4), (1, 2, 5, 4)), ((2, 1, 3, 4, 6), (2, 1, 3, 8, 6)))

#: The hint for an answer right on the fixed pairs and wrong on another pair of the same rank.
SAME_RANK = ("right on the fixed pairs, but not on another pair with the same number of dimensions: does your "
             "function remember, or write in, an answer per number of dimensions? Work the shape out from the two "
             "tuples every time: the batch dimensions in front stay, and (L, E) @ (E, S) -> (L, S).")


def check_scores_shape(scores_shape: Callable[[tuple, tuple], tuple]) -> CheckResult:
    """Check the learner's ``scores_shape(query_shape, key_shape)`` of ``notebooks/00_welcome.ipynb``.

    Built in ``notebooks/00_welcome.ipynb``; the worked solution is in
    ``notebooks/solutions/00_welcome_solution.ipynb``.

    The shape must come from the tuples alone: a function that computes the product (even on empty or
    ``meta`` tensors) or calls one of PyTorch's functions (``torch.broadcast_shapes``) fails with a hint: no PyTorch
    operation is allowed. The answer is a tuple of Python ints (a ``torch.Size`` is one): a list or NumPy's
    ``int64`` sizes fail with a message that says so. It is tried on four fixed pairs of shapes,
    with zero to three batch dimensions; a shape of the wrong length, or one that holds anything but ints
    (``"4"``, ``4.0``), fails with a
    message that says so.

    Args:
        scores_shape: ``(query_shape, key_shape) -> shape`` of ``query @ key.transpose(-2, -1)``, for
            ``query_shape = (N, ..., L, E)`` and ``key_shape = (N, ..., S, E)``; it returns a tuple of ints.

    Returns:
        A :class:`~attention_lib.exercises.CheckResult` that reads "✅ ..." when correct, or says what to fix.

    Example:
        >>> check_scores_shape(lambda q, k: (*q[:-1], k[-2])).status
        'passed'
    """
    result = check_function(scores_shape, _reference, _inputs, name="scores_shape", mistakes=MISTAKES,
                            atol=0.0, rtol=0.0, allowed=ALLOWED, explain=_explain, trials=len(_TRIALS),
                            awkward=[Awkward(f"another pair with {len(q) - 2} batch dimensions, {q} and {k}", (q, k),
                                             SAME_RANK) for q, k in _AGAIN],
                            inputs_said="4 fixed pairs of shapes, with 0, 1, 2 and 3 batch dimensions, without any "
                                        "PyTorch operation")
    if not result.passed:
        return result
    for trial in range(len(_TRIALS)):
        called = _torch_function_called(scores_shape, _inputs(trial))
        if called is not None:
            return CheckResult("failed", f"❌ scores_shape: not allowed here. Hint: "
                                         f"{HINTS['shape_computed'].format(call=f'`{called}`')}")
        said = _not_a_tuple_of_ints(scores_shape(*_inputs(trial)))
        if said is not None:
            return CheckResult("failed", f"❌ scores_shape: right sizes, but {said}")
    return result


def _not_a_tuple_of_ints(got) -> str | None:
    """What is wrong with a right shape that is not a tuple of Python ints (a list, NumPy's int64), or ``None``."""
    if not isinstance(got, tuple):
        return (f"your function returned a {type(got).__name__}; a shape is a tuple, as torch.Size is (tuple(...) "
                f"or (*query_shape[:-1], key_shape[-2])).")
    odd = next((size for size in got if type(size) is not int), None)
    if odd is not None:
        return (f"your shape holds {odd!r} of type {type(odd).__module__}.{type(odd).__name__}, not a Python int; "
                f"the sizes in query_shape and key_shape are Python ints already: take them as they are, without "
                f"NumPy.")
    return None


def _torch_function_called(fn: Callable, args: tuple) -> str | None:
    """The first of PyTorch's own Python functions (``torch.broadcast_shapes``) that ``fn``'s code calls directly, by
    name; the watch of PyTorch operations does not see them, since they compute no tensor."""
    import sys

    torch_dir = torch.__file__.rsplit("/", 1)[0]
    found = []

    def profile(frame, event, arg):
        if found or event != "call" or not frame.f_code.co_filename.startswith(torch_dir):
            return
        caller = frame.f_back
        if caller is not None and not caller.f_code.co_filename.startswith(torch_dir):
            found.append(f"torch.{frame.f_code.co_name}")

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        fn(*args)
    except Exception:  # noqa: BLE001 - it ran on these inputs in check_function; only its calls matter here
        pass
    finally:
        sys.setprofile(previous)
    return found[0] if found else None
