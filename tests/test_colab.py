"""Colab: every notebook opens itself on Colab, installs the course only there, and disturbs nothing.

The Colab-like environment (`.venv-colab`, made by tools/colab_like_env.py: ipywidgets 7.7.1, matplotlib 3.10,
IPython 7, the main environment's torch) is built on first use. Building it installs torch, so outside CI it is
only built when COURSE_COLAB_ENV=1 is set; in CI (CI=true) it is always built and these tests never skip.
"""

import doctest
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import colab_like_env  # noqa: E402
import colab_sync  # noqa: E402
from notebook_rules import ROOT, all_notebooks, read  # noqa: E402

NOTEBOOKS = all_notebooks()
IDS = [p.relative_to(ROOT / "notebooks").as_posix() for p in NOTEBOOKS]
CONFIG = colab_sync.colab_config()


def _setup_index(nb) -> int:
    return next(i for i, c in enumerate(nb.cells) if "colab-setup" in c.metadata.get("tags", []))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_badge_setup_cell_and_gpu_metadata(path):
    nb = read(path)
    badge, setup = nb.cells[0], nb.cells[_setup_index(nb)]
    relpath = path.relative_to(ROOT).as_posix()
    assert "colab-badge" in badge.metadata.get("tags", [])
    assert f"/blob/{CONFIG['ref']}/{relpath}\"" in badge.source, "the badge must open this very notebook"
    assert f"github/{CONFIG['repository']}/" in badge.source
    assert setup.source == colab_sync.setup_source(CONFIG)
    assert setup.outputs == [], "outside Colab the setup cell must print nothing"
    assert nb.metadata["accelerator"] == "GPU"
    assert nb.metadata["colab"]["gpuType"] == "T4"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_the_title_and_goals_come_before_the_setup_cell(path):
    """A reader meets the lesson first: its title and goals, then the Colab-only install cell, before any code."""
    nb = read(path)
    at = _setup_index(nb)
    before = nb.cells[:at]
    assert any(c.cell_type == "markdown" and c.source.startswith("# ") for c in before), "the title comes first"
    if any(colab_sync.GOALS in c.source for c in nb.cells if c.cell_type == "markdown"):
        assert any(colab_sync.GOALS in c.source for c in before), "the goals come before the setup cell"
    assert [c for c in before if c.cell_type == "code"] == [], "no code runs before the setup cell"
    assert at == 1 + colab_sync.setup_position(nb.cells[1:at] + nb.cells[at + 1:]), "right after the goals"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_badge_and_setup_cell_appear_once(path):
    """One badge (the first cell) and one setup cell, never a second copy further down."""
    nb = read(path)
    badges = [i for i, c in enumerate(nb.cells) if "colab-badge.svg" in c.source]
    setups = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "google.colab" in c.source
              and "pip" in c.source]
    assert badges == [0], f"the Colab badge must appear once, as the first cell; found it in cells {badges}"
    assert setups == [_setup_index(nb)], f"the Colab setup cell must appear once; found it in cells {setups}"


def test_sync_puts_the_setup_cell_after_the_title_and_goals():
    """On a notebook laid out the old way (setup cell second), sync moves the setup cell after the goals, keeps
    its id, and a second sync changes nothing."""
    old_setup = nbformat.v4.new_code_cell(colab_sync.setup_source(CONFIG), metadata={"tags": ["colab-setup"]})
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("old badge", metadata={"tags": ["colab-badge"]}), old_setup,
        nbformat.v4.new_markdown_cell("# 99 · A lesson\n\nWhere we are."),
        nbformat.v4.new_markdown_cell("**By the end of this notebook you will be able to:** ..."),
        nbformat.v4.new_markdown_cell("## Setup"), nbformat.v4.new_code_cell("import torch")])
    colab_sync.sync(nb, "notebooks/99_lesson.ipynb", CONFIG)
    layout = [c.metadata.get("tags", [c.source.split()[0]])[0] for c in nb.cells]
    assert layout == ["colab-badge", "#", "**By", "colab-setup", "##", "import"]
    assert nb.cells[3]["id"] == old_setup["id"]
    again = nbformat.writes(nb)
    colab_sync.sync(nb, "notebooks/99_lesson.ipynb", CONFIG)
    assert nbformat.writes(nb) == again


def test_colab_sync_examples():
    """The ``>>>`` examples in tools/colab_sync.py run (tools/ is not collected for doctests)."""
    result = doctest.testmod(colab_sync, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 1
    assert result.failed == 0


@pytest.mark.slow  # reads every notebook in a new process (35-50 s on a busy 2-core machine)
def test_every_notebook_is_in_sync():
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "colab_sync.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_slug_is_defined_in_one_place():
    """The slug appears in pyproject.toml once; everywhere else it was written by `course.py colab`."""
    slug = CONFIG["repository"]
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    files = [ROOT / f for f in tracked] or [p for p in ROOT.rglob("*") if ".venv" not in p.parts]
    holders = set()
    for f in files:
        if f.is_file() and f.suffix in {".py", ".toml", ".md", ".yml", ".yaml", ".cfg", ".sh", ".txt", ""}:
            if slug in f.read_text(errors="ignore"):
                holders.add(f.relative_to(ROOT).as_posix())
    assert (ROOT / "pyproject.toml").read_text().count(slug) == 1
    assert holders <= {"pyproject.toml", "README.md"}
    readme = (ROOT / "README.md").read_text()
    outside = readme
    blocks = ((colab_sync.README_START, colab_sync.README_END), (colab_sync.CLONE_START, colab_sync.CLONE_END))
    for start, end in blocks:
        outside = outside[:outside.index(start)] + outside[outside.index(end):]
    assert slug not in outside, "README mentions the slug outside the generated blocks (badges, git clone)"
    assert colab_sync.clone_block(CONFIG) in readme, "the README's git clone lines are not the generated ones"


def _run_setup_cell(monkeypatch, on_colab: bool):
    calls = []
    monkeypatch.setitem(sys.modules, "subprocess", types.SimpleNamespace(run=lambda *a, **k: calls.append((a, k))))
    if on_colab:
        monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    exec(colab_sync.setup_source(CONFIG), {})
    return calls


def test_setup_cell_does_nothing_outside_colab(monkeypatch):
    assert _run_setup_cell(monkeypatch, on_colab=False) == []


def test_setup_cell_installs_same_ref_on_colab(monkeypatch):
    (args, kwargs), = _run_setup_cell(monkeypatch, on_colab=True)
    command = args[0]
    assert command[1:4] == ["-m", "pip", "install"]
    assert f"git+https://github.com/{CONFIG['repository']}@{CONFIG['ref']}" in command[-1]
    assert not any("ipywidgets" in part or "torch" in part for part in command)


@pytest.fixture(scope="module")
def colab_python():
    venv = ROOT / ".venv-colab"
    if not (venv / ".colab-like").exists() and not (os.environ.get("CI") or os.environ.get("COURSE_COLAB_ENV")):
        pytest.skip("the Colab-like environment is built in CI, or here with COURSE_COLAB_ENV=1 (installs torch)")
    return colab_like_env.create(venv)


@pytest.mark.slow  # builds the Colab-like environment (installs torch) on first use
def test_install_into_colab_like_env_replaces_nothing(colab_python, tmp_path):
    report = tmp_path / "report.json"
    subprocess.run([str(colab_python), "-m", "pip", "install", "--dry-run", "--quiet", "--no-build-isolation",
                    "--report", str(report), str(ROOT)], check=True, capture_output=True)
    installs = {item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"]}
    assert "attention-lib" in installs
    assert not installs & {"torch", "matplotlib", "ipywidgets", "ipython"}, installs


@pytest.mark.slow  # the explorer tests again, in the Colab-like environment
def test_explorers_build_under_ipywidgets_7(colab_python):
    """The explorer tests pass under ipywidgets 7.7.1 too (with the package on the path, not installed)."""
    version = subprocess.run([str(colab_python), "-c", "import ipywidgets; print(ipywidgets.__version__)"],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert version == "7.7.1"
    tests = sorted(str(p) for p in (ROOT / "tests").glob("test_widgets*.py"))
    modules = sorted(str(p) for p in (ROOT / "attention_lib" / "widgets").glob("*.py"))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    result = subprocess.run([str(colab_python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                             "--doctest-modules", "--rootdir", str(ROOT), "-c", os.devnull, *modules, *tests],
                            capture_output=True, text=True, env=env, cwd=ROOT)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
