"""A block diagram of the tiny transformer: its parts, in the order data flows through them, with the residual paths.

Built in ``notebooks/12_learning_to_attend.ipynb``. matplotlib is imported inside the function.
"""

from __future__ import annotations

from ...validation import check_int
from ..alt import set_alt, with_alt
from ..style import OKABE_ITO, finish

# (label, detail, colour index) of every box, bottom to top; "+" marks the adders of the residual connections
_EMBED = [("token embedding", "nn.Embedding: one vector per token", 4),
          ("+ position", "LearnedPositions (lesson 11): one vector per position", 4)]
_BLOCK = [("layer norm", "nn.LayerNorm: steady scale", 6),
          ("multi-head attention", "MultiHeadAttention (lesson 09): each word gathers from the others", 1),
          ("+", "residual: keep the word, add what it gathered", None),
          ("layer norm", "nn.LayerNorm", 6),
          ("MLP", "Linear, GELU, Linear: each word on its own", 2),
          ("+", "residual", None)]
_HEAD = [("layer norm", "nn.LayerNorm", 6), ("read-out", "nn.Linear: a score for every answer", 0)]


@with_alt
def plot_block_diagram(model=None, *, num_layers: int | None = None, title: str = ""):
    """Draw the tiny transformer as boxes, from token ids (bottom) to answer scores (top).

    Built in ``notebooks/12_learning_to_attend.ipynb``. Each box is one part of
    :class:`~attention_lib.encoder.TinyTransformer` with what it does; the blocks are framed, and each residual
    connection is an arrow that goes around its part to a ``+``.

    Args:
        model: a :class:`~attention_lib.encoder.TinyTransformer` to read the sizes from (optional).
        num_layers: how many blocks to draw (default: the model's, or 1).
        title: a title over the diagram.

    Returns:
        The ``matplotlib.figure.Figure``.

    Raises:
        ValueError: if ``num_layers`` is not a positive int.

    Example:
        >>> fig = plot_block_diagram(num_layers=2)
        >>> sum(t.get_text() == "multi-head attention" for t in fig.axes[0].texts)
        2
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

    config = getattr(model, "config", None) or {}
    layers = num_layers if num_layers is not None else config.get("num_layers", 1)
    layers = check_int(layers, "num_layers", minimum=1)
    E = config.get("embed_dim", "E")
    rows = [("token ids", "(N, L)", None), *_EMBED]
    blocks = []
    for layer in range(layers):
        blocks.append((len(rows), len(rows) + len(_BLOCK) - 1, layer))
        rows += _BLOCK
    rows += [*_HEAD, ("answer scores", "(N, L, C): the logits", None)]
    step, height = 1.0, 0.62
    fig, ax = plt.subplots(figsize=(7.6, 0.55 + 0.52 * len(rows)))
    x0, width = 0.0, 3.4
    for i, (label, detail, colour) in enumerate(rows):
        y = i * step
        if label == "+":
            ax.add_patch(plt.Circle((x0 + width / 2, y), 0.22, facecolor="white", edgecolor="black", lw=1.2))
            ax.text(x0 + width / 2, y, "+", ha="center", va="center", fontsize=12, fontweight="bold")
        elif colour is None:
            ax.text(x0 + width / 2, y, label, ha="center", va="center", fontsize=10, style="italic")
        else:
            ax.add_patch(FancyBboxPatch((x0, y - height / 2), width, height,
                                        boxstyle="round,pad=0.02,rounding_size=0.1", facecolor=OKABE_ITO[colour],
                                        edgecolor="black", alpha=0.85, lw=1.0))
            ax.text(x0 + width / 2, y, label, ha="center", va="center", fontsize=10)
        ax.text(x0 + width + 0.5, y, detail, ha="left", va="center", fontsize=8.5)
        if i:
            gap = 0.22 if label == "+" else height / 2
            below = 0.22 if rows[i - 1][0] == "+" else (0.15 if rows[i - 1][2] is None else height / 2)
            ax.add_patch(FancyArrowPatch((x0 + width / 2, (i - 1) * step + below), (x0 + width / 2, y - gap),
                                         arrowstyle="-|>", mutation_scale=10, color="black", lw=1.0))
    for first, last, layer in blocks:  # the block's frame and its two residual paths
        ax.add_patch(Rectangle((x0 - 0.55, first * step - 0.5), width + 0.85, (last - first + 1) * step,
                               fill=False, linestyle="--", edgecolor="#555555", lw=1.0))
        ax.text(x0 - 0.65, (first + last) / 2 * step, f"block {layer}", rotation=90, ha="right", va="center",
                fontsize=9, color="#555555")
        for start, adder in ((first - 1, first + 2), (first + 2, first + 5)):
            y_start, y_end = (start + 0.5) * step, adder * step  # from the arrow into the part, to its "+"
            path = [(x0 + width / 2 + 0.05, y_start), (x0 - 0.3, y_start), (x0 - 0.3, y_end),
                    (x0 + width / 2 - 0.22, y_end)]
            ax.plot([p[0] for p in path[:3]], [p[1] for p in path[:3]], color=OKABE_ITO[3], lw=1.6)
            ax.add_patch(FancyArrowPatch(path[2], path[3], arrowstyle="-|>", mutation_scale=10, color=OKABE_ITO[3],
                                         lw=1.6))
    ax.text(x0 - 0.3, -0.55, "residual path", color=OKABE_ITO[3], fontsize=8.5, ha="left", va="top")
    ax.set_xlim(-1.3, 10.5)
    ax.set_ylim(-1.0, (len(rows) - 1) * step + 0.7)
    ax.axis("off")
    sizes = f" (E = {E})" if config else ""
    ax.set_title(title or f"the tiny transformer, {layers} block{'s' if layers > 1 else ''}{sizes}")
    set_alt(ax, f"Block diagram of the tiny transformer, read from bottom to top: token embedding plus position, "
                f"then {layers} block{'s' if layers > 1 else ''}, each a layer norm, multi-head attention and an "
                "addition to the residual path, then a layer norm, an MLP and another addition; a last layer "
                "norm and the read-out.")
    return finish(fig)
