"""The online-softmax explorer of ``notebooks/10_memory_efficient.ipynb``: step through the keys block by block.

ipywidgets and matplotlib are imported inside the functions, so importing this module stays light.
"""

from __future__ import annotations

import torch

#: The small example the explorer starts with: one query's scores against 8 keys, and 2 features per value.
#: The maximum moves at blocks 2 and 3 (blocks of 2 keys) and stays put at block 4.
EXAMPLE_SCORES = (0.5, -1.0, 1.5, 0.2, 3.0, -0.5, 1.0, 2.5)
EXAMPLE_VALUES = ((1.0, 0.0), (0.0, 1.0), (1.0, 1.0), (0.0, 0.0), (2.0, 0.0), (0.0, 2.0), (1.0, 0.0), (0.0, 1.0))


def _vector(x: torch.Tensor) -> str:
    return "[" + ", ".join(f"{float(v):.3f}" for v in x) + "]"


def render_online_softmax(block: int = 1, block_size: int = 2, scores=EXAMPLE_SCORES, value=EXAMPLE_VALUES):
    """Draw the online softmax of one query after ``block`` blocks of ``block_size`` keys, with its numbers.

    Left: the scores, keys already folded in, the current block and the keys still to come told apart by
    colour and hatch, and the running max as a line. Right: this step written out: the block's max, the new
    running max, the correction ``exp(old m - new m)``, the new running sum and blend, and the output so far
    next to the exact one. Built on :func:`attention_lib.plotting.online_softmax_steps`.

    Args:
        block: which step to show, ``1..number of blocks``.
        block_size: keys per block.
        scores: ``(S,)``, one query's scores (a tensor or a sequence of numbers).
        value: ``(S, Ev)``, the values.

    Returns:
        The ``matplotlib.figure.Figure``.

    Raises:
        ValueError: if ``block`` is not between 1 and the number of blocks, or the shapes do not fit.

    Example:
        >>> fig = render_online_softmax(2, 2)
        >>> "correction = exp(0.500 - 1.500) = 0.368" in fig.axes[1].texts[0].get_text()
        True
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    from ..plotting.style import GREY, HATCHES, OKABE_ITO
    from ..plotting.tiles import online_softmax_steps

    scores, value = torch.as_tensor(scores, dtype=torch.float64), torch.as_tensor(value, dtype=torch.float64)
    steps = online_softmax_steps(scores, value, block_size)
    if not 1 <= block <= len(steps):
        raise ValueError(f"block must be between 1 and {len(steps)} (the number of blocks of {block_size} keys), "
                         f"but block={block}.")
    step = steps[block - 1]
    fig, (ax, text) = plt.subplots(1, 2, figsize=(10.5, 3.8), gridspec_kw={"width_ratios": [1.0, 1.1]})
    kinds = [0 if j < step.first else 1 if j <= step.last else 2 for j in range(scores.shape[0])]
    colors = (OKABE_ITO[0], OKABE_ITO[1], "#E8E8E8")
    ax.bar(range(scores.shape[0]), scores.numpy(), color=[colors[k] for k in kinds],
           hatch=None, edgecolor=GREY)
    for patch, kind in zip(ax.patches, kinds, strict=True):
        patch.set_hatch(HATCHES[kind])
    ax.axhline(step.running_max, color=OKABE_ITO[5], linestyle="--", label=f"running max m = {step.running_max:.2f}")
    ax.axhline(0, color=GREY, linewidth=0.8)
    ax.set_xticks(range(scores.shape[0]), labels=[f"key {j}" for j in range(scores.shape[0])], rotation=30)
    ax.set_ylabel("score")
    ax.set_title(f"after block {block} of {len(steps)} (keys {step.first}-{step.last})")
    handles = [Patch(facecolor=c, hatch=h, edgecolor=GREY, label=label) for c, h, label in
               zip(colors, HATCHES, ("folded in already", "this block", "still to come"), strict=False)]
    ax.legend(handles=[*handles, *ax.get_legend_handles_labels()[0]], fontsize=8, loc="upper left")
    old_max = "-inf" if step.old_max == float("-inf") else f"{step.old_max:.3f}"
    lines = [
        f"block max            = {step.block_max:.3f}",
        f"new running max m    = max({old_max}, {step.block_max:.3f}) = {step.running_max:.3f}",
        f"correction = exp({old_max} - {step.running_max:.3f}) = {step.correction:.3f}"
        + ("   (nothing to correct yet)" if block == 1 else "   (m did not move)" if step.correction == 1 else ""),
        f"block's sum of exp(s - m)       = {step.block_sum:.3f}",
        f"running sum l = {step.old_sum:.3f} x {step.correction:.3f} + {step.block_sum:.3f} = {step.running_sum:.3f}",
        f"blend o = {_vector(step.old_output)} x {step.correction:.3f}",
        f"          + {_vector(step.block_output)} = {_vector(step.running_output)}",
        f"output so far o / l = {_vector(step.estimate)}",
        f"exact output        = {_vector(steps[-1].estimate)}" + ("   (equal: all keys seen)"
                                                                  if block == len(steps) else ""),
    ]
    text.axis("off")
    text.text(0.0, 1.0, "\n".join(lines), va="top", ha="left", family="monospace", fontsize=9,
              transform=text.transAxes)
    fig.patch.set_facecolor("white")
    fig.tight_layout()
    return fig


def online_softmax_explorer(scores=EXAMPLE_SCORES, value=EXAMPLE_VALUES):
    """An explorer: step through the online softmax block by block and watch its running numbers.

    Built in ``notebooks/10_memory_efficient.ipynb`` around :func:`render_online_softmax`.

    Returns:
        The explorer box of :func:`attention_lib.widgets.make_explorer`.

    Example:
        >>> box = online_softmax_explorer()
        >>> sorted(box.controls)
        ['block', 'block_size']
    """
    import ipywidgets as widgets

    from .explorer import make_explorer

    S = len(scores)
    block = widgets.IntSlider(value=1, min=1, max=-(-S // 2), description="block")
    size = widgets.Dropdown(options=[1, 2, 3, 4, S], value=2, description="keys/block")

    def resize(change):  # fewer or more blocks: keep the slider inside them
        block.max = -(-S // change["new"])
        block.value = min(block.value, block.max)

    size.observe(resize, names="value")
    return make_explorer(lambda block, block_size: render_online_softmax(block, block_size, scores, value),
                         {"block": block, "block_size": size}, title="The online softmax, one block at a time")
