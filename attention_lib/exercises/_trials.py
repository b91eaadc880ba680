"""The trials a checker runs after the answer is right on its fixed inputs: the same inputs in float64, and a
backward pass through the answer, as a model that trains through it would run.

:func:`float64_slip` says what is wrong when the answer loses float64 (a result in float32, or float32 precision);
:func:`backward_slip` when autograd cannot run backward through it: an in-place operation on a tensor autograd
saved (``s -= s.amax(...)``, ``e /= e.sum(...)``, ``w[w.isnan()] = 0``), a change to the caller's own tensors, or a
result cut off from its inputs (``.detach()``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from ._allowed import Allowed
from ._compare import difference
from ._running import run_learner

IN_PLACE = ("your function changes a tensor in place ({ops}), and autograd then cannot run backward through it "
            "(PyTorch says: \"{said}\"). A model trains through this function: make each step a new tensor, "
            "s = s - s.amax(dim=-1, keepdim=True), e = e / e.sum(dim=-1, keepdim=True), w = w.masked_fill(...) or "
            "torch.where(...), instead of -=, /=, w[...] = ... or a method ending in _.")
CHANGED_INPUT = ("your function changed its input `{name}` in place ({ops}): the caller's tensor is no longer what "
                 "it was. Make each step a new tensor, s = s - ..., instead of -=, /=, x[...] = ... or a method "
                 "ending in _ (such as .div_() or .transpose_()).")
DETACHED = ("your result is cut off from its inputs (.detach(), .data, or a new tensor built from the numbers), so "
            "no gradient can flow back through it and a model could not train through it. Compute it from the "
            "inputs with tensor operations.")
GRAD_DIFFERS = ("right on the way forward, but the gradient with respect to `{name}` differs from the reference's "
                "({differs}): part of your computation is cut off from autograd (.detach(), .data, torch.no_grad(), "
                "or numbers rebuilt as a new tensor), so a model training through it would learn from wrong "
                "gradients. Compute every step from the inputs with tensor operations, and detach nothing.")
GRAD_NAN = ("right on the way forward, but the gradient with respect to `{name}` is NaN at {count} of {total} places "
            "where the reference's is a number: a step computes NaN or inf (0 / 0, -inf - (-inf), exp of -inf "
            "times 0) that the forward pass then cleans (nan_to_num, where), but its backward still multiplies by "
            "it. Keep NaN from being formed at all: pick safe inputs with torch.where before the step, then the "
            "masked result after it.")
FLOAT64_DTYPE = ("right in float32, but for float64 inputs your function returned {got}: it converts to, or builds "
                 "tensors in, another dtype. Keep the inputs' dtype: make new tensors with dtype=x.dtype (or "
                 "torch.zeros_like(x), x.new_zeros(...)), and leave out .float() and dtype=torch.float32.")
FLOAT64_CRASH = ("right in float32, but on the same inputs in float64 your function raised {error} (PyTorch says: "
                 "\"{said}\"): only the dtype changed, so a tensor it makes itself is float32 while the inputs are "
                 "float64. Make new tensors with dtype=x.dtype (or torch.zeros_like(x), x.new_zeros(...)), and leave "
                 "out .float() and dtype=torch.float32.")
FLOAT64_PRECISION = ("right in float32, but on float64 inputs your result differs from the reference ({differs}): "
                     "somewhere it computes in float32. Keep the inputs' dtype all the way (no .float(), no "
                     "dtype=torch.float32).")
#: The same, when the function converts no dtype: the numbers themselves are a little off.
FLOAT64_SMALL_CHANGE = ("right to float32's precision, but on float64 inputs your result differs from the reference "
                        "({differs}), more than float64's rounding: your function computes something slightly "
                        "different, such as a small constant added to a norm or a sum (an eps of 1e-8), a score "
                        "clamped, or a number made as a float32 tensor (torch.tensor(d_k).sqrt() is float32 whatever "
                        "the inputs: use math.sqrt(d_k)). Compute exactly the formula asked, with nothing added.")
#: Operations that change a tensor's dtype.
_CONVERSIONS = {"float", "half", "to", "type", "type_as"}


def _tensors(x) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    return [t for item in x for t in _tensors(item)] if isinstance(x, tuple | list) else []


def to_float64(args: tuple) -> tuple:
    """``args`` with every float tensor in float64 (other arguments unchanged)."""
    def convert(x):
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            return x.double()
        return type(x)(convert(y) for y in x) if isinstance(x, tuple | list) else x
    return tuple(convert(a) for a in args)


def float64_slip(fn: Callable, reference: Callable, args: tuple, allowed: Allowed | None) -> str | None:
    """What goes wrong when ``fn`` runs on ``args`` in float64 (a crash, another dtype, float32 precision), or
    ``None``."""
    args = to_float64(args)
    expected = reference(*args)
    run = run_learner(fn, args, allowed)
    if run.error is not None:
        return FLOAT64_CRASH.format(error=type(run.error).__name__, said=_first_clause(run.error))
    if run.result is None:
        return None
    got_all, expected_all = _tensors(run.result), _tensors(expected)
    for got, want in zip(got_all, expected_all, strict=False):
        if want.is_floating_point() and got.dtype != want.dtype:
            return FLOAT64_DTYPE.format(got=str(got.dtype).removeprefix("torch."))
    for got, want in zip(got_all, expected_all, strict=False):
        differs = difference(got, want, atol=1e-9, rtol=1e-9) if want.is_floating_point() else None
        if differs is not None and got.shape == want.shape:
            return (FLOAT64_PRECISION if run.ops & _CONVERSIONS else FLOAT64_SMALL_CHANGE).format(differs=differs)
    return None


def backward_slip(fn: Callable, args: tuple, allowed: Allowed | None, params: Sequence[str],
                  reference: Callable | None = None) -> str | None:
    """Whether autograd can run backward through ``fn`` on ``args`` and give the reference's gradients: the hint if
    not, else ``None``.

    Every float tensor goes in as a tensor that needs gradients and is not a leaf (the output of a model's layer,
    which may be changed in place in the forward pass); the result's finite numbers, each weighted by a fixed random
    number (a plain sum of softmax weights has no gradient), are summed and backward runs. With ``reference``, the
    gradient of every input must equal the reference's (:func:`torch.testing.assert_close`): a part cut off by
    ``.detach()`` or a NaN that ``nan_to_num`` hid on the way forward shows up there.

    Example:
        >>> def in_place(s):
        ...     s -= s.amax(dim=-1, keepdim=True)
        ...     return s - s.exp().sum(dim=-1, keepdim=True).log()
        >>> print(backward_slip(in_place, (torch.randn(2, 3),), None, ["scores"]))
        your function changes a tensor in place (-= or .sub_()), and autograd then cannot run backward through it ...
        >>> backward_slip(lambda s: s - s.amax(dim=-1, keepdim=True), (torch.randn(2, 3),), None, ["scores"]) is None
        True
    """
    leaves = [a.detach().clone().requires_grad_() if isinstance(a, torch.Tensor) and a.is_floating_point() else
              a.clone() if isinstance(a, torch.Tensor) else a for a in args]  # the answer may change them
    inputs = tuple(a.clone() if isinstance(a, torch.Tensor) and a.requires_grad else a for a in leaves)
    before = [a.detach().clone() if isinstance(a, torch.Tensor) else None for a in inputs]
    run = run_learner(fn, inputs, allowed, copy=False)
    ops = ", ".join(dict.fromkeys(run.in_place)) or "an in-place operation"
    if run.error is not None:
        said = _first_clause(run.error)
        return IN_PLACE.format(ops=ops, said=said) if _about_in_place(said) else None
    outputs = [t for t in _tensors(run.result) if t.is_floating_point()]
    if outputs and not any(t.requires_grad for t in outputs):
        return DETACHED
    total = _weighted_total(outputs)
    if isinstance(total, torch.Tensor):
        try:
            total.backward()
        except RuntimeError as error:  # only an in-place slip is this trial's to name
            said = _first_clause(error)
            if _about_in_place(said):
                return IN_PLACE.format(ops=ops, said=said)
    for name, a, was in zip(params, inputs, before, strict=False):
        if was is not None and was.is_floating_point() and not _same(a.detach(), was):
            return CHANGED_INPUT.format(name=name, ops=ops)
    return _gradients_differ(leaves, args, reference, params) if reference is not None else None


def _weighted_total(outputs: list[torch.Tensor]):
    """The finite numbers of ``outputs``, each times a fixed random weight, summed (``0`` without outputs)."""
    generator = torch.Generator().manual_seed(0)
    total = 0
    for t in outputs:
        if t.requires_grad:
            weight = torch.rand(t.shape, generator=generator, dtype=t.dtype) + 0.5
            total = total + torch.where(t.isfinite(), t * weight, 0.0).sum()
    return total


def _gradients_differ(leaves: list, args: tuple, reference: Callable, params: Sequence[str]) -> str | None:
    """The hint when the learner's gradients (on ``leaves``) differ from the reference's on the same ``args``."""
    mine = [a.detach().clone().requires_grad_() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
            for a in args]
    try:
        expected = reference(*(a.clone() if isinstance(a, torch.Tensor) and a.requires_grad else a for a in mine))
        total = _weighted_total([t for t in _tensors(expected) if t.is_floating_point()])
        if not isinstance(total, torch.Tensor):
            return None
        total.backward()
    except RuntimeError:  # a reference autograd cannot run backward through has no gradient to compare
        return None
    for name, got, want in zip(params, leaves, mine, strict=False):
        if not isinstance(want, torch.Tensor) or not want.requires_grad:
            continue
        got_grad = got.grad if got.grad is not None else torch.zeros_like(got)
        want_grad = want.grad if want.grad is not None else torch.zeros_like(want)
        nan = got_grad.isnan() & ~want_grad.isnan()
        if bool(nan.any()):
            return GRAD_NAN.format(name=name, count=int(nan.sum()), total=nan.numel())
        differs = difference(got_grad, want_grad)
        if differs is not None:
            return GRAD_DIFFERS.format(name=name, differs=differs)
    return None


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and bool(((a == b) | (a.isnan() & b.isnan())).all())


def _first_clause(error: BaseException) -> str:
    """PyTorch's message up to its first semicolon (it goes on with its own hints)."""
    text = str(error).strip()
    return text.splitlines()[0].split(";")[0][:220] if text else type(error).__name__


def _about_in_place(said: str) -> bool:
    return "inplace" in said or "in-place" in said or "in place" in said
