"""Regenerate the stored outputs of notebooks by executing them top to bottom (``python course.py execute``).

This is the only way notebook outputs are produced: never edit an output by hand. With no arguments, every
notebook under ``notebooks/`` (solutions included) is executed; otherwise only the paths given. Each runs in
its own folder, in a fresh kernel of the current environment, with the thread settings `course.py` sets.
``--jobs N`` (first argument) executes N notebooks at once: faster, but stored timings get noisier.
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from course import all_notebooks  # noqa: E402


def normalise_metadata(nb) -> None:
    """Keep only what does not depend on the machine that executed the notebook."""
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    for cell in nb.cells:
        cell.metadata.pop("execution", None)


def execute(path: Path) -> tuple[Path, float]:
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    client = NotebookClient(nb, timeout=600, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    normalise_metadata(nb)
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
