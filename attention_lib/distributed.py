"""Starting a ring of processes on one machine: ``spawn(fn, world, *args)``, and the same code under torchrun.

Built for ``notebooks/16_ring_attention.ipynb``. :func:`spawn` starts ``world`` fresh Python processes (the
``spawn`` start method, the one Windows and macOS use by default, so nothing depends on ``fork``), joins them
in a ``torch.distributed`` process group on the ``gloo`` backend (CPU), calls ``fn(rank, world, *args)`` in
each and returns their results in rank order. The processes find each other through a ``file://`` store in a
temporary folder; gloo then connects them over TCP, each rank listening on a port of this machine. What a child
prints goes to its own log file (:meth:`ProcessRing.output` reads it back); what it returns comes back through a
queue. :class:`ProcessRing` keeps such processes alive between calls, so that a lesson pays for starting them
once. When a child raises, :func:`spawn` raises a ``RuntimeError`` holding the child's traceback; when one dies
without a traceback, it says which rank, which signal or exit code (and what that signal is), and the last lines
the child wrote to its stderr, and stops the others, so a broken ring never hangs the notebook.

``fn`` must be importable by a child: a module-level function of a module, or of a script guarded by
``if __name__ == "__main__":`` (spawn imports the script again in each child); a function defined in a notebook
cannot be imported. :func:`run_under_torchrun` calls the same ``fn`` in a process started by ``torchrun``.
"""

from __future__ import annotations

import os
import pickle
import queue as queues
import sys
import tempfile
import time
import traceback
from collections.abc import Callable

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from ._deaths import _raise_for_death_behind, _raise_for_silent_death, signal_meaning  # noqa: F401
from ._ring_hops import _pack, _unpack, _world_and_rank, pass_round  # noqa: F401 - one hop, re-exported
from .validation import check_int


def check_world(world) -> int:
    """``world``, checked: an int, at least 1 (one process is a ring of one).

    Raises:
        TypeError: if it is not an int. ValueError: if it is below 1.
    """
    return check_int(world, "world", minimum=1, fix="a ring needs at least one process (world=1 runs alone)")


#: Seconds :func:`spawn` waits for all ranks before it stops them and raises TimeoutError.
DEFAULT_TIMEOUT = 120.0


def check_importable(fn) -> Callable:
    """``fn`` itself, if a child process can import it by name; else a clear error.

    A function of a script's ``__main__`` is accepted: spawn runs the script again in each child (as
    ``__mp_main__``), so its module-level functions are found there, as long as the script guards what it runs
    with ``if __name__ == "__main__":``.

    Raises:
        TypeError: if ``fn`` is not callable, is defined inside another function or as a lambda, or in a notebook
            or at the interactive prompt, where a spawned child cannot find it.
    """
    if not callable(fn):
        raise TypeError(f"fn must be a function fn(rank, world, *args), but got {type(fn).__name__}.")
    module, name = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if "<locals>" in name or "<lambda>" in name:
        raise TypeError(f"fn must be a module-level function (def at the top of a module), because each process "
                        f"imports it by name, but found {name!r}, defined inside a function or as a lambda.")
    script = getattr(sys.modules.get("__main__"), "__file__", None)
    if module is None or (module == "__main__" and not (script and script.endswith(".py"))):
        raise TypeError(f"fn must be importable by a new process, but {name!r} was defined in a notebook or at the "
                        f"interactive prompt, which a new process cannot import; move it into a .py file next to "
                        f"the notebook and import it from there (the lesson's workers live in "
                        f"attention_lib.experiments.ring_attention).")
    return fn


def spawn(fn: Callable, world: int, *args, timeout: float = DEFAULT_TIMEOUT, threads: int = 1) -> list:
    """Run ``fn(rank, world, *args)`` in ``world`` new gloo processes and return their results, in rank order.

    Built for ``notebooks/16_ring_attention.ipynb``: a :class:`ProcessRing` started for one call, then closed.
    Results travel back pickled (tensors included).

    Args:
        fn: a module-level function of an importable module (see :func:`check_importable`).
        world: how many processes, at least 1.
        *args: passed to every rank (picklable).
        timeout: seconds to wait for every rank.
        threads: ``torch.set_num_threads`` in each child (1: the ranks share the machine's cores).

    Returns:
        ``[result of rank 0, result of rank 1, ...]``.

    Raises:
        TypeError: if ``fn`` cannot be imported by a child, or ``world`` is not an int.
        ValueError: if ``world < 1``.
        RuntimeError: if a rank raised (the message holds its traceback) or died (its exit code).
        TimeoutError: if the ranks did not all finish within ``timeout`` seconds.
    """
    check_importable(fn)
    with ProcessRing(world, timeout=timeout, threads=threads) as ring:
        return ring.run(fn, *args)


class ProcessRing:
    """``world`` processes in one gloo process group, kept alive between calls of :meth:`run`.

    Built for ``notebooks/16_ring_attention.ipynb``, where each new process costs seconds (it imports torch):
    a lesson starts a ring once and runs several workers on it. After a rank raises or dies the ring is closed
    (the other ranks may wait in a collective that will never complete). Use it as a context manager, or call
    :meth:`close`. Arguments and errors as :func:`spawn`.
    """

    def __init__(self, world: int, *, timeout: float = DEFAULT_TIMEOUT, threads: int = 1):
        self.world, self.timeout = check_world(world), timeout
        threads = check_int(threads, "threads", minimum=1, fix="each rank needs at least one thread")
        context = mp.get_context("spawn")
        self._folder = tempfile.TemporaryDirectory(prefix="ring-")
        store = f"file://{os.path.join(self._folder.name, 'store')}"
        self._tasks = [context.Queue() for _ in range(self.world)]
        self._messages = context.Queue()
        self._ranks = [context.Process(target=_serve, args=(rank, self.world, store, self._tasks[rank],
                                                            self._messages, threads), daemon=True)
                       for rank in range(self.world)]
        for rank, process in enumerate(self._ranks):
            _start_writing_to(process, self.log(rank))
        self._logs = [self.log(rank) for rank in range(self.world)]

    def run(self, fn: Callable, *args) -> list:
        """``fn(rank, world, *args)`` on every rank: the results, in rank order."""
        check_importable(fn)
        if self._folder is None:
            raise RuntimeError("this ProcessRing is closed (after close(), or after a rank failed); start a new one.")
        for tasks in self._tasks:
            tasks.put((fn, args))
        results: dict[int, object] = {}
        try:
            _collect(self._ranks, self._messages, results, self.timeout, self._logs)
        except BaseException:
            self.close(wait=0)  # the ranks may be stuck waiting for each other: stop them now
            raise
        return [results[rank] for rank in range(self.world)]

    def log(self, rank: int) -> str:
        """The file that rank ``rank``'s output (its ``print`` and its stderr) goes to while the ring runs."""
        return os.path.join(self._folder.name if self._folder is not None else "", f"rank{rank}.log")

    def output(self, rank: int) -> str:
        """What rank ``rank`` has printed so far (stdout and stderr), read from its log; ``""`` once closed."""
        try:
            with open(self._logs[rank], errors="replace") as log:
                return log.read()
        except OSError:
            return ""

    def close(self, wait: float = 5.0) -> None:
        """Stop every rank (after ``wait`` seconds, terminated) and remove the store's folder (safe to call twice)."""
        if self._folder is None:
            return
        for tasks, process in zip(self._tasks, self._ranks, strict=True):
            if process.is_alive():
                tasks.put(None)
        deadline = time.monotonic() + wait  # one wait for all the ranks, not one each
        for process in self._ranks:
            process.join(timeout=max(0.0, deadline - time.monotonic()))
        for process in self._ranks:
            if process.is_alive():
                process.terminate()
                process.join(timeout=5)
        self._folder.cleanup()
        self._folder = None

    def __enter__(self) -> ProcessRing:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ProcessRing(world={self.world}, {'closed' if self._folder is None else 'running'})"


def _start_writing_to(process, path: str) -> None:
    """Start ``process`` with its stdout and stderr (file descriptors 1 and 2) writing to ``path``: a spawned child
    inherits them, so even an error raised before our code runs in it (importing the parent's script) lands there."""
    with open(path, "ab", buffering=0) as log:
        saved = [os.dup(1), os.dup(2)]
        try:
            for fd in (1, 2):
                os.dup2(log.fileno(), fd)
            process.start()
        finally:
            for fd, old in zip((1, 2), saved, strict=True):
                os.dup2(old, fd)
                os.close(old)


def _collect(ranks, messages, results: dict, timeout: float, logs: list[str]) -> None:
    deadline = time.monotonic() + timeout
    while len(results) < len(ranks):
        try:
            rank, ok, payload = messages.get(timeout=0.1)
        except queues.Empty:
            for rank, process in enumerate(ranks):
                if rank not in results and process.exitcode is not None:
                    _raise_for_silent_death(rank, process.exitcode, len(ranks), logs, ranks)
            if time.monotonic() > deadline:
                raise TimeoutError(f"the ranks did not finish within timeout={timeout} s (done: {sorted(results)} of "
                                   f"{len(ranks)}); pass a larger timeout, or look for a rank that waits on a message "
                                   f"no other rank sends.") from None
            continue
        if not ok:
            _raise_for_death_behind(ranks, results, rank, logs)  # a peer died and this rank lost its connection
            raise RuntimeError(f"rank {rank} of {len(ranks)} raised an error; its traceback:\n{payload}")
        results[rank] = pickle.loads(payload)


def _serve(rank: int, world: int, store: str, tasks, messages, threads: int) -> None:
    """One rank: in the process group, running ``(fn, args)`` tasks until ``None``; each result or traceback goes
    home through ``messages``. Its stdout and stderr are its log file (see :func:`_start_writing_to`)."""
    for stream in (sys.stdout, sys.stderr):
        stream.reconfigure(line_buffering=True)  # each printed line reaches the log at once
    torch.set_num_threads(threads)
    try:
        dist.init_process_group("gloo", init_method=store, rank=rank, world_size=world)
        for fn, args in iter(tasks.get, None):
            try:
                messages.put((rank, True, pickle.dumps(fn(rank, world, *args))))
            except BaseException:  # noqa: BLE001 - whatever happened, the parent hears of it
                messages.put((rank, False, traceback.format_exc()))
    except BaseException:  # noqa: BLE001 - joining the group failed
        messages.put((rank, False, traceback.format_exc()))
    # No destroy_process_group(), and no normal exit (gloo's clean-up waits seconds for the other ranks): once the
    # last message has left, the process ends at once.
    messages.close()
    messages.join_thread()
    sys.stdout.flush()
    os._exit(0)


def run_under_torchrun(fn: Callable, *args):
    """Call ``fn(rank, world, *args)`` in a process that ``torchrun`` started; returns its result.

    Joins the process group from torchrun's environment (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ...) on gloo,
    so the workers that :func:`spawn` runs run here unchanged.

    Raises:
        RuntimeError: if the environment holds no ``RANK``/``WORLD_SIZE`` (not started by torchrun).
    """
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        raise RuntimeError("run_under_torchrun expected the RANK and WORLD_SIZE that torchrun sets, but found neither; "
                           "start it with `torchrun --standalone --nproc-per-node 2 -m <module>`, or use spawn().")
    dist.init_process_group("gloo")
    try:
        return fn(dist.get_rank(), dist.get_world_size(), *args)
    finally:
        dist.destroy_process_group()


def tensor_bytes(*tensors: torch.Tensor) -> int:
    """Bytes held by the storage of the tensors (each counted once).

    Example:
        >>> x = torch.zeros(4, 8)
        >>> tensor_bytes(x, x[:2]), tensor_bytes(torch.zeros(3, dtype=torch.float64))
        (128, 24)
    """
    seen, total = set(), 0
    for t in tensors:
        storage = t.untyped_storage()
        if storage.data_ptr() not in seen:
            seen.add(storage.data_ptr())
            total += storage.nbytes()
    return total


__all__ = ["DEFAULT_TIMEOUT", "ProcessRing", "check_importable", "check_world", "pass_round", "run_under_torchrun",
           "signal_meaning", "spawn", "tensor_bytes"]
