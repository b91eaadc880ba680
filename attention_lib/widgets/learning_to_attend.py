"""The explorer of a trained model (``notebooks/12_learning_to_attend.ipynb``): type an input, pick a head.

Works at once with the shipped models of :func:`attention_lib.training.load_trained`, no training needed. ipywidgets
and matplotlib are imported inside the functions, so importing this module stays light.
"""

from __future__ import annotations

from ..validation import check_index
from .explorer import explain_unreadable


def _trained(trained):
    from ..training.learning_to_attend import TrainedModel, load_trained

    return trained if isinstance(trained, TrainedModel) else load_trained(trained)


def render_trained(trained, text: str, layer: int = 0, head: int = 0):
    """Draw one head's attention map on one input, with the model's answer, tokens on both axes.

    Built in ``notebooks/12_learning_to_attend.ipynb``. Rows are the words attending (labelled with the
    answer given there, ``token -> answer``), columns the words attended to.

    Args:
        trained: a :class:`~attention_lib.training.learning_to_attend.TrainedModel`, or a task name to load the
            shipped one.
        text: the input, space-separated tokens of the task's vocabulary.
        layer: which layer, ``0 <= layer < num_layers``.
        head: which head, ``0 <= head < H``.

    Returns:
        The ``matplotlib.figure.Figure``.

    Raises:
        ValueError: for an input the model cannot read (the message says what is allowed), or a layer or
            head out of range.

    Example:
        >>> fig = render_trained("reversal", "1 2 3 4 5 6 7 8", head=1)
        >>> fig.axes[0].get_title()
        'layer 0, head 1 · answer: 8 7 6 5 4 3 2 1'
    """
    from ..plotting import plot_heatmap

    trained = _trained(trained)
    tokens, answers, attention = trained.run(text)
    for name, value, size in (("layer", layer, len(attention)), ("head", head, attention[0].shape[0])):
        check_index(value, name, size)
    rows = [f"{t} → {a}" if a else t for t, a in zip(tokens, answers, strict=True)]
    answer = trained.task.answer_text(tokens, answers)
    fig = plot_heatmap(attention[layer][head], rows, tokens, title=f"layer {layer}, head {head} · answer: {answer}",
                       vmin=0.0, vmax=1.0, fmt=".1f", cmap="viridis")
    fig.set_size_inches(max(5.0, 1.6 + 0.62 * len(tokens)), 1.4 + 0.5 * len(tokens))
    fig.tight_layout()
    return fig


def _render_or_explain(trained, text: str, layer: int, head: int):
    """What the explorer draws: the map, or for an input the model cannot read, what is allowed."""
    return explain_unreadable(lambda: render_trained(trained, text, layer=layer, head=head), "input")


def trained_explorer(trained="agreement", examples=None, *, layer: int = 0, head: int = 0):
    """An explorer of a trained model: type or pick an input, choose layer and head, see the map and answer.

    Built in ``notebooks/12_learning_to_attend.ipynb`` around :func:`render_trained`. An input the model
    cannot read shows what is allowed instead of a map.

    Args:
        trained: a :class:`~attention_lib.training.learning_to_attend.TrainedModel`, or ``"reversal"``/``"agreement"``
            to load the shipped model.
        examples: inputs offered in the list (default: the task's ``examples``).
        layer, head: the layer and head shown first.

    Returns:
        The explorer box of :func:`attention_lib.widgets.make_explorer`, with controls ``text``, ``layer`` and
        ``head``.

    Example:
        >>> box = trained_explorer("reversal")
        >>> sorted(box.controls)
        ['head', 'layer', 'text']
    """
    from functools import partial

    import ipywidgets as widgets

    from .explorer import make_explorer

    trained = _trained(trained)
    config = trained.model.config
    for name, value, size in (("layer", layer, config["num_layers"]), ("head", head, config["num_heads"])):
        check_index(value, name, size)
    examples = list(trained.task.examples if examples is None else examples)
    controls = {
        "text": widgets.Combobox(options=examples, value=examples[0], ensure_option=False,
                                 continuous_update=False, description="input",
                                 layout=widgets.Layout(width="420px")),
        "layer": widgets.Dropdown(options=list(range(config["num_layers"])), value=layer, description="layer",
                                  layout=widgets.Layout(width="180px")),
        "head": widgets.Dropdown(options=list(range(config["num_heads"])), value=head, description="head",
                                 layout=widgets.Layout(width="180px")),
    }
    return make_explorer(partial(_render_or_explain, trained), controls,
                         title=f"What did the {trained.task.name} model learn to look at?")
