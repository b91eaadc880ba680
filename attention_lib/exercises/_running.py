"""Run the learner's function under a watch: record its PyTorch calls, refuse what it may not call, catch errors.

The watch is a ``TorchFunctionMode``: PyTorch hands it every function, method and operator the learner's code
calls (``torch.softmax``, ``x.view``, ``@``, ``.T``, ``.tolist()``, ``float(x)``, NumPy's ``__array__``, ...),
but not the calls made inside them. It checks each against the exercise's
:class:`~attention_lib.exercises._allowed.Allowed` (an allowlist: anything else, a future spelling included, is
refused by name), notes the package's functions on the call stack, the in-place operations and a ``.T`` on a
batched tensor, and remembers the operation that raised, so that
:func:`~attention_lib.exercises._checker.explain_crash` can name the shapes that met there.

The no-loops rule (:func:`loop_growth`): a function without a Python loop runs as many PyTorch operations and
as many lines of the learner's own Python on a small input as on a large one.
"""

from __future__ import annotations

import sys
import sysconfig
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode

from ._allowed import Allowed, plain_name, shown
from ._copies import changed_inputs, copies_of

_TORCH_DIR = str(Path(torch.__file__).parent)
_PACKAGE_DIR = str(Path(__file__).parents[1])
_EXERCISES_DIR = str(Path(__file__).parent)


@dataclass
class Run:
    """What happened when the learner's function ran once."""

    result: object = None
    error: Exception | None = None
    calls: int = 0  # PyTorch operations called by the learner's own code
    ops: set[str] = field(default_factory=set)  # their plain names
    failed_op: tuple[str, list] | None = None  # (name, arguments) of the operation that raised
    refused: str | None = None  # the hint for the first call outside what the exercise allows
    warnings: list[str] = field(default_factory=list)
    lines: int | None = None  # lines of the learner's own Python executed, when counted (``count_lines=True``)
    in_place: list[str] = field(default_factory=list)  # the in-place operations called, as written
    batched_T: bool = False  # noqa: N815 - a tensor of more than 2 dimensions reversed by `.T`, then used
    arguments: dict[str, list[tuple]] = field(default_factory=dict)  # op -> the plain (non-tensor) arguments
    changed: list[int] = field(default_factory=list)  # the arguments whose tensors the call changed in place
    clamped: bool = False  # a clamp (or clip) of the learner's changed at least one number


_CLAMPS = {"clamp", "clip", "clamp_min", "clamp_max"}
_IN_PLACE_SHOWN = {"sub": "-=", "add": "+=", "mul": "*=", "div": "/=", "setitem": "x[...] = ..."}
#: PyTorch hands `s -= x` to the watch as `sub_`, so both spellings are named.
_IN_PLACE_METHODS = {"sub": "-= or .sub_()", "add": "+= or .add_()", "mul": "*= or .mul_()", "div": "/= or .div_()"}


def _plain_args(args, kwargs) -> tuple:
    keep = (int, float, bool, str, type(None))
    return (tuple(a for a in args if isinstance(a, keep)), {k: v for k, v in kwargs.items() if isinstance(v, keep)})


class _Watch(TorchFunctionMode):
    def __init__(self, run: Run, allowed: Allowed | None):
        super().__init__()
        self.run, self.allowed = run, allowed
        self.flipped: list[torch.Tensor] = []  # the results of `.T` on batched tensors, not yet used
        self.functions = {f.__code__ for f in allowed.functions if hasattr(f, "__code__")} if allowed else set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = op_name(func)
        plain, in_place = plain_name(name)
        library, module, whole = _library_caller(sys._getframe(1))
        learners = library is None or self.allowed is None or library.f_code not in self.functions
        if learners:
            self._note(func, name, plain, in_place, library, args, kwargs, module)
            helper = whole and not whole.startswith("torch.")  # a checker's own function, called by the learner
            if whole and self.allowed is not None and self.run.refused is None and not (
                    helper and self.allowed.own_helpers):
                self.run.refused = self.allowed.library_hint.replace("{call}", f"`{whole}`")
        try:
            result = func(*args, **kwargs)
        except Exception:
            self.run.failed_op = (name, [*args, *kwargs.values()])
            raise
        if learners:
            self._follow_flips(name, args, kwargs, result)
            if plain in _CLAMPS and args and isinstance(args[0], torch.Tensor) and isinstance(result, torch.Tensor):
                self.run.clamped |= result.shape != args[0].shape or not bool(
                    ((result == args[0]) | (result.isnan() & args[0].isnan())).all())
        return result

    def _follow_flips(self, name, args, kwargs, result) -> None:
        """Note a batched tensor reversed by ``.T`` once it is used (a second ``.T`` restores it, and is no slip)."""
        flipped = [a for a in (*args, *kwargs.values()) if any(a is f for f in self.flipped)]
        if name == "T" and args and isinstance(args[0], torch.Tensor) and args[0].dim() > 2:
            if not flipped:
                self.flipped.append(result)
        elif flipped:
            self.run.batched_T = True

    def _note(self, func, name, plain, in_place, library, args, kwargs, module=None) -> None:
        run = self.run
        run.calls += 1
        run.ops.add(plain)
        run.arguments.setdefault(plain, []).append(_plain_args(args, kwargs))
        if in_place:
            run.in_place.append(_IN_PLACE_SHOWN.get(plain, name) if name.startswith("__") else
                                _IN_PLACE_METHODS.get(plain, f".{name}()"))
        if self.allowed is None or run.refused is not None:
            return
        if library is not None:
            run.refused = self.allowed.library_hint.replace("{call}", f"`{_library_name(library.f_code)}`")
        elif not self.allowed.permits(plain):
            run.refused = self.allowed.refusal(plain, f"nn.{module} (its {shown(name, func)})" if module else
                                               shown(name, func))


def _library_caller(frame):
    """``(frame, module, whole)``: the outermost frame of the package's own code (outside the exercises) between an
    operation and the learner's code (``None`` when the learner's code called the operation), the ``torch.nn`` module
    whose method made the call (``"MultiheadAttention"``), if any, and the ``torch.masked`` function that made it
    (``"torch.masked.softmax"``: a whole masked softmax, built of allowed operations), if any."""
    found, module, whole = None, None, None
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename.startswith(_PACKAGE_DIR) and not filename.startswith(_EXERCISES_DIR):
            found = frame
        elif filename.startswith(_TORCH_DIR):
            path = filename.replace("\\", "/")
            owner = frame.f_locals.get("self") if "nn" + "/modules" in path else None
            module = type(owner).__name__ if isinstance(owner, torch.nn.Module) else module
            whole = f"torch.masked.{frame.f_code.co_name}" if "/torch/masked/" in path else whole
        elif not (filename.startswith(_STDLIB_DIRS) or filename.startswith("<frozen")):
            return found, module, whole or _helper_called(frame) or ""  # the learner's code (or the exercise's)
        frame = frame.f_back
    return found, module, whole


def checkers_own(code) -> str | None:
    """How a checker's own module-level function (its reference, a helper such as ``_update``) is named, or ``None``
    for any other code (the learner's, or a wrapper a checker made around the learner's function)."""
    if not code.co_filename.startswith(_EXERCISES_DIR) or "<" in getattr(code, "co_qualname", code.co_name):
        return None
    module = Path(code.co_filename).relative_to(Path(_PACKAGE_DIR).parent).with_suffix("")
    return ".".join(module.parts) + "." + code.co_name


def _helper_called(frame) -> str | None:
    """The checker's own function that ``frame`` runs, when the learner's code called it, else ``None``."""
    name = checkers_own(frame.f_code)
    caller = frame.f_back
    while name is not None and caller is not None and caller.f_code.co_filename.startswith(_LIBRARY_DIRS_OR_FROZEN):
        caller = caller.f_back
    return name if caller is not None and not caller.f_code.co_filename.startswith(_PACKAGE_DIR) else None


_NAMES: dict = {}


def _library_name(code) -> str:
    """How the learner called the package's function of ``code``: ``al.calculate_attention``, ..."""
    if not _NAMES:
        import attention_lib as al
        from attention_lib import experiments

        where = ((al, "al."), (experiments, "attention_lib.experiments."))
        for own, (module, prefix) in [(own, place) for own in (True, False) for place in where]:  # own forward first
            for public in module.__all__:
                o = getattr(module, public)
                function = (vars(o).get("forward") if own else getattr(o, "forward", 0)) if isinstance(o, type) else o
                if hasattr(function, "__code__"):
                    _NAMES.setdefault(function.__code__, f"{prefix}{public}")
    return _NAMES.get(code, f"{code.co_qualname if hasattr(code, 'co_qualname') else code.co_name}")


def op_name(func) -> str:
    """A readable name for a function PyTorch hands to a ``TorchFunctionMode`` (``"matmul"``, ``"T"``, ...).

    An ATen operator called directly (``torch.ops.aten.sum.dim_IntList``, ``torch.ops.aten.mul``) is named by its
    operator, ``"sum"``, ``"mul"``: it is the same operation as ``torch.sum`` or ``*``.
    """
    if isinstance(func, torch._ops.OpOverload):
        return func.overloadpacket.__name__
    if isinstance(func, torch._ops.OpOverloadPacket):
        return func.__name__
    owner = getattr(func, "__self__", None)  # a property such as .T is seen through its descriptor's __get__
    name = getattr(owner, "__name__", None) if getattr(func, "__name__", "") == "__get__" else None
    return name or getattr(func, "__name__", repr(func))


def run_learner(fn: Callable, args: tuple, allowed: Allowed | None = None, *, count_lines: bool = False,
                copy: bool = True) -> Run:
    """Call ``fn`` on copies of ``args`` (an in-place slip cannot spoil the comparison) under the watch.

    Never raises: an error is returned in :attr:`Run.error`, and warnings are recorded, not shown. With
    ``allowed``, the first call outside it is recorded in :attr:`Run.refused` (the function still runs). With
    ``count_lines``, :attr:`Run.lines` counts the lines of the learner's own Python that ran (see
    :func:`loop_growth`). ``copy=False`` passes ``args`` themselves.

    Example:
        >>> from attention_lib.exercises._allowed import Allowed, PRODUCTS
        >>> run = run_learner(lambda x: torch.softmax(x @ x.T, dim=-1), (torch.ones(2, 3),),
        ...                   Allowed(PRODUCTS | {"T"}, said="a product"))
        >>> run.calls, run.refused
        (3, 'your function called `torch.softmax`, which this exercise does not use: it is built from a product.')
    """
    run = Run()
    copies, layouts = copies_of(args) if copy else (args, None)
    counter = _LineCounter() if count_lines else None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with _Watch(run, allowed), counter or _nothing():
                run.result = fn(*copies)
        except Exception as error:  # noqa: BLE001 - explained by explain_crash, never re-raised
            run.error = error
    run.warnings = [str(w.message) for w in caught]
    run.lines = counter.lines if counter else None
    if copy:  # the copies were the learner's: one that came back different was changed in place
        run.changed = changed_inputs(args, copies, layouts)
    return run


def loop_growth(fn: Callable, inputs: Sequence[tuple]) -> tuple[str, int, int] | None:
    """Whether ``fn`` loops in Python: what grows with the input, as ``(what, smallest, largest)``, or ``None``.

    ``fn`` runs once on each argument tuple of ``inputs`` (inputs of different sizes), counting the PyTorch
    operations it calls and the lines of its own Python that run. Code without a Python loop runs the same
    counts on every input; a loop over words, sentences or features (over tensors, ``.tolist()`` or a NumPy
    array, in a comprehension or a helper of the learner's) makes them grow. ``what`` is ``"PyTorch
    operations"`` or ``"lines of Python"``; a run that raises is left out.

    Example:
        >>> inputs = [(torch.ones(2, 3),), (torch.ones(4, 3),)]
        >>> loop_growth(lambda x: x.sum(dim=-1), inputs) is None
        True
        >>> what, smallest, largest = loop_growth(lambda x: torch.tensor([sum(r) for r in x.tolist()]), inputs)
        >>> what, smallest < largest
        ('lines of Python', True)
    """
    runs = [run for run in (run_learner(fn, args, count_lines=True) for args in inputs) if run.error is None]
    for what, counts in (("PyTorch operations", [run.calls for run in runs]),
                         ("lines of Python", [run.lines for run in runs])):
        if len(set(counts)) > 1:
            return what, min(counts), max(counts)
    return None


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _library_dirs() -> tuple[str, ...]:
    """Where code that is not the learner's lives: the standard library, installed packages, torch, this package."""
    paths = sysconfig.get_paths()
    dirs = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    dirs |= {str(Path(torch.__file__).parent), str(Path(__file__).parents[1])}
    return tuple(sorted(dirs))


_LIBRARY_DIRS = _library_dirs()
_STDLIB_DIRS = tuple(sorted({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")}))
_LIBRARY_DIRS_OR_FROZEN = (*_STDLIB_DIRS, _TORCH_DIR, "<frozen")


class _LineCounter:
    """Counts the lines of the learner's own Python (any code outside :func:`_library_dirs`) run inside it."""

    def __init__(self):
        self.lines = 0
        self._previous = None

    def _call(self, frame, event, arg):
        filename = frame.f_code.co_filename
        if filename.startswith(_LIBRARY_DIRS) or filename.startswith("<frozen"):
            return None
        return self._line

    def _line(self, frame, event, arg):
        if event == "line":
            self.lines += 1
        return self._line

    def __enter__(self):
        self._previous = sys.gettrace()
        sys.settrace(self._call)
        return self

    def __exit__(self, *exc):
        sys.settrace(self._previous)
        return False
