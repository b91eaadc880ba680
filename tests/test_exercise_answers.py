"""No exercise's answer is on screen before the learner's cell: an exercise asks for what the lesson has not written.

For every checker a solution notebook calls, the solution's key lines (the code it writes in the cells that define
or check the answer, after its Colab and setup cells: no imports, prints, comments, docstrings or checker calls)
must not appear in the lesson, code or prose, before the first cell that calls that checker (the learner's cell),
unless the learner's cell itself gives the line (its stub). Whitespace is ignored, so a line copied with other
indentation or spacing is still found.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHECKER_CALL = re.compile(r"\b(check_\w+)\(")
SKIP = re.compile(r"^(import |from |print\(|#|\"\"\"|def |torch\.manual_seed|torch\.set_printoptions|return$|pass$|"
                  r"\.\.\.$)")


def _cells(path: Path) -> list[tuple[str, str]]:
    return [(c["cell_type"], "".join(c["source"])) for c in json.loads(path.read_text())["cells"]]


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _key_lines(source: str) -> list[str]:
    lines = []
    for line in source.splitlines():
        code = line.split("  #")[0].strip()
        if len(_squash(code)) >= 12 and not SKIP.match(code) and not CHECKER_CALL.search(code):
            lines.append(code)
    return lines


#: Lessons whose exercise still shows its answer first: each is rewritten to ask for a variation (strict: an entry that
#: passes fails, so that it is taken off this list).
SHOWN_FIRST: set[str] = set()


def _cases():
    for solution in sorted((ROOT / "notebooks" / "solutions").glob("*_solution.ipynb")):
        lesson = ROOT / "notebooks" / solution.name.replace("_solution", "")
        # the solution's own code: past its Colab cell and its setup (imports, seeds), the first two code cells
        cells = [src for kind, src in _cells(solution) if kind == "code"][2:]
        for checker in sorted({name for src in cells for name in CHECKER_CALL.findall(src)}):
            # the cells that define or check this answer: the checker's cell and the cells since the previous check
            answer, chunk = [], []
            for src in cells:
                chunk.append(src)
                if checker + "(" in src:
                    answer += chunk
                    chunk = []
                elif CHECKER_CALL.search(src):
                    chunk = []
            case = f"{lesson.stem}-{checker}"
            marks = [pytest.mark.xfail(strict=True, reason="shows its answer first")] if case in SHOWN_FIRST else []
            yield pytest.param(lesson, checker, [ln for src in answer for ln in _key_lines(src)], id=case, marks=marks)


@pytest.mark.parametrize(("lesson", "checker", "answer"), list(_cases()))
def test_the_answer_is_not_shown_before_the_exercise(lesson, checker, answer):
    cells = _cells(lesson)
    first = next((i for i, (kind, src) in enumerate(cells) if kind == "code" and checker + "(" in src), None)
    assert first is not None, f"{lesson.name} never calls {checker}, which its solution notebook checks"
    given = _squash(cells[first][1])  # what the learner's cell itself gives (the stub, its docstring) is no answer
    before = _squash("\n".join(src for _, src in cells[:first]))
    shown = [line for line in answer if _squash(line) in before and _squash(line) not in given]
    assert not shown, (f"{lesson.name}: the answer to {checker} is on screen before the learner's cell {first}: "
                       f"{shown}; ask for a variation the lesson has not written, or reveal it after the exercise")


def test_the_finder_finds_a_copied_line():
    assert _key_lines("def f(q, k):\n    return q @ k.transpose(-2, -1)  # scores\nprint(f)") == [
        "return q @ k.transpose(-2, -1)"]
