"""Pictures of generation (``notebooks/15_generation.ipynb``): what one new token attends to in the cache, and the
time per token with and without the cache. matplotlib is imported inside each function.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from .alt import number, set_alt, with_alt
from .basic import _as_numpy, plot_heatmap, plot_lines
from .style import finish


@with_alt
def plot_new_token_attention(weights, tokens: Sequence[str], *, written: str = "", title: str = ""):
    """Draw what the newest token attends to over the cache: one row per layer and head, one column per token.

    Built in ``notebooks/15_generation.ipynb``.

    Args:
        weights: ``(layers, H, S)``, the newest query's weights in each layer and head (each row sums to 1).
        tokens: the ``S`` tokens in the cache, the newest last.
        written: the token the model wrote from this step, for the title.
        title: a title (default: ``"<newest> → <written>"``).

    Returns:
        The ``matplotlib.figure.Figure``.

    Raises:
        ValueError: if ``weights`` is not 3-D or ``tokens`` does not have one label per column.

    Example:
        >>> fig = plot_new_token_attention(torch.full((2, 2, 3), 1 / 3), ["<bos>", "the", "cat"], written="purrs")
        >>> fig.axes[0].get_title()
        'cat → purrs'
    """
    weights = torch.as_tensor(weights).detach().cpu()
    if weights.dim() != 3:
        raise ValueError(f"weights must be (layers, H, S), the newest query's row in each layer and head, but got "
                         f"shape {tuple(weights.shape)}.")
    layers, H, S = weights.shape
    rows = [f"layer {layer}, head {head}" for layer in range(layers) for head in range(H)]
    title = title or (f"{tokens[-1]} → {written}" if written and len(tokens) else "")
    fig = plot_heatmap(weights.reshape(layers * H, S), rows, list(tokens), title=title, vmin=0.0, vmax=1.0,
                       fmt=".2f", xlabel="cached token (key)", ylabel="")
    fig.set_size_inches(max(5.0, 2.4 + 0.62 * S), 1.2 + 0.38 * layers * H)
    strongest = weights.mean(dim=(0, 1)).argmax()
    set_alt(fig, f"Heatmap '{title}', {layers * H} rows (layer and head) by {S} cached tokens: each row is where "
                 f"the newest token, '{tokens[-1]}', looks; on average over the heads it looks most at "
                 f"'{tokens[int(strongest)]}', with {number(float(weights.mean(dim=(0, 1))[strongest]))} of its "
                 f"weight.")
    return finish(fig)


@with_alt
def plot_decoding_times(prefixes: Sequence[int], times: Mapping[str, Sequence[float]], *, title: str = ""):
    """Draw the time to write one token against the length of the text so far, with and without the cache.

    Built in ``notebooks/15_generation.ipynb``; ``times`` comes from
    :func:`attention_lib.bench.time_per_token` (seconds), drawn in milliseconds on log axes.

    Args:
        prefixes: the lengths of the text before the new token.
        times: ``{"no cache": seconds per token, "cache": seconds per token}``, one value per prefix.
        title: a title.

    Returns:
        The ``matplotlib.figure.Figure``.

    Raises:
        ValueError: if a curve does not have one value per prefix.

    Example:
        >>> fig = plot_decoding_times([4, 64], {"no cache": [1e-3, 4e-3], "cache": [1e-3, 1e-3]})
        >>> [line.get_label() for line in fig.axes[0].get_lines()]
        ['no cache', 'cache']
    """
    ms = {name: [1e3 * t for t in values] for name, values in times.items()}
    fig = plot_lines(list(prefixes), ms, title=title or "time to write one token", xlabel="tokens before it",
                     ylabel="ms per token", logx=True, logy=True, marker="o")
    if "no cache" in ms and "cache" in ms:
        ratio = [a / b for a, b in zip(_as_numpy(ms["no cache"]), _as_numpy(ms["cache"]), strict=True)]
        set_alt(fig, f"Line plot '{title or 'time to write one token'}': milliseconds per token against the "
                     f"tokens before it, from {prefixes[0]} to {prefixes[-1]}, on log axes; without the cache it "
                     f"takes {number(ratio[0])} times as long as with it at {prefixes[0]} tokens and "
                     f"{number(ratio[-1])} times at {prefixes[-1]}.")
    return fig
