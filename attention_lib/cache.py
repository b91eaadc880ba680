"""The key/value cache: what a model keeps of every token it has read, so that the next token costs one step.

Built step by step in ``notebooks/15_generation.ipynb``. A model that writes one token at a time attends, at
every step, over everything before it. The keys and values of the earlier tokens do not change (each token sees
only its past), so they are computed once and kept: each step then projects only the new token and appends its
key and value. The names follow transformers' caches (``update(key, value, layer_idx)`` returns the full keys
and values so far; ``get_seq_length``), so what you learn here carries over.

- :class:`KVCache` allocates room for ``max_cache_len`` positions once (like transformers' ``StaticCache``) and
  writes each new key into it, so a step never copies the past;
- :class:`SlidingWindowCache` keeps only the last ``window - 1`` positions, all a sliding window of ``window``
  keys needs: its memory stops growing;
- :class:`ConcatCache` keeps no room ahead and grows by ``torch.cat`` at every step, a copy of the whole past
  (the benchmark's comparison; transformers' ``DynamicCache`` grows the same way).

All three check their inputs and allocate their buffers through the same two methods of :class:`KVCache`.
Shape legend: ``N`` sequences, ``Hkv`` key/value heads, ``S`` positions, ``Dh`` the size of a head.
"""

from __future__ import annotations

import torch

from .validation import check_int, check_is_tensor


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
        """The bytes of keys and values held for the tokens seen so far, every layer together (the filled part)."""
        return sum(self._held(i) * (k[:, :, :1].nelement() + v[:, :, :1].nelement()) * k.element_size()
                   for i, (k, v) in enumerate(zip(self.keys, self.values, strict=True)) if k is not None)

    def allocated_bytes(self) -> int:
        """The bytes of the buffers themselves, every layer together: room for ``max_cache_len`` positions each."""
        return sum(t.nelement() * t.element_size() for t in (*self.keys, *self.values) if t is not None)

    def crop(self, max_length: int) -> None:
        """Forget every token after the first ``max_length``; the buffers stay (transformers 4's
        ``DynamicCache.crop(max_length)``; transformers 5's ``DynamicCache.crop(-r)`` removes the last ``r`` instead).

        Raises:
            TypeError, ValueError: if ``max_length`` is not a non-negative int.
        """
        max_length = check_int(max_length, "max_length", minimum=0, fix="pass how many tokens to keep.")
        self._seen = [min(seen, max_length) for seen in self._seen]

    def _allocate(self, key: torch.Tensor, value: torch.Tensor, layer_idx: int, length: int) -> None:
        """The one allocation of every cache: zeros ``(N, Hkv, length, Dh)`` for the keys and for the values."""
        N, H, _, D = key.shape
        self.keys[layer_idx] = key.new_zeros(N, H, length, D)
        self.values[layer_idx] = value.new_zeros(N, H, length, value.shape[-1])

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
            self._allocate(key, value, layer_idx, self.max_cache_len)
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

    def crop(self, max_length: int) -> None:
        """Refused below the tokens seen: the keys before the window are gone, so they cannot be returned to.

        Raises:
            ValueError: if ``max_length`` is below :meth:`get_seq_length` of a layer.
        """
        if any(check_int(max_length, "max_length", minimum=0) < seen for seen in self._seen):
            raise ValueError(f"a SlidingWindowCache cannot be cropped to max_length={max_length}: it has seen "
                             f"{max(self._seen)} tokens and kept only the last {self.window - 1}; build a new one.")

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
            self._allocate(key, value, layer_idx, self.max_cache_len)
        if keep:
            self.keys[layer_idx][:, :, :keep] = keys[:, :, keys.shape[2] - keep:]
            self.values[layer_idx][:, :, :keep] = values[:, :, values.shape[2] - keep:]
        self._kept[layer_idx] = keep
        self._seen[layer_idx] += key.shape[2]
        return keys, values


class ConcatCache(KVCache):
    """A cache that keeps no room ahead: each update concatenates the past with the new keys, a copy of both.

    Built for the benchmark's comparison (``python -m attention_lib.bench --decoding``): a step then copies all the
    past, ``O(S)`` bytes, as transformers' ``DynamicCache`` does; :class:`KVCache` writes the new keys only.
    ``max_cache_len`` is not a limit here, only the size the buffers would have pre-allocated.

    Example:
        >>> cache = ConcatCache(num_layers=1, max_cache_len=8)
        >>> for _ in range(3):
        ...     keys, _ = cache.update(torch.ones(1, 2, 1, 4), torch.ones(1, 2, 1, 4), layer_idx=0)
        >>> tuple(keys.shape), cache.allocated_bytes()  # exactly the 3 positions held
        ((1, 2, 3, 4), 192)
    """

    def crop(self, max_length: int) -> None:
        super().crop(max_length)
        for i, seen in enumerate(self._seen):
            if self.keys[i] is not None:
                self.keys[i], self.values[i] = self.keys[i][:, :, :seen], self.values[i][:, :, :seen]

    def update(self, key: torch.Tensor, value: torch.Tensor, layer_idx: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Append by ``torch.cat``: ``(N, Hkv, S, Dh)`` + ``(N, Hkv, L, Dh)`` -> a new ``(N, Hkv, S + L, Dh)``.

        Args, Returns and Raises as for :meth:`KVCache.update` (never full).
        """
        layer_idx = self._check(key, value, layer_idx)
        if self.keys[layer_idx] is None:
            self._allocate(key, value, layer_idx, 0)  # (N, Hkv, 0, Dh): nothing held yet
        self.keys[layer_idx] = torch.cat([self.keys[layer_idx], key], dim=2)  # the whole past copied
        self.values[layer_idx] = torch.cat([self.values[layer_idx], value], dim=2)
        self._seen[layer_idx] += key.shape[2]
        return self.keys[layer_idx], self.values[layer_idx]
