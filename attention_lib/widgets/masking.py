"""The masking explorer of ``notebooks/08_masking.ipynb``: pick a sentence of a padded batch and a mask.

The masks come from :func:`attention_lib.experiments.batch_mask`; this module only draws them. ipywidgets and
matplotlib are imported inside the functions, so importing this module stays light.
"""

from __future__ import annotations

from ..attention import calculate_attention
from ..experiments import MASK_KINDS, batch_mask
from ..toy_data import BATCH_SENTENCES, sentence_batch

#: The label of a padding position on the heatmaps' axes.
PAD = "<pad>"


def render_masking(sentence: int = 0, kind: str = "causal + padding"):
    """Draw the mask and the attention weights of one sentence of the course's padded batch, side by side.

    The batch is :func:`attention_lib.toy_data.sentence_batch`; each word's embedding serves as its query, key and
    value (self-attention). Padding positions are labelled ``<pad>``.

    Args:
        sentence: which sentence of :data:`attention_lib.toy_data.BATCH_SENTENCES` (an index).
        kind: one of :data:`MASK_KINDS`.

    Returns:
        The ``matplotlib.figure.Figure``: the mask (may attend / blocked) on the left, the weights on the
        right with the blocked cells hatched.

    Raises:
        ValueError: if ``sentence`` is out of range or ``kind`` is unknown.

    Example:
        >>> fig = render_masking(1, "padding")
        >>> [t.get_text() for t in fig.axes[0].get_xticklabels()]
        ['the', 'dog', 'barked', '<pad>']
    """
    import matplotlib.pyplot as plt

    from ..plotting import plot_heatmap, plot_mask
    from ..plotting.style import finish

    if not 0 <= sentence < len(BATCH_SENTENCES):
        raise ValueError(f"sentence must be an index in 0..{len(BATCH_SENTENCES) - 1}, but sentence={sentence}.")
    x, lengths = sentence_batch()  # (N, S, 4), (N,)
    S = x.shape[1]
    mask = batch_mask(kind, lengths, S)  # (N, S, S)
    _, weights = calculate_attention(x, x, x, attn_mask=mask)  # (N, S, S)
    words = list(BATCH_SENTENCES[sentence])
    labels = words + [PAD] * (S - len(words))
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.5, 4.2), gridspec_kw={"width_ratios": [1.0, 1.15]})
    plot_mask(mask[sentence], labels, labels, title="the mask", ax=left)
    plot_heatmap(weights[sentence], labels, labels, title="attention weights", vmin=0.0, vmax=1.0,
                 mask=mask[sentence], ax=right)
    fig.suptitle(f"{' '.join(words)!r}, mask: {kind}")
    return finish(fig)


def masking_explorer():
    """An explorer: choose a sentence of the padded batch and a mask, see who may attend to whom.

    Built in ``notebooks/08_masking.ipynb`` around :func:`render_masking`.

    Returns:
        The explorer box of :func:`attention_lib.widgets.make_explorer`.

    Example:
        >>> box = masking_explorer()
        >>> sorted(box.controls)
        ['kind', 'sentence']
    """
    import ipywidgets as widgets

    from .explorer import make_explorer

    options = [(" ".join(words), i) for i, words in enumerate(BATCH_SENTENCES)]
    controls = {
        "sentence": widgets.Dropdown(options=options, value=0, description="sentence"),
        "kind": widgets.Dropdown(options=list(MASK_KINDS), value="causal + padding", description="mask"),
    }
    return make_explorer(render_masking, controls, title="Who may look at whom?")
