"""The trials every checker runs once an answer is right on its fixed inputs: the answer called again on the same
shape with new values, on views that are not laid out row by row, on the exercise's own awkward inputs, and once
more after all of them; then every result is compared again.

An answer that remembers its result by the input's shape fails the second call; one that returns views into a
buffer it reuses fails the final comparison (its earlier results changed under the caller); one that assumes a
contiguous input (``.view`` on a transposed tensor) or writes into its input fails the views.

Example:
    >>> views = awkward_views((torch.ones(2, 3, 4), torch.ones(5), 2))
    >>> [(name, [a.is_contiguous() for a in args if isinstance(a, torch.Tensor)]) for name, args in views]
    [('a non-contiguous view (the same numbers, read through a transposed or sliced tensor)', [False, False]), \
('a broadcast view (every batch entry the same, one copy in memory: stride 0)', [False, True])]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

#: The names of the trials, as the messages say them.
SECOND_CALL = "the second call (the first input's shape, new values)"
LAST_CALL = "a call after all the others (the first input's shape, new values)"
TRANSPOSED = "a non-contiguous view (the same numbers, read through a transposed or sliced tensor)"
BROADCAST = "a broadcast view (every batch entry the same, one copy in memory: stride 0)"

#: The hint for a result that changed after later calls.
ALIASED = ("your result for {trial} changed after your function ran on other inputs ({differs} now): it returns a "
           "view into memory it reuses (a global buffer, a cache, a default argument). Return a new tensor each "
           "call.")
#: The hint for a result that is exactly the one an earlier call, on other inputs, returned.
KEPT_EARLIER = ("your function returned exactly its result for {label}, whose inputs differ: it remembers an answer by "
                "part of its arguments (a dict or a cache keyed on some of them, such as (L, S) without the window, on "
                "the shapes alone, or on the tensors' ids, which Python reuses). Compute every call from all of its "
                "arguments.")
#: The hint for another call's result handed back whatever the inputs (a cache keyed on ids, a global).
KEPT_ANY = ("your function keeps a result between calls and hands it back for other inputs (a dict or a cache keyed on "
            "the tensors' ids, which Python gives to new tensors once the old ones are freed, or a global): compute "
            "every call from its own arguments.")
#: The hint for an answer that writes into its inputs.
WRITES = ("The caller's tensors are not yours to change: make each step a new tensor, s = s - ..., instead of -=, "
          "/=, x[...] = ... or a method ending in _ (such as .div_() or .t_()).")
#: The hint for a right answer that differs on the second call of a shape.
MEMORISED = ("it looks as if your function remembers an answer by the input's shape (a dict, a cache, a global): "
             "on new numbers of a shape it has seen it must compute again.")
#: The hint for an answer that only fails on a view.
VIEW_SLIP = ("the numbers are the same as in an input you got right, only laid out differently in memory: your "
             "function reads the storage itself (.view on a transposed tensor, .data_ptr(), as_strided, "
             "torch.frombuffer) or writes into an input. Use .reshape and tensor operations, which follow the "
             "strides.")
#: The hint for an answer that only fails on a broadcast view.
BROADCAST_SLIP = ("these inputs are valid ones whose batch entries are all the same and share one copy in memory "
                  "(stride 0, what .expand gives): your function reads the storage itself (.view, .data_ptr(), "
                  "as_strided) or treats the batch entries differently. Use .reshape and tensor operations, which "
                  "follow the strides.")


@dataclass(frozen=True)
class Awkward:
    """A trial of the exercise's own: ``name`` (said in the messages), its ``inputs``, and the ``hint`` given
    when a right answer on the fixed inputs differs here (``""`` to say only where)."""

    name: str
    inputs: tuple
    hint: str = ""
    nonfinite: bool = False  # give ``hint`` only when the answer has NaN or inf where the reference has a number,
    # or called exp itself
    present: Callable[[object, object, tuple], bool] | None = None  # give ``hint`` only when ``present(result,
    # expected, inputs)`` says its slip is there


#: The name of a trial whose scores overflow ``exp`` in float32 unless each row's max is subtracted first.
LOUD = "loud scores (large enough that exp overflows in float32 unless each row's max is subtracted first)"


def loud(args: tuple, factor: float, *which: int, hint: str) -> Awkward:
    """The trial :data:`LOUD`: ``args`` with the tensors at positions ``which`` times ``factor``; ``hint`` (the
    naive softmax's) is given when the answer then holds NaN or inf."""
    louder = tuple(a * factor if i in which else a for i, a in enumerate(args))
    return Awkward(LOUD, louder, hint, nonfinite=True)


def map_tensors(x, fn: Callable[[torch.Tensor], torch.Tensor]):
    """``x`` (a tensor, or a tuple or list holding some) with ``fn`` applied to every tensor."""
    if isinstance(x, torch.Tensor):
        return fn(x)
    return type(x)(map_tensors(y, fn) for y in x) if isinstance(x, tuple | list) else x


def fresh_values(args: tuple, factor: float) -> tuple:
    """``args`` with new numbers of the same shapes: float tensors times ``factor``, and every other feature (along
    the last dimension) times ``1.5 * factor``, so that a normalised vector changes too (-inf and NaN stay);
    integer tensors with their batch entries in reverse order; bool tensors (masks) and Python values as they
    are."""
    def change(t: torch.Tensor) -> torch.Tensor:
        if t.is_floating_point():
            pattern = 1.0 + 0.5 * (torch.arange(t.shape[-1]) % 2) if t.dim() else torch.ones(())
            return t * (factor * pattern).to(t.dtype)
        if t.dtype != torch.bool and t.dim() > 0 and t.shape[0] > 1:
            return t.flip(0)
        return t
    return map_tensors(args, change)


def _non_contiguous(t: torch.Tensor) -> torch.Tensor:
    if t.dim() >= 2 and t.shape[-1] > 1 and t.shape[-2] > 1:
        return t.mT.contiguous().mT  # column by column in memory
    if t.dim() >= 1 and t.numel() > 1:
        return torch.stack([t, torch.zeros_like(t)], dim=-1)[..., 0]  # every other number of a larger tensor
    return t


def _broadcast(t: torch.Tensor) -> torch.Tensor:
    return t[:1].expand(t.shape) if t.dim() >= 3 and t.shape[0] > 1 else t


def awkward_views(args: tuple) -> list[tuple[str, tuple]]:
    """The trials on ``args`` laid out otherwise: a non-contiguous view of every tensor (the same numbers), and a
    broadcast one (stride 0 over the batch), each where it differs from ``args``."""
    views = []
    for name, fn in ((TRANSPOSED, _non_contiguous), (BROADCAST, _broadcast)):
        changed = map_tensors(args, fn)
        if any(a is not b for a, b in zip(_flat(changed), _flat(args), strict=True)):
            views.append((name, changed))
    return views


def _flat(x) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    return [t for y in x for t in _flat(y)] if isinstance(x, tuple | list) else []


def widest(inputs: Sequence[tuple]) -> tuple:
    """The inputs whose tensors have the most dimensions longer than 1 (a view of them cannot hide in a size 1)."""
    return max(inputs, key=lambda args: sum(n > 1 for t in _flat(args) for n in t.shape))


def later_trials(first: tuple, last: tuple, awkward: Sequence[Awkward]) -> list[Awkward]:
    """Every trial run after the fixed ones: the second call, the views of ``last`` (say the :func:`widest`
    inputs), the exercise's own, and a call after all the others."""
    trials = [Awkward(SECOND_CALL, fresh_values(first, 0.5), MEMORISED)]
    trials += [Awkward(name, args, BROADCAST_SLIP if name == BROADCAST else VIEW_SLIP)
               for name, args in awkward_views(last)]
    return [*trials, *awkward, Awkward(LAST_CALL, fresh_values(first, 1.5), MEMORISED)]


def _said(args: tuple) -> str:
    return ", ".join(f"{tuple(a.shape)}" if isinstance(a, torch.Tensor) else repr(a) for a in args)


def later_slip(learner_fn: Callable, reference_fn: Callable, trials: Sequence[Awkward], earlier: Sequence[tuple],
               *, name: str, allowed, atol: float, rtol: float, mistakes: Sequence = (),
               params: Sequence[str] = (), keep_inputs: bool = True) -> tuple[str, str] | None:
    """Run ``learner_fn`` on each of ``trials`` (see :func:`later_trials`), then compare every result again:
    ``(status, message)`` for the first that goes wrong, else ``None``.

    ``earlier`` holds ``(inputs, result)`` of the fixed trials, compared again at the end with the later ones;
    ``mistakes`` (``(wrong function, hint)``) are named when the learner's result equals one on the failing trial and
    agrees with it on the fixed trials (a softmax without its max subtracted agrees until the scores are loud).
    """
    from ._compare import _finite_parts_agree, difference
    from ._crashes import explain_crash
    from ._running import run_learner
    from ._trials import CHANGED_INPUT
    from ._where import how_it_differs

    results = [(f"the fixed input {i + 1} ({_said(args)})", args, got) for i, (args, got) in enumerate(earlier)]
    for trial in trials:
        try:
            expected = reference_fn(*trial.inputs)
        except Exception:  # noqa: BLE001 - a trial the reference cannot run (a .view on a view) is no trial
            continue
        run = run_learner(learner_fn, trial.inputs, allowed)
        shapes = _said(trial.inputs)
        where = f"on {trial.name}" + (f", inputs {shapes}" if any(map(_is_tensor, trial.inputs)) else "")
        if run.refused is not None:
            return "failed", f"❌ {name}: not allowed here. Hint: {run.refused}"
        if run.error is not None and run.in_place and "written-to tensor" in str(run.error):
            if not keep_inputs:  # the checker looks for changed inputs its own way, afterwards
                continue
            ops = ", ".join(dict.fromkeys(run.in_place))
            return "failed", (f"❌ {name}: right on the fixed inputs, but {where}, your function wrote into a tensor "
                              f"it was given ({ops}), which PyTorch refuses for a broadcast input. " + WRITES)
        if run.error is not None and trial.hint in (VIEW_SLIP, BROADCAST_SLIP):
            first = str(run.error).strip().splitlines()[0][:200] if str(run.error).strip() else ""
            return "error", (f"💥 {name}: right on the fixed inputs, but {where}, your function raised "
                             f"{type(run.error).__name__}.\nHint: {trial.hint}\nPyTorch said: {first}")
        if run.error is not None:
            said = explain_crash(name, run.error, trial.inputs, failed_op=run.failed_op, params=list(params))
            return "error", said.replace(f"{name}: ", f"{name}: right on the fixed inputs, but {where}: ", 1)
        differs = difference(run.result, expected, atol, rtol)
        if differs is not None and not _flat(expected):  # a tuple of sizes, a number: say both
            differs = f"your function returned {run.result!r}, the answer is {expected!r}"
        if differs is not None:
            hint = next((h for wrong, h in mistakes if _is(wrong, run.result, trial.inputs, earlier, atol, rtol,
                                                           _finite_parts_agree, difference)), None)
            if hint is None and trial.hint == MEMORISED:
                hint = MEMORISED if difference(run.result, earlier[0][1], atol, rtol) is None else None
            elif hint is None and (same := next((label for label, _, got in results if _flat(got) and difference(
                    run.result, got, atol, rtol) is None), None)) is not None:
                hint = KEPT_EARLIER.format(label=same)
            elif hint is None and trial.nonfinite:
                hint = trial.hint if _nonfinite_where_finite(run.result, expected) or "exp" in run.ops else None
            elif hint is None and trial.present is not None:
                hint = trial.hint if _says(trial.present, run.result, expected, trial.inputs) else None
            elif hint is None:
                hint = trial.hint or None
            hint = hint or _how(run.result, expected, how_it_differs, difference, run.ops) or (
                "print your result and the reference's for these inputs, and compare them row by row.")
            return "failed", f"❌ {name}: right on the fixed inputs, but not {where}: {differs}. Hint: {hint}"
        if run.changed and keep_inputs:
            ops = ", ".join(dict.fromkeys(run.in_place)) or "an in-place operation"
            param = params[run.changed[0]] if run.changed[0] < len(params) else f"argument {run.changed[0]}"
            return "failed", f"❌ {name}: right numbers, but {where}, " + CHANGED_INPUT.format(name=param, ops=ops)
        results.append((trial.name, trial.inputs, run.result))
    for label, args, got in results:
        differs = difference(got, reference_fn(*args), atol, rtol)
        if differs is not None:
            return "failed", f"❌ {name}: not quite. Hint: " + ALIASED.format(trial=label, differs=differs)
    return None


def remembered(got, args: tuple, earlier: Sequence[tuple], atol: float, rtol: float) -> str | None:
    """:data:`MEMORISED` as a message's hint when ``got``, wrong for ``args``, is the result an earlier fixed trial
    of the same shapes returned (``earlier``: ``(inputs, result)``), else ``None``. For inputs without tensors (sizes),
    any earlier result returned again for other sizes."""
    from ._compare import difference

    def shapes(inputs):
        return [tuple(t.shape) for t in _flat(inputs)]

    if not _flat(args):  # sizes, not tensors: an earlier call's result for other sizes, returned again
        same = next((i for i, (inputs, result) in enumerate(earlier) if _flat(result) and _flat(got)
                     and difference(got, result, atol, rtol) is None), None)
        return None if same is None else (
            f"for the fixed input {len(earlier) + 1} ({_said(args)}) your function returned its result for the fixed "
            f"input {same + 1} ({_said(earlier[same][0])}). Hint: It" + KEPT_EARLIER.split(": it", 1)[1])
    same = next((i for i, (inputs, result) in enumerate(earlier) if shapes(inputs) == shapes(args)
                 and difference(got, result, atol, rtol) is None), None)
    return None if same is None else (f"for the fixed input {len(earlier) + 1} your function returned its result for "
                                      f"the fixed input {same + 1}, which has the same shapes and other numbers. "
                                      f"Hint: {MEMORISED[0].upper()}{MEMORISED[1:]}")


def _is(wrong: Callable, got, args: tuple, earlier: Sequence[tuple], atol, rtol, agree, difference) -> bool:
    """Does the learner's ``got`` equal ``wrong``'s result on ``args``, and agree with it on the fixed trials?"""
    try:
        if difference(got, wrong(*args), atol, rtol) is not None:
            return False
        return all(agree(result, wrong(*inputs), atol, rtol) for inputs, result in earlier)
    except Exception:  # noqa: BLE001 - a mistake that cannot be made on these inputs
        return False


def _says(present: Callable, got, expected, inputs: tuple) -> bool:
    """``present(got, expected, inputs)``, ``False`` when it cannot tell (a result of another shape or type)."""
    try:
        return bool(present(got, expected, inputs))
    except Exception:  # noqa: BLE001 - a result the test cannot read has no slip it can name
        return False


def _nonfinite_where_finite(got, expected) -> bool:
    """Does ``got`` hold NaN or inf where ``expected`` holds a number (in any of its tensors)?"""
    pairs = zip(_flat(got), _flat(expected), strict=False)
    return any(g.shape == e.shape and g.is_floating_point() and bool((~g.isfinite() & e.isfinite()).any())
               for g, e in pairs)


def _is_tensor(x) -> bool:
    return bool(_flat(x))


def _how(got, expected, how_it_differs, difference, ops=None) -> str | None:
    """How ``got`` differs from ``expected``: for a tuple, which result first, and how."""
    if isinstance(expected, tuple | list) and isinstance(got, tuple | list) and len(got) == len(expected):
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            if difference(g, e) is not None:
                said = how_it_differs(g, e, ops)
                return f"result {i + 1} of {len(expected)} differs" + (f": {said}" if said else ".")
        return None
    return how_it_differs(got, expected, ops)
