"""What an exercise may use: a set of allowed PyTorch operations, not a list of forbidden ones.

Each exercise declares an :class:`Allowed`: the operations its answer may call (by their plain names, ``"mul"``,
``"sum"``, ``"getitem"``), the package's functions it may call (usually none: they are the answer), and what to
use instead of anything else. The watch of :mod:`~attention_lib.exercises._running` sees every PyTorch call the
learner's code makes (``torch.linalg.matmul``, ``@``, ``.tolist()``, ``float(x)``, NumPy's ``__array__``, ...)
and refuses the first one outside the set, naming it. A new spelling in a future PyTorch is refused by default.

Example:
    >>> allowed = Allowed(ELEMENTWISE | REDUCTIONS, said="elementwise products and sums")
    >>> print(allowed.refusal("linalg_matmul", "torch.linalg.matmul"))
    your function called `torch.linalg.matmul`, which this exercise does not use: it is built from elementwise ...
    >>> allowed.permits("mul"), allowed.permits("linalg_vecdot")
    (True, False)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

#: What any answer may ask of a tensor without computing anything: its shape, its dtype, a printout.
METADATA = frozenset({"shape", "size", "dim", "ndim", "ndimension", "numel", "dtype", "device", "layout", "len",
                      "is_floating_point", "is_complex", "requires_grad", "grad_fn", "is_leaf", "is_contiguous",
                      "repr", "str", "format", "names", "nelement", "element_size", "stride", "storage_offset",
                      "is_cuda", "is_meta", "get_device"})
#: Moving numbers around: indexing, reshapes, transposes, joining and splitting, copies, dtype changes.
LAYOUT = frozenset({"getitem", "setitem", "unsqueeze", "squeeze", "reshape", "view", "view_as", "reshape_as",
                    "expand", "expand_as", "broadcast_to", "broadcast_tensors", "flatten", "unflatten", "transpose",
                    "swapaxes",
                    "swapdims", "permute", "movedim", "moveaxis", "T", "mT", "t", "contiguous", "clone", "detach",
                    "stack", "cat", "concat", "concatenate", "narrow", "select", "split", "chunk", "unbind",
                    "index_select", "gather", "take_along_dim", "flip", "fliplr", "flipud", "roll", "diagonal", "diag",
                    "diag_embed", "diagflat", "scatter", "index_put", "masked_scatter", "index_fill",
                    "to", "float", "double", "half", "type_as", "type", "cpu", "requires_grad_", "masked_select",
                    "tile", "repeat", "repeat_interleave", "squeeze_", "unsqueeze_"})
#: Numbers made from nothing (or from a shape): zeros, ones, ranges, masks.
CREATION = frozenset({"zeros", "ones", "full", "empty", "zeros_like", "ones_like", "full_like", "empty_like",
                      "arange", "tensor", "as_tensor", "eye", "tril", "triu", "new_zeros", "new_ones", "new_full",
                      "new_empty", "new_tensor", "bool", "int", "long", "linspace", "rand", "randn", "rand_like",
                      "randn_like", "scalar_tensor", "meshgrid", "tril_indices", "triu_indices"})
#: Elementwise arithmetic, functions and comparisons.
ELEMENTWISE = frozenset({"add", "sub", "mul", "div", "true_divide", "divide", "multiply", "subtract", "neg",
                         "negative", "pos", "pow", "float_power", "rsub", "reciprocal", "sqrt", "rsqrt", "square",
                         "abs", "exp", "exp2", "log", "log2", "log1p", "expm1", "sign", "maximum", "minimum",
                         "fmax", "fmin", "sin", "cos", "floordiv", "floor_divide", "remainder", "mod", "fmod",
                         "floor", "ceil", "round", "trunc", "eq", "ne", "lt", "le", "gt", "ge", "equal",
                         "logical_not", "logical_and", "logical_or", "logical_xor", "bitwise_not", "invert",
                         "and", "or", "xor", "bitwise_and", "bitwise_or", "isnan", "isinf", "isfinite",
                         "isneginf", "isposinf", "where", "masked_fill", "nan_to_num", "lerp", "addcmul",
                         "addcdiv", "rdiv", "rtruediv", "truediv", "rpow", "radd", "rmul", "rfloordiv", "clamp",
                         "clip", "clamp_min", "clamp_max"})
#: Reductions over a dimension (the sum, the max, ...), and the argmax family.
REDUCTIONS = frozenset({"sum", "mean", "amax", "amin", "max", "min", "aminmax", "prod", "any", "all", "count_nonzero",
                        "argmax", "argmin", "cumsum", "nansum", "sort", "topk", "var", "std", "nanmean"})
#: Every matrix product PyTorch spells, for the exercises that use one (a crash in any of them gets its hint).
PRODUCTS = frozenset({"matmul", "mm", "bmm", "mv", "einsum", "linear", "tensordot", "baddbmm", "addmm", "addbmm",
                      "dot", "vdot", "inner", "outer"})
#: The softmax (and its log), for the exercises past lesson 05 that may call it.
SOFTMAX = frozenset({"softmax", "log_softmax"})
#: What most exercises past lesson 03 are built from.
PLAIN = METADATA | LAYOUT | CREATION | ELEMENTWISE | REDUCTIONS
#: :data:`PLAIN` in words.
PLAIN_SAID = ("plain PyTorch operations: arithmetic and comparisons, indexing and reshapes, sums and maxima, matrix "
              "products and the softmax")

#: Calls that take numbers out of PyTorch (into Python numbers, lists or NumPy arrays), with what they make.
LEAVING_TORCH: dict[str, str] = {"tolist": "Python lists", "numpy": "a NumPy array", "array": "a NumPy array",
                                 "item": "a Python number", "py_float": "a Python number",
                                 "py_int": "a Python number", "py_index": "a Python number", "py_bool": "a Python bool",
                                 "py_complex": "a Python number",
                                 "array_wrap": "a NumPy array", "dlpack": "another library's array"}

#: Refused calls that no exercise's words describe, each with its own hint.
NAMED = {"_set_grad_enabled": "your function turns gradients off (torch.no_grad() or torch.set_grad_enabled(False)), "
                              "so no gradient could flow back through it and a model could not train through it: "
                              "compute it with gradients on, as plain tensor operations.",
         "data": "your function used x.data, which takes the numbers out of autograd (no gradient flows back "
                 "through them, and a change to them is never seen): use x itself."}

#: The hint for a call that leaves PyTorch; ``{call}`` names the call and ``{what}`` what it makes.
LEAVE_HINT = ("stay in PyTorch: your function called {call}, which turns the tensor into {what}; this exercise is "
              "done in tensor operations, every word at once (so that it runs on any device and a model can train "
              "through it).")


@dataclass(frozen=True)
class Allowed:
    """What an exercise may use.

    Attributes:
        ops: the PyTorch operations allowed, by plain name (see :func:`plain_name`); :data:`METADATA` is always
            allowed.
        said: what the exercise is built from, in words, for the hint of a refused call.
        instead: ``op name -> hint`` for refused calls that deserve their own (``{call}`` names the call).
        functions: the package's functions the answer may call (the operations inside them are not checked).
        default: the hint for any other refused call, instead of the general one (``{call}`` names it).
        library_hint: the hint for a call of any other function of the package (``{call}`` names it).
        own_helpers: whether the checkers' own functions (a reference, a helper such as ``_update``) may be called
            or given as the answer; :func:`refusing_helpers` makes a copy that refuses them with ``library_hint``.
    """

    ops: frozenset[str]
    said: str
    instead: Mapping[str, str] = field(default_factory=dict)
    functions: frozenset[Callable] = frozenset()
    default: str | None = None
    library_hint: str = ("this exercise asks you to write it yourself, with plain PyTorch operations; your "
                         "function called {call}, which does it for you.")
    own_helpers: bool = True

    def permits(self, name: str) -> bool:
        """Whether the operation ``name`` (a plain name) is allowed."""
        return name in self.ops or name in METADATA

    def refusal(self, name: str, call: str) -> str:
        """The hint for a call of ``name``, shown as ``call``."""
        shown = f"`{call}`"
        if name in self.instead:
            return self.instead[name].replace("{call}", shown)
        if name in NAMED:
            return NAMED[name]
        if name in LEAVING_TORCH and name not in self.ops:
            return LEAVE_HINT.format(call=shown, what=LEAVING_TORCH[name])
        if self.default is not None:
            return self.default.replace("{call}", shown)
        return f"your function called {shown}, which this exercise does not use: it is built from {self.said}."

    def with_ops(self, *names: str, said: str | None = None) -> Allowed:
        """The same, with more operations allowed."""
        return Allowed(self.ops | set(names), said or self.said, self.instead, self.functions, self.default,
                       self.library_hint, self.own_helpers)

    def refusing_helpers(self) -> Allowed:
        """The same, refusing the checkers' own functions as an answer or inside one."""
        return Allowed(self.ops, self.said, self.instead, self.functions, self.default, self.library_hint, False)


#: A dunder's plain name: ``__rmatmul__`` and ``__imatmul__`` are ``matmul``, ``__array__`` is ``array``.
_DUNDER_ALIASES = {"radd": "add", "iadd": "add", "rsub": "rsub", "isub": "sub", "rmul": "mul", "imul": "mul",
                   "rmatmul": "matmul", "imatmul": "matmul", "truediv": "div", "rtruediv": "rdiv", "itruediv": "div",
                   "div": "div", "rdiv": "rdiv", "idiv": "div", "ipow": "pow", "rpow": "rpow", "floordiv": "floordiv",
                   "ifloordiv": "floordiv", "rfloordiv": "rfloordiv", "iand": "and", "ior": "or", "ixor": "xor",
                   "rand": "and", "ror": "or", "rxor": "xor", "mod": "remainder", "imod": "remainder",
                   "float": "py_float", "int": "py_int", "bool": "py_bool", "index": "py_index",
                   "complex": "py_complex"}
#: How a refused call is shown, where its plain name is not how the learner wrote it.
_SHOWN = {"matmul": "@ (torch.matmul)", "array": "__array__ (NumPy's np.asarray or np.array)",
          "py_float": "float(tensor)", "py_int": "int(tensor)", "py_index": "a tensor used as a Python int",
          "py_bool": "a tensor used as a Python bool (if, and, or)", "tolist": ".tolist()", "numpy": ".numpy()",
          "item": ".item()"}


def plain_name(name: str) -> tuple[str, bool]:
    """``(plain name, in place)`` of the name PyTorch gives a call: ``"__isub__"`` -> ``("sub", True)``,
    ``"exp_"`` -> ``("exp", True)``, ``"__setitem__"`` -> ``("setitem", True)``, ``"linalg_matmul"`` -> itself."""
    if name.startswith("__") and name.endswith("__") and len(name) > 4:
        core = name[2:-2]
        in_place = core == "setitem" or (core.startswith("i") and core[1:] in {
            "add", "sub", "mul", "matmul", "truediv", "div", "pow", "floordiv", "and", "or", "xor", "mod"})
        return _DUNDER_ALIASES.get(core, core), in_place
    if name.endswith("_") and not name.startswith("_") and name not in {"requires_grad_"}:
        return name[:-1], True
    return name, False


def shown(name: str, func=None) -> str:
    """How the learner wrote the call ``name``: ``torch.linalg.matmul``, ``.tolist()``, ``@ / torch.matmul``."""
    plain, _ = plain_name(name)
    if type(func).__name__ in {"OpOverload", "OpOverloadPacket"}:  # torch.ops.aten.sum.dim_IntList, as written
        return f"torch.ops.{func}"
    if plain in _SHOWN:
        return _SHOWN[plain]
    for prefix, module in (("linalg_", "torch.linalg."), ("special_", "torch.special."), ("fft_", "torch.fft."),
                           ("nn_functional_", "F.")):
        if name.startswith(prefix):
            return module + name[len(prefix):]
    module = getattr(func, "__module__", None) or ""
    if module.startswith(("torch.nn.functional", "torch._C._nn")):
        return f"F.{name}"
    if getattr(func, "__objclass__", None) is not None or type(func).__name__ == "method_descriptor":
        return f".{name}()"
    return f"torch.{name}"
