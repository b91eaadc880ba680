"""The stored notebooks are fit for strict nbval: executed, in order, error-free, stable, well formed.

Strict nbval itself runs over every notebook as part of `python3 course.py test` (`--nbval`); these tests
catch what nbval would silently let through.
"""

import json
import re

import nbformat
import pytest
from notebook_rules import (
    ROOT,
    all_notebooks,
    lessons,
    out_of_order,
    read,
    stored_errors,
    unexecuted_cells,
    unstable_outputs,
)

from tools.project import TRAINING_NOTEBOOKS, training_notebooks

NOTEBOOKS = all_notebooks()
IDS = [p.relative_to(ROOT / "notebooks").as_posix() for p in NOTEBOOKS]


def test_there_are_notebooks():
    assert (ROOT / "notebooks" / "00_welcome.ipynb") in NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_code_cell_was_executed(path):
    nb = read(path)
    assert unexecuted_cells(nb) == [], f"{path.name}: run `python3 course.py execute {path.relative_to(ROOT)}`"
    assert not out_of_order(nb), f"{path.name}: cells ran out of order; re-run `python3 course.py execute`"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_outputs_are_clean_and_stable(path):
    nb = read(path)
    assert stored_errors(nb) == []
    assert unstable_outputs(nb) == []
    assert nb.metadata["kernelspec"]["name"] == "python3"


def test_guard_catches_cleared_outputs(tmp_path):
    """A copy of notebook 00 with its outputs cleared fails the guard. nbval alone would pass it: it compares
    only cells that hold an execution count, so a cleared notebook compares nothing."""
    nb = read(ROOT / "notebooks" / "00_welcome.ipynb")
    assert unexecuted_cells(nb) == []
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    cleared = tmp_path / "cleared.ipynb"
    nbformat.write(nb, cleared)
    assert len(unexecuted_cells(read(cleared))) == sum(1 for c in nb.cells if c.cell_type == "code" and c.source)


def test_guard_catches_out_of_order_and_errors(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("1 / 0", execution_count=2),
                nbformat.v4.new_code_cell("x", execution_count=1)]
    nb.cells[0].outputs = [nbformat.v4.new_output("error", ename="ZeroDivisionError", evalue="", traceback=[])]
    nb.cells[1].outputs = [nbformat.v4.new_output("execute_result", {"text/plain": "<object at 0x7f00aa11bb22>"},
                                                  execution_count=1)]
    assert out_of_order(nb)
    assert stored_errors(nb) == [0]
    assert unstable_outputs(nb) == ["code cell 1 prints an object address"]


@pytest.mark.parametrize("path", lessons(), ids=[p.name for p in lessons()])
def test_lesson_structure(path):
    """Title with its number, goals, a summary, and a 'Next up' link to a notebook that exists."""
    nb = read(path)
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    number = path.name[:2]
    assert re.search(rf"^# {number} · ", markdown, re.M), "title must read '# NN · ...'"
    assert "By the end" in markdown
    assert "## Summary" in markdown
    for target in re.findall(r"\]\(((?:\.\./)?[\w/]+\.ipynb)\)", markdown):
        assert (path.parent / target).exists(), f"{path.name} links to missing {target}"
    following = sorted(path.parent.glob(f"{int(number) + 1:02d}_*.ipynb"))
    if following:
        next_up = re.findall(r"\*\*Next up:\*\*[^\n]*?\]\(([^)]+)\)", markdown)
        assert next_up == [following[0].name], "'Next up' must link the next lesson, so that the lessons form one path"


@pytest.mark.parametrize("path", lessons(), ids=[p.name for p in lessons()])
def test_lesson_imports_attention_lib_and_has_solution(path):
    nb = read(path)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "attention_lib" in code
    if "raise NotImplementedError" in code:
        solution = path.parent / "solutions" / f"{path.stem}_solution.ipynb"
        assert solution.exists(), f"{path.name} has an exercise but no {solution.relative_to(ROOT)}"
        outputs = json.dumps(read(solution).cells, ensure_ascii=False)
        assert "✅" in outputs, f"{solution.name} must show its checker passing"


#: A call of a training function (``train``, ``train_induction``, ...), not its definition.
TRAINING_CALL = re.compile(r"(?<!def )\btrain(?:_\w+)?\(")


def test_every_notebook_that_trains_is_listed():
    """CI runs the notebooks that train under the newest torch and other CPUs' kernels: the list is
    TRAINING_NOTEBOOKS in tools/project.py, and every notebook that calls a training function is on it."""
    calling = [p.stem for p in NOTEBOOKS
               if TRAINING_CALL.search("\n".join(c.source for c in read(p).cells if c.cell_type == "code"))]
    assert calling, "no notebook calls a training function: the check checks nothing"
    assert sorted(calling) == sorted(p.stem for p in training_notebooks())
    assert len(training_notebooks()) == len(TRAINING_NOTEBOOKS), "a name in TRAINING_NOTEBOOKS has no notebook"
    assert TRAINING_CALL.search("run = train(task)")
    assert not TRAINING_CALL.search("def train(task):")
