"""A tiny transformer encoder built from the course's own :class:`~attention_lib.MultiHeadAttention`.

Built step by step in ``notebooks/12_learning_to_attend.ipynb``. Every part is one the big models have, at a
size a CPU trains in seconds:

- a **token embedding**: one learned vector per token (``nn.Embedding``), as in Vaswani et al. (2017),
  "Attention Is All You Need", section 3.4;
- a **learned position embedding**: lesson 11's :class:`~attention_lib.LearnedPositions`, one learned vector
  per position, added to the token's (as in BERT and GPT-2; lesson 11 compares it with the sinusoidal
  encoding). ``use_positions=False`` leaves it out, and then attention cannot tell positions apart (lesson 11
  shows why);
- **blocks**, each ``x = x + attention(norm(x))`` then ``x = x + mlp(norm(x))``: the **residual
  connections** of He et al. (2016) keep each word's own vector and add what attention found to it; **layer
  norm** (Ba et al., 2016) keeps the vectors' scale steady, placed before each part ("pre-norm", as in GPT-2
  and Xiong et al., 2020, which trains without a warm-up); the **MLP** (the "position-wise feed-forward
  network" of Vaswani et al., section 3.3) transforms each word on its own, 4 times wider inside;
- a final layer norm and a **linear read-out** that scores every answer at every position.

Attention is not causal: every word may look at every other (an encoder, like BERT's). Padding is kept out of
the keys with a mask (``True`` = may attend).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from .multihead import MultiHeadAttention
from .positions import LearnedPositions
from .validation import check_int, check_token_ids


class TinyOutput(NamedTuple):
    """What :class:`TinyTransformer` returns: ``logits (N, L, C)`` and one ``(N, H, L, L)`` map per layer,
    ``attentions`` as ``transformers`` names them."""

    logits: torch.Tensor
    attentions: tuple[torch.Tensor, ...]

    @property
    def attention(self) -> tuple:
        """The old name of :attr:`attentions`, read by lessons 12 and 13 until they say ``attentions``."""
        return self.attentions


class Block(nn.Module):
    """One pre-norm transformer block: ``x + attention(norm(x))``, then ``x + mlp(norm(x))``.

    Part of the model that ``notebooks/12_learning_to_attend.ipynb`` trains.

    Args:
        embed_dim: ``E``, the size of every word's vector.
        num_heads: ``H``, heads of :class:`~attention_lib.MultiHeadAttention`.
        mlp_dim: the width inside the MLP (``4 * E`` in Vaswani et al. 2017).
    """

    def __init__(self, embed_dim: int, num_heads: int, mlp_dim: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(embed_dim)
        self.attention = MultiHeadAttention(embed_dim, num_heads)
        self.norm2 = nn.LayerNorm(embed_dim)
        self.mlp = nn.Sequential(nn.Linear(embed_dim, mlp_dim), nn.GELU(), nn.Linear(mlp_dim, embed_dim))

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """``x (N, L, E)`` -> ``(x (N, L, E), weights (N, H, L, L))``; ``attn_mask`` ``True`` = may attend."""
        h = self.norm1(x)
        mixed, weights = self.attention(h, h, h, attn_mask=attn_mask)  # (N, L, E), (N, H, L, L)
        x = x + mixed  # residual: keep the word, add what it gathered
        x = x + self.mlp(self.norm2(x))  # each word on its own: (N, L, E) -> (N, L, mlp_dim) -> (N, L, E)
        return x, weights


class TinyTransformer(nn.Module):
    """A tiny transformer encoder that scores ``num_answers`` answers at every position.

    Built step by step in ``notebooks/12_learning_to_attend.ipynb``; see the module docstring for where
    each part comes from. With the defaults it has about 14k parameters.

    Args:
        vocab_size: how many input tokens there are.
        num_answers: ``C``, how many answers each position chooses from.
        max_len: the longest input (the number of learned positions).
        embed_dim: ``E``; must be divisible by ``num_heads``.
        num_heads: ``H``, heads per layer.
        num_layers: how many blocks.
        mlp_dim: the MLP's inner width (default ``4 * embed_dim``).
        use_positions: add the learned position embedding (``False``: the model sees a bag of tokens).
        pad: the id of the padding token, kept out of every key; ``None`` when inputs are never padded.

    Raises:
        TypeError, ValueError: from :class:`~attention_lib.MultiHeadAttention` for bad sizes; ValueError if
            a size is not positive.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> model = TinyTransformer(vocab_size=10, num_answers=10, max_len=8)
        >>> out = model(torch.randint(0, 10, (3, 8)))  # (N, L) token ids
        >>> tuple(out.logits.shape), len(out.attentions), tuple(out.attentions[0].shape)
        ((3, 8, 10), 1, (3, 2, 8, 8))
        >>> sum(p.numel() for p in model.parameters())
        13674
    """

    def __init__(self, vocab_size: int, num_answers: int, max_len: int, *, embed_dim: int = 32,
                 num_heads: int = 2, num_layers: int = 1, mlp_dim: int | None = None, use_positions: bool = True,
                 pad: int | None = None):
        super().__init__()
        mlp_dim = 4 * embed_dim if mlp_dim is None else mlp_dim
        for name, size in (("vocab_size", vocab_size), ("num_answers", num_answers), ("max_len", max_len),
                           ("num_layers", num_layers), ("mlp_dim", mlp_dim)):
            check_int(size, name, minimum=1)
        self.config = {"vocab_size": vocab_size, "num_answers": num_answers, "max_len": max_len,
                       "embed_dim": embed_dim, "num_heads": num_heads, "num_layers": num_layers,
                       "mlp_dim": mlp_dim, "use_positions": bool(use_positions), "pad": pad}
        self.max_len, self.use_positions, self.pad = max_len, bool(use_positions), pad
        self.token_embedding = nn.Embedding(vocab_size, embed_dim)
        self.positions = LearnedPositions(max_len, embed_dim) if use_positions else None
        self.blocks = nn.ModuleList(Block(embed_dim, num_heads, mlp_dim) for _ in range(num_layers))
        self.norm = nn.LayerNorm(embed_dim)
        self.readout = nn.Linear(embed_dim, num_answers)

    def forward(self, tokens: torch.Tensor) -> TinyOutput:
        """Score every answer at every position of ``tokens (N, L)`` (int64 ids, ``L <= max_len``).

        Returns:
            :class:`TinyOutput`: ``logits (N, L, C)`` and ``attentions``, one ``(N, H, L, L)`` map per layer
            (row = the word attending, column = the word attended to).

        Raises:
            TypeError: if ``tokens`` is not a tensor of integer ids.
            ValueError: if ``tokens`` is not ``(N, L)`` with ``1 <= L <= max_len``, or holds an id outside
                ``0 .. vocab_size - 1`` (:func:`~attention_lib.validation.check_token_ids`).
        """
        check_token_ids(tokens, self.token_embedding.num_embeddings, "tokens")
        N, L = tokens.shape
        if L > self.max_len:
            raise ValueError(f"this model reads at most max_len={self.max_len} tokens, but got L={L}.")
        x = self.token_embedding(tokens)  # (N, L) -> (N, L, E)
        if self.positions is not None:
            x = self.positions(x)  # (N, L, E) + (L, E) -> (N, L, E): each position adds its own vector
        mask = None
        if self.pad is not None:
            mask = (tokens != self.pad)[:, None, None, :]  # (N, 1, 1, S): True = may attend (a real word)
        maps = []
        for block in self.blocks:
            x, weights = block(x, attn_mask=mask)
            maps.append(weights)
        return TinyOutput(self.readout(self.norm(x)), tuple(maps))  # (N, L, E) -> (N, L, C)
