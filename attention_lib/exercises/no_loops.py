"""The exercise of ``notebooks/07_no_loops.ipynb``: turn a loop over words into tensor operations.

The notebook writes ``loop_weights``, the weights of *cosine attention* filled one query and one key at a time:
each score is the cosine of the angle between a query and a key, divided by a temperature of 0.1, and each
query's row goes through a softmax (Swin Transformer V2 scores this way). The learner writes
``weights_no_loops(query, key)``, the same numbers with no Python loop, for any batch of sentences:
``query (N, L, E)`` and ``key (N, S, E)`` give weights ``(N, L, S)``. The checker refuses the package's
functions and SDPA, a detour through Python lists or NumPy, and any loop whose work grows with the input.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import torch

from ._allowed import PLAIN, PLAIN_SAID, PRODUCTS, SOFTMAX, Allowed
from ._checker import CheckResult, also_checked, check_function
from ._compare import difference
from ._hints import HINTS
from ._running import loop_growth, run_learner
from ._where import how_it_differs

#: The temperature of the exercise: the cosine, between -1 and 1, is divided by it.
TEMPERATURE = 0.1

#: Trial 0 is square (L = S = E) so that a missing transpose or misaligned key lengths run and earn their hint;
#: the others are not, and N, L, S and E all differ from trial to trial, so that a loop over sentences, words or
#: features changes the amount of work.
_SHAPES = ((2, 4, 4, 4), (3, 5, 7, 6), (1, 6, 3, 8))  # (N, L, S, E)


def _inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Queries and keys whose lengths differ from word to word (from 0.2 to 5), so that a forgotten length shows."""
    n, L, S, E = _SHAPES[seed % len(_SHAPES)]
    g = torch.Generator().manual_seed(2000 + seed)
    query, key = torch.randn(n, L, E, generator=g), torch.randn(n, S, E, generator=g)
    lengths = lambda *shape: 0.2 * 25.0 ** torch.rand(*shape, 1, generator=g)  # noqa: E731 - (..., 1) in [0.2, 5)
    return query * lengths(n, L), key * lengths(n, S)


def _unit(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    return x / x.norm(dim=dim, keepdim=True)


def _weights(scores: torch.Tensor, dim: int = -1, temperature: float = TEMPERATURE) -> torch.Tensor:
    return torch.softmax(scores / temperature, dim=dim)


def _reference(query: torch.Tensor, key: torch.Tensor, temperature: float = TEMPERATURE) -> torch.Tensor:
    # (N, L, E) @ (N, E, S) -> (N, L, S): the cosine of every pair
    return _weights(_unit(query) @ _unit(key).transpose(-2, -1), temperature=temperature)


#: The other temperature tried when the learner's function takes one (``temperature=0.1`` in the stub).
OTHER_TEMPERATURE = 0.5

#: A temperature small enough that cosine / temperature overflows exp in float32 (above about 88).
LOUD_TEMPERATURE = 0.002

TEMPERATURE_LOUD = ("right at the temperatures 0.1 and {other}, but at temperature={loud} (cosines up to 1 / {loud} = "
                    "{top:.0f}, loud scores) your function returned {what} where softmax(cosine / {loud}) has numbers "
                    "({differs}). Hint: " + HINTS["naive_exp"])

TEMPERATURE_IGNORED = ("right at the temperature 0.1, but called with temperature={other} your function returned "
                       "other weights than softmax(cosine / {other}) ({differs}). Hint: it ignores its `temperature` "
                       "argument (a 0.1 written into the code?). Divide the cosines by `temperature`.")


def _row_lengths_everywhere(query, key):
    # (N, L, 1) * (N, S, 1) runs only when L == S, and divides row i by |q_i| |k_i|
    return _weights(query @ key.transpose(-2, -1) / (query.norm(dim=-1, keepdim=True) * key.norm(dim=-1, keepdim=True)))


_COSINE = "the cosine of query i and key j is their dot product divided by both lengths, "

#: Typical wrong answers, each with its hint.
MISTAKES = [
    (lambda q, k: _weights(q @ k.transpose(-2, -1)),
     _COSINE + "(q_i · k_j) / (|q_i| |k_j|): divide by the lengths too (query.norm(dim=-1, keepdim=True) is (N, L, 1), "
               "one length per query)."),
    (lambda q, k: _weights(_unit(q) @ k.transpose(-2, -1)),
     _COSINE + "and you divided by the queries' lengths only: divide by the keys' lengths as well."),
    (lambda q, k: _weights(q @ _unit(k).transpose(-2, -1)),
     _COSINE + "and you divided by the keys' lengths only: divide by the queries' lengths as well."),
    (lambda q, k: _weights(_unit(q, -2) @ _unit(k, -2).transpose(-2, -1)),
     "a vector's length is the norm of its own features, over the last dimension: norm(dim=-1, keepdim=True). "
     "dim=-2 runs across the words instead."),
    (_row_lengths_everywhere,
     "the key lengths belong to the columns: query.norm(dim=-1, keepdim=True) is (N, L, 1), one per row, but the "
     "key lengths must be (N, 1, S), one per column, e.g. key.norm(dim=-1)[:, None, :]. (Or divide each vector by "
     "its length first, then take the matrix product.)"),
    (lambda q, k: torch.softmax(_unit(q) @ _unit(k).transpose(-2, -1) * TEMPERATURE, dim=-1),
     f"divide the cosines by the temperature, {TEMPERATURE} (that multiplies them by 10); you multiplied."),
    (lambda q, k: torch.softmax(_unit(q) @ _unit(k).transpose(-2, -1), dim=-1),
     f"divide the cosines by the temperature, {TEMPERATURE}, before the softmax."),
    (lambda q, k: _weights(_unit(q) @ _unit(k).transpose(-2, -1) / q.size(-1) ** 0.5),
     "the loop divides by the temperature only: a cosine already lies between -1 and 1, so there is no √d_k here "
     "(that was the scaled dot product's cure for long vectors)."),
    (lambda q, k: torch.softmax(q @ k.transpose(-2, -1) / q.size(-1) ** 0.5, dim=-1),
     "that is the scaled dot product of lessons 03 to 06. This loop scores with the cosine: each dot product "
     "divided by the two vectors' lengths, then by the temperature."),
    (lambda q, k: _unit(q) @ _unit(k).transpose(-2, -1) / TEMPERATURE, HINTS["no_softmax"]),
    (lambda q, k: _weights(_unit(q) @ _unit(k).transpose(-2, -1), dim=-2), HINTS["softmax_dim_-2"]),
    (lambda q, k: _weights(_unit(q) @ _unit(k).transpose(-2, -1), dim=0), HINTS["softmax_dim_0"]),
    (lambda q, k: _weights(_unit(q) @ _unit(k)), HINTS["no_transpose"]),
    (lambda q, k: _weights(q @ k.transpose(-2, -1) / ((q ** 2).sum(-1, keepdim=True) * (k ** 2).sum(-1)[..., None, :])),
     "you divided by the squared lengths (the sums of squares): a length is the square root of that, "
     "x.norm(dim=-1, keepdim=True), so the cosine is (q_i · k_j) / (|q_i| |k_j|)."),
]

_WRITE_IT = ("write it with PyTorch's own operations: your function called {call}, which computes the weights (or "
             "a step of them) for you.")

#: What the exercise may use: plain PyTorch operations and the norms; not the package's functions, SDPA, or a
#: detour out of PyTorch (Python lists, NumPy).
ALLOWED = Allowed(PLAIN | PRODUCTS | SOFTMAX | {"norm", "linalg_norm", "linalg_vector_norm", "normalize",
                                                 "cosine_similarity"},
                  said=PLAIN_SAID + ", and the norms", library_hint=_WRITE_IT,
                  instead={"scaled_dot_product_attention": _WRITE_IT}, own_helpers=False)

LOOP_HINT = ("right numbers, but your function ran {smallest} {what} on the smallest input and {largest} on the "
             "largest, so it loops in Python over sentences, words or features. Replace each loop by one tensor "
             "operation over a whole dimension: one matrix product does every dot product, one norm over dim=-1 "
             "every vector's length, one softmax over dim=-1 every row.")


def check_weights_no_loops(fn: Callable) -> CheckResult:
    """Check ``weights_no_loops(query, key)``: the notebook's cosine-attention loop, for a batch, with no loops.

    The exercise of ``notebooks/07_no_loops.ipynb``. The learner's function runs on three fixed batches
    ``query (N, L, E)``, ``key (N, S, E)`` (one square, the others with ``N``, ``L``, ``S`` and ``E`` all
    different, vectors of lengths from 0.2 to 5) and is compared with
    ``softmax(cos(query_i, key_j) / 0.1)`` over the keys; typical slips get their own hint. It fails, with a
    message that says why, when it calls the package's attention functions or SDPA, leaves PyTorch for Python
    lists or NumPy, or does an amount of work that grows with the input (a Python loop).

    Args:
        fn: ``(query (N, L, E), key (N, S, E)) -> weights (N, L, S)``.

    Returns:
        A :class:`~attention_lib.exercises._checker.CheckResult` (shows "✅ ..." when correct).

    Example:
        >>> def cosine_weights(q, k):
        ...     q, k = q / q.norm(dim=-1, keepdim=True), k / k.norm(dim=-1, keepdim=True)
        ...     return torch.softmax(q @ k.transpose(-2, -1) / 0.1, dim=-1)
        >>> check_weights_no_loops(cosine_weights).status
        'passed'
        >>> print(check_weights_no_loops(lambda q, k: torch.softmax(q @ k.transpose(-2, -1) / 0.1, dim=-1)))
        ❌ weights_no_loops: not quite. Hint: the cosine of query i and key j is their dot product divided by ...
    """
    name = "weights_no_loops"
    result = check_function(
        fn, _reference, _inputs, name=name, mistakes=MISTAKES, allowed=ALLOWED, float64=True, keep_inputs=True,
        shape_hint="the weights are (N, L, S): one row per query, one column per key, for every sentence. A matrix "
                   "product of (N, L, E) and (N, E, S) gives that shape for every sentence at once.",
    )
    if not result.passed:
        return result
    ignored = _temperature_ignored(fn) or _temperature_too_loud(fn)
    if ignored is not None:
        return CheckResult("failed", f"❌ {name}: {ignored}")
    growth = loop_growth(fn, [_inputs(trial) for trial in range(len(_SHAPES))])
    if growth is not None:
        what, smallest, largest = growth
        return CheckResult("failed", f"❌ {name}: " + LOOP_HINT.format(what=what, smallest=smallest,
                                                                       largest=largest))
    tried = (f", at the temperatures 0.1, {OTHER_TEMPERATURE} and {LOUD_TEMPERATURE}" if _takes_temperature(fn)
             else "")
    return CheckResult("passed", f"✅ {name}: correct on three fixed batches (one square; in the others N, L, S "
                                 f"and E all differ){tried}{also_checked(True, False)}, in tensor operations with no "
                                 f"Python loop. Well done!")


def _takes_temperature(fn: Callable) -> bool:
    try:
        return "temperature" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _temperature_ignored(fn: Callable) -> str | None:
    """For a function with a ``temperature`` parameter (the stub's ``temperature=0.1``): the hint when it gives the
    wrong weights at another temperature, else ``None``."""
    if not _takes_temperature(fn):
        return None
    query, key = _inputs(1)
    run = run_learner(lambda q, k: fn(q, k, temperature=OTHER_TEMPERATURE), (query, key), ALLOWED)
    if run.error is not None or run.refused is not None:
        return None
    differs = difference(run.result, _reference(query, key, OTHER_TEMPERATURE))
    return None if differs is None else TEMPERATURE_IGNORED.format(other=OTHER_TEMPERATURE, differs=differs)


def _temperature_too_loud(fn: Callable) -> str | None:
    """For a function with a ``temperature`` parameter: the hint when a small temperature makes its softmax overflow
    (NaN or inf where the reference has weights), else ``None``."""
    if not _takes_temperature(fn):
        return None
    query, key = _inputs(1)
    run = run_learner(lambda q, k: fn(q, k, temperature=LOUD_TEMPERATURE), (query, key), ALLOWED)
    if run.error is not None or run.refused is not None or not isinstance(run.result, torch.Tensor):
        return None
    expected = _reference(query, key, LOUD_TEMPERATURE)
    differs = difference(run.result, expected, atol=1e-4, rtol=1e-3)
    if differs is None:
        return None
    bad = run.result.shape == expected.shape and not bool(run.result.isfinite().all())
    what = "NaN or inf" if bad else "other weights"
    if not bad:
        hint = HINTS["clamp"] if run.clamped else how_it_differs(run.result, expected)
        return (f"right at the temperatures 0.1 and {OTHER_TEMPERATURE}, but at temperature={LOUD_TEMPERATURE} your "
                f"function returned other weights than softmax(cosine / {LOUD_TEMPERATURE}) ({differs})."
                + (f" Hint: {hint}" if hint else ""))
    return TEMPERATURE_LOUD.format(other=OTHER_TEMPERATURE, loud=LOUD_TEMPERATURE, top=1 / LOUD_TEMPERATURE,
                                   what=what, differs=differs)
