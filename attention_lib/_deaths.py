"""What :mod:`attention_lib.distributed` says when a rank dies without a Python traceback: which rank, its signal
or exit code, what the signal is, and the last lines the rank wrote to its stderr."""

from __future__ import annotations

import signal
import time


def _raise_for_death_behind(ranks, results: dict, failed: int, logs: list[str], grace: float = 1.0) -> None:
    """When rank ``failed`` raised because another rank died (gloo: "Connection closed by peer"), name the dead one."""
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        for rank, process in enumerate(ranks):
            if rank != failed and rank not in results and process.exitcode not in (None, 0):
                _raise_for_silent_death(rank, process.exitcode, len(ranks), logs, ranks)
        time.sleep(0.05)


def signal_meaning(number: int) -> str:
    """A signal's name and the system's description of it, e.g. ``"SIGABRT, Aborted"``.

    Example:
        >>> signal_meaning(9)
        'SIGKILL, Killed'
    """
    try:
        name = signal.Signals(number).name
    except ValueError:
        return f"signal {number}, unknown to this system"
    return f"{name}, {signal.strsignal(number) or 'no description'}"


def _tail(path: str, lines: int = 20) -> str:
    try:
        with open(path, errors="replace") as log:
            return "".join(log.readlines()[-lines:]).rstrip()
    except OSError:
        return ""


def _death(rank: int, exitcode: int, logs: list[str]) -> str:
    how = f"killed by signal {-exitcode} ({signal_meaning(-exitcode)})" if exitcode < 0 else f"exit code {exitcode}"
    tail = _tail(logs[rank])
    if tail:
        return f"rank {rank} ({how}); the last lines it wrote to its stderr:\n{tail}"
    outside = (" (a SIGKILL comes from outside the process: kill -9, or the system's out-of-memory killer, which "
               "the system log names)") if exitcode == -signal.SIGKILL else ""
    return f"rank {rank} ({how}) wrote nothing to its stdout or stderr{outside}."


def _raise_for_silent_death(rank: int, exitcode: int, world: int, logs: list[str], ranks=()) -> None:
    """Raise for rank ``rank``, dead with ``exitcode``; the other dead ranks of ``ranks`` (processes) are told too."""
    others = [(r, p.exitcode) for r, p in enumerate(ranks) if r != rank and p.exitcode not in (None, 0)]
    told = "\n".join(_death(r, code, logs) for r, code in [(rank, exitcode), *others])
    raise RuntimeError(f"rank {rank} of {world} died before returning a result, without a Python traceback"
                       f"{f' (and {len(others)} more)' if others else ''}; the other ranks were stopped.\n{told}")
