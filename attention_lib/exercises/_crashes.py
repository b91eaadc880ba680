"""Explain an error raised inside the learner's code: the line, the shapes that met, the likely cause.

Every checker goes through :func:`explain_crash` (via :func:`~attention_lib.exercises._checker.check_function`),
so a learner never sees a bare PyTorch message: the hint comes first, PyTorch's own words last.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Sequence
from pathlib import Path

import torch

from ._hints import HINTS

_LIBRARY_DIRS = (str(Path(torch.__file__).parent), str(Path(__file__).parents[1]))
_MATMULS = {"matmul", "__matmul__", "__rmatmul__", "einsum"}


def _shape(x):
    return tuple(x.shape) if isinstance(x, torch.Tensor) else None


def _fmt(shape) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def _learner_frames(error: BaseException) -> list[traceback.FrameSummary]:
    """The frames of the learner's own code (outside torch and attention_lib) that ``error`` went through."""
    return [f for f in traceback.extract_tb(error.__traceback__) if not f.filename.startswith(_LIBRARY_DIRS)]


def _learner_locals(error: BaseException) -> dict[str, object]:
    """The local variables of the learner's frame that raised ``error`` (its tensors have the shapes we name)."""
    tb, found = error.__traceback__, {}
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(_LIBRARY_DIRS):
            found = tb.tb_frame.f_locals
        tb = tb.tb_next
    return dict(found)


#: A tensor flipped in the learner's line: ``k.T``, ``k.mT``, ``k.t()`` or ``k.transpose(...)``.
_FLIPPED = re.compile(r"(?<![\w.])([A-Za-z_]\w*)\s*\.\s*(T|mT|t\(\s*\)|transpose\([^)]*\))(?!\w)")


def _looks_like_weights(x) -> bool:
    """Is ``x`` a tensor of attention weights: non-negative rows that each add up to 1?"""
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.dim() < 2 or x.numel() == 0:
        return False
    x = x.detach()
    return bool((x >= 0).all()) and bool(torch.allclose(x.sum(dim=-1), torch.ones((), dtype=x.dtype), atol=1e-4))


def _flip_in_line(line: str | None, local: dict, op: str | None, op_args: list) -> str | None:
    """A hint for a matmul that failed on a tensor the learner flipped in ``line``, named as the line names it.

    Two inputs can share a shape, so the tensor is found by its name in the line (and its shape in the learner's
    frame), never by its shape alone: ``k.T`` on a batched ``k`` reverses every dimension (flip only the last
    two); ``weights @ v.T`` flips values that need no flip at all.
    """
    tensors = [a for a in op_args if isinstance(a, torch.Tensor)]
    if not line or op not in _MATMULS or len(tensors) < 2:
        return None
    left, right = tuple(tensors[0].shape), tuple(tensors[1].shape)
    for match in _FLIPPED.finditer(line):
        name, how = match.group(1), match.group(2)
        original = _shape(local.get(name))
        if original is None or len(original) < 2:
            continue
        flipped = original[::-1] if how == "T" else (*original[:-2], original[-1], original[-2])
        if flipped != right:
            continue
        fits = left[-1] == original[-2] and (len(left) == 2 or len(original) == 2 or left[:-2] == original[:-2])
        if fits and _looks_like_weights(tensors[0]):  # weights @ values: the values were the right way round
            return HINTS["crash_flip_not_needed"].format(
                expr=match.group(0).replace(" ", ""), name=name, original=_fmt(original), shape=_fmt(right),
                left=_fmt(left), a=left[-1], how=".T" if how == "T" else f".{how.split('(')[0]}")
        if how == "T" and len(original) > 2:
            return HINTS["crash_reversed"].format(arg="B", shape=_fmt(right), name=name, original=_fmt(original))
    return None


def _swapped(shape: tuple, original: tuple) -> tuple[int, int] | None:
    """The two dimensions ``(i, j)`` whose swap turns ``original`` into ``shape``, or ``None``."""
    if len(shape) != len(original) or shape == original:
        return None
    diff = [d for d in range(len(shape)) if shape[d] != original[d]]
    if len(diff) == 2 and shape[diff[0]] == original[diff[1]] and shape[diff[1]] == original[diff[0]]:
        return diff[0], diff[1]
    return None


def _cause(error: BaseException, op: str | None, shapes: list[tuple], inputs: dict[str, tuple],
           line: str | None = None, op_args: list | None = None) -> str:
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
    flip = _flip_in_line(line, _learner_locals(error), op, op_args or [])
    if flip:
        return flip
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
    likely cause, naming the tensors as the learner's line names them (a missing, needless or hard-coded
    transpose, ``.T`` or ``torch.bmm`` on batched inputs, ``x.max(dim)``
    returning values *and* indices, ``.view`` after ``transpose``, a missing ``keepdim``, ...), and PyTorch's
    own words last.

    Args:
        name: what the exercise asks for, used in the message.
        error: the exception raised by the learner's function.
        args: the arguments the function was called with.
        params: the names of those arguments, as the exercise calls them.
        failed_op: ``(operation name, its arguments)`` of the PyTorch call that raised, if known.

    Returns:
        The message of a :class:`~attention_lib.exercises.CheckResult` with status ``"error"``.

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
    return f"{message}\nHint: {_cause(error, op, shapes, inputs, line, op_args)}\n{source}: {said[:200]}"
