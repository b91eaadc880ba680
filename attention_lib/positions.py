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


def sinusoidal_encoding(length: int, dim: int, base: float = 10000.0, *, offset: int = 0,
                        dtype: torch.dtype = torch.float32, device=None) -> torch.Tensor:
    """The sinusoidal position encoding of "Attention Is All You Need" (Vaswani et al., 2017, section 3.5).

    Built step by step in ``notebooks/11_word_order.ipynb``. Row ``pos`` is the vector of position ``pos``;
    feature pair ``i`` (columns ``2i`` and ``2i + 1``) is a sine and a cosine of one frequency::

        PE[pos, 2i]     = sin(pos / base ** (2i / dim))
        PE[pos, 2i + 1] = cos(pos / base ** (2i / dim))

    The first pair turns fastest (one radian per position), the last one slowest, like the hands of a clock.
    Computed in float64 and then converted, so every device and dtype gets the same rounded numbers.

    Args:
        length: ``L``, the number of positions (``offset`` to ``offset + L - 1``).
        dim: ``E``, the number of features; must be even (sine and cosine pairs).
        base: the slowest wavelength is about ``2π · base`` positions; the paper uses ``10000``.
        offset: the position of the first row (default 0). A model that writes one token at a time, after
            ``offset`` tokens, needs the rows from ``offset`` on (``notebooks/15_generation.ipynb``).
        dtype: the dtype of the result (floating point).
        device: where to put the result.

    Returns:
        The encoding ``(L, E)``, every entry between -1 and 1; add it to word vectors ``(N, ..., L, E)``.

    Raises:
        TypeError: if ``length``, ``dim`` or ``offset`` is not an int, ``base`` is not a number or ``dtype`` is
            not a floating-point dtype.
        ValueError: if ``length`` or ``dim`` is not positive, ``dim`` is odd, ``offset`` is negative, or ``base``
            is not positive.

    Example:
        >>> sinusoidal_encoding(3, 4)  # columns: sin(pos), cos(pos), sin(pos / 100), cos(pos / 100)
        tensor([[ 0.0000,  1.0000,  0.0000,  1.0000],
                [ 0.8415,  0.5403,  0.0100,  0.9999],
                [ 0.9093, -0.4161,  0.0200,  0.9998]])
        >>> torch.equal(sinusoidal_encoding(1, 4, offset=2), sinusoidal_encoding(3, 4)[2:])  # position 2 alone
        True
    """
    length = check_int(length, "length", minimum=1, fix="pass the number of positions, e.g. x.shape[-2].")
    dim = check_int(dim, "dim", minimum=1, fix="pass the number of features, e.g. x.shape[-1].")
    if dim % 2 != 0:
        raise ValueError(f"dim must be even (each frequency fills a sine and a cosine column), but dim={dim}; "
                         f"use an even embedding size such as {dim + 1}.")
    base = check_number(base, "base", positive=True, fix="the paper uses base=10000.0.")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating-point torch.dtype, but got {dtype!r}; use e.g. torch.float32.")
    offset = check_int(offset, "offset", minimum=0, fix="pass the position of the first token (0 at the start).")
    position = torch.arange(offset, offset + length, dtype=torch.float64)[:, None]  # (L, 1)
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
        >>> torch.equal(positions(x[:, :1], offset=2)[0, 0], positions.weight[2])  # one new word, at position 2
        True
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

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """Add position ``pos``'s vector to the word at position ``pos``: ``x + weight[offset:offset + L]``.

        Args:
            x: ``(N, ..., L, E)``, word vectors with ``offset + L <= max_length`` and ``E == dim``.
            offset: the position of the first word (default 0). While a model generates, the new token comes
                after the ``offset`` tokens already in the cache (``notebooks/15_generation.ipynb``).

        Returns:
            ``(N, ..., L, E)``, the same shape as ``x``.

        Raises:
            TypeError: if ``x`` is not a floating-point tensor, its dtype differs from the table's, or ``offset``
                is not an int.
            ValueError: if ``x`` has fewer than 2 dimensions, ``E != dim``, ``offset`` is negative or
                ``offset + L > max_length``.
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
        offset = check_int(offset, "offset", minimum=0, fix="pass the position of the first token (0 at the start).")
        if offset + length > self.max_length:
            where = f"positions {offset}..{offset + length - 1}" if offset else f"{length} positions"
            raise ValueError(f"the sequence has {where} but the table holds only max_length="
                             f"{self.max_length}; shorten the sequence or build a larger LearnedPositions.")
        if x.dtype != self.weight.dtype:
            raise TypeError(f"x.dtype={x.dtype} but the table is {self.weight.dtype}; convert one of them, e.g. "
                            f"module.to({x.dtype}).")
        return x + self.weight[offset:offset + length]  # (N, ..., L, E) + (L, E) -> (N, ..., L, E)


class RotaryPositions(nn.Module):
    """Rotary positions (RoPE, Su et al. 2021): rotate each query and key by an angle that grows with its position.

    Built step by step in ``notebooks/15_generation.ipynb``; the positions of Llama, Mistral and Qwen. Instead of
    adding a vector to the word (:class:`LearnedPositions`, :func:`sinusoidal_encoding`), RoPE turns every pair
    of features of a query or key by ``pos · θ_i``, with the frequencies of the sinusoidal encoding,
    ``θ_i = base ** (-2i / E)``. A rotation keeps lengths, and the score of a query at ``m`` with a key at ``n``
    depends on ``m - n`` alone: ``(R_m q) · (R_n k) = q · (R_(n - m) k)``. So score(q at 5, k at 2) equals
    score(q at 40, k at 37).

    Feature ``i`` is paired with feature ``i + E/2`` (the layout of transformers' Llama and of GPT-NeoX, whose
    ``rotate_half`` we follow); the paper pairs ``2i`` with ``2i + 1``, the same rotations with the features in
    another order. Angles are computed in float64, then converted.

    Args:
        dim: ``E``, the size of each query and key vector (a head's size); even.
        base: the slowest wavelength is about ``2π · base`` positions (Llama uses ``10000``, its ``rope_theta``).

    Raises:
        TypeError: if ``dim`` is not an int or ``base`` not a number.
        ValueError: if ``dim`` is not positive or odd, or ``base`` is not positive.

    Example:
        >>> rope = RotaryPositions(dim=4)
        >>> q, k = torch.tensor([[1.0, 0.0, 2.0, 1.0]]), torch.tensor([[0.5, 1.0, 0.0, 2.0]])
        >>> near = rope(q, offset=5) @ rope(k, offset=2).T  # query at 5, key at 2
        >>> far = rope(q, offset=40) @ rope(k, offset=37).T  # query at 40, key at 37: 3 apart too
        >>> torch.allclose(near, far, atol=1e-6)
        True
    """

    def __init__(self, dim: int, base: float = 10000.0):
        super().__init__()
        dim = check_int(dim, "dim", minimum=1, fix="pass the size of each query and key vector (a head's size).")
        if dim % 2 != 0:
            raise ValueError(f"dim must be even (RoPE turns pairs of features), but dim={dim}; use a head size "
                             f"such as {dim + 1}.")
        self.dim, self.base = dim, check_number(base, "base", positive=True, fix="Llama uses base=10000.0.")
        self._table: tuple[torch.Tensor, torch.Tensor] | None = None  # cos and sin of the positions met so far

    def extra_repr(self) -> str:
        return f"dim={self.dim}, base={self.base:g}"

    def angles(self, length: int, offset: int = 0) -> torch.Tensor:
        """The rotation angles ``(L, E / 2)`` of positions ``offset .. offset + L - 1``, in float64."""
        position = torch.arange(offset, offset + length, dtype=torch.float64)[:, None]  # (L, 1)
        frequency = self.base ** (-torch.arange(0, self.dim, 2, dtype=torch.float64) / self.dim)  # (E / 2,)
        return position * frequency  # (L, 1) * (E / 2,) -> (L, E / 2)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """Rotate ``x (N, ..., L, E)``, whose rows are positions ``offset .. offset + L - 1``.

        Args:
            x: queries or keys, ``(N, ..., L, E)`` with ``E == dim`` (e.g. ``(N, H, L, Dh)`` after
                :func:`~attention_lib.split_heads`).
            offset: the position of the first row (default 0): the number of tokens already in the cache.

        Returns:
            ``(N, ..., L, E)``, every pair ``(i, i + E/2)`` of row ``pos`` turned by ``pos · θ_i``.

        Raises:
            TypeError: if ``x`` is not a floating-point tensor or ``offset`` is not an int.
            ValueError: if ``x`` has fewer than 2 dimensions, ``E != dim`` or ``offset`` is negative.
        """
        check_is_tensor(x, "x")
        if not x.is_floating_point():
            raise TypeError(f"x must hold floating-point queries or keys, but x.dtype={x.dtype}; rotate the "
                            f"projected vectors, not token ids.")
        if x.dim() < 2 or x.shape[-1] != self.dim:
            raise ValueError(f"x must be (N, ..., L, E) with E = dim = {self.dim}, but x.shape={tuple(x.shape)}; "
                             f"rotate each head's queries and keys, (N, H, L, Dh), with RotaryPositions(Dh).")
        offset = check_int(offset, "offset", minimum=0, fix="pass the position of the first token (0 at the start).")
        cos, sin = self._cos_sin(offset, offset + x.shape[-2], x)  # (L, E) each
        first, second = x.chunk(2, dim=-1)  # (N, ..., L, E / 2) twice: the two halves of every pair
        turned = torch.cat([-second, first], dim=-1)  # each pair turned by 90 degrees
        return x * cos + turned * sin  # (N, ..., L, E) * (L, E) -> (N, ..., L, E)

    def _cos_sin(self, start: int, end: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``cos`` and ``sin`` of positions ``start .. end - 1``, ``(L, E)`` each, from a table kept between calls
        (one new token costs no trigonometry); the table doubles when a longer text comes."""
        table = self._table
        if table is None or table[0].shape[0] < end or table[0].device != like.device or table[0].dtype != like.dtype:
            angle = self.angles(max(end, 64, 2 * (0 if table is None else table[0].shape[0])))  # (T, E / 2)
            angle = torch.cat([angle, angle], dim=-1)  # (T, E): both features of a pair turn by the same angle
            table = self._table = (angle.cos().to(like.device, like.dtype), angle.sin().to(like.device, like.dtype))
        return table[0][start:end], table[1][start:end]
