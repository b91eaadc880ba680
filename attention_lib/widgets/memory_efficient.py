"""The online-softmax explorer of ``notebooks/10_memory_efficient.ipynb``: step through the keys block by block.

ipywidgets and matplotlib are imported inside the functions, so importing this module stays light.
"""

from __future__ import annotations

import torch

#: The small example the explorer starts with: one query's scores against 8 keys, and 2 features per value.
#: The maximum moves at blocks 2 and 3 (blocks of 2 keys) and stays put at block 4.
EXAMPLE_SCORES = (0.5, -1.0, 1.5, 0.2, 3.0, -0.5, 1.0, 2.5)
EXAMPLE_VALUES = ((1.0, 0.0), (0.0, 1.0), (1.0, 1.0), (0.0, 0.0), (2.0, 0.0), (0.0, 2.0), (1.0, 0.0), (0.0, 1.0))


def render_memory_efficient(block: int = 1, block_size: int = 2, scores=EXAMPLE_SCORES, value=EXAMPLE_VALUES):
    """Draw the online softmax of one query after ``block`` blocks of ``block_size`` keys, with its numbers.

    The explorer's picture: :func:`attention_lib.plotting.plot_online_softmax_block` on the example (or given)
    scores and values.

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
        >>> fig = render_memory_efficient(2, 2)
        >>> "correction = exp(0.500 - 1.500) = 0.368" in fig.axes[1].texts[0].get_text()
        True
    """
    from ..plotting.memory_efficient.online_softmax import plot_online_softmax_block

    scores, value = torch.as_tensor(scores, dtype=torch.float64), torch.as_tensor(value, dtype=torch.float64)
    return plot_online_softmax_block(scores, value, block, block_size)


def memory_efficient_explorer(scores=EXAMPLE_SCORES, value=EXAMPLE_VALUES):
    """An explorer: step through the online softmax block by block and watch its running numbers.

    Built in ``notebooks/10_memory_efficient.ipynb`` around :func:`render_memory_efficient`.

    Returns:
        The explorer box of :func:`attention_lib.widgets.make_explorer`.

    Example:
        >>> box = memory_efficient_explorer()
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
    return make_explorer(lambda block, block_size: render_memory_efficient(block, block_size, scores, value),
                         {"block": block, "block_size": size}, title="The online softmax, one block at a time")
