"""environment.yml (the conda route) asks for the same packages, with the same bounds, as pyproject.toml."""

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


def pyproject_requirements() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for items in project["optional-dependencies"].values():
        reqs += [r for r in items if not r.startswith("attention-lib")]
    wanted = {}
    for r in reqs:
        name, spec, marker = parse(r)
        if marker and "python_version" in marker and "< '3.11'" in marker:
            continue  # backports for old Pythons (tomli) are not needed by the conda environment
        wanted[CONDA_NAMES.get(name, name)] = spec
    return wanted


def environment_requirements() -> dict[str, str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    found = {}
    for dep in env["dependencies"]:
        if isinstance(dep, str):
            name, spec, _ = parse(dep)
            found[name] = spec
    return found


def test_environment_matches_pyproject():
    env = environment_requirements()
    assert env.pop("python") == ">=3.10"
    env.pop("pip")
    assert env == pyproject_requirements()


def test_environment_installs_the_package_itself():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert "-e ." in pip


@pytest.mark.parametrize("name", ["torch", "matplotlib", "ipywidgets"])
def test_colab_packages_have_loose_bounds(name):
    """Installing the course must not replace what Colab ships (torch with CUDA, matplotlib, ipywidgets 7.7)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    spec = next(parse(r)[1] for r in project["dependencies"] if parse(r)[0] == name)
    assert "==" not in spec
    assert spec.startswith(">=")
