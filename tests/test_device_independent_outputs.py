"""Every notebook passes strict nbval on a GPU as on a CPU: no compared cell shows what depends on the machine.

The stored outputs are made on a CPU; on Colab with a GPU the same cells run on CUDA and nbval compares them with
the stored ones. So a compared cell (one that does not start with ``# NBVAL_IGNORE_OUTPUT``) must not show:

- a value computed from the device: ``print(device)``, ``device.type``, ``torch.cuda.is_available()``, a GPU's
  name or capability, the SDPA implementation that ran, or text chosen by one of those (``"GPU" if ... else
  "CPU"``), whether printed or left as the cell's last expression; a tensor moved there with ``.to(device)`` and
  printed after ``.cpu()`` is fine, as is the device passed to ``device=``;
- in its stored output: a tensor's ``device=``, a device repr, a backend's name (``flash_attention``, ...), or a
  GPU model, unless the cell's own source spells that text out (data, like lesson 10's data-sheet table).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p for p in (ROOT / "notebooks").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)

#: Calls and attributes whose value depends on the machine.
DEVICE_QUERIES = {"is_available", "get_device_name", "get_device_capability", "get_device_properties", "get_device",
                  "current_device", "device_count", "environment_report", "sdpa_implementation", "platform",
                  "processor", "get_num_threads", "device"}

#: Text in a stored output that names a device, a backend or a GPU.
DEVICE_TEXT = re.compile(r"device='|device\(type=|\bcuda:\d|_for_cpu|\bflash_attention|(?<!memory)_efficient_attention"
                         r"|\bcudnn|math \(composite|\bTesla\b|NVIDIA|GeForce|Quadro|\bRTX\b|Apple M\d")


def _shows_the_device(node: ast.AST) -> bool:
    """Whether evaluating ``node`` gives something that depends on the device (skipping ``.to(...)`` arguments and
    ``device=`` keywords, which only say where a tensor lives)."""
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ("to", "cpu", "numpy", "item", "tolist", "round"):
            return _shows_the_device(func.value)  # the tensor itself, not where it was moved
        keywords = [k.value for k in node.keywords if k.arg != "device"]
        return any(_shows_the_device(n) for n in (func, *node.args, *keywords))
    if isinstance(node, ast.Name):
        return "device" in node.id.lower() or node.id in DEVICE_QUERIES
    if isinstance(node, ast.Attribute):
        return node.attr in DEVICE_QUERIES or _shows_the_device(node.value)
    return any(_shows_the_device(child) for child in ast.iter_child_nodes(node))


def _shown(tree: ast.Module) -> list[ast.AST]:
    """What a cell shows: the arguments of its ``print`` calls, and its last expression (Jupyter displays it)."""
    shown = [arg for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
             and node.func.id == "print" for arg in node.args]
    last = tree.body[-1] if tree.body else None
    if isinstance(last, ast.Expr) and not (isinstance(last.value, ast.Call) and getattr(
            last.value.func, "attr", getattr(last.value.func, "id", "")) in ("print", "show", "display")):
        shown.append(last.value)
    return shown


def _compared_cells(path: Path):
    for index, cell in enumerate(json.loads(path.read_text())["cells"]):
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and not source.startswith("# NBVAL_IGNORE_OUTPUT"):
            yield index, source, cell.get("outputs", [])


def _output_lines(outputs) -> list[str]:
    texts = ["".join(o["text"]) for o in outputs if "text" in o]
    texts += ["".join(o["data"]["text/plain"]) for o in outputs if "text/plain" in o.get("data", {})]
    return [line for text in texts for line in text.splitlines()]


def device_dependent_cells(path: Path) -> list[str]:
    """``"cell N: why"`` for every compared cell of ``path`` that shows something that depends on the machine."""
    found = []
    for index, source, outputs in _compared_cells(path):
        code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
        shows = [ast.unparse(node) for node in _shown(ast.parse(code)) if _shows_the_device(node)]
        if shows:
            found.append(f"cell {index} shows {shows[0]!r}")
        for line in _output_lines(outputs):
            match = DEVICE_TEXT.search(line)
            if match and match.group(0) not in source:
                found.append(f"cell {index} printed {line.strip()[:100]!r}")
    return found


#: Compared cells known to show a device-derived value that is the same on every machine, with why; each is an
#: expected failure until it is rewritten (strict: fixing it makes this list fail, so it gets removed).
KNOWN: dict[str, str] = {}


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name, marks=[pytest.mark.xfail(reason=KNOWN[p.name],
                                                                                       strict=True)]
                                               if p.name in KNOWN else []) for p in NOTEBOOKS])
def test_no_compared_cell_shows_the_device(path):
    assert device_dependent_cells(path) == []


@pytest.mark.parametrize(("source", "output", "found"), [
    ('print("kernels run", "on the GPU" if device.type == "cuda" else "on the CPU")', "kernels run on the CPU", True),
    ("print(device)", "cpu", True),
    ("torch.cuda.is_available()", "False", True),
    ("print(al.environment_report()['gpu'])", "", True),
    ("print(torch.randn(2, 2))", "tensor([[0.1, 0.2]], device='cuda:0')", True),
    ("print(implementation)", "_scaled_dot_product_flash_attention_for_cpu", True),
    ("print(torch.ones(2, device=device).cpu())", "tensor([1., 1.])", False),
    ("print(x.to(device).sum().item())", "2.0", False),
    ('gpus = {"NVIDIA H100": 80}\nprint(list(gpus))', "['NVIDIA H100']", False),  # data, the same everywhere
    ("print('memory_efficient_attention agrees')", "memory_efficient_attention agrees", False),
])
def test_the_detector_finds_what_depends_on_the_machine(tmp_path, source, output, found):
    """The detector itself, on one-cell notebooks: it finds lesson 14's old setup line and leaves data alone."""
    cell = {"cell_type": "code", "source": source, "metadata": {}, "execution_count": 1,
            "outputs": [{"output_type": "stream", "name": "stdout", "text": output}]}
    path = tmp_path / "one.ipynb"
    path.write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    assert bool(device_dependent_cells(path)) == found
