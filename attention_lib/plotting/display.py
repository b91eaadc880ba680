"""How a figure's text alternative reaches the reader in a notebook, on Colab and on the website.

Importing :mod:`attention_lib.plotting` inside IPython (JupyterLab, Colab, a terminal) installs a display hook
for matplotlib figures. Each figure is then shown as its usual PNG, with its text alternative
(:func:`attention_lib.plotting.alt.alt_text`) in the output's metadata (``{"image/png": {"alt": ...}}``: the
website's ``<img alt>`` comes from there, see ``book/conf.py``), followed by a one-line caption ``Figure: ...``
that every reader, and every screen reader, gets in JupyterLab and Colab.
"""

from __future__ import annotations

import html

from .alt import alt_text

#: The class of the caption printed under each figure in a notebook (the website's stylesheet uses it).
CAPTION_CLASS = "course-figure-alt"


def caption_bundle(text: str) -> dict:
    """The caption shown under a figure in a notebook: ``{"text/plain": ..., "text/html": ...}``.

    Example:
        >>> caption_bundle("Two bars: a 0.25, b 0.75.")["text/plain"]
        'Figure: Two bars: a 0.25, b 0.75.'
    """
    return {"text/plain": f"Figure: {text}",
            "text/html": f'<p class="{CAPTION_CLASS}"><em>Figure:</em> {html.escape(text)}</p>'}


def _display_figure(fig) -> None:
    """Show ``fig`` as IPython would, with its text alternative in the image metadata, then its caption."""
    import sys

    from IPython import get_ipython
    from IPython.display import publish_display_data

    shell = get_ipython()
    formatter = shell.display_formatter
    data, metadata = {}, {}
    for mime, each in formatter.formatters.items():  # the formatters the inline backend registered (PNG, ...)
        result = each(fig)
        if isinstance(result, tuple) and len(result) == 2:
            result, metadata[mime] = result
        if result is not None:
            data[mime] = result
    images = [mime for mime in data if mime.startswith("image/")]
    if not images:  # nothing to draw it with (no inline backend): show what IPython would show
        publish_display_data(data, metadata)
        return
    text = alt_text(fig)
    for mime in images:
        metadata[mime] = {**(metadata.get(mime) or {}), "alt": text}
    inline = sys.modules.get("matplotlib_inline.backend_inline")
    fetch = getattr(inline, "_fetch_figure_metadata", None)
    background = fetch(fig) if fetch is not None else None
    publish_display_data(data, {**metadata, **(background or {})})
    publish_display_data(caption_bundle(text))


def install_display_hook(shell=None) -> bool:
    """Make IPython show every matplotlib figure with its text alternative (see the module docstring).

    Called when :mod:`attention_lib.plotting` is imported; does nothing outside IPython. matplotlib is not
    imported here: the hook is registered by the figure class's name. Returns whether a hook is installed.
    """
    import sys

    if shell is None:
        if "IPython" not in sys.modules:
            return False
        from IPython import get_ipython

        shell = get_ipython()
    formatter = getattr(getattr(shell, "display_formatter", None), "ipython_display_formatter", None)
    if formatter is None:
        return False
    formatter.for_type_by_name("matplotlib.figure", "Figure", _display_figure)
    return True
