"""The explorer of the induction model (``notebooks/13_induction_heads.ipynb``): type or generate a sequence with a
repeat, pick a layer and a head, see its map and the model's next-token predictions.

Works at once with the shipped two-layer model, no training needed. ipywidgets and matplotlib are imported inside
the functions, so importing this module stays light.
"""

from __future__ import annotations

from ..validation import check_index
from .explorer import explain_unreadable

#: Sequences offered in the explorer's list (any other can be typed: a-z and 0-5, at most 32 tokens).
EXAMPLES = ("qmxbtzqmxbtzpa", "thecatsatthecatsat", "abcdefghabcdefgh", "attentionattention", "k3v1r0wuk3v1r0wu")


def random_repeat(seed: int, k: int = 8, length: int = 20) -> str:
    """A random sequence whose first ``k`` tokens are repeated right after themselves, as a string.

    Example:
        >>> text = random_repeat(0, k=4, length=10)
        >>> text[:4] == text[4:8], len(text)
        (True, 10)
    """
    from ..training.induction_heads import decode, make_repeats

    return decode(make_repeats(1, seed=seed, min_repeat=k, max_repeat=k, length=length).tokens[0])


def _model(model):
    from ..training.induction_heads import load_induction

    return load_induction(2)[0] if model is None else model


def render_induction_heads(text: str, layer: int = 1, head: int = 0, model=None):
    """Draw one head's map on one sequence; each row is labelled with its token and the model's prediction.

    Built in ``notebooks/13_induction_heads.ipynb``. Row ``i`` is labelled ``token -> prediction`` (the token the
    model expects at ``i + 1``); columns are the positions attended to.

    Args:
        text: the sequence, one character per token (a-z, 0-5; spaces are ignored), at most 32 tokens.
        layer, head: which head.
        model: an :class:`attention_lib.attention_only.AttentionOnlyTransformer` (default: the shipped two-layer one).

    Returns:
        The ``matplotlib.figure.Figure``.

    Raises:
        ValueError: for a sequence the model cannot read (the message says what is allowed), or a layer or head
            out of range.

    Example:
        >>> fig = render_induction_heads("abcdefabcdef", layer=1, head=0)
        >>> fig.axes[0].get_title()[:30]
        'layer 1, head 0 · predictions:'
    """
    import torch

    from ..plotting import plot_heatmap
    from ..training.induction_heads import decode, encode

    model = _model(model)
    ids = encode(text)
    for name, value, size in (("layer", layer, model.config["num_layers"]), ("head", head, model.config["num_heads"])):
        check_index(value, name, size)
    with torch.no_grad():
        out = model(ids.unsqueeze(0))
    tokens, predicted = decode(ids), decode(out.logits[0].argmax(-1))
    rows = [f"{t} → {p}" for t, p in zip(tokens, predicted, strict=True)]
    cols = [f"{t} {i}" for i, t in enumerate(tokens)]
    L = len(tokens)
    fig = plot_heatmap(out.attentions[layer][0, head], rows, cols, title=f"layer {layer}, head {head} · predictions: "
                       f"{predicted}", vmin=0.0, vmax=1.0, fmt=".1f", annotate=L <= 14)
    fig.set_size_inches(max(5.0, 1.8 + 0.42 * L), 1.4 + 0.36 * L)
    fig.tight_layout()
    return fig


def _render_or_explain(model, text: str, layer: int, head: int):
    """What the explorer draws: the map, or for a sequence the model cannot read, what is allowed."""
    return explain_unreadable(lambda: render_induction_heads(text, layer=layer, head=head, model=model), "sequence")


def induction_heads_explorer(model=None, examples=None):
    """An explorer of the induction model: type, pick or generate a sequence; choose layer and head.

    Built in ``notebooks/13_induction_heads.ipynb`` around :func:`render_induction_heads`. The button writes a new
    random sequence with a repeat (:func:`random_repeat`) into the text box.

    Args:
        model: an :class:`attention_lib.attention_only.AttentionOnlyTransformer` (default: the shipped two-layer one).
        examples: sequences offered in the list (default :data:`EXAMPLES`).

    Returns:
        The explorer box of :func:`attention_lib.widgets.make_explorer`, with controls ``text``, ``layer`` and
        ``head``, and the button as ``box.generate``.

    Example:
        >>> box = induction_heads_explorer()
        >>> sorted(box.controls)
        ['head', 'layer', 'text']
        >>> box.generate.click()
        >>> box.controls["text"].value == random_repeat(1)
        True
    """
    from functools import partial

    import ipywidgets as widgets

    from .explorer import make_explorer

    model = _model(model)
    examples = list(EXAMPLES if examples is None else examples)
    controls = {
        "text": widgets.Combobox(options=examples, value=examples[0], ensure_option=False, continuous_update=False,
                                 description="sequence", layout=widgets.Layout(width="360px")),
        "layer": widgets.Dropdown(options=list(range(model.config["num_layers"])), value=model.config["num_layers"] - 1,
                                  description="layer", layout=widgets.Layout(width="160px")),
        "head": widgets.Dropdown(options=list(range(model.config["num_heads"])), value=0, description="head",
                                 layout=widgets.Layout(width="160px")),
    }
    box = make_explorer(partial(_render_or_explain, model), controls,
                        title="Where does each head look? (rows: token → the model's next-token prediction)")
    button = widgets.Button(description="random sequence with a repeat", layout=widgets.Layout(width="260px"))
    seeds = iter(range(1, 10**6))

    def generate(_button):
        controls["text"].value = random_repeat(next(seeds))

    button.on_click(generate)
    box.children = (*box.children[:-1], button, box.children[-1])
    box.generate = button
    return box
