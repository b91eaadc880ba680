"""The README's promise: on a fresh clone, `python3 course.py lab` and `python3 course.py test` do the right thing.

Each test works on a fresh copy of the repository (the files git tracks, no ``.venv``). Nothing is downloaded:
``COURSE_DRY_RUN=1`` makes course.py print its plan (every step, then the command it would start) and run nothing,
and the in-process tests replace the probes (root, sudo, an installed torch, a browser) and the install steps in
course.py's parts: ``tools/environment.py`` (the environment) and ``tools/chromium.py`` (the browser).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import shutil
import stat
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """A fresh copy of the repository as git tracks it (the working tree's versions), without ``.venv``."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split("\0")
    target = tmp_path_factory.mktemp("clone") / "attention-step-by-step"
    for name in filter(None, files):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    assert not (target / ".venv").exists()
    return target


def stub_bin(folder: Path, *names: str) -> Path:
    """A folder of do-nothing executables, to stand for PATH (`chromium`, `apt-get`, ...)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        path = folder / name
        path.write_text("#!/bin/sh\nexit 0\n")
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return folder


def dry_run(clone: Path, tmp_path: Path, *argv: str, path_names=("apt-get",), cwd: Path | None = None,
            **env: str) -> str:
    """``python -S course.py ARGV`` (the standard library only: no site-packages) in the clone, with
    COURSE_DRY_RUN=1 and PATH holding only stubs; its output."""
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith(("COURSE_", "PLAYWRIGHT_", "VIRTUAL_ENV", "PYTHON"))}
    environment.update(COURSE_DRY_RUN="1", PATH=str(stub_bin(tmp_path / "bin", *path_names)),
                       PLAYWRIGHT_BROWSERS_PATH=str(tmp_path / "no-browsers"), HOME=str(tmp_path), **env)
    done = subprocess.run([sys.executable, "-S", str(clone / "course.py"), *argv], cwd=cwd or clone,
                          env=environment, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (clone / ".venv").exists(), "a dry run must not create anything"
    return done.stdout


@pytest.fixture
def parts(clone, monkeypatch):
    """The clone's course.py and its parts (``course``, ``environment``, ``chromium``), imported from the clone,
    the way tests/browser/lab.py loads course.py; this session's own ``tools`` package is put back afterwards."""
    saved = {name: module for name, module in sys.modules.items() if name == "tools" or name.startswith("tools.")}
    for name in saved:
        del sys.modules[name]
    monkeypatch.syspath_prepend(str(clone))
    spec = importlib.util.spec_from_file_location("course_under_test", clone / "course.py")
    course = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(course)  # not in sys.modules: course.py must load without it
    loaded = types.SimpleNamespace(course=course, environment=importlib.import_module("tools.environment"),
                                   chromium=importlib.import_module("tools.chromium"),
                                   project=importlib.import_module("tools.project"))
    assert Path(loaded.environment.__file__).is_relative_to(clone)
    yield loaded
    for name in [name for name in sys.modules if name == "tools" or name.startswith("tools.")]:
        del sys.modules[name]
    sys.modules.update(saved)


def test_fresh_clone_test_installs_everything_then_runs_pytest(clone, tmp_path):
    out = dry_run(clone, tmp_path, "test")
    steps = [line for line in out.splitlines() if line.startswith("[course] step")]
    assert [s.split(": ", 1)[1] for s in steps[:3]] == [
        f"create the environment in {clone / '.venv'}", "update pip", "install the course and its tools"]
    assert f"-m pip install -e '{clone}[dev]'" in out
    assert CPU_INDEX not in out.split("[course] step")[1], "the default path installs torch from PyPI"
    assert "about 3.2 GB to download, 6.1 GB on disk" in out or "a few hundred MB" in out  # said before it starts
    # the browser comes from the test run itself, decided by what pytest collected (tests/conftest.py)
    assert "chromium" not in out.lower()
    assert out.rstrip().splitlines()[-1].endswith("-m pytest -v --nbval --nbval-current-env --nbval-sanitize-with "
                                                  f"{clone / 'tests' / 'nbval_sanitize.cfg'} --nbval-cell-timeout 600")


@pytest.mark.parametrize("argv", [["help"], ["--help"], ["-h"], []], ids=["help", "--help", "-h", "nothing"])
def test_help_is_a_command_and_an_option(clone, tmp_path, argv):
    out = dry_run(clone, tmp_path, *argv)  # asserts exit status 0
    assert "python3 course.py test" in out


def test_an_unknown_command_says_so_and_fails(clone):
    done = subprocess.run([sys.executable, "-S", str(clone / "course.py"), "tset"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert "'tset' is not a command of course.py" in done.stderr


@pytest.mark.parametrize("how", [["lab", "--cpu"], ["lab"]], ids=["flag", "env"])
def test_the_cpu_option_installs_torch_from_the_cpu_index_first(clone, tmp_path, how):
    env = {} if "--cpu" in how else {"COURSE_TORCH": "cpu"}
    out = dry_run(clone, tmp_path, *how, **env)
    cpu = out.index(f"--index-url {CPU_INDEX} 'torch>=2.1'")
    assert "--timeout 15 --retries 0" in out, "an unreachable index must fail within seconds"
    assert cpu < out.index(f"-m pip install -e '{clone}[dev]'"), "torch comes first, so the project keeps it"
    assert "about 0.65 GB to download, 2.5 GB on disk" in out or sys.platform != "linux"
    if sys.platform == "linux":  # the CPU-only build brings no Triton: lesson 14's comes from PyPI, pinned
        triton = out.index("-m pip install triton==3.8.0\n")
        assert cpu < triton < out.index(f"-m pip install -e '{clone}[dev]'")
    else:
        assert "triton" not in out
        assert "lesson 14 (the Triton kernel) runs on Colab" in out
    assert "-m jupyter lab" in out
    assert "--cpu" not in out.split("-m jupyter lab")[1]


def test_course_py_runs_from_any_directory_with_the_standard_library_only(clone, tmp_path):
    """``python -S`` (no site-packages) from a folder outside the clone: course.py finds its parts in tools/."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = dry_run(clone, tmp_path, "lab", cwd=elsewhere)
    assert f"--notebook-dir={clone / 'notebooks'}" in out
    assert not (elsewhere / ".venv").exists()


LOADED_FILES = """\
import sys
import course
print("\\n".join(sorted(getattr(module, "__file__", None) or "" for module in list(sys.modules.values()))))
"""


def test_course_parts_use_the_standard_library_only(clone):
    """course.py and its parts import nothing from site-packages: they run before anything is installed."""
    done = subprocess.run([sys.executable, "-S", "-c", LOADED_FILES], cwd=clone, capture_output=True, text=True,
                          timeout=60, env={"PATH": os.environ.get("PATH", "")})
    assert done.returncode == 0, done.stderr
    loaded = done.stdout.splitlines()
    assert [f for f in loaded if "site-packages" in f] == []
    assert {str(clone / "tools" / name) for name in ("environment.py", "chromium.py", "steps.py")} <= set(loaded)


def test_ci_runs_the_readme_command_in_both_environments_and_on_both_cpu_paths():
    """.ci/run: the README's test command over everything (pinned torch), then in an environment made as the
    default install makes it (no torch pin: the newest) the quick part and the notebooks that train, then those
    notebooks under both other CPU kernel paths, and those notebooks with lesson 12's retraining tests under MKL's
    two other paths; the notebooks that train come from the ``trains`` marker."""
    ci = (ROOT / ".ci" / "run").read_text()
    commands = [line.strip() for line in ci.splitlines() if "course.py test" in line and not line.startswith("#")]
    assert commands == [
        'part "1/6 the whole suite, torch $TORCH_PIN" "$PY" course.py test',
        'part "2/6 the newest torch: the quick part" env COURSE_VENV=.venv-newest "$PY" course.py test -m "not slow"',
        'env COURSE_VENV=.venv-newest "$PY" course.py test -m trains notebooks/',
        'env ATEN_CPU_CAPABILITY=avx2 "$PY" course.py test -m trains notebooks/',
        'env ATEN_CPU_CAPABILITY=default "$PY" course.py test -m trains notebooks/',
        '"$PY" course.py test -m trains notebooks/ || status=1',
        '"$PY" course.py test tests/test_training.py || status=1',
    ]
    assert "retrained MKL_CBWR=COMPATIBLE" in ci
    assert "retrained MKL_ENABLE_INSTRUCTIONS=AVX2" in ci
    assert "rm -rf .venv-newest" in ci
    assert "export COURSE_TORCH=default" in ci
    assert ".venv-newest/bin/python -m pip" not in ci, "the newest environment is made by course.py, as a learner's"
    assert "python3 course.py test" in (ROOT / "README.md").read_text()


def test_ci_pins_the_triton_that_the_cpu_option_installs(parts):
    """.ci/run installs the torch and Triton pair that course.py's ``--cpu`` path installs on a fresh machine, both
    read from the one place they are written (``PINS`` in tools/project.py)."""
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'TORCH_PIN="$("$PY" tools/project.py --pin torch)"' in ci
    assert 'TRITON_PIN="$("$PY" tools/project.py --pin triton)"' in ci
    assert re.search(r'pip install [^\n]*"torch==\$TORCH_PIN" "triton==\$TRITON_PIN"', ci)
    assert parts.environment.TRITON == f"triton=={parts.project.PINS['triton']}"
    assert parts.environment.TORCH == "torch>=2.1"
    out = subprocess.run([sys.executable, "tools/project.py", "--pin", "torch"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == parts.project.PINS["torch"]
    wrong = subprocess.run([sys.executable, "tools/project.py", "--pin", "numpy"], cwd=ROOT, capture_output=True,
                           text=True)
    assert wrong.returncode == 1
    assert "usage: python3 tools/project.py --pin {torch,triton}" in wrong.stderr


def test_each_pin_is_written_once():
    """The version of each pin appears, as a pin, in tools/project.py alone (measurements may quote it)."""
    from tools.project import PINS

    for name, version in PINS.items():
        pinned = re.compile(rf"{name}\s*==\s*{re.escape(version)}")
        found = [str(p.relative_to(ROOT)) for p in [ROOT / ".ci" / "run", ROOT / "pyproject.toml",
                                                    ROOT / "environment.yml", *sorted((ROOT / "tools").glob("*.py"))]
                 if p.exists() and p.name != "project.py" and pinned.search(p.read_text())]
        assert found == [], f"{name}=={version} is written in {found}: read PINS in tools/project.py instead"


def _collected(*fixturenames):
    """A stand-in for what pytest collected: one test per tuple of fixture names."""
    items = [types.SimpleNamespace(fixturenames=names) for names in fixturenames]
    config = types.SimpleNamespace(option=types.SimpleNamespace(collectonly=False),
                                   pluginmanager=types.SimpleNamespace(getplugin=lambda name: None))
    return types.SimpleNamespace(items=items, config=config)


@pytest.mark.parametrize(("collected", "found", "skip", "installs"), [
    ((("lab", "chromium"), ("tmp_path",)), None, None, True),
    ((("tmp_path",), ()), None, None, False),
    ((("lab", "chromium"),), "/usr/bin/chromium", None, False),
    ((("lab", "chromium"),), None, "1", False),
], ids=["a-browser-test-and-no-browser", "no-browser-test", "browser-found", "COURSE_SKIP_BROWSER"])
def test_the_browser_is_provided_when_what_pytest_collected_needs_it(monkeypatch, collected, found, skip, installs):
    """Decided by the tests selected to run (what ``-k``, ``-m``, ``--deselect`` or node ids left), not by reading
    pytest's arguments: a test that uses the ``chromium`` fixture, no Chromium found, and no COURSE_SKIP_BROWSER."""
    tests_conftest = importlib.import_module("conftest")
    assert Path(tests_conftest.__file__) == ROOT / "tests" / "conftest.py"
    calls = []
    monkeypatch.setattr(tests_conftest, "find_chromium", lambda: found)
    monkeypatch.setattr(tests_conftest, "ensure_browser", calls.append)
    if skip:
        monkeypatch.setenv("COURSE_SKIP_BROWSER", skip)
    else:
        monkeypatch.delenv("COURSE_SKIP_BROWSER", raising=False)
    tests_conftest.pytest_collection_finish(_collected(*collected))
    assert calls == ([Path(sys.executable)] if installs else [])


@pytest.mark.parametrize(("root", "sudo", "first"), [
    (True, False, ["apt-get"]),
    (False, True, ["sudo", "-n", "apt-get"]),
    (False, False, None),
], ids=["root", "sudo", "neither"])
def test_browser_plan_by_privileges(parts, monkeypatch, root, sudo, first):
    """apt (directly as root, through sudo without a password), else Playwright's download; both in that order."""
    chromium = parts.chromium
    monkeypatch.setattr(chromium, "is_root", lambda: root)
    monkeypatch.setattr(chromium, "has_sudo", lambda: sudo)
    monkeypatch.setattr(chromium.shutil, "which", lambda name: f"/usr/bin/{name}")
    plans = [[step.argv for step in plan] for plan in chromium.browser_plan(Path("/venv/bin/python"))]
    assert plans[-1] == [["/venv/bin/python", "-m", "playwright", "install", "chromium"]]
    if first is None:
        assert len(plans) == 1
    else:
        update, install = plans[0]
        assert update[:len(first)] == first
        assert update[-1] == "update"
        assert install[:len(first) - 1] == first[:-1]  # sudo -n, or nothing as root
        assert "DEBIAN_FRONTEND=noninteractive" in install
        assert "apt-get" in install
        assert install[-4:] == ["-y", "--no-install-recommends", "chromium", "fonts-dejavu-core"]


def test_without_any_way_to_a_browser_one_message_names_the_choices(parts, monkeypatch, capsys):
    chromium = parts.chromium
    monkeypatch.delenv("COURSE_DRY_RUN", raising=False)
    monkeypatch.delenv("COURSE_CHROMIUM", raising=False)
    monkeypatch.setattr(chromium, "find_chromium", lambda: None)
    monkeypatch.setattr(chromium, "is_root", lambda: False)
    monkeypatch.setattr(chromium, "has_sudo", lambda: False)
    failing = chromium.Step("download Playwright's Chromium", [sys.executable, "-c", "raise SystemExit(1)"])
    monkeypatch.setattr(chromium, "browser_plan", lambda python: [[failing]])
    assert chromium.ensure_browser(Path(sys.executable)) is False
    out = capsys.readouterr().out
    assert out.count("Choose one:") == 1
    assert "apt: not run (needs root or passwordless sudo)" in out
    assert "`COURSE_SKIP_BROWSER=1 python3 course.py test`" in out
    assert "COURSE_CHROMIUM=/path/to/chrome python3 course.py test" in out


@pytest.mark.parametrize(("installed", "pins", "said"), [
    ({"torch": "2.13.0+cpu"}, "torch==2.13.0+cpu\n", "torch 2.13.0+cpu is already installed: it is kept"),
    ({"torch": "2.13.0", "triton": "3.8.0"}, "torch==2.13.0\ntriton==3.8.0\n",
     "torch 2.13.0 and triton 3.8.0 are already installed: they are kept"),
], ids=["torch", "torch-and-triton"])
def test_a_torch_already_installed_is_kept_even_with_the_cpu_option(parts, tmp_path, monkeypatch, installed, pins,
                                                                    said):
    environment = parts.environment
    venv = tmp_path / "venv"
    stub_bin(venv / "bin", "python")
    monkeypatch.setattr(environment, "installed_version", lambda python, name: installed.get(name))
    steps, notes = environment.install_plan(venv, "cpu")
    assert [step.title for step in steps] == ["install the course and its tools"]
    assert all(CPU_INDEX not in step.argv and environment.TRITON not in step.argv for step in steps)
    pin = venv / ".course-constraints.txt"
    assert steps[0].argv[-2:] == ["--constraint", str(pin)]
    assert steps[0].files == {pin: pins}
    assert any(said in note for note in notes)
    (venv / ".course-installed").write_text(environment.pyproject_digest())
    assert environment.install_plan(venv, "cpu") == ([], []), "an environment that is up to date needs nothing"


def test_an_unreachable_cpu_index_stops_at_once_with_one_message(parts, tmp_path, monkeypatch, capsys):
    """The message offers PyPI's build, which needs no other index, and that choice says nothing of --cpu again:
    the two messages never send the learner back and forth."""
    course, environment = parts.course, parts.environment
    monkeypatch.delenv("COURSE_DRY_RUN", raising=False)
    monkeypatch.delenv("COURSE_NO_VENV", raising=False)
    monkeypatch.setenv("COURSE_VENV", str(tmp_path / "venv"))
    monkeypatch.setenv("COURSE_TORCH", "default")
    monkeypatch.setattr(environment, "cpu_index_problem", lambda: "[Errno -2] Name or service not known")
    ran = []
    monkeypatch.setattr(environment, "run_steps", ran.append)
    assert course.main(["lab", "--cpu"]) == 1
    assert ran == [], "nothing is installed when the CPU index cannot be reached"
    err = capsys.readouterr().err
    assert f"PyTorch's CPU index ({CPU_INDEX}) cannot be reached: [Errno -2] Name or service not known" in err
    assert "`COURSE_TORCH=default python3 course.py lab`" in err
    assert "about 3.2 GB to download, 6.1 GB on disk" in err
    monkeypatch.setattr(environment, "cuda_by_default", lambda: True)
    monkeypatch.setattr(environment, "has_nvidia_gpu", lambda: False)
    steps, notes = environment.install_plan(tmp_path / "other", "default")
    assert "--cpu" not in " ".join(notes), "the learner chose PyPI's build: no advice to switch back"


@pytest.fixture
def cpu_only_linux(parts, monkeypatch):
    """The environment module on a Linux PC without an NVIDIA GPU, where PyPI's torch is the CUDA build."""
    environment = parts.environment
    monkeypatch.setattr(environment, "cuda_by_default", lambda: True)
    monkeypatch.setattr(environment, "has_nvidia_gpu", lambda: False)
    monkeypatch.delenv("COURSE_DRY_RUN", raising=False)
    monkeypatch.delenv("COURSE_NO_VENV", raising=False)
    monkeypatch.delenv("COURSE_TORCH", raising=False)
    return environment


@pytest.mark.parametrize(("answers", "choice"), [([""], "cpu"), (["1"], "cpu"), (["2"], "default"),
                                                 (["3", "2"], "default")], ids=["enter", "1", "2", "again"])
def test_without_a_gpu_the_learner_chooses_once_knowing_the_costs(cpu_only_linux, parts, tmp_path, monkeypatch,
                                                                  capsys, answers, choice):
    environment = cpu_only_linux
    monkeypatch.setenv("COURSE_VENV", str(tmp_path / "venv"))
    (tmp_path / "venv").mkdir()  # where the (stubbed) steps would have made it
    monkeypatch.setattr(environment.sys.stdin, "isatty", lambda: True, raising=False)
    asked = []
    monkeypatch.setattr("builtins.input", lambda prompt: asked.append(prompt) or answers[len(asked) - 1])
    monkeypatch.setattr(environment, "cpu_index_problem", lambda: None)
    ran = []
    monkeypatch.setattr(environment, "run_steps", ran.append)
    environment.venv_python()
    assert len(asked) == len(answers)
    assert "1. PyTorch's CPU-only build" in asked[0]
    assert "about 0.65 GB to download, 2.5 GB on disk" in asked[0]
    assert "2. PyPI's default, the CUDA build (about 3.2 GB to download, 6.1 GB on disk" in asked[0]
    commands = [" ".join(step.argv) for step in ran[0]]
    assert any(CPU_INDEX in c for c in commands) == (choice == "cpu")
    out = capsys.readouterr().out
    assert "--cpu" not in out, "a learner who chose is not told to choose again"


def test_without_a_terminal_pypis_build_is_installed_and_the_notice_says_what_else_there_is(cpu_only_linux, tmp_path,
                                                                                            monkeypatch):
    environment = cpu_only_linux
    monkeypatch.setattr(environment, "ask_choice", lambda: None)  # no terminal (CI, a script)
    steps, notes = environment.install_plan(tmp_path / "venv", environment.torch_choice())
    assert all(CPU_INDEX not in step.argv for step in steps)
    assert "the CUDA build" in notes[0]
    assert "about 3.2 GB to download, 6.1 GB on disk" in notes[0]
    assert "`python3 course.py lab --cpu`" in notes[0]
    assert "about 0.65 GB to download, 2.5 GB on disk" in notes[0]


def test_the_readme_states_the_costs_the_course_says(parts):
    """The install table of the README and the messages of tools/environment.py give the same measured costs."""
    readme = (ROOT / "README.md").read_text()
    for choice, (download, disk) in parts.environment.COSTS.items():
        name = "`--cpu`" if choice == "cpu" else choice
        row = next(line for line in readme.splitlines() if line.startswith(f"| {name} |"))
        assert f"about {download}" in row, row
        assert disk in row, row


def test_the_suite_time_is_stated_once():
    """How long the whole suite takes is said in one place, the README's quick start; pyproject.toml gives no time."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    pytest_section = pyproject[pyproject.index("[tool.pytest.ini_options]"):pyproject.index("[tool.ruff]")]
    assert not re.search(r"\d+(\.\d+)? ?min", pytest_section), "say times in the README, not in pyproject.toml"
    readme = (ROOT / "README.md").read_text()
    stated = re.findall(r"(?:whole suite|every test of the course|everything)[^.|\n]*?\d+ min", readme)
    assert stated == ["every test of the course: about 20 min"], stated


def test_every_slow_entry_names_a_test_that_exists():
    """conftest.py's SLOW names files and tests by hand: a renamed test must not silently become quick again."""
    spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    for entry in conftest.SLOW:
        file, _, test = entry.partition("::")
        assert (ROOT / file).is_file(), f"SLOW names {file}, which does not exist"
        if test:
            assert re.search(rf"^def {re.escape(test)}\(", (ROOT / file).read_text(), re.M), \
                f"SLOW names {entry}, but {file} defines no {test}"


# -- one lesson's tests, and the regenerators --------------------------------------------------------------------
def test_one_lesson_selects_its_notebook_solution_checker_rows_core_tests_explorer_and_figures():
    """``-m lesson08`` (what ``course.py test --lesson 08`` passes) picks lesson 08's parts and nothing of 09."""
    from tools.project import NBVAL_ARGS

    paths = ["tests/test_masks.py", "tests/test_exercises.py", "tests/test_widgets.py", "tests/test_multihead.py",
             "notebooks/08_masking.ipynb", "notebooks/solutions/08_masking_solution.ipynb",
             "notebooks/09_detective_team.ipynb", "attention_lib/exercises/masking.py"]
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "-m", "lesson08", *NBVAL_ARGS, *paths], cwd=ROOT, capture_output=True, text=True).stdout
    files = {line.split("::")[0] for line in out.splitlines() if "::" in line}
    assert files == {"tests/test_masks.py", "tests/test_exercises.py", "tests/test_widgets.py",
                     "notebooks/08_masking.ipynb", "notebooks/solutions/08_masking_solution.ipynb",
                     "attention_lib/exercises/masking.py"}, out[-2000:]
    rows = [line for line in out.splitlines() if line.startswith("tests/test_exercises.py::")]
    assert rows
    assert all("mask" in line for line in rows), "the checker rows of lesson 08, named after their checkers"
    assert any("masking" in line for line in out.splitlines() if line.startswith("tests/test_widgets.py::"))


def test_the_lesson_option_becomes_a_marker_and_refuses_what_is_not_a_lesson(clone, tmp_path):
    out = dry_run(clone, tmp_path, "test", "--lesson", "masking", "-q")
    assert re.search(r"-m pytest -v .* -m lesson08 -q$", out, re.MULTILINE), out[-1500:]
    result = subprocess.run([sys.executable, "-S", "course.py", "test", "--lesson", "99"], cwd=clone,
                            capture_output=True, text=True)
    assert result.returncode != 0
    assert "'99' is not a lesson; give its number or its name: 00 welcome" in result.stderr


def test_remake_lists_every_regenerator_with_its_command(clone):
    from tools.remake import REMAKES

    out = subprocess.run([sys.executable, "-S", "course.py", "remake", "--list"], cwd=clone, capture_output=True,
                         text=True, check=True).stdout
    for name, entry in REMAKES.items():
        assert f"{name}  " in out
        assert entry.what in out
    assert "$ python -m attention_lib.training.bands --lesson 15" in out
    assert {"weights-12", "weights-13", "weights-15", "bands-12", "bands-13", "bands-15", "attraction",
            "triton-targets", "readme-figure"} <= set(REMAKES)


def test_remake_runs_the_named_entries_and_dry_run_runs_nothing(clone, tmp_path):
    made = clone / "attention_lib" / "training"
    before = {p: p.stat().st_mtime_ns for p in made.rglob("*") if p.is_file()}
    out = dry_run(clone, tmp_path, "remake", "bands-12", "weights-13")
    assert "-m attention_lib.training.bands --lesson 12" in out
    assert "-m attention_lib.training.induction_heads" in out
    assert {p: p.stat().st_mtime_ns for p in made.rglob("*") if p.is_file()} == before, "a dry run changes nothing"
    result = subprocess.run([sys.executable, "-S", "course.py", "remake", "bands-99"], cwd=clone, capture_output=True,
                            text=True)
    assert result.returncode == 2
    assert "['bands-99'] are not entries of remake" in result.stderr


def test_every_regenerator_of_the_package_is_an_entry_of_the_table():
    """Each module with a ``__main__`` (but the benchmark, and lesson 16's workers, which torchrun starts) is named by a
    remake entry; each entry's module exists."""
    import importlib.util

    from tools.remake import REMAKES, call

    named = {entry.argv[1] for entry in REMAKES.values() if entry.argv[0] == "-m"}
    assert all(importlib.util.find_spec(name) for name in named)
    mains = set()
    for path in (ROOT / "attention_lib").rglob("*.py"):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        if path.name == "__main__.py":
            mains.add(module.removesuffix(".__main__"))
        elif re.search(r'^if __name__ == "__main__":', path.read_text(), re.MULTILINE):  # not a docstring's
            mains.add(module)
    not_remakes = {"attention_lib.bench", "attention_lib.bench.run", "attention_lib.experiments.ring_attention"}
    assert mains - named == not_remakes
    for entry in REMAKES.values():
        if entry.argv[0] == "-c":
            compile(entry.argv[1], "<remake>", "exec")
    argv = call("tools.lessons:lesson_number", "masking")
    assert subprocess.run([sys.executable, *argv], cwd=ROOT).returncode == 0


# -- the two pages ---------------------------------------------------------------------------------------------------
def test_the_readme_is_the_learners_page_and_developing_the_maintainers():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200, "the README is the learner's page: move the rest to DEVELOPING.md"
    for command in ("python3 course.py lab", "python3 course.py test"):
        assert f"```bash\n{command}" in readme or f"\n{command} " in readme, command
    lessons = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    for stem in [*lessons, "16_ring_attention", "17_latent_and_paged"]:
        assert f"notebooks/{stem}.ipynb" in readme, f"the README lists {stem}"
    assert "(DEVELOPING.md)" in readme
    developing = (ROOT / "DEVELOPING.md").read_text()
    rules = developing[developing.index("## Rules for lessons"):].split("\n## ")[0]
    for rule in ("Numbers in prose are outputs", "backed by an intervention", "sceptical reviewer",
                 "../shared/briefs/sceptical-reader.md", "Bands state their margin and the runs they rest on"):
        assert rule in rules, rule
    for section in ("### What CI runs", "## The layout: what is where", "### Adding a lesson", "## Benchmark",
                    "## Dependencies, and why each is there", "python3 course.py remake --list"):
        assert section in developing, section


@pytest.mark.parametrize(("args", "match"), [
    (["--lesson"], "--lesson takes one lesson"),
    (["--lesson", "08", "-m", "slow"], "e.g. `python3 course.py test --lesson 08`, and no -m besides"),
    (["--lesson", "attention"], "'attention' is not a lesson; give its number or its name: 00 welcome, 01 cocktail"),
])
def test_the_lesson_option_refuses_what_it_cannot_select(args, match):
    import course

    with pytest.raises(SystemExit, match=re.escape(match)):
        course.lesson_args(args)
    assert course.lesson_args(["-q", "--lesson", "8"]) == ["-q", "-m", "lesson08"]


def test_a_lesson_is_named_by_its_number_or_its_slug():
    from tools.lessons import lesson_number

    assert lesson_number("8") == lesson_number("08") == lesson_number("masking") == "08"
    with pytest.raises(ValueError, match=r"'99' is not a lesson; give its number or its name"):
        lesson_number("99")
