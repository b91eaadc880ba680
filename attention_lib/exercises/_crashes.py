"""Explain an error raised inside the learner's code: the line, the shapes that met, the likely cause.

Every checker goes through :func:`explain_crash` (via :func:`~attention_lib.exercises._checker.check_function`),
so a learner never sees a bare PyTorch message: the hint comes first, PyTorch's own words last.
"""

from __future__ import annotations

import math
import re
import traceback
from collections.abc import Sequence
from pathlib import Path

import torch

#: Error -> hint: the likely cause of an error raised inside the learner's code.
CRASH_HINTS: dict[str, str] = {
    "max_pair": "x.max(dim=...) returns two things, the values and their indices (a torch.return_types "
                      "pair); take .values, or use x.amax(dim=-1, keepdim=True), which returns the values only.",
    "t": "x.t() only flips 2-D tensors; on batched inputs flip the last two dimensions with "
               "x.transpose(-2, -1) (or x.mT).",
    "bmm": "torch.bmm takes exactly 3-D tensors (N, L, E) @ (N, E, S); with more batch dimensions, like "
                 "(N, H, L, E), use @ (torch.matmul), which handles any number of them.",
    "mm": "torch.mm and torch.mv take plain matrices and vectors; with batch dimensions use @ "
                "(torch.matmul).",
    "view": "after a transpose the numbers are no longer in row order in memory, so .view cannot regroup "
                  "them: use .reshape(...) (or .contiguous().view(...)).",
    "permute": "permute(...) names every dimension, so it only fits inputs with exactly that many, and the "
                     "checker also passes more batch dimensions. Flip the last two with transpose(-2, -1).",
    "hard_transpose": "{arg} {shape} is `{name}` {original} with dimensions {i} and {j} swapped. Counting "
                            "from the front only fits one number of batch dimensions; count from the end: "
                            "{name}.transpose(-2, -1).",
    "reversed": "{arg} {shape} is `{name}` {original} with every dimension reversed, which is what .T does "
                      "to a batched tensor. Flip only the last two: {name}.transpose(-2, -1) (or {name}.mT).",
    "flip_not_needed": "`{expr}` in your line flips `{name}` {original} into {shape}, but `{name}` needs no "
                             "flip here: in {left} @ {original} the weights' {a} columns (one per key) already meet "
                             "`{name}`'s {a} rows. Drop the {how}: weights @ {name}.",
    "dim_range": "{dim} counts from the front and assumes a fixed number of dimensions; count from the end "
                       "(dim=-1 is the last).",
    "no_transpose": "A @ B pairs the last size of A with the second-to-last of B ({a} with {b} here). B ends in the "
                    "same size as A, {a}: it is stored the other way round (as keys are, (..., S, E), and as an "
                    "nn.Linear weight is, (out, in)), so flip the second with .transpose(-2, -1): (..., L, E) @ "
                    "(..., E, S) -> (..., L, S).",
    "vector_per_batch": "`{name}` {short} holds one vector per batch entry, but @ takes a 2-D right operand as one "
                        "matrix shared by the whole batch, {long} @ {short}. Give each vector its own column: "
                        "{name}.unsqueeze(-1) is {column}, and {long} @ {column} -> {result}.",
    "matmul": "A @ B needs the last size of A ({a}) to equal the second-to-last of B ({b}), as in "
                    "(..., L, E) @ (..., E, S) -> (..., L, S).",
    "keepdim": "a reduction without keepdim=True drops the dimension: {short} no longer lines up with "
                     "{long}. Use keepdim=True (for example scores.amax(dim=-1, keepdim=True)).",
    "broadcast": "elementwise operations line shapes up from the right, and each pair of sizes must be "
                       "equal or 1; {a} and {b} are not.",
    "reshape": "the new shape must hold exactly as many numbers as the old one; with heads, E = H * Dh.",
    "float_size": "sizes must be whole numbers: use integer division, E // num_heads, not E / num_heads.",
    "bool_mask": "a mask is a bool tensor (True = may attend): invert it with ~mask (not 1 - mask), and "
                       "give masked_fill a bool mask (mask.bool()).",
    "dtype": "both sides of the operation must have the same dtype; convert one with .to(other.dtype).",
    "signature": "the checker calls your function with {n} arguments, ({params}); keep the first line of "
                       "the stub as it is.",
    "generic": "print the shape of each tensor, line by line (x.shape), and compare them with the shapes "
                     "the exercise asks for.",
    "row_input": "`{name}` {short} has one number per row of {long}, but elementwise operations line shapes up "
                 "from the right, so it meets the last dimension, the columns. Make it a column first: "
                 "{name}[:, None] (or {name}.unsqueeze(-1)) is {name} as one number per row.",
    "einsum_dims": "einsum's letters name every dimension, so '{equation}' fits only inputs with exactly that many, "
                   "and the checker also passes more batch dimensions. Write ... for the dimensions in front: "
                   "'...le,...se->...ls'.",
    "einsum_letters": "in an einsum one letter is one size, but '{letter}' stands for {a} in one operand and {b} in "
                      "another. Give each operand its letters in the order of its shape: key is (..., S, E), so "
                      "'...se', not '...es'.",
    "number_not_tensor": "torch.{fn} takes a tensor, but got a plain Python {kind} (query.size(-1) is an int, not a "
                         "tensor): use math.{fn}(...) for a number{root}.",
    "tensor_function_on_number": "torch.{fn} takes a tensor, but got a plain Python {kind} (query.size(-1) is an "
                                 "int, not a tensor): work on a tensor, or with Python's own operators.",
}

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
            return CRASH_HINTS["flip_not_needed"].format(
                expr=match.group(0).replace(" ", ""), name=name, original=_fmt(original), shape=_fmt(right),
                left=_fmt(left), a=left[-1], how=".T" if how == "T" else f".{how.split('(')[0]}")
        if how == "T" and len(original) > 2:
            return CRASH_HINTS["reversed"].format(arg="B", shape=_fmt(right), name=name, original=_fmt(original))
    return None


def _swapped(shape: tuple, original: tuple) -> tuple[int, int] | None:
    """The two dimensions ``(i, j)`` whose swap turns ``original`` into ``shape``, or ``None``."""
    if len(shape) != len(original) or shape == original:
        return None
    diff = [d for d in range(len(shape)) if shape[d] != original[d]]
    if len(diff) == 2 and shape[diff[0]] == original[diff[1]] and shape[diff[1]] == original[diff[0]]:
        return diff[0], diff[1]
    return None


def _einsum_cause(text: str, op_args: list) -> str | None:
    """A hint for an einsum whose letters do not fit its operands, or ``None``."""
    if "number of subscripts" in text and "no ellipsis" in text:
        equation = next((a for a in op_args if isinstance(a, str)), "...")
        return CRASH_HINTS["einsum_dims"].format(equation=equation)
    sizes = re.search(r"subscript (\w) has size (\d+) for operand \d+ which does not broadcast with previously "
                      r"seen size (\d+)", text)
    if sizes:
        return CRASH_HINTS["einsum_letters"].format(letter=sizes.group(1), a=sizes.group(3), b=sizes.group(2))
    return None


def _cause(error: BaseException, op: str | None, shapes: list[tuple], inputs: dict[str, tuple],
           line: str | None = None, op_args: list | None = None) -> str:
    """The likely cause of ``error``, raised by operation ``op`` on tensors of ``shapes``, as a hint."""
    text = str(error)
    pair = re.search(r"return_types\.(\w+)", text)
    if pair:
        return CRASH_HINTS["max_pair"].replace("x.max", f"x.{pair.group(1)}")
    number = re.match(r"(\w+)\(\): argument '\w+' \(position \d\) must be Tensor, not (int|float)", text)
    if number:  # torch.sqrt(d_k) on a plain int
        fn, kind = number.groups()
        if hasattr(math, fn):
            root = " (or d_k ** 0.5)" if fn == "sqrt" else ""
            return CRASH_HINTS["number_not_tensor"].format(fn=fn, kind=kind, root=root)
        return CRASH_HINTS["tensor_function_on_number"].format(fn=fn, kind=kind)
    if isinstance(error, TypeError) and op is None and not _learner_frames(error):  # raised by the call itself
        return CRASH_HINTS["signature"].format(n=len(inputs), params=", ".join(inputs))
    if op == "einsum":
        einsum = _einsum_cause(text, op_args or [])
        if einsum:
            return einsum
    rules = [
        (op == "t", "t"), (op in {"bmm", "baddbmm"}, "bmm"), (op in {"mm", "mv", "addmm"}, "mm"),
        (op in {"view", "view_as"} and "stride" in text, "view"), (op == "permute", "permute"),
        ("must be tuple of ints" in text or "but got float" in text, "float_size"),
        ("is invalid for input of size" in text, "reshape"),
        (re.search(r"boolean|bool tensor|bitwise_not", text) is not None, "bool_mask"),
        ("dtype" in text or "scalar type" in text, "dtype"),
    ]
    for applies, key in rules:
        if applies:
            return CRASH_HINTS[key]
    flip = _flip_in_line(line, _learner_locals(error), op, op_args or [])
    if flip:
        return flip
    for arg, shape in zip(("A", "B"), shapes, strict=False):  # an input reversed or swapped by hand
        for name, original in inputs.items():
            if original is None:
                continue
            if list(inputs.values()).count(original) > 1:  # two inputs of that shape: the tensor is not named
                name = "x"
            if len(shape) > 2 and shape == original[::-1] and shape != original:
                return CRASH_HINTS["reversed"].format(arg=arg, shape=_fmt(shape), name=name,
                                                      original=_fmt(original))
            dims = _swapped(shape, original)
            if dims and dims != (len(shape) - 2, len(shape) - 1):
                return CRASH_HINTS["hard_transpose"].format(arg=arg, shape=_fmt(shape), name=name,
                                                            original=_fmt(original), i=dims[0], j=dims[1])
    dim = re.search(r"Dimension out of range .* but got (-?\d+)", text)
    if dim:
        return CRASH_HINTS["dim_range"].format(dim=f"dim={dim.group(1)}")
    if len(shapes) >= 2:
        a, b = shapes[0], shapes[1]
        if op in _MATMULS and a and b:
            given = next((name for name, shape in inputs.items() if shape == b), None)
            if given and len(b) == 2 and len(a) >= 3 and a[0] == b[0] and a[-1] == b[-1]:  # key @ query, (N, E)
                column = (*b, 1)
                return CRASH_HINTS["vector_per_batch"].format(name=given, short=_fmt(b), long=_fmt(a),
                                                              column=_fmt(column), result=_fmt((*a[:-1], 1)))
            inner = b[-2] if len(b) > 1 else b[0]
            if len(b) > 1 and a[-1] == b[-1] and a[-1] != inner:
                return CRASH_HINTS["no_transpose"].format(a=a[-1], b=inner)
            return CRASH_HINTS["matmul"].format(a=a[-1], b=inner)
        if "must match the size" in text:
            short, long = sorted((a, b), key=len)
            given = next((name for name, shape in inputs.items() if shape == short), None)
            if given and len(short) == 1 and long[:-1] == short:  # a per-row input lined up with the columns
                return CRASH_HINTS["row_input"].format(name=given, short=_fmt(short), long=_fmt(long))
            if len(long) == len(short) + 1 and long[:-1] == short:
                return CRASH_HINTS["keepdim"].format(short=_fmt(short), long=_fmt(long))
            return CRASH_HINTS["broadcast"].format(a=_fmt(a), b=_fmt(b))
    return CRASH_HINTS["generic"]


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
