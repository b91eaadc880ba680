"""``course.py execute`` never waits in silence: a cell or a notebook that runs too long ends with a message naming the
notebook and the cell, the file stays as it was; the explorers' Output widgets reach the saved state; and the stored
metadata is what JupyterLab writes when it opens the notebook, so that a lesson opens unmodified."""

import platform
import sys
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import execute_notebooks  # noqa: E402


def notebook(tmp_path, *sources) -> Path:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    path = tmp_path / "waits.ipynb"
    nbformat.write(nb, path)
    return path


@pytest.mark.parametrize(("limits", "says"), [
    ({"cell_timeout": 3, "notebook_timeout": 120}, "did not finish within 3 s, the limit for one cell"),
    ({"cell_timeout": 120, "notebook_timeout": 8}, "stopped after 8 s in all, the limit for one notebook"),
])
def test_a_cell_that_waits_ends_with_a_message_naming_the_notebook_and_the_cell(tmp_path, limits, says):
    path = notebook(tmp_path, "x = 1", "import time\ntime.sleep(600)", "print('never')")
    before = path.read_text()
    outcome = execute_notebooks.execute(path, **limits)
    assert says in outcome.error
    assert "waits.ipynb" in outcome.error
    assert "cell 1 (counting from 0; it starts `import time`)" in outcome.error
    assert outcome.seconds < 100
    assert path.read_text() == before  # nothing half-executed is stored


def test_an_error_in_a_cell_names_the_cell(tmp_path):
    path = notebook(tmp_path, "x = 1", "1 / 0")
    outcome = execute_notebooks.execute(path, cell_timeout=60, notebook_timeout=120)
    assert "cell 1 (counting from 0; it starts `1 / 0`) raised an error" in outcome.error
    assert "ZeroDivisionError" in outcome.error


def test_output_widgets_are_saved_and_echoed_to_the_kernel_as_in_jupyterlab(tmp_path):
    path = notebook(tmp_path, "import ipywidgets as w\nfrom IPython.display import display\nout = w.Output()\n"
                              "display(out)\nwith out:\n    print('inside')",
                    "print(len(out.outputs))")  # the kernel's copy, filled by the front end's echo
    outcome = execute_notebooks.execute(path, cell_timeout=60, notebook_timeout=120)
    assert outcome.error == ""
    nb = nbformat.read(path, as_version=4)
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    saved = [m["state"]["outputs"] for m in state.values() if m["model_name"] == "OutputModel"]
    assert saved == [[{"name": "stdout", "output_type": "stream", "text": "inside\n"}]]
    assert nb.cells[1].outputs[0]["text"] == "1\n"


def test_the_stored_metadata_is_what_jupyterlab_writes_when_it_opens_the_notebook(tmp_path):
    """The kernel's own kernelspec and language_info (JupyterLab writes both as the kernel starts: any other value
    marks the notebook as modified before the learner touches it), and no execution times."""
    path = notebook(tmp_path, "x = 1")
    outcome = execute_notebooks.execute(path, cell_timeout=60, notebook_timeout=120)
    assert outcome.error == ""
    nb = nbformat.read(path, as_version=4)
    spec = KernelSpecManager().get_kernel_spec("python3")
    assert nb.metadata["kernelspec"] == {"display_name": spec.display_name, "language": spec.language,
                                         "name": "python3"}
    assert nb.metadata["language_info"]["name"] == "python"
    assert nb.metadata["language_info"]["version"] == platform.python_version()
    assert {"codemirror_mode", "file_extension", "mimetype", "pygments_lexer"} <= set(nb.metadata["language_info"])
    assert all("execution" not in cell.metadata for cell in nb.cells)


def test_the_kernels_that_can_leave_a_request_unread_are_excluded():
    """Executing echoes an Output widget's outputs to the kernel, as JupyterLab does; ipykernel 7.0 to 7.3 could
    then leave the next request unread for good (ipykernel#1554), so the project's dependencies exclude them."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra in ("lab", "test"):
        pin = next(r for r in extras[extra] if r.startswith("ipykernel"))
        assert all(f"!={minor}.*" in pin for minor in ("7.0", "7.1", "7.2", "7.3")), pin


@pytest.mark.parametrize(("argv", "message"), [
    (["--timeout"], "--timeout needs a number"),
    (["--cell-timeout", "soon"], "--cell-timeout needs a number, but got 'soon'"),
    (["--timeout", "0"], "--timeout must be positive"),
])
def test_bad_options_are_explained(argv, message):
    with pytest.raises(SystemExit, match=message):
        execute_notebooks.main(argv)
