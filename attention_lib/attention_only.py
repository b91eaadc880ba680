"""An attention-only transformer, and the two scores that find its previous-token and induction heads.

Built step by step in ``notebooks/13_induction_heads.ipynb``. The model follows the attention-only models of
Elhage et al. (2021), "A Mathematical Framework for Transformer Circuits": token and position embeddings
written into a residual stream, then layers of causal multi-head attention that each *add* to it (no MLP, no
layer norm), then a linear read-out. With nothing but attention, everything the model does is done by its
heads, so what it learns can be read off their maps. The parts are the package's own:
:class:`~attention_lib.MultiHeadAttention`, :func:`~attention_lib.causal_mask` and
:class:`~attention_lib.LearnedPositions`.

Shape legend, as everywhere in the package: ``N`` sequences, ``L`` positions, ``E`` features, ``H`` heads;
attention weights are ``(N, H, L, L)``, row = the position attending, column = the position attended to.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import NamedTuple

import torch
from torch import nn

from .interventions import edit_head, zero_rows
from .masks import causal_mask
from .multihead import MultiHeadAttention
from .positions import LearnedPositions
from .validation import check_int, check_token_ids


class InductionOutput(NamedTuple):
    """What :class:`AttentionOnlyTransformer` returns: ``logits (N, L, V)`` and one ``(N, H, L, L)`` map per layer
    (``None`` per layer when the weights were not asked for), ``attentions`` as ``transformers`` names them."""

    logits: torch.Tensor
    attentions: tuple[torch.Tensor | None, ...]

    @property
    def attention(self) -> tuple:
        """The old name of :attr:`attentions`, read by lessons 12 and 13 until they say ``attentions``."""
        return self.attentions


def _check_weights(weights, name: str = "weights") -> None:
    if not isinstance(weights, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of attention weights, but got {type(weights).__name__}.")
    if weights.dim() != 4 or weights.shape[-1] != weights.shape[-2]:
        raise ValueError(f"{name} must be self-attention weights (N, H, L, L), but {name}.shape="
                         f"{tuple(weights.shape)}; for one sequence use {name}.unsqueeze(0).")


class AttentionOnlyTransformer(nn.Module):
    """A causal, attention-only transformer that predicts the next token at every position.

    Built step by step in ``notebooks/13_induction_heads.ipynb``. ``x = token_embedding(ids) + positions``,
    then for each layer ``x = x + attention(x, x, x)`` with the causal mask (position ``i`` may attend to
    ``0..i``), then ``logits = readout(x)``. With the defaults (``E = 64``, 2 heads of 32 features, 2 layers)
    it has about 39k parameters.

    Args:
        vocab_size: ``V``, how many tokens there are (and answers at each position).
        max_len: the longest input (the number of learned positions).
        embed_dim: ``E``, the width of the residual stream; must be divisible by ``num_heads``.
        num_heads: ``H``, heads per layer.
        num_layers: how many attention layers.

    Raises:
        TypeError, ValueError: for sizes that are not positive ints (from the package's parts, or here).

    Example:
        >>> _ = torch.manual_seed(0)
        >>> model = AttentionOnlyTransformer(vocab_size=32, max_len=32)
        >>> out = model(torch.randint(0, 32, (3, 10)))  # (N, L) token ids
        >>> tuple(out.logits.shape), [tuple(w.shape) for w in out.attentions]
        ((3, 10, 32), [(3, 2, 10, 10), (3, 2, 10, 10)])
        >>> bool(out.attentions[0][0, 0].triu(1).eq(0).all())  # causal: nothing above the diagonal
        True
    """

    def __init__(self, vocab_size: int, max_len: int, *, embed_dim: int = 64, num_heads: int = 2,
                 num_layers: int = 2):
        super().__init__()
        for name, size in (("vocab_size", vocab_size), ("num_layers", num_layers)):
            check_int(size, name, minimum=1)
        self.config = {"vocab_size": vocab_size, "max_len": max_len, "embed_dim": embed_dim,
                       "num_heads": num_heads, "num_layers": num_layers}
        self.token_embedding = nn.Embedding(vocab_size, embed_dim)
        self.positions = LearnedPositions(max_len, embed_dim)
        self.layers = nn.ModuleList(MultiHeadAttention(embed_dim, num_heads) for _ in range(num_layers))
        self.readout = nn.Linear(embed_dim, vocab_size)

    def forward(self, tokens: torch.Tensor, *, ablate=(), need_weights: bool = True) -> InductionOutput:
        """Score the next token at every position of ``tokens (N, L)``.

        Args:
            tokens: int64 ids ``(N, L)`` with ``L <= max_len``.
            ablate: ``(layer, head)`` pairs whose attention weights are set to zero, so that their output is zero
                before the layer's output projection (zero ablation: the head writes nothing into the residual
                stream), with :func:`~attention_lib.interventions.edit_head`; their maps come back as zeros.
            need_weights: return the attention maps (``False``: ``None`` per layer, through the fast path).

        Returns:
            :class:`InductionOutput`: ``logits (N, L, V)``, where row ``i`` scores the token at ``i + 1``, and
            one ``(N, H, L, L)`` map per layer.

        Raises:
            TypeError: if ``tokens`` is not a tensor of integer ids.
            ValueError: if ``tokens`` is not ``(N, L)`` ids in range (:func:`~attention_lib.validation.
                check_token_ids`), or an ablated head does not exist.
        """
        check_token_ids(tokens, self.config["vocab_size"], "tokens")
        with self._ablated(ablate):
            x = self.positions(self.token_embedding(tokens))  # (N, L) -> (N, L, E), plus (L, E) positions
            mask = causal_mask(tokens.shape[1], device=tokens.device)  # (L, L): True = may attend (j <= i)
            maps = []
            for attention in self.layers:
                mixed, weights = attention(x, x, x, attn_mask=mask, need_weights=need_weights)  # (N, L, E)
                x = x + mixed  # each layer adds what its heads found to the residual stream
                maps.append(weights)
        return InductionOutput(self.readout(x), tuple(maps))  # (N, L, E) -> (N, L, V)

    def _ablated(self, ablate) -> ExitStack:
        """The ablations as one context: :func:`~attention_lib.interventions.edit_head` with
        :func:`~attention_lib.interventions.zero_rows` on each layer's ablated heads (a zero map writes nothing)."""
        H = self.config["num_heads"]
        pairs = [tuple(p) for p in ablate]
        for pair in pairs:
            if len(pair) != 2 or not all(isinstance(v, int) for v in pair) or not (
                    0 <= pair[0] < len(self.layers) and 0 <= pair[1] < H):
                raise ValueError(f"ablate takes (layer, head) pairs with layer in 0..{len(self.layers) - 1} and "
                                 f"head in 0..{H - 1}, but got {pair!r}.")
        stack = ExitStack()
        for layer in sorted({p[0] for p in pairs}):
            heads = sorted({h for lay, h in pairs if lay == layer})
            stack.enter_context(edit_head(self.layers[layer], heads, zero_rows))
        return stack


def previous_token_score(weights: torch.Tensor) -> torch.Tensor:
    """How much each head attends to the position just before the query: the mean of ``weights[..., i, i - 1]``.

    Built step by step in ``notebooks/13_induction_heads.ipynb``. Averaged over the sequences and the queries
    ``i = 1..L-1`` (query 0 has no previous token). A head that always looks one step back scores 1.

    Args:
        weights: ``(N, H, L, L)`` attention weights of one layer.

    Returns:
        ``(H,)``, one score per head, between 0 and 1.

    Raises:
        TypeError, ValueError: if ``weights`` is not an ``(N, H, L, L)`` tensor.

    Example:
        >>> back = torch.eye(4).roll(-1, dims=1).tril().expand(1, 1, 4, 4)  # every row on the one before
        >>> previous_token_score(back)
        tensor([1.])
    """
    _check_weights(weights)
    return weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=(0, -1))  # (N, H, L - 1) -> (H,)


def induction_score(weights: torch.Tensor, lengths) -> torch.Tensor:
    """How much each head attends to the token *after* the earlier copy of the current token.

    Built step by step in ``notebooks/13_induction_heads.ipynb``. In a sequence whose first ``k`` tokens are
    repeated right after themselves, the query at ``i`` in the copy (``k <= i < 2k``) repeats position
    ``i - k``; an induction head looks at ``i - k + 1``, the token that came next last time. The score is the
    mean weight there, over the sequences and those ``k`` queries each.

    Args:
        weights: ``(N, H, L, L)`` attention weights of one layer.
        lengths: the repeated segment's length ``k``: one int for every sequence, or ``(N,)`` ints; ``2k <= L``.

    Returns:
        ``(H,)``, one score per head, between 0 and 1.

    Raises:
        TypeError, ValueError: if ``weights`` is not ``(N, H, L, L)`` or a length is not in ``1..L // 2``.

    Example:
        >>> k, L = 3, 6
        >>> w = torch.zeros(1, 1, L, L)
        >>> w[0, 0, torch.arange(k, 2 * k), torch.arange(1, k + 1)] = 1.0  # rows 3, 4, 5 on keys 1, 2, 3
        >>> induction_score(w, k)
        tensor([1.])
    """
    _check_weights(weights)
    N, H, L, _ = weights.shape
    try:
        k = torch.as_tensor(lengths, device=weights.device)
        ok = k.dtype != torch.bool and not k.is_floating_point() and k.dim() <= 1
        k = k.long().expand(N)  # one length per sequence: (N,)
    except (TypeError, ValueError, RuntimeError):
        ok = False
    if not ok or bool(((k < 1) | (2 * k > L)).any()):
        raise ValueError(f"lengths must be one int or (N,) ints, each a repeat length k with 1 <= k <= L // 2 = "
                         f"{L // 2}, but got {lengths!r}.")
    i = torch.arange(L, device=weights.device)[None]  # (1, L): every query position
    in_copy = (i >= k[:, None]) & (i < 2 * k[:, None])  # (N, L): the queries of the repeated copy
    target = (i - k[:, None] + 1).clamp(min=0)  # (N, L): the position after the earlier copy
    on_target = weights.gather(-1, target[:, None, :, None].expand(N, H, L, 1)).squeeze(-1)  # (N, H, L)
    return (on_target * in_copy[:, None]).sum(dim=(0, 2)) / in_copy.sum()  # (H,)


def all_head_scores(attention, lengths) -> dict[str, torch.Tensor]:
    """Both scores for every head of every layer: ``{"previous token": (layers, H), "induction": (layers, H)}``.

    Built in ``notebooks/13_induction_heads.ipynb`` from :func:`previous_token_score` and
    :func:`induction_score`.

    Args:
        attention: one ``(N, H, L, L)`` map per layer (``model(tokens).attentions``).
        lengths: the repeat lengths, as in :func:`induction_score`.

    Example:
        >>> maps = (torch.full((2, 2, 4, 4), 0.25), torch.full((2, 2, 4, 4), 0.25))
        >>> all_head_scores(maps, 2)["induction"].shape
        torch.Size([2, 2])
    """
    return {"previous token": torch.stack([previous_token_score(w) for w in attention]),
            "induction": torch.stack([induction_score(w, lengths) for w in attention])}


class PhaseChange(NamedTuple):
    """Where a loss curve drops: ``step`` (halfway down), ``begins``/``ends`` (a quarter and three quarters of the
    way down), and the loss ``before`` (the first ``window`` steps) and ``after`` (the last ``window`` steps)."""

    step: int
    begins: int
    ends: int
    before: float
    after: float


def phase_change(losses, window: int = 20) -> PhaseChange:
    """Find the drop in a loss curve, on its moving average over ``window`` steps.

    Built in ``notebooks/13_induction_heads.ipynb``. Steps count from 1 (the loss after the first update). The
    fall from ``before`` to ``after`` is measured on the moving average; ``ends - begins`` steps hold the middle
    half of it: the fewer, the more sudden the change.

    Args:
        losses: one loss per step (a list or a 1-D tensor), at least ``2 * window`` of them.
        window: the moving average's width.

    Raises:
        ValueError: if the curve is too short or does not fall.

    Example:
        >>> curve = [3.0] * 100 + [0.5] * 100  # a sudden drop after step 100
        >>> phase_change(curve).step
        101
    """
    y = torch.as_tensor(losses, dtype=torch.float64).reshape(-1)
    window = check_int(window, "window", minimum=1)
    if len(y) < 2 * window:
        raise ValueError(f"phase_change needs at least 2 * window = {2 * window} losses and a positive window, "
                         f"but got {len(y)} losses and window={window!r}.")
    smooth = y.unfold(0, window, 1).mean(-1)  # (steps - window + 1,): smooth[j] = mean of steps j+1..j+window
    before, after = float(y[:window].mean()), float(y[-window:].mean())
    if not after < before:
        raise ValueError(f"the loss does not fall (from {before:.3g} to {after:.3g}): there is no phase change.")

    def first_below(fraction: float) -> int:  # the first step whose smoothed loss is that far down
        level = before - fraction * (before - after)
        j = int((smooth < level).int().argmax())
        return j + (window + 1) // 2  # the middle of the window, counted from 1

    return PhaseChange(first_below(0.5), first_below(0.25), first_below(0.75), before, after)
