"""Regenerate the stored outputs of notebooks by executing them top to bottom (``python3 course.py execute``).

This is the only way notebook outputs are produced: never edit an output by hand. With no arguments, every
notebook under ``notebooks/`` (solutions included) is executed; otherwise only the paths given. Each runs in
its own folder, in a fresh kernel of the current environment, with the thread settings `course.py` sets.

Options, before the paths: ``--jobs N`` executes N notebooks at once (faster, but stored timings get
noisier); ``--cell-timeout S`` stops a cell that runs longer than S seconds (default :data:`CELL_TIMEOUT`);
``--timeout S`` stops a notebook that runs longer than S seconds in all (default :data:`NOTEBOOK_TIMEOUT`).
A run that fails or is stopped ends with a message naming the notebook and the cell, never with a silent
wait; that notebook is left on disk as it was, the others go on, and the command exits with status 1.

What a run stores besides the outputs: the kernel's own ``kernelspec`` and ``language_info``, exactly as
JupyterLab writes them when it opens the notebook and its kernel starts (``{"name": "python3", "display_name":
"Python 3 (ipykernel)", "language": "python"}``, and the kernel's language, Python version included). Anything
else would make JupyterLab change the notebook as it opens, so that every lesson would show as modified (its tab's
dot) before the learner touched it; ``tests/test_browser.py`` opens every lesson and checks that it does not.

Why a run cannot wait forever: the kernel client is asynchronous (``AsyncKernelManager``; with a blocking one,
nbclient waits for the kernel's messages with a blocking call inside its event loop, so while no message comes
nothing else runs, its per-cell timeout included), and every limit above ends the run with a message. The kernel
releases that could leave a request unread for good when a front end echoes an Output widget's outputs back
(ipykernel 7.0 to 7.3, https://github.com/ipython/ipykernel/issues/1554) are excluded by the project's
dependencies (``pyproject.toml``), so nbclient's Output widget runs as JupyterLab's does.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import nbformat
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from course import all_notebooks  # noqa: E402

WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

#: Seconds one cell may run (the lessons' slowest cells take well under a minute on a laptop).
CELL_TIMEOUT = 300
#: Seconds one notebook may run in all, kernel start included.
NOTEBOOK_TIMEOUT = 900
#: Extra seconds before the last-resort alarm fires, should the event loop itself ever be stuck.
ALARM_GRACE = 60


class NotebookTimeout(TimeoutError):
    """A notebook ran longer than its overall time limit."""


@dataclass
class Outcome:
    """What executing one notebook gave: the seconds it took, and an error message (``""`` when it worked)."""

    path: Path
    seconds: float
    error: str = ""


def normalise_metadata(nb, kernel_name: str, kernel_spec) -> None:
    """The notebook's metadata as JupyterLab will find it: the kernel's ``kernelspec``, the ``language_info`` the
    kernel reported (nbclient stores it), and no per-cell execution times."""
    nb.metadata["kernelspec"] = {"display_name": kernel_spec.display_name, "language": kernel_spec.language,
                                 "name": kernel_name}
    for cell in nb.cells:
        cell.metadata.pop("execution", None)


def stable_widget_ids(nb):
    """Rename the explorers' widget models ``w0001``, ``w0002``, ... in the order the notebook shows them.

    Jupyter gives every widget a random id, so each execution would rewrite all the stored widget state and its
    references even when nothing changed. Numbering them in a fixed order (each explorer's view, then the models
    it refers to, depth first) keeps the stored notebooks' diffs to what really changed.
    """
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    if not state:
        return nb
    order: list[str] = []

    def visit(model_id: str) -> None:
        if model_id in order or model_id not in state:
            return
        order.append(model_id)
        for ref in re.findall(r"IPY_MODEL_([0-9a-f]{32})", json.dumps(state[model_id], sort_keys=True)):
            visit(ref)

    for cell in nb.cells:
        for output in cell.get("outputs", []):
            view = output.get("data", {}).get(WIDGET_VIEW)
            if view:
                visit(view["model_id"])
    for model_id in sorted(state, key=lambda m: json.dumps(state[m], sort_keys=True)):  # models no view shows
        visit(model_id)
    text = json.dumps(nb)
    for number, model_id in enumerate(order, 1):
        text = text.replace(model_id, f"w{number:04d}")
    return nbformat.from_dict(json.loads(text))


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _describe_cell(nb, index: int | None) -> str:
    """``cell 39 (counting from 0; it starts `memory_efficient_explorer()`)``, or a note that none had started."""
    if index is None:
        return "before its first cell (while starting the kernel)"
    lines = [line for line in nb.cells[index].source.splitlines() if line.strip()]
    first = lines[0] if lines else ""
    if first.startswith("# NBVAL") and len(lines) > 1:
        first = lines[1]
    first = first if len(first) <= 70 else first[:67] + "..."
    return f"cell {index} (counting from 0; it starts `{first}`)"


def _alarm(signum, frame):
    raise NotebookTimeout


async def _run(client: NotebookClient, km: AsyncKernelManager, notebook_timeout: float) -> None:
    task = asyncio.ensure_future(client.async_execute())
    try:
        done, _ = await asyncio.wait({task}, timeout=notebook_timeout)
        if not done:  # nbclient reports a cancelled cell as a dead kernel: stop it, then say what happened
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise NotebookTimeout
        task.result()  # the notebook's own error, if any
    finally:
        if km.has_kernel:
            await km.shutdown_kernel(now=True)


def execute(path: Path, cell_timeout: float = CELL_TIMEOUT, notebook_timeout: float = NOTEBOOK_TIMEOUT) -> Outcome:
    """Execute the notebook at ``path`` in a fresh kernel and store its outputs, unless it fails or times out.

    Returns:
        An :class:`Outcome`; its ``error`` names the notebook and the cell when the run failed or was stopped
        (the file is then left as it was).
    """
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    current: dict[str, int | None] = {"cell": None}
    # The kernel talks over local sockets in a temporary folder, not TCP (which logs an "unencrypted" warning).
    with tempfile.TemporaryDirectory() as sockets:
        km = AsyncKernelManager(kernel_name="python3", transport="ipc", ip=str(Path(sockets) / "kernel"))
        client = NotebookClient(nb, km=km, timeout=int(cell_timeout), record_timing=False,
                                resources={"metadata": {"path": str(path.parent)}},
                                on_cell_start=lambda cell, cell_index: current.update(cell=cell_index))
        # The last resort, should the event loop itself ever block: an alarm (POSIX, main thread only).
        alarm = hasattr(signal, "SIGALRM") and threading.current_thread() is threading.main_thread()
        if alarm:
            previous = signal.signal(signal.SIGALRM, _alarm)
            signal.alarm(int(notebook_timeout + ALARM_GRACE))
        try:
            asyncio.run(_run(client, km, notebook_timeout))
        except NotebookTimeout:
            return Outcome(path, time.perf_counter() - start, (
                f"{_shown(path)}: stopped after {notebook_timeout:g} s in all, the limit for one notebook, "
                f"during {_describe_cell(nb, current['cell'])}. Run it in JupyterLab to see where it waits, "
                f"or raise the limit with --timeout."))
        except CellTimeoutError:
            return Outcome(path, time.perf_counter() - start, (
                f"{_shown(path)}: {_describe_cell(nb, current['cell'])} did not finish within {cell_timeout:g} s, "
                f"the limit for one cell, and was stopped. Run it in JupyterLab to see where it waits, or raise "
                f"the limit with --cell-timeout."))
        except CellExecutionError as error:
            return Outcome(path, time.perf_counter() - start,
                           f"{_shown(path)}: {_describe_cell(nb, current['cell'])} raised an error:\n{error}")
        except DeadKernelError:
            return Outcome(path, time.perf_counter() - start,
                           f"{_shown(path)}: the kernel died during {_describe_cell(nb, current['cell'])}.")
        finally:
            if alarm:
                signal.alarm(0)
                signal.signal(signal.SIGALRM, previous)
    normalise_metadata(nb, km.kernel_name, km.kernel_spec)
    nb = stable_widget_ids(nb)
    nbformat.validate(nb)
    nbformat.write(nb, path)
    return Outcome(path, time.perf_counter() - start)


def _options(argv: list[str]) -> tuple[dict[str, float], list[str]]:
    """``--jobs``, ``--cell-timeout`` and ``--timeout`` (each with a number), then the paths."""
    names = {"--jobs": "jobs", "--cell-timeout": "cell_timeout", "--timeout": "notebook_timeout"}
    options = {"jobs": 1, "cell_timeout": CELL_TIMEOUT, "notebook_timeout": NOTEBOOK_TIMEOUT}
    while argv[:1] and argv[0] in names:
        if len(argv) < 2:
            raise SystemExit(f"{argv[0]} needs a number, e.g. {argv[0]} 300")
        try:
            value = float(argv[1])
        except ValueError:
            raise SystemExit(f"{argv[0]} needs a number, but got {argv[1]!r}; e.g. {argv[0]} 300") from None
        if value <= 0:
            raise SystemExit(f"{argv[0]} must be positive, but got {argv[1]}")
        options[names[argv[0]]] = value
        argv = argv[2:]
    return options, argv


def main(argv: list[str]) -> int:
    options, argv = _options(argv)
    paths = [Path(a).resolve() for a in argv] if argv else all_notebooks()
    if not paths:
        print("no notebooks found")
        return 0
    run = partial(execute, cell_timeout=options["cell_timeout"], notebook_timeout=options["notebook_timeout"])
    failed = []
    # One notebook at a time by default: two kernels on two cores disturb each other's timings (lessons 07 and
    # 10 store measured times, in ignored cells, for learners to read).
    with ProcessPoolExecutor(max_workers=int(options["jobs"])) as pool:
        for outcome in pool.map(run, paths):
            if outcome.error:
                failed.append(outcome)
                print(f"{outcome.seconds:6.1f} s  FAILED: {outcome.error}", file=sys.stderr, flush=True)
            else:
                print(f"{outcome.seconds:6.1f} s  {_shown(outcome.path)}", flush=True)
    if failed:
        print(f"{len(failed)} of {len(paths)} notebooks failed and were left as they were: "
              + ", ".join(_shown(o.path) for o in failed), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
