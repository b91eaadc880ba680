"""The masking explorer of ``notebooks/08_masking.ipynb``: pick a sentence of a padded batch and a mask.

ipywidgets and matplotlib are imported inside the functions, so importing this module stays light.
"""

from __future__ import annotations

import torch

from ..attention import calculate_attention
from ..data import BATCH_SENTENCES, sentence_batch
from ..masks import causal_mask, padding_mask

#: The masks the explorer offers.
MASK_KINDS: tuple[str, ...] = ("none", "causal", "padding", "causal + padding")

#: The label of a padding position on the heatmaps' axes.
PAD = "<pad>"


def batch_mask(kind: str, lengths: torch.Tensor, S: int) -> torch.Tensor:
    """The bool mask ``(N, S, S)`` of one of :data:`MASK_KINDS` for a padded batch (``True`` = may attend).

    Built step by step in ``notebooks/08_masking.ipynb``.

    Args:
        kind: one of ``"none"``, ``"causal"``, ``"padding"``, ``"causal + padding"``.
        lengths: ``(N,)``, the number of real tokens of each sentence.
        S: the padded length.

    Returns:
        A bool tensor ``(N, S, S)``: ``[n, i, j]`` says whether word ``i`` of sentence ``n`` may attend to
        word ``j``.

    Raises:
        ValueError: if ``kind`` is not one of :data:`MASK_KINDS`.

    Example:
        >>> batch_mask("causal + padding", torch.tensor([2]), 3).int()
        tensor([[[1, 0, 0],
                 [1, 1, 0],
                 [1, 1, 0]]], dtype=torch.int32)
    """
    if kind not in MASK_KINDS:
        raise ValueError(f"kind must be one of {MASK_KINDS}, but kind={kind!r}.")
    N = lengths.shape[0]
    mask = torch.ones(N, S, S, dtype=torch.bool)  # (N, L, S) with L = S: self-attention
    if "causal" in kind:
        mask = mask & causal_mask(S, S)  # (N, L, S) & (L, S) -> (N, L, S)
    if "padding" in kind:
        mask = mask & padding_mask(lengths, S)  # (N, L, S) & (N, 1, S) -> (N, L, S)
    return mask


def render_masking(sentence: int = 0, kind: str = "causal + padding"):
    """Draw the mask and the attention weights of one sentence of the course's padded batch, side by side.

    The batch is :func:`attention_lib.data.sentence_batch`; each word's embedding serves as its query, key and
    value (self-attention). Padding positions are labelled ``<pad>``.

    Args:
        sentence: which sentence of :data:`attention_lib.data.BATCH_SENTENCES` (an index).
        kind: one of :data:`MASK_KINDS`.

    Returns:
        The ``matplotlib.figure.Figure``: the mask (1 = may attend) on the left, the weights on the right.

    Raises:
        ValueError: if ``sentence`` is out of range or ``kind`` is unknown.

    Example:
        >>> fig = render_masking(1, "padding")
        >>> [t.get_text() for t in fig.axes[0].get_xticklabels()]
        ['the', 'dog', 'barked', '<pad>']
    """
    from ..plotting import plot_heatmaps

    if not 0 <= sentence < len(BATCH_SENTENCES):
        raise ValueError(f"sentence must be an index in 0..{len(BATCH_SENTENCES) - 1}, but sentence={sentence}.")
    x, lengths = sentence_batch()  # (N, S, 4), (N,)
    S = x.shape[1]
    mask = batch_mask(kind, lengths, S)  # (N, S, S)
    _, weights = calculate_attention(x, x, x, attn_mask=mask)  # (N, S, S)
    words = list(BATCH_SENTENCES[sentence])
    labels = words + [PAD] * (S - len(words))
    return plot_heatmaps([mask[sentence].float(), weights[sentence]], labels, labels,
                         titles=["mask (1 = may attend)", "attention weights"],
                         suptitle=f"{' '.join(words)!r}, mask: {kind}", vmin=0.0, vmax=1.0)


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
