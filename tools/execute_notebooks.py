"""Regenerate the stored outputs of notebooks by executing them top to bottom (``python course.py execute``).

This is the only way notebook outputs are produced: never edit an output by hand. With no arguments, every
notebook under ``notebooks/`` (solutions included) is executed; otherwise only the paths given. Each runs in
its own folder, in a fresh kernel of the current environment, with the thread settings `course.py` sets.
``--jobs N`` (first argument) executes N notebooks at once: faster, but stored timings get noisier.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nbformat
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from course import all_notebooks  # noqa: E402

WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def normalise_metadata(nb) -> None:
    """Keep only what does not depend on the machine that executed the notebook."""
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
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


def execute(path: Path) -> tuple[Path, float]:
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    # The kernel talks over local sockets in a temporary folder, not TCP (which logs an "unencrypted" warning).
    with tempfile.TemporaryDirectory() as sockets:
        km = KernelManager(kernel_name="python3", transport="ipc", ip=str(Path(sockets) / "kernel"))
        client = NotebookClient(nb, km=km, timeout=600, record_timing=False,
                                resources={"metadata": {"path": str(path.parent)}})
        try:
            client.execute()
        finally:
            if km.has_kernel:
                km.shutdown_kernel()
    normalise_metadata(nb)
    nb = stable_widget_ids(nb)
    nbformat.validate(nb)
    nbformat.write(nb, path)
    return path, time.perf_counter() - start


def main(argv: list[str]) -> int:
    jobs = 1
    if argv[:1] == ["--jobs"]:
        jobs, argv = int(argv[1]), argv[2:]
    paths = [Path(a).resolve() for a in argv] if argv else all_notebooks()
    if not paths:
        print("no notebooks found")
        return 0
    # One notebook at a time by default: two kernels on two cores disturb each other's timings (lessons 07 and
    # 10 store measured times, in ignored cells, for learners to read).
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for path, seconds in pool.map(execute, paths):
            print(f"{seconds:6.1f} s  {path.relative_to(ROOT)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
