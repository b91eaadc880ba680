"""Which lesson a test belongs to, so that ``python3 course.py test --lesson 08`` runs everything of one lesson.

Standard library only. Each collected test gets the marker ``lessonNN`` of every lesson it belongs to (root
``conftest.py`` adds them); ``course.py test --lesson 08`` is ``pytest -m lesson08``. A test belongs to lesson NN when

- it is a cell of ``notebooks/NN_slug.ipynb`` or of its solution;
- it is a doctest of a module named after the slug (``exercises/<slug>``, ``plotting/<slug>``, ...), or of a
  function whose docstring says "Built step by step in ``notebooks/NN_slug.ipynb``";
- its file is named after the slug (``tests/test_generation_texts.py``), or is one of the lesson's core tests
  (:data:`CORE_TESTS`: the tests of the concept modules it teaches, ``tests/test_masks.py`` for lesson 08);
- its name or id names the slug (``test_widgets.py::test_it_draws_the_packages_numbers[masking]``);
- its code uses a name defined in one of the lesson's modules (a checker row uses ``check_window_mask``, a figure test
  ``plot_window_masks``), or its parameters hold such a function (the checker rows' ``Exercise.checker``).
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "attention_lib"
#: The folders whose modules are named after a lesson's slug.
LESSON_FOLDERS = ("exercises", "plotting", "widgets", "experiments", "training")
#: The tests of the concept modules each lesson teaches, by file name (tests named after a slug need no entry).
CORE_TESTS = {
    "test_devices.py": ("00",), "test_lookup.py": ("02",), "test_attention.py": ("03", "04", "05", "06", "07"),
    "test_masks.py": ("08",), "test_multihead.py": ("09",), "test_memory.py": ("10",), "test_positions.py": ("11",),
    "test_model.py": ("12",), "test_tasks.py": ("12",), "test_training.py": ("12",), "test_induction.py": ("13",),
    "test_cache.py": ("15",), "test_decoding_masks.py": ("15",), "test_llama.py": ("15",), "test_rotary.py": ("15",),
    "test_speculative.py": ("18",), "test_speculative_bench.py": ("18",), "test_linear_attention.py": ("19",),
    "test_flex_attention.py": ("20",),
}
#: The suffix of a lesson's optional deep dive: ``notebooks/12_learning_to_attend_deep_dive.ipynb`` is lesson 12's.
DEEP_DIVE = "_deep_dive"
_BUILT = re.compile(r"Built step by step in ``notebooks/(\d\d)_\w+\.ipynb``")


@functools.cache
def lessons() -> dict[str, str]:
    """``{slug: number}`` of every lesson in ``notebooks/``, e.g. ``{"masking": "08", ...}``; a lesson's optional
    deep dive, ``NN_slug_deep_dive.ipynb``, belongs to its lesson (same slug, same number)."""
    return {p.stem.split("_", 1)[1].removesuffix(DEEP_DIVE): p.stem[:2]
            for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))}


def lesson_number(text: str) -> str:
    """``"08"`` for ``"8"``, ``"08"`` or ``"masking"``.

    Raises:
        ValueError: for anything that is not a lesson (the message lists them).
    """
    by_number = {number: slug for slug, number in lessons().items()}
    number = lessons().get(text) or (text.zfill(2) if text.isdigit() else None)
    if number not in by_number:
        listed = ", ".join(f"{n} {s}" for n, s in sorted(by_number.items()))
        raise ValueError(f"{text!r} is not a lesson; give its number or its name: {listed}.")
    return number


def _slug_of_module(path: Path) -> str | None:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    if len(parts) >= 2 and parts[0] in LESSON_FOLDERS and parts[1] in lessons():
        return parts[1]
    return None


@functools.cache
def lesson_names() -> dict[str, str]:
    """``{name: number}`` of every public name defined at the top of one lesson's module (names defined by two
    lessons are left out: they tell nothing)."""
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        slug = _slug_of_module(path)
        if slug is None or path.name == "__init__.py":
            continue
        for node in ast.parse(path.read_text()).body:
            names = ([node.name] if isinstance(node, ast.FunctionDef | ast.ClassDef) else
                     [t.id for t in node.targets if isinstance(t, ast.Name)] if isinstance(node, ast.Assign) else [])
            for name in names:
                if not name.startswith("_"):
                    found.setdefault(name, set()).add(lessons()[slug])
    return {name: numbers.pop() for name, numbers in found.items() if len(numbers) == 1}


@functools.cache
def _identifiers(function) -> frozenset[str]:
    try:
        tree = ast.parse(inspect.cleandoc("\n" + inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return frozenset()
    return frozenset(n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(tree)
                     if isinstance(n, ast.Name | ast.Attribute))


def _from_value(value) -> set[str]:
    """Lessons named by a parameter's value: a function of a lesson's module, or an object whose ``checker`` is."""
    numbers = set()
    for candidate in (value, getattr(value, "checker", None)):
        name = getattr(candidate, "__name__", None)
        if callable(candidate) and name in lesson_names():
            numbers.add(lesson_names()[name])
    return numbers


def lessons_of(path: Path, name: str, *, function=None, params=None, docstring: str = "") -> set[str]:
    """The lessons (``{"08", ...}``) of the test called ``name`` (its id) in ``path`` (see the module docstring).

    Args:
        path: the file the test was collected from.
        name: the test's name with its parameters' id (``test_x[masking]``).
        function: the test function, whose code is read; params: its parameters' values; docstring: a doctest's.
    """
    numbers, slugs = set(), lessons()
    if path.suffix == ".ipynb" and path.stem[:2] in slugs.values():
        return {path.stem[:2]}
    if path.suffix == ".py" and path.resolve().is_relative_to(PACKAGE):
        slug = _slug_of_module(path.resolve())
        numbers |= {slugs[slug]} if slug else set()
        numbers |= set(_BUILT.findall(docstring))
        return numbers
    numbers |= set(CORE_TESTS.get(path.name, ()))
    text = f"{path.stem} {name}"
    numbers |= {number for slug, number in slugs.items() if slug in text}
    numbers |= {lesson_names()[n] for n in _identifiers(function) if n in lesson_names()} if function else set()
    for value in (params or {}).values():
        numbers |= _from_value(value)
    return numbers
