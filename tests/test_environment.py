"""environment.yml (the conda route) asks for the same packages, with the same bounds, as pyproject.toml.

conda installs what conda-forge has for every platform; the rest comes from pip at the end of the file, with the
same platform marker as in pyproject.toml (Triton: Linux only).
"""

import re
from pathlib import Path

import pytest
import yaml

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
CONDA_NAMES = {"torch": "pytorch"}  # PyPI name -> conda-forge name
REQ = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*([^;]*?)\s*(?:;\s*(.*))?$")


def parse(requirement: str):
    name, spec, marker = REQ.match(requirement).groups()
    return name.lower(), spec.replace(" ", ""), marker


def pyproject_requirements() -> dict[str, tuple[str, str | None]]:
    """``{conda name: (bounds, platform marker or None)}`` of every requirement, extras included."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for items in project["optional-dependencies"].values():
        reqs += [r for r in items if not r.startswith("attention-lib")]
    wanted = {}
    for r in reqs:
        name, spec, marker = parse(r)
        if marker and "python_version" in marker and "< '3.11'" in marker:
            continue  # backports for old Pythons (tomli) are not needed by the conda environment
        wanted[CONDA_NAMES.get(name, name)] = (spec, marker)
    return wanted


def environment_file() -> tuple[list[str], list[str]]:
    """The conda requirements and the pip lines of environment.yml."""
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = [dep for dep in env["dependencies"] if isinstance(dep, str)]
    pip = next(dep["pip"] for dep in env["dependencies"] if isinstance(dep, dict))
    return conda, pip


def environment_requirements() -> dict[str, tuple[str, str | None]]:
    conda, pip = environment_file()
    found = {}
    for dep in conda + [line for line in pip if not line.startswith("-")]:
        name, spec, marker = parse(dep)
        assert name not in found, f"{name} is listed twice in environment.yml"
        found[name] = (spec, marker)
    return found


def test_environment_matches_pyproject():
    env = environment_requirements()
    assert env.pop("python") == (">=3.10", None)
    env.pop("pip")
    assert env == pyproject_requirements()


def test_platform_specific_packages_come_from_pip_with_their_marker():
    """conda cannot skip a package by platform in an environment file: those go to pip, whose marker can."""
    conda, pip = environment_file()
    assert all(parse(dep)[2] is None for dep in conda)
    marked = {parse(line)[0]: parse(line)[2] for line in pip if not line.startswith("-") and parse(line)[2]}
    assert marked == {"triton": "sys_platform == 'linux'"}


def test_environment_installs_the_package_itself():
    conda, pip = environment_file()
    assert "-e ." in pip
    assert "--no-deps" in pip, "pip must not re-resolve (and replace) what conda installed"


@pytest.mark.parametrize("name", ["torch", "matplotlib", "ipywidgets", "triton"])
def test_colab_packages_have_loose_bounds(name):
    """Installing the course must not replace what Colab ships (torch with CUDA and its Triton, matplotlib,
    ipywidgets 7.7)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = [*project["dependencies"], *[r for items in project["optional-dependencies"].values() for r in items]]
    spec = next(parse(r)[1] for r in reqs if parse(r)[0] == name)
    assert "==" not in spec
    assert spec.startswith(">=")
