"""The package's layout follows one rule, so that a reader can tell where code lives from its name alone.

- A lesson ``notebooks/NN_slug.ipynb`` keeps its machinery in modules named after its slug: ``exercises/<slug>``,
  ``plotting/<slug>``, ``widgets/<slug>``, ``experiments/<slug>`` (a module, or a package when it outgrows 300 lines).
- What several lessons share is named for what it is (a short, fixed list below); private modules start with ``_``.
- ``training/`` holds one folder per lesson that trains, named after its slug, and the few things they share;
  every shipped weights file is read by one loader (``training/shipped.py``'s ``load_shipped``).
- Notebooks import from ``attention_lib``, one of its top-level modules or sub-packages, or their own lesson's module.
- Every module stays under 300 lines; every argument check is written once, in ``validation/``.
- No import cycle, lazy or not: the graph of every ``import`` in the package, at module level and inside functions,
  has none.
- Each "Built step by step in ``notebooks/NN_x.ipynb``" names a lesson that mentions the function it documents.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "attention_lib"
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
SOLUTIONS = sorted((ROOT / "notebooks" / "solutions").glob("[0-9][0-9]_*_solution.ipynb"))
SLUGS = {p.stem.split("_", 1)[1] for p in LESSONS}
#: The lesson-machinery folders, and the shared modules each may hold besides the lessons' own.
MACHINERY = {
    "exercises": {"predictions"},
    "plotting": {"alt", "basic", "diagrams", "display", "style"},
    "widgets": {"explorer"},
    "experiments": set(),
}
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)
#: What the lessons that train share in ``training/``, named for what it is (the rest is one folder per lesson).
TRAINING_SHARED = {"task", "vocabulary", "grammar", "bands", "bands_measured", "seed_study", "shipped", "trained"}


def _slug(notebook: Path) -> str:
    return notebook.stem.removesuffix("_solution").split("_", 1)[1]


def _code(notebook: Path) -> str:
    cells = json.loads(notebook.read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


def _text(notebook: Path) -> str:
    return "\n".join("".join(c["source"]) for c in json.loads(notebook.read_text())["cells"])


@pytest.mark.parametrize("folder", sorted(MACHINERY))
def test_lesson_machinery_is_named_after_its_notebook(folder):
    names = {p.stem if p.is_file() else p.name for p in (PACKAGE / folder).iterdir()
             if p.name != "__init__.py" and p.name != "__pycache__" and (p.suffix == ".py" or p.is_dir())}
    strays = sorted(n for n in names if n not in SLUGS and n not in MACHINERY[folder] and not n.startswith("_"))
    assert not strays, (f"attention_lib/{folder}/ holds {strays}, named after no lesson ({sorted(SLUGS)}) and not "
                        f"among its shared modules {sorted(MACHINERY[folder])}; name it after its notebook's slug")


def test_a_lesson_package_holds_only_its_lessons_parts():
    for folder in MACHINERY:
        for package in (PACKAGE / folder).iterdir():
            if package.is_dir() and package.name != "__pycache__":
                assert package.name in SLUGS, f"attention_lib/{folder}/{package.name}/ is named after no lesson"


def _training_strays(folder: Path) -> list[str]:
    """What ``folder`` (a ``training/``) holds besides lesson folders named after a slug and the shared modules."""
    strays = []
    for path in sorted(folder.iterdir()):
        if path.name in ("__init__.py", "__pycache__") or path.name.startswith("_"):
            continue
        if path.is_dir() and path.name != "trained":
            if path.name not in SLUGS:
                strays.append(f"{path.name}/ (a folder named after no lesson)")
        elif path.stem not in TRAINING_SHARED:
            strays.append(f"{path.name} (not among the shared {sorted(TRAINING_SHARED)})")
    return strays


def _explorer_strays(folder: Path) -> list[str]:
    """Public explorers and renderers in ``widgets/<slug>.py`` not called ``<slug>_explorer`` / ``render_<slug>``."""
    strays = []
    for module in sorted(folder.glob("*.py")):
        slug = module.stem
        if slug not in SLUGS:
            continue
        for node in ast.parse(module.read_text()).body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                if (node.name.endswith("_explorer") and node.name != f"{slug}_explorer"
                        or node.name.startswith("render_") and node.name != f"render_{slug}"):
                    strays.append(f"{module.name}: {node.name}")
    return strays


def test_explorers_are_named_after_their_lesson():
    strays = _explorer_strays(PACKAGE / "widgets")
    assert not strays, f"explorers and their renderers are named <slug>_explorer and render_<slug>: {strays}"


def test_the_explorer_rule_finds_a_stray(tmp_path):
    (tmp_path / "masking.py").write_text("def masking_explorer(): ...\ndef trained_explorer(): ...\n"
                                         "def render_masking(): ...\ndef render_trained(): ...\n")
    assert _explorer_strays(tmp_path) == ["masking.py: trained_explorer", "masking.py: render_trained"]


def test_training_is_one_folder_per_lesson():
    strays = _training_strays(PACKAGE / "training")
    assert not strays, (f"attention_lib/training/ holds {strays}: a lesson's training code lives in "
                        f"training/<slug>/ (slugs: {sorted(SLUGS)}); what lessons share is named for what it is")


def test_the_training_rule_finds_a_stray(tmp_path):
    for name in ("learning_to_attend", "trained", "recipes"):
        (tmp_path / name).mkdir()
    for name in ("__init__.py", "bands.py", "probes.py"):
        (tmp_path / name).write_text("")
    assert _training_strays(tmp_path) == ["probes.py (not among the shared ['bands', 'bands_measured', 'grammar', "
                                          "'seed_study', 'shipped', 'task', 'trained', 'vocabulary'])",
                                          "recipes/ (a folder named after no lesson)"]


def test_every_shipped_model_is_read_by_the_one_loader():
    """``torch.load`` is called in ``training/shipped.py`` alone, and every shipped file has a name it loads."""
    from attention_lib.training.shipped import kind_of, shipped_models

    loader = PACKAGE / "training" / "shipped.py"
    calls = [f"{p.relative_to(ROOT)}:{node.lineno}" for p in MODULES if p != loader
             for node in ast.walk(ast.parse(p.read_text())) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Attribute) and node.func.attr == "load"
             and isinstance(node.func.value, ast.Name) and node.func.value.id == "torch"]
    assert not calls, f"torch.load outside the one loader (use attention_lib.training.load_shipped): {calls}"
    names = shipped_models()
    assert len(names) == len(list((PACKAGE / "training" / "trained").glob("*.pt"))) > 0
    assert all(kind_of(name) for name in names)


def _imports(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("attention_lib"):
            yield node.module
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.startswith("attention_lib"))


@pytest.mark.parametrize("notebook", LESSONS + SOLUTIONS, ids=lambda p: p.name)
def test_notebooks_import_from_the_small_surface(notebook):
    """``attention_lib``, ``attention_lib.X`` (a top-level module or sub-package), or ``attention_lib.X.<slug>``."""
    code = "\n".join(line for line in _code(notebook).splitlines() if not line.lstrip().startswith(("%", "!")))
    slug = _slug(notebook)
    for module in _imports(ast.parse(code)):
        parts = module.split(".")
        assert len(parts) <= 2 or (len(parts) == 3 and parts[2] == slug), (
            f"{notebook.name} imports from {module}: import from attention_lib, one of its top-level modules or "
            f"sub-packages, or attention_lib.<sub-package>.{slug} (this lesson's own module)")


@pytest.mark.parametrize("module", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_every_module_stays_under_300_lines(module):
    lines = len(module.read_text().splitlines())
    assert lines < 300, f"{module.relative_to(ROOT)} has {lines} lines: split it by concept (or by lesson)"


HAND_WRITTEN_INT_CHECK = re.compile(r"isinstance\(\s*\w+\s*,\s*bool\s*\)")


def test_argument_checks_are_written_once_in_validation():
    """``isinstance(x, bool) or not isinstance(x, int)`` lives in validation/ (check_int, check_index, is_int)."""
    found = [f"{p.relative_to(ROOT)}:{i}" for p in MODULES if p.parent.name != "validation"
             for i, line in enumerate(p.read_text().splitlines(), 1) if HAND_WRITTEN_INT_CHECK.search(line)]
    assert not found, f"hand-written int or bool checks (use attention_lib.validation): {found}"


def test_the_int_check_finder_finds_one():
    assert HAND_WRITTEN_INT_CHECK.search("if isinstance(n, bool) or not isinstance(n, int):")
    assert not HAND_WRITTEN_INT_CHECK.search("if isinstance(n, torch.Tensor):")


BUILT_IN = re.compile(r"Built step by step in ``notebooks/(\d\d_\w+)\.ipynb``")


def _documented():
    for module in MODULES:
        tree = ast.parse(module.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_"):
                doc = ast.get_docstring(node) or ""
                for lesson in BUILT_IN.findall(doc):
                    yield module, node.name, lesson


@pytest.mark.parametrize(("module", "name", "lesson"), list(_documented()),
                         ids=lambda x: x.name if isinstance(x, Path) else str(x))
def test_built_step_by_step_names_a_lesson_that_mentions_it(module, name, lesson):
    notebook = ROOT / "notebooks" / f"{lesson}.ipynb"
    assert notebook.exists(), f"{module.relative_to(ROOT)}: {name} says it is built in {lesson}, which does not exist"
    assert name in _text(notebook), (f"{module.relative_to(ROOT)}: {name} says it is built step by step in "
                                     f"{notebook.name}, but that lesson never mentions {name}")


# -- import cycles, through function-level imports too ----------------------------------------------------------------
def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package: Path) -> dict[str, list[str]]:
    """``module: [modules it imports]`` for every ``import`` of every module under ``package``, at module level and
    inside functions alike. ``from .x import y`` imports ``x`` (or the module ``x.y``); ``from . import y`` imports the
    module ``y`` (or the package, for a name of its ``__init__``)."""
    root = package.parent
    paths = sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.parts)
    names = {_module_name(p, root) for p in paths}
    edges = {}
    for path in paths:
        name = _module_name(path, root)
        here = (name if path.name == "__init__.py" else name.rpartition(".")[0]).split(".")
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(here[:len(here) - node.level + 1]) if node.level else ""
                source = ".".join(part for part in (base, node.module or "") if part)
                modules = {f"{source}.{a.name}" for a in node.names if f"{source}.{a.name}" in names}
                targets |= modules if len(modules) == len(node.names) else modules | {source}
        edges[name] = sorted(t for t in targets if t in names and t != name)
    return edges


def import_cycles(edges: dict[str, list[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm): each holds an import cycle."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while not group or group[-1] != v:
                group.append(stack.pop())
                on_stack.discard(group[-1])
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_even_through_function_level_imports():
    cycles = import_cycles(import_graph(PACKAGE))
    assert not cycles, (f"import cycles (a lazy import inside a function counts too): {cycles}; make the dependency "
                        f"go one way (move the shared part down, or pass what is needed in)")


def test_the_cycle_finder_finds_a_lazy_cycle(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from .a import f\n")
    (package / "a.py").write_text("from .sub import b\n\ndef f():\n    return b\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "b.py").write_text("def g():\n    from ..a import f  # lazy: still a cycle\n    return f\n")
    (package / "c.py").write_text("from . import a\n")
    edges = import_graph(package)
    assert edges["pkg.a"] == ["pkg.sub.b"]
    assert edges["pkg.c"] == ["pkg.a"]
    assert import_cycles(edges) == [["pkg.a", "pkg.sub.b"]]


def _lessons_reaching(module: str, edges: dict[str, list[str]]) -> set[str]:
    """The slugs whose lesson modules (``attention_lib.<folder>.<slug>...``) import ``module``, directly or not."""
    def reach(start):
        seen, todo = set(), [start]
        while todo:
            for target in edges.get(todo.pop(), ()):
                if target not in seen:
                    seen.add(target)
                    todo.append(target)
        return seen

    return {m.split(".")[2] for m in edges if len(m.split(".")) > 2 and m.split(".")[2] in SLUGS and module in reach(m)}


@pytest.mark.parametrize("shared", sorted(MACHINERY["plotting"]))
def test_a_shared_plotting_module_is_shared_for_real(shared):
    """A module named for what it is serves at least two lessons; one that serves one is named after it."""
    users = _lessons_reaching(f"attention_lib.plotting.{shared}", import_graph(PACKAGE))
    assert len(users) >= 2, f"plotting/{shared}.py serves only {sorted(users)}: name it after its lesson"


def test_every_model_output_names_its_maps_attentions():
    """As ``transformers`` does: ``output.attentions``, one map per layer, on every model's output tuple."""
    import attention_lib.attention_only
    import attention_lib.encoder
    import attention_lib.llama

    outputs = [cls for module in (attention_lib.attention_only, attention_lib.encoder, attention_lib.llama)
               for name, cls in vars(module).items() if name.endswith("Output") and hasattr(cls, "_fields")]
    assert len(outputs) == 3
    for cls in outputs:
        assert "attentions" in cls._fields, f"{cls.__name__} has fields {cls._fields}: call its maps attentions"
        assert "attention" not in cls._fields, cls.__name__
