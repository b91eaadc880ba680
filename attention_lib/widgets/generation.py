"""The explorer of lesson 15 (``notebooks/15_generation.ipynb``): step through generation, token by token.

Each step shows the text so far, what the newest token attends to in the cache (every layer and head) and the token
the model writes from it, with the cache's size. Works at once with the shipped models of
:func:`attention_lib.training.generation.load_lm`. ipywidgets and matplotlib are imported inside the functions.
"""

from __future__ import annotations

from functools import lru_cache

from ..validation import check_index

#: The prompts the explorer offers: subjects with nouns of the other number around them.
PROMPTS = ("<bos> the cat near the dogs with the dogs", "<bos> near the dogs the cat", "<bos> the dogs behind a cat")
STEPS = 6


@lru_cache(maxsize=16)
def _steps(prompt: str, variant: str):
    from ..experiments.generation import watch_generation
    from ..training.generation import encode, load_lm

    return watch_generation(load_lm(variant)[0], encode(prompt), STEPS)


def render_generation(step: int = 0, prompt: str = PROMPTS[0], variant: str = "mha"):
    """Draw step ``step`` of the greedy generation that continues ``prompt``: the newest token's attention.

    Built in ``notebooks/15_generation.ipynb``.

    Args:
        step: which step, ``0 <= step < 6`` (step 0 reads the prompt's last word).
        prompt: the start of a text, words of the lesson's vocabulary, ``<bos>`` first.
        variant: the shipped model, ``"mha"``, ``"gqa"`` or ``"mqa"``.

    Returns:
        The ``matplotlib.figure.Figure``.

    Raises:
        ValueError: for a step out of range, a word outside the vocabulary or an unknown variant.

    Example:
        >>> fig = render_generation(0, "<bos> the cat near the dogs with the dogs")
        >>> fig.axes[0].get_title()
        'dogs → sits'
    """
    from ..plotting import set_alt
    from ..plotting.generation import plot_new_token_attention
    from ..training.generation import VOCAB, decode

    check_index(step, "step", STEPS)
    record = _steps(prompt, variant)[step]
    tokens = decode(record["tokens"]).split()
    fig = plot_new_token_attention(record["weights"], tokens, written=VOCAB[record["written"]])
    fig.axes[0].set_xlabel(f"cached token (key): {len(tokens)} tokens, {record['cache_bytes']:,} bytes of keys "
                           f"and values")
    set_alt(fig.axes[0], None)
    return fig


def generation_explorer(prompt: str = PROMPTS[0], variant: str = "mha"):
    """An explorer of generation: pick a prompt and a model, move through the steps, see what each new token reads.

    Built in ``notebooks/15_generation.ipynb`` around :func:`render_generation`.

    Returns:
        The explorer box of :func:`attention_lib.widgets.make_explorer`, with controls ``step``, ``prompt`` and
        ``variant``.

    Example:
        >>> box = generation_explorer()
        >>> sorted(box.controls)
        ['prompt', 'step', 'variant']
    """
    import ipywidgets as widgets

    from .explorer import make_explorer

    render_generation(0, prompt, variant)  # refuse a bad prompt or variant before building the controls
    controls = {
        "step": widgets.IntSlider(value=0, min=0, max=STEPS - 1, description="step", continuous_update=False),
        "prompt": widgets.Dropdown(options=list(dict.fromkeys([prompt, *PROMPTS])), value=prompt,
                                   description="prompt", layout=widgets.Layout(width="380px")),
        "variant": widgets.Dropdown(options=["mha", "gqa", "mqa"], value=variant, description="model",
                                    layout=widgets.Layout(width="200px")),
    }
    return make_explorer(render_generation, controls, title="Writing one token at a time: what does the newest "
                                                            "token read in the cache?")
