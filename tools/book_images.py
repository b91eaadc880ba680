"""The course website's output renderer: myst-nb's own, with each figure's text alternative as its picture's ``alt``.

myst-nb 1.x reads an image's ``alt`` only from the cell's metadata (one text for every image of the cell); the
course keeps each figure's own text in its output's metadata (``{"image/png": {"alt": ...}}``, written by
``attention_lib.plotting.alt`` when the notebook is executed). Without this renderer Sphinx would use the image's
file name (a hash) as its ``alt``.

It is plugged in where myst-nb documents it: registered as the ``course`` renderer in the ``myst_nb.renderers``
entry-point group (``[project.entry-points."myst_nb.renderers"]`` in ``pyproject.toml``) and chosen in
``book/conf.py`` with ``nb_render_plugin = "course"``.
"""

from __future__ import annotations

from myst_nb.core.render import MimeData, NbElementRenderer


class AltTextRenderer(NbElementRenderer):
    """myst-nb's renderer of notebook outputs; an image takes its ``alt`` from its output's metadata."""

    def render_image(self, data: MimeData) -> list:
        nodes = super().render_image(data)
        alt = (data.output_metadata.get(data.mime_type) or {}).get("alt")
        if alt:
            for node in nodes:
                node["alt"] = str(alt)
        return nodes
