"""The key/value cache: what a model keeps of every token it has read, so that the next token costs one step.

Built step by step in ``notebooks/15_generation.ipynb``. A model that writes one token at a time attends, at
every step, over everything before it. The keys and values of the earlier tokens do not change (each token sees
only its past), so they are computed once and kept: each step then projects only the new token and appends its
key and value. The names follow transformers' caches (``update(key, value, layer_idx)`` returns the full keys
and values so far; ``get_seq_length``), so what you learn here carries over.

- :class:`KVCache` allocates room for ``max_cache_len`` positions once (like transformers' ``StaticCache``) and
  writes each new key into it, so a step never copies the past;
- :class:`SlidingWindowCache` keeps only the last ``window - 1`` positions, all a sliding window of ``window``
  keys needs: its memory stops growing.

Shape legend: ``N`` sequences, ``Hkv`` key/value heads, ``S`` positions, ``Dh`` the size of a head.
"""

from __future__ import annotations

import torch

from .masks import sliding_window_mask
from .validation import check_int, check_is_tensor


def decoding_mask(L: int, S: int, window: int | None = None, device=None) -> torch.Tensor | None:
    """The mask of the newest ``L`` queries over ``S`` keys (cached + new): ``None`` when it would allow everything.

    Built step by step in ``notebooks/15_generation.ipynb``. :func:`~attention_lib.causal_mask_lower_right`, or
    :func:`~attention_lib.sliding_window_mask` with a ``window``; one new token at the end (``L == 1``) may attend
    to every key (within its window), so it needs no mask at all, and none is made.

    Example:
        >>> decoding_mask(1, 5) is None, decoding_mask(1, 5, window=3).int().tolist()
        (True, [[0, 0, 1, 1, 1]])
        >>> decoding_mask(2, 3).int().tolist()
        [[1, 1, 0], [1, 1, 1]]
    """
    if L == 1 and (window is None or S <= window):
        return None  # one query at the end sees every key
    return sliding_window_mask(L, S, window, device=device)  # (L, S); window None: causal, aligned to the end


class KVCache:
    """A pre-allocated key/value cache: room for ``max_cache_len`` positions in each of ``num_layers`` layers.

    Built step by step in ``notebooks/15_generation.ipynb``. The buffers, ``(N, Hkv, max_cache_len, Dh)`` per
    layer for the keys and for the values, are allocated at a layer's first :meth:`update` (then the batch size,
    heads, sizes, dtype and device are known); every update writes the new positions after the old ones and
    returns views of everything so far. Nothing is copied, so a step costs the same at position 10 as at 2,000.

    Args:
        num_layers: how many attention layers share the cache (one pair of buffers each).
        max_cache_len: how many positions it holds: the prompt plus every token to generate.

    Raises:
        TypeError: if a size is not an int.
        ValueError: if a size is not positive.

    Example:
        >>> cache = KVCache(num_layers=1, max_cache_len=8)
        >>> keys, values = cache.update(torch.ones(1, 2, 3, 4), torch.zeros(1, 2, 3, 4), layer_idx=0)  # 3 tokens
        >>> keys, values = cache.update(torch.ones(1, 2, 1, 4), torch.zeros(1, 2, 1, 4), layer_idx=0)  # 1 more
        >>> tuple(keys.shape), cache.get_seq_length()  # (N, Hkv, S, Dh): every key so far
        ((1, 2, 4, 4), 4)
    """

    def __init__(self, num_layers: int, max_cache_len: int):
        self.num_layers = check_int(num_layers, "num_layers", minimum=1, fix="pass the model's number of layers.")
        self.max_cache_len = check_int(max_cache_len, "max_cache_len", minimum=1,
                                       fix="pass the prompt's length plus the number of tokens to generate.")
        self.keys: list[torch.Tensor | None] = [None] * self.num_layers
        self.values: list[torch.Tensor | None] = [None] * self.num_layers
        self._seen = [0] * self.num_layers  # tokens written so far, per layer

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(num_layers={self.num_layers}, max_cache_len={self.max_cache_len}, "
                f"seq_length={self.get_seq_length()})")

    def get_seq_length(self, layer_idx: int = 0) -> int:
        """How many tokens ``layer_idx`` has seen: the position the next token will have."""
        return self._seen[self._layer(layer_idx)]

    def reset(self) -> None:
        """Forget every token (the buffers stay allocated)."""
        self._seen = [0] * self.num_layers

    def nbytes(self) -> int:
        """The bytes of keys and values held for the tokens seen so far, every layer together."""
        return sum(self._held(i) * (k[:, :, :1].nelement() + v[:, :, :1].nelement()) * k.element_size()
                   for i, (k, v) in enumerate(zip(self.keys, self.values, strict=True)) if k is not None)

    def _held(self, layer_idx: int) -> int:
        return self._seen[layer_idx]

    def _layer(self, layer_idx) -> int:
        layer_idx = check_int(layer_idx, "layer_idx", minimum=0, fix="pass the attention layer's index.")
        if layer_idx >= self.num_layers:
            raise ValueError(f"layer_idx must be below num_layers={self.num_layers}, but layer_idx={layer_idx}; "
                             f"build the cache with one slot per attention layer.")
        return layer_idx

    def _check(self, key, value, layer_idx) -> int:
        layer_idx = self._layer(layer_idx)
        check_is_tensor(key, "key")
        check_is_tensor(value, "value")
        if key.dim() != 4 or value.dim() != 4 or key.shape[:3] != value.shape[:3]:
            raise ValueError(f"key and value must be (N, Hkv, L, Dh) with the same N, Hkv and L, but "
                             f"key.shape={tuple(key.shape)} and value.shape={tuple(value.shape)}; split them into "
                             f"heads first (split_heads).")
        held = self.keys[layer_idx]
        if held is not None and (key.shape[:2] != held.shape[:2] or key.shape[-1] != held.shape[-1]
                                 or value.shape[-1] != self.values[layer_idx].shape[-1] or key.dtype != held.dtype
                                 or value.dtype != held.dtype or key.device != held.device):
            raise ValueError(f"layer {layer_idx} holds keys of shape (N, Hkv, S, Dh) = "
                             f"{(*held.shape[:2], '...', held.shape[-1])} ({held.dtype}, {held.device}), but got "
                             f"key.shape={tuple(key.shape)} ({key.dtype}, {key.device}); a cache serves one batch: "
                             f"call cache.reset() or build a new one for other inputs.")
        return layer_idx

    def update(self, key: torch.Tensor, value: torch.Tensor, layer_idx: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Append the new tokens' keys and values to layer ``layer_idx``; return that layer's keys and values so far.

        Args:
            key: ``(N, Hkv, L, Dh)``, the keys of the ``L`` new tokens (rotated already, with RoPE).
            value: ``(N, Hkv, L, Dv)``, their values.
            layer_idx: which attention layer they belong to.

        Returns:
            ``(keys, values)``, ``(N, Hkv, S, Dh)`` and ``(N, Hkv, S, Dv)`` with ``S`` every token so far (the new
            ones last): views into the buffers, not copies.

        Raises:
            TypeError: if ``key`` or ``value`` is not a tensor, or ``layer_idx`` not an int.
            ValueError: if the shapes are not 4-D or disagree with what the layer holds, ``layer_idx`` is out of
                range, or the cache is full.
        """
        layer_idx = self._check(key, value, layer_idx)
        start, end = self._seen[layer_idx], self._seen[layer_idx] + key.shape[2]
        if end > self.max_cache_len:
            raise ValueError(f"the cache is full: it holds max_cache_len={self.max_cache_len} positions and has "
                             f"{start}, so {key.shape[2]} more do not fit; build KVCache(num_layers, "
                             f"max_cache_len={end}) or more (the prompt plus every token to generate).")
        if self.keys[layer_idx] is None:  # allocate once, at the first update: (N, Hkv, max_cache_len, Dh)
            N, H, _, D = key.shape
            self.keys[layer_idx] = key.new_zeros(N, H, self.max_cache_len, D)
            self.values[layer_idx] = value.new_zeros(N, H, self.max_cache_len, value.shape[-1])
        self.keys[layer_idx][:, :, start:end] = key  # write after the last position: no copy of the past
        self.values[layer_idx][:, :, start:end] = value
        self._seen[layer_idx] = end
        return self.keys[layer_idx][:, :, :end], self.values[layer_idx][:, :, :end]  # (N, Hkv, S, Dh) views


class SlidingWindowCache(KVCache):
    """A cache for a sliding window of ``window`` keys: it keeps only the last ``window - 1`` positions.

    Built step by step in ``notebooks/15_generation.ipynb``. With a sliding window (Mistral's, see
    :func:`~attention_lib.masks.sliding_window_mask`) a new token sees itself and the ``window - 1`` tokens
    before it, so older keys are never read again: the cache drops them, and its memory stops growing at
    ``window - 1`` positions. :meth:`update` returns the kept keys followed by the new ones (which the mask
    then limits to the window); ``get_seq_length`` still counts every token seen, the position of the next one.

    Args:
        num_layers: how many attention layers share the cache.
        window: the sliding window of the model, its own key included (a positive int).

    Example:
        >>> cache = SlidingWindowCache(num_layers=1, window=3)
        >>> for _ in range(5):
        ...     keys, _ = cache.update(torch.ones(1, 1, 1, 2), torch.ones(1, 1, 1, 2), layer_idx=0)
        >>> keys.shape[2], cache.get_seq_length()  # 3 keys read, 5 tokens seen
        (3, 5)
    """

    def __init__(self, num_layers: int, window: int):
        self.window = check_int(window, "window", minimum=1, fix="pass the model's sliding window.")
        super().__init__(num_layers, max(1, self.window - 1))
        self._kept = [0] * self.num_layers

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(num_layers={self.num_layers}, window={self.window}, "
                f"seq_length={self.get_seq_length()})")

    def reset(self) -> None:
        super().reset()
        self._kept = [0] * self.num_layers

    def _held(self, layer_idx: int) -> int:
        return self._kept[layer_idx]

    def update(self, key: torch.Tensor, value: torch.Tensor, layer_idx: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Return the kept keys and values followed by the new ones; keep the last ``window - 1`` of them.

        Args and Raises as for :meth:`KVCache.update` (a sliding window cache is never full).

        Returns:
            ``(keys, values)``, ``(N, Hkv, kept + L, Dh)`` and ``(N, Hkv, kept + L, Dv)``.
        """
        layer_idx = self._check(key, value, layer_idx)
        kept = self._kept[layer_idx]
        if self.keys[layer_idx] is None:
            keys, values = key, value
        else:  # (N, Hkv, kept, Dh) then (N, Hkv, L, Dh) -> (N, Hkv, kept + L, Dh): at most window - 1 + L
            keys = torch.cat([self.keys[layer_idx][:, :, :kept], key], dim=2)
            values = torch.cat([self.values[layer_idx][:, :, :kept], value], dim=2)
        keep = min(self.window - 1, keys.shape[2])
        if self.keys[layer_idx] is None:
            N, H, _, D = key.shape
            self.keys[layer_idx] = key.new_zeros(N, H, self.max_cache_len, D)
            self.values[layer_idx] = value.new_zeros(N, H, self.max_cache_len, value.shape[-1])
        if keep:
            self.keys[layer_idx][:, :, :keep] = keys[:, :, keys.shape[2] - keep:]
            self.values[layer_idx][:, :, :keep] = values[:, :, values.shape[2] - keep:]
        self._kept[layer_idx] = keep
        self._seen[layer_idx] += key.shape[2]
        return keys, values
