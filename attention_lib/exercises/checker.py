"""The machinery behind every exercise checker: run the learner's function, compare, and give a hint.

A checker never raises and never prints a traceback: it returns a :class:`CheckResult` whose text is shown
by the notebook. Chapters define their checkers in the sibling modules with :func:`check_function`.

The learner's function runs under a watch (:mod:`attention_lib.exercises.running`) that counts its PyTorch
operations, notices calls an exercise forbids, and remembers the operation that raised. :func:`explain_crash`,
the one place that turns an error inside the learner's code into a hint, names the shapes that met there and
the likely cause; the hint texts live in :mod:`attention_lib.exercises.hints`.
"""

from __future__ import annotations

import inspect
import re
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from .hints import HINTS
from .running import Forbidden, Run, run_learner

#: A typical mistake: a function that computes the wrong answer the way learners often do, and its hint.
Mistake = tuple[Callable[..., object], str]

_LIBRARY_DIRS = (str(Path(torch.__file__).parent), str(Path(__file__).parents[1]))
_MATMULS = {"matmul", "__matmul__", "__rmatmul__", "einsum"}


@dataclass(frozen=True)
class CheckResult:
    """The verdict of a checker: ``status`` is ``"passed"``, ``"not attempted"``, ``"failed"`` or ``"error"``.

    It is truthy only when passed, and shows its friendly ``message`` in a notebook.
    """

    status: str
    message: str

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return self.message

    __str__ = __repr__


def _shape(x):
    return tuple(x.shape) if isinstance(x, torch.Tensor) else None


def _fmt(shape) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def _learner_frames(error: BaseException) -> list[traceback.FrameSummary]:
    """The frames of the learner's own code (outside torch and attention_lib) that ``error`` went through."""
    return [f for f in traceback.extract_tb(error.__traceback__) if not f.filename.startswith(_LIBRARY_DIRS)]


def _swapped(shape: tuple, original: tuple) -> tuple[int, int] | None:
    """The two dimensions ``(i, j)`` whose swap turns ``original`` into ``shape``, or ``None``."""
    if len(shape) != len(original) or shape == original:
        return None
    diff = [d for d in range(len(shape)) if shape[d] != original[d]]
    if len(diff) == 2 and shape[diff[0]] == original[diff[1]] and shape[diff[1]] == original[diff[0]]:
        return diff[0], diff[1]
    return None


def _cause(error: BaseException, op: str | None, shapes: list[tuple], inputs: dict[str, tuple]) -> str:
    """The likely cause of ``error``, raised by operation ``op`` on tensors of ``shapes``, as a hint."""
    text = str(error)
    pair = re.search(r"return_types\.(\w+)", text)
    if pair:
        return HINTS["crash_max_pair"].replace("x.max", f"x.{pair.group(1)}")
    if isinstance(error, TypeError) and op is None and not _learner_frames(error):  # raised by the call itself
        return HINTS["crash_signature"].format(n=len(inputs), params=", ".join(inputs))
    rules = [
        (op == "t", "crash_t"), (op in {"bmm", "baddbmm"}, "crash_bmm"), (op in {"mm", "mv", "addmm"}, "crash_mm"),
        (op in {"view", "view_as"} and "stride" in text, "crash_view"), (op == "permute", "crash_permute"),
        ("must be tuple of ints" in text or "but got float" in text, "crash_float_size"),
        ("is invalid for input of size" in text, "crash_reshape"),
        (re.search(r"boolean|bool tensor|bitwise_not", text) is not None, "crash_bool_mask"),
        ("dtype" in text or "scalar type" in text, "crash_dtype"),
    ]
    for applies, key in rules:
        if applies:
            return HINTS[key]
    for arg, shape in zip(("A", "B"), shapes, strict=False):  # an input reversed or swapped by hand
        for name, original in inputs.items():
            if original is None:
                continue
            if len(shape) > 2 and shape == original[::-1] and shape != original:
                return HINTS["crash_reversed"].format(arg=arg, shape=_fmt(shape), name=name,
                                                      original=_fmt(original))
            dims = _swapped(shape, original)
            if dims and dims != (len(shape) - 2, len(shape) - 1):
                return HINTS["crash_hard_transpose"].format(arg=arg, shape=_fmt(shape), name=name,
                                                            original=_fmt(original), i=dims[0], j=dims[1])
    dim = re.search(r"Dimension out of range .* but got (-?\d+)", text)
    if dim:
        return HINTS["crash_dim_range"].format(dim=f"dim={dim.group(1)}")
    if len(shapes) >= 2:
        a, b = shapes[0], shapes[1]
        if op in _MATMULS and a and b:
            inner = b[-2] if len(b) > 1 else b[0]
            if len(b) > 1 and a[-1] == b[-1] and a[-1] != inner:
                return HINTS["crash_no_transpose"].format(a=a[-1], b=inner)
            return HINTS["crash_matmul"].format(a=a[-1], b=inner)
        if "must match the size" in text:
            short, long = sorted((a, b), key=len)
            if len(long) == len(short) + 1 and long[:-1] == short:
                return HINTS["crash_keepdim"].format(short=_fmt(short), long=_fmt(long))
            return HINTS["crash_broadcast"].format(a=_fmt(a), b=_fmt(b))
    return HINTS["crash_generic"]


def explain_crash(name: str, error: BaseException, args: tuple, *, params: Sequence[str] = (),
                  failed_op: tuple[str, list] | None = None) -> str:
    """Turn an error raised inside the learner's function into a message with a hint, never a bare traceback.

    The message names the learner's line that raised, the operation and the shapes that met there, the
    likely cause (a missing or hard-coded transpose, ``.T`` or ``torch.bmm`` on batched inputs, ``x.max(dim)``
    returning values *and* indices, ``.view`` after ``transpose``, a missing ``keepdim``, ...), and PyTorch's
    own words last.

    Args:
        name: what the exercise asks for, used in the message.
        error: the exception raised by the learner's function.
        args: the arguments the function was called with.
        params: the names of those arguments, as the exercise calls them.
        failed_op: ``(operation name, its arguments)`` of the PyTorch call that raised, if known.

    Returns:
        The message of a :class:`CheckResult` with status ``"error"``.

    Example:
        >>> q, k = torch.ones(2, 3, 4), torch.ones(2, 5, 4)
        >>> try:
        ...     q @ k
        ... except RuntimeError as error:
        ...     print(explain_crash("scores", error, (q, k), params=("query", "key"),
        ...                         failed_op=("matmul", [q, k])))
        💥 scores: your function raised RuntimeError...
        The shapes that met in `matmul (@)`: (2, 3, 4) and (2, 5, 4).
        Hint: A @ B pairs the last size of A with the second-to-last of B (4 with 5 here). ...
    """
    params = list(params) or [f"argument {i}" for i in range(len(args))]
    inputs = {p: _shape(a) for p, a in zip(params, args, strict=False)}
    op, op_args = failed_op or (None, [])
    shapes = [_shape(a) for a in op_args if _shape(a) is not None]
    frames = _learner_frames(error)
    line = frames[-1].line if frames and frames[-1].line else None
    message = f"💥 {name}: your function raised {type(error).__name__}" + (f" at `{line}`." if line else ".")
    if op and shapes:
        shown = "matmul (@)" if op in ("matmul", "__matmul__") else op
        message += f"\nThe shapes that met in `{shown}`: " + " and ".join(map(_fmt, shapes)) + "."
    said = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    source = "PyTorch said" if op else "The error says"
    return f"{message}\nHint: {_cause(error, op, shapes, inputs)}\n{source}: {said[:200]}"


def _close(a, b, atol: float, rtol: float) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and torch.allclose(a.detach().to(b.dtype), b.detach(), atol=atol, rtol=rtol,
                                                     equal_nan=True)
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        return len(a) == len(b) and all(_close(x, y, atol, rtol) for x, y in zip(a, b, strict=True))
    if isinstance(a, torch.Tensor | tuple | list) or isinstance(b, torch.Tensor | tuple | list):
        return False  # a tensor against a tuple (or the reverse): not the same kind of answer
    try:
        return abs(float(a) - float(b)) <= atol + rtol * abs(float(b))
    except (TypeError, ValueError):
        try:
            return bool(a == b)
        except Exception:  # noqa: BLE001 - an answer we cannot compare is not a match
            return False


def _params(fn: Callable, count: int) -> list[str]:
    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        names = []
    return names[:count] if len(names) >= count else [f"argument {i}" for i in range(count)]


def check_function(learner_fn: Callable, reference_fn: Callable, make_inputs: Callable[[int], tuple], *,
                   name: str, mistakes: Sequence[Mistake] = (), shape_hint: str = "",
                   trials: int = 3, atol: float = 1e-5, rtol: float = 1e-4,
                   forbidden: Forbidden | None = None, no_loops: bool = False,
                   clues: Mapping[str, str] | None = None) -> CheckResult:
    """Check ``learner_fn`` against ``reference_fn`` on ``trials`` fresh inputs from ``make_inputs(seed)``.

    Args:
        learner_fn: the learner's function.
        reference_fn: the correct function (from ``attention_lib``).
        make_inputs: ``seed -> tuple of arguments``; fresh random inputs for each trial.
        name: what the exercise asks for, used in the messages.
        mistakes: typical wrong implementations with the hint each one deserves.
        shape_hint: the hint to give when the result has the wrong shape.
        trials: how many random inputs to try.
        atol, rtol: the tolerance of the comparison.
        forbidden: shortcuts the exercise forbids, ``PyTorch operation name or Python function -> hint``
            (see :data:`~attention_lib.exercises.running.Forbidden`); a call to one fails the check even when
            the answer is right.
        no_loops: fail a correct answer whose number of PyTorch calls grows with the input (a Python loop).
        clues: ``PyTorch operation name -> hint`` for a wrong answer that matches no listed mistake but called
            that operation (e.g. ``clamp`` in a softmax).

    Returns:
        A :class:`CheckResult`.

    Example:
        >>> ref = lambda x: 2 * x
        >>> inputs = lambda seed: (torch.randn(3, generator=torch.Generator().manual_seed(seed)),)
        >>> check_function(ref, ref, inputs, name="doubling").status
        'passed'
        >>> check_function(lambda x: x + x + 1, ref, inputs, name="doubling",
        ...                mistakes=[(lambda x: x + x + 1, "drop the + 1")]).message
        '❌ doubling: not quite. Hint: drop the + 1'
    """
    calls = []
    for trial in range(trials):
        args = make_inputs(trial)
        expected = reference_fn(*args)
        run = run_learner(learner_fn, args, forbidden)
        got = run.result
        if isinstance(run.error, NotImplementedError):
            return CheckResult("not attempted", f"📝 {name}: not attempted yet. Replace `raise "
                               f"NotImplementedError` with your code and run this cell again.")
        if run.error is not None:
            return CheckResult("error", explain_crash(name, run.error, args, failed_op=run.failed_op,
                                                      params=_params(reference_fn, len(args))))
        if got is None or got is Ellipsis:
            return CheckResult("not attempted", f"📝 {name}: not attempted yet (your function returned "
                               f"{got!r}). Fill in the body and return the result.")
        if run.forbidden is not None:
            return CheckResult("failed", f"❌ {name}: not allowed here. Hint: {run.forbidden}")
        calls.append(run.calls)
        if _close(got, expected, atol, rtol):
            continue
        if isinstance(expected, torch.Tensor) and not isinstance(got, torch.Tensor):
            return CheckResult("failed", f"❌ {name}: expected a torch.Tensor, but got {type(got).__name__}.")
        if _shape(expected) is not None and _shape(got) != _shape(expected):
            hint = f" Hint: {shape_hint}" if shape_hint else ""
            return CheckResult("failed", f"❌ {name}: expected shape {_shape(expected)}, but got "
                               f"{_shape(got)}.{hint}")
        for wrong_fn, hint in mistakes:
            try:
                if _close(got, wrong_fn(*args), atol, rtol):
                    return CheckResult("failed", f"❌ {name}: not quite. Hint: {hint}")
            except Exception:  # noqa: BLE001, S112 - a mistake that does not apply to these inputs
                continue
        return CheckResult("failed", f"❌ {name}: the shape is right but the values differ from the "
                           f"reference (largest difference {_max_diff(got, expected)}).{_clue(got, run, clues or {})}")
    if no_loops and len(set(calls)) > 1:
        few, many = min(calls), max(calls)
        return CheckResult("failed", f"❌ {name}: right numbers, but " + HINTS["python_loop"].format(
            few=few, many=many))
    return CheckResult("passed", f"✅ {name}: correct on {trials} random inputs. Well done!")


def _clue(got, run: Run, clues: Mapping[str, str]) -> str:
    """A hint for a wrong answer that matches no listed mistake, from what the run left behind."""
    for op, hint in clues.items():
        if op in run.ops:
            return f" Hint: {hint}"
    if any("x.T" in w for w in run.warnings):
        return f" Hint: {HINTS['dot_T']}"
    if isinstance(got, torch.Tensor) and got.is_floating_point() and not bool(got.isfinite().all()):
        return (" Hint: your result contains NaN or inf; look for exp of a large number, 0 / 0, or "
                "-inf - (-inf).")
    return ""


def _max_diff(got, expected) -> str:
    try:
        return f"{(got.detach().double() - expected.detach().double()).abs().max().item():.3g}"
    except Exception:  # noqa: BLE001 - only used inside a message
        return "unknown"
