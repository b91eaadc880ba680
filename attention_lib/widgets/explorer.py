"""The one building block of every explorer: controls on top, a figure underneath, redrawn on change.

Only the part of the ipywidgets API that is the same in 7.7 (what Colab ships) and 8 (JupyterLab) is
used: ``IntSlider``, ``FloatSlider``, ``Dropdown``, ``Checkbox``, ``Output``, ``VBox``, ``HBox``,
``observe(..., names="value")`` and ``Output.clear_output(wait=True)``. ipywidgets and matplotlib are
imported here, not by ``import attention_lib``.
"""

from __future__ import annotations

from collections.abc import Callable


def make_explorer(render: Callable[..., object], controls: dict, *, title: str = ""):
    """Build an explorer: ``controls`` (name -> ipywidgets control) above the figure ``render(**values)``.

    ``render`` must be a plain, tested function that takes the controls' values as keyword arguments and
    returns a matplotlib figure; the explorer only wires it to the controls.

    Args:
        render: ``(**values) -> matplotlib.figure.Figure``.
        controls: ``{argument name: ipywidgets control}``; each control's ``value`` is passed to ``render``.
        title: an optional heading shown above the controls.

    Returns:
        An ``ipywidgets.VBox`` with attributes ``controls`` (the dict), ``output`` (the ``Output``),
        ``figure`` (the latest figure drawn) and ``refresh()`` (redraw now).

    Example:
        >>> import ipywidgets as w
        >>> import matplotlib.pyplot as plt
        >>> def render(n):
        ...     fig, ax = plt.subplots()
        ...     ax.plot(range(n))
        ...     return fig
        >>> box = make_explorer(render, {"n": w.IntSlider(value=3, min=1, max=9)})
        >>> first = box.figure
        >>> box.controls["n"].value = 5  # redraws the figure
        >>> box.figure is not first, len(box.children)
        (True, 2)
    """
    import ipywidgets as widgets
    import matplotlib.pyplot as plt
    from IPython import get_ipython
    from IPython.display import display

    output = widgets.Output()

    def refresh(_change=None):
        values = {name: control.value for name, control in controls.items()}
        fig = render(**values)
        box.figure = fig
        if get_ipython() is not None:  # outside a kernel (tests, scripts) there is nothing to show it in
            with output:
                output.clear_output(wait=True)
                display(fig)
        plt.close(fig)

    for control in controls.values():
        control.observe(refresh, names="value")
    header = [widgets.HTML(f"<b>{title}</b>")] if title else []
    box = widgets.VBox([*header, widgets.HBox(list(controls.values())), output])
    box.controls = controls
    box.output = output
    box.refresh = refresh
    box.figure = None
    refresh()
    return box


def explain_unreadable(render: Callable[[], object], what: str = "input"):
    """``render()``, or, when it raises ``ValueError`` (an input the model cannot read), a figure that says why.

    Used by the explorers whose learners type their own input (lessons 12 and 13): a typo shows the error
    message where the map would be, instead of a traceback.
    """
    import textwrap

    import matplotlib.pyplot as plt

    try:
        return render()
    except ValueError as error:
        fig, ax = plt.subplots(figsize=(7.0, 2.0))
        ax.axis("off")
        ax.text(0.0, 0.5, "\n".join(textwrap.wrap(f"This {what} cannot be read: {error}", 90)), va="center",
                fontsize=10, color="#D55E00")
        return fig
