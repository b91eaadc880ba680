"""Word order for attention: the sinusoidal position encoding and a learned position embedding.

Attention by itself treats its input as a set: shuffle the words and the outputs are shuffled the same way.
A model that must know word order adds a vector that depends only on the *position* to each word's vector,
before queries, keys and values are made from it. Built step by step in ``notebooks/11_word_order.ipynb``.

Shape legend, as everywhere in the package: ``N, ...`` batch dimensions, ``L`` positions, ``E`` features.
"""

from __future__ import annotations

import torch
from torch import nn

from .validation import check_int, check_is_tensor, check_number


def sinusoidal_encoding(length: int, dim: int, base: float = 10000.0, *, dtype: torch.dtype = torch.float32,
                        device=None) -> torch.Tensor:
    """The sinusoidal position encoding of "Attention Is All You Need" (Vaswani et al., 2017, section 3.5).

    Built step by step in ``notebooks/11_word_order.ipynb``. Row ``pos`` is the vector of position ``pos``;
    feature pair ``i`` (columns ``2i`` and ``2i + 1``) is a sine and a cosine of one frequency::

        PE[pos, 2i]     = sin(pos / base ** (2i / dim))
        PE[pos, 2i + 1] = cos(pos / base ** (2i / dim))

    The first pair turns fastest (one radian per position), the last one slowest, like the hands of a clock.
    Computed in float64 and then converted, so every device and dtype gets the same rounded numbers.

    Args:
        length: ``L``, the number of positions (``0`` to ``L - 1``).
        dim: ``E``, the number of features; must be even (sine and cosine pairs).
        base: the slowest wavelength is about ``2π · base`` positions; the paper uses ``10000``.
        dtype: the dtype of the result (floating point).
        device: where to put the result.

    Returns:
        The encoding ``(L, E)``, every entry between -1 and 1; add it to word vectors ``(N, ..., L, E)``.

    Raises:
        TypeError: if ``length`` or ``dim`` is not an int, ``base`` is not a number or ``dtype`` is not a
            floating-point dtype.
        ValueError: if ``length`` or ``dim`` is not positive, ``dim`` is odd, or ``base`` is not positive.

    Example:
        >>> sinusoidal_encoding(3, 4)  # columns: sin(pos), cos(pos), sin(pos / 100), cos(pos / 100)
        tensor([[ 0.0000,  1.0000,  0.0000,  1.0000],
                [ 0.8415,  0.5403,  0.0100,  0.9999],
                [ 0.9093, -0.4161,  0.0200,  0.9998]])
    """
    length = check_int(length, "length", minimum=1, fix="pass the number of positions, e.g. x.shape[-2].")
    dim = check_int(dim, "dim", minimum=1, fix="pass the number of features, e.g. x.shape[-1].")
    if dim % 2 != 0:
        raise ValueError(f"dim must be even (each frequency fills a sine and a cosine column), but dim={dim}; "
                         f"use an even embedding size such as {dim + 1}.")
    base = check_number(base, "base", positive=True, fix="the paper uses base=10000.0.")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch.dtype, but got {dtype!r}; use e.g. torch.float32.")
    position = torch.arange(length, dtype=torch.float64)[:, None]  # (L, 1)
    pair = torch.arange(0, dim, 2, dtype=torch.float64)  # (E / 2,): 2i = 0, 2, 4, ...
    angle = position / float(base) ** (pair / dim)  # (L, 1) / (E / 2,) -> (L, E / 2)
    encoding = torch.empty(length, dim, dtype=torch.float64)
    encoding[:, 0::2] = torch.sin(angle)  # even columns
    encoding[:, 1::2] = torch.cos(angle)  # odd columns
    return encoding.to(device=device, dtype=dtype)


class LearnedPositions(nn.Module):
    """A learned position embedding: one trainable vector per position, added to each word's vector.

    Built step by step in ``notebooks/11_word_order.ipynb``; trained in ``notebooks/12_learning_to_attend.ipynb``.
    The table starts random (like ``nn.Embedding``, from a standard normal) and is learned with the rest of
    the model, as in BERT and GPT-2. Unlike :func:`sinusoidal_encoding` it knows only ``max_length``
    positions.

    Args:
        max_length: the number of positions the table holds (the longest sequence it accepts).
        dim: ``E``, the size of each position vector (the model's embedding size).

    Attributes:
        weight: the table ``(max_length, E)``, an ``nn.Parameter``; row ``pos`` belongs to position ``pos``.

    Raises:
        TypeError: if a size is not an int.
        ValueError: if a size is not positive.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> positions = LearnedPositions(max_length=8, dim=4)
        >>> x = torch.zeros(2, 3, 4)  # (N, L, E)
        >>> out = positions(x)
        >>> tuple(out.shape), torch.equal(out[1], positions.weight[:3])
        ((2, 3, 4), True)
    """

    def __init__(self, max_length: int, dim: int):
        super().__init__()
        max_length = check_int(max_length, "max_length", minimum=1,
                               fix="pass the longest sequence length the model must accept.")
        dim = check_int(dim, "dim", minimum=1, fix="pass the model's embedding size E.")
        self.max_length, self.dim = max_length, dim
        self.weight = nn.Parameter(torch.randn(max_length, dim))

    def extra_repr(self) -> str:
        return f"max_length={self.max_length}, dim={self.dim}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Add position ``pos``'s vector to the word at position ``pos``: ``x + weight[:L]``.

        Args:
            x: ``(N, ..., L, E)``, word vectors with ``L <= max_length`` and ``E == dim``.

        Returns:
            ``(N, ..., L, E)``, the same shape as ``x``.

        Raises:
            TypeError: if ``x`` is not a floating-point tensor or its dtype differs from the table's.
            ValueError: if ``x`` has fewer than 2 dimensions, ``E != dim`` or ``L > max_length``.
        """
        check_is_tensor(x, "x")
        if not x.is_floating_point():
            raise TypeError(f"x must hold floating-point word vectors, but x.dtype={x.dtype}; embed token ids "
                            f"first (e.g. with nn.Embedding), then add positions.")
        if x.dim() < 2:
            raise ValueError(f"x must be (N, ..., L, E), with positions in dimension -2, but "
                             f"x.shape={tuple(x.shape)}; for one sentence use shape (L, E).")
        length, dim = x.shape[-2], x.shape[-1]
        if dim != self.dim:
            raise ValueError(f"x must have {self.dim} features (the module's dim), but x.shape={tuple(x.shape)}; "
                             f"build LearnedPositions(max_length, {dim}) or project x first.")
        if length > self.max_length:
            raise ValueError(f"the sequence has {length} positions but the table holds only max_length="
                             f"{self.max_length}; shorten the sequence or build a larger LearnedPositions.")
        if x.dtype != self.weight.dtype:
            raise TypeError(f"x.dtype={x.dtype} but the table is {self.weight.dtype}; convert one of them, e.g. "
                            f"module.to({x.dtype}).")
        return x + self.weight[:length]  # (N, ..., L, E) + (L, E) -> (N, ..., L, E)
