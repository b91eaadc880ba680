"""The backward pass through one row's softmax, pictured: its Jacobian, and ``dS = p * (dP - D)`` key by key.

Built for ``notebooks/10_memory_efficient.ipynb``, where the backward pass of memory-efficient attention is derived
on the course sentence.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..alt import number, set_alt, with_alt
from ..basic import plot_heatmap
from ..style import GREY, HATCHES, OKABE_ITO, finish


def softmax_jacobian(weights: torch.Tensor) -> torch.Tensor:
    """The Jacobian of one row's softmax from its weights: ``J[i, j] = dp_i / ds_j = p_i (δ_ij - p_j)``.

    Args:
        weights: ``(S,)``, the weights ``p = softmax(s)`` of one query.

    Returns:
        ``(S, S)``: ``diag(p) - p pᵀ`` (symmetric, and each row and column adds up to 0).

    Raises:
        ValueError: if ``weights`` is not one row ``(S,)``.

    Example:
        >>> softmax_jacobian(torch.tensor([0.5, 0.5]))
        tensor([[ 0.2500, -0.2500],
                [-0.2500,  0.2500]])
    """
    if not isinstance(weights, torch.Tensor) or weights.dim() != 1:
        shape = tuple(weights.shape) if isinstance(weights, torch.Tensor) else type(weights).__name__
        raise ValueError(f"expected the weights of one query, a tensor (S,), but got {shape}; pick one row, "
                         f"e.g. weights[3].")
    return torch.diag(weights) - weights[:, None] * weights[None, :]  # (S, S) - (S, 1) * (1, S)


@with_alt
def plot_softmax_backward(weights: torch.Tensor, grad_weights: torch.Tensor, labels: Sequence[str] | None = None,
                          *, title: str = ""):
    """Draw how the gradient ``dP`` of one query's weights flows back through its softmax to the scores.

    Left: the softmax's Jacobian ``dp_i / ds_j = p_i (δ_ij - p_j)`` (:func:`softmax_jacobian`), numbers in the
    cells: raising one score raises its own weight and lowers every other. Right, key by key: ``dP_j``,
    ``dP_j - D`` and the score gradient ``dS_j = p_j (dP_j - D)``, with ``D = Σ_i p_i dP_i`` (the
    ``p``-weighted mean of ``dP``) as a dashed line: a key's score gradient has the sign of ``dP_j - D``,
    scaled by its weight.

    Args:
        weights: ``(S,)``, the weights ``p`` of one query.
        grad_weights: ``(S,)``, ``dP``, the gradient of the loss with respect to those weights.
        labels: ``S`` names of the keys; defaults to ``key 0``, ``key 1``, ...
        title: an optional title over both panels.

    Returns:
        The ``matplotlib.figure.Figure`` (two axes, plus the heatmap's colour bar).

    Raises:
        ValueError: if the two are not rows of the same length, or ``labels`` does not have one name per key.

    Example:
        >>> p, dp = torch.tensor([0.25, 0.75]), torch.tensor([1.0, 0.0])
        >>> fig = plot_softmax_backward(p, dp, ["a", "b"])
        >>> [round(float(bar.get_height()), 4) for bar in fig.axes[1].patches[4:]]  # dS = p * (dP - D), D = 0.25
        [0.1875, -0.1875]
    """
    import matplotlib.pyplot as plt

    jacobian = softmax_jacobian(weights)
    if not isinstance(grad_weights, torch.Tensor) or grad_weights.shape != weights.shape:
        shape = tuple(grad_weights.shape) if isinstance(grad_weights, torch.Tensor) else type(grad_weights).__name__
        raise ValueError(f"grad_weights must have the shape of weights, {tuple(weights.shape)}, but got {shape}.")
    S = weights.shape[0]
    labels = [f"key {j}" for j in range(S)] if labels is None else list(labels)
    if len(labels) != S:
        raise ValueError(f"expected {S} labels, one per key, but got {len(labels)}.")
    p, dp = weights.detach().double().cpu(), grad_weights.detach().double().cpu()
    D = float((p * dp).sum())
    ds = p * (dp - D)  # (S,)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.0), gridspec_kw={"width_ratios": [1.0, 1.3]})
    plot_heatmap(jacobian.cpu(), labels, labels, ax=left, fmt=".3f", xlabel="score s_j that moves",
                 ylabel="weight p_i that answers", title="softmax Jacobian dp_i / ds_j = p_i (δ_ij - p_j)")
    x = torch.arange(S, dtype=torch.float64).numpy()
    width = 0.27
    bars = ((dp, "dP_j"), (dp - D, "dP_j - D"), (ds, "dS_j = p_j (dP_j - D)"))
    for k, (values, name) in enumerate(bars):
        right.bar(x + (k - 1) * width, values.numpy(), width, color=OKABE_ITO[k], hatch=HATCHES[k], edgecolor=GREY,
                  label=name)
    right.axhline(D, color=OKABE_ITO[5], linestyle="--", label=f"D = Σ p_i dP_i = {D:.3f}")
    right.axhline(0, color=GREY, linewidth=0.8)
    right.set_xticks(x, labels=[f"{name}\np = {float(w):.3f}" for name, w in zip(labels, p, strict=True)])
    right.set_ylabel("gradient")
    right.set_title("dP flows back through the softmax")
    right.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    if title:
        fig.suptitle(title)
    return set_alt(finish(fig), _alt(labels, p, dp, D, ds, jacobian, title))


def _alt(labels, p, dp, D, ds, jacobian, title: str) -> str:
    """The text alternative: what each panel shows, with the numbers of every key."""
    diagonal = jacobian.diagonal()
    top = int(diagonal.argmax())
    keys = "; ".join(f"{name} (weight {number(float(w))}): dP {number(float(a))}, dP - D {number(float(a) - D)}, "
                     f"dS {number(float(b))}" for name, w, a, b in zip(labels, p, dp, ds, strict=True))
    rising = [name for name, b in zip(labels, ds, strict=True) if float(b) > 0]
    return (f"{title + '. ' if title else ''}2 panels. (1) Heatmap of the softmax Jacobian dp_i / ds_j = "
            f"p_i (δ_ij - p_j), {len(labels)} x {len(labels)}, rows the weights, columns the scores: the diagonal "
            f"is positive (largest {number(float(diagonal[top]))}, at '{labels[top]}'), every other entry is negative "
            f"or 0 (smallest {number(float(jacobian.min()))}). (2) Bars, key by key, of dP_j, dP_j - D and "
            f"dS_j = p_j (dP_j - D), with D = {number(D)}: {keys}. "
            f"Positive score gradient for: {', '.join(rising) if rising else 'no key'}.")
