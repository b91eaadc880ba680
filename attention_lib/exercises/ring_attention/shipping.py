"""Sending the learner's function to the processes of a ring, and running it there under the course's watch.

A spawned process cannot import a function defined in a notebook, so the checker sends it as its source (read by
:func:`inspect.getsource`, as Jupyter keeps every cell's source) with the names it uses: modules by name, the
package's functions by reference, the learner's other functions by their source, small values pickled.
"""

from __future__ import annotations

import inspect
import pickle
import textwrap
import types


class NotShippable(TypeError):
    """The learner's function cannot be sent to another process; the message says why and what to do."""


def _importable(obj) -> bool:
    module, name = getattr(obj, "__module__", None), getattr(obj, "__qualname__", "")
    return module not in (None, "__main__") and "<" not in name


def _names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def ship(fn, depth: int = 0) -> tuple:
    """What a child process needs to rebuild ``fn``: ``("ref", fn)`` for an importable function, else
    ``("source", name, source, {name: how})``.

    Raises:
        NotShippable: for a lambda, a function of a closure, or one whose source cannot be read.
    """
    if not callable(fn):
        raise NotShippable(f"expected your function, but got {type(fn).__name__}.")
    if _importable(fn):
        return ("ref", fn)
    name = getattr(fn, "__name__", "")
    if name == "<lambda>":
        raise NotShippable("a lambda cannot be sent to the ring's processes: write it with def at the top level "
                           "of a cell.")
    if getattr(fn, "__closure__", None):
        raise NotShippable(f"{name} uses names of the function it is defined in "
                           f"({', '.join(fn.__code__.co_freevars)}), which another process cannot see: define it "
                           f"with def at the top level of a cell.")
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError) as missing:
        raise NotShippable(f"the source of {name} cannot be read ({missing}), and a spawned process needs it: "
                           f"define it with def in a notebook cell or a .py file.") from None
    found = {}
    for used in sorted(_names(fn.__code__)):
        if used not in fn.__globals__:
            continue  # a builtin, or an attribute's name
        obj = fn.__globals__[used]
        if isinstance(obj, types.ModuleType):
            found[used] = ("module", obj.__name__)
        elif isinstance(obj, types.FunctionType) and not _importable(obj) and depth < 5:
            found[used] = ("source", ship(obj, depth + 1))
        else:
            try:
                found[used] = ("value", pickle.dumps(obj))
            except Exception:  # noqa: BLE001 - left out: the child then raises NameError, explained as a crash
                continue
    return ("source", name, source, found)


def unship(shipped: tuple):
    """The function :func:`ship` described, rebuilt in this process."""
    if shipped[0] == "ref":
        return shipped[1]
    _, name, source, found = shipped
    import importlib

    namespace: dict = {"__name__": "__learner__"}
    for used, (how, what) in found.items():
        if how == "module":
            namespace[used] = importlib.import_module(what)
        elif how == "source":
            namespace[used] = unship(what)
        else:
            namespace[used] = pickle.loads(what)
    import linecache

    filename = f"<your {name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # for the crash's line
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - the learner's own cell, sent on
    return namespace[name]
