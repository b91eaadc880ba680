"""The key/value caches: what update returns, that nothing of the past is copied, a clear error when full, the
sliding window's bounded memory, and errors for keys that do not fit."""

import pytest
import torch

from attention_lib import KVCache, SlidingWindowCache


def kv(L, N=2, H=2, D=4, Dv=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(N, H, L, D, generator=g), torch.randn(N, H, L, Dv, generator=g)


def test_update_returns_every_key_and_value_so_far_in_order():
    cache = KVCache(num_layers=2, max_cache_len=6)
    k1, v1 = kv(3, seed=1)
    k2, v2 = kv(1, seed=2)
    cache.update(k1, v1, 0)
    keys, values = cache.update(k2, v2, 0)
    torch.testing.assert_close(keys, torch.cat([k1, k2], dim=2))
    torch.testing.assert_close(values, torch.cat([v1, v2], dim=2))
    assert cache.get_seq_length(0) == 4
    assert cache.get_seq_length(1) == 0  # each layer has its own slot


def test_the_buffers_are_allocated_once_and_the_past_is_never_copied():
    cache = KVCache(num_layers=1, max_cache_len=5)
    first, _ = cache.update(*kv(2), 0)
    buffer = cache.keys[0]
    assert buffer.shape == (2, 2, 5, 4)
    later, _ = cache.update(*kv(1, seed=3), 0)
    assert cache.keys[0] is buffer
    assert later.data_ptr() == first.data_ptr() == buffer.data_ptr()  # views into one buffer


def test_a_full_cache_says_how_to_make_room():
    cache = KVCache(num_layers=1, max_cache_len=3)
    cache.update(*kv(2), 0)
    with pytest.raises(ValueError, match=r"the cache is full: it holds max_cache_len=3 positions and has 2, so 2 "
                                         r"more do not fit; build KVCache\(num_layers, max_cache_len=4\)"):
        cache.update(*kv(2), 0)
    assert cache.get_seq_length() == 2  # nothing was written


def test_reset_forgets_and_nbytes_counts_what_is_held():
    cache = KVCache(num_layers=2, max_cache_len=8)
    for layer in (0, 1):
        cache.update(*kv(3), layer)
    assert cache.nbytes() == 2 * 3 * (2 * 2 * 4 + 2 * 2 * 3) * 4  # layers x tokens x (keys + values) x float32
    cache.reset()
    assert cache.get_seq_length() == 0
    assert cache.nbytes() == 0
    keys, _ = cache.update(*kv(1, seed=5), 0)
    assert keys.shape[2] == 1


def test_sliding_window_cache_keeps_the_last_window_minus_one_tokens():
    cache = SlidingWindowCache(num_layers=1, window=3)
    steps = [kv(1, seed=s) for s in range(6)]
    for t, (k, v) in enumerate(steps):
        keys, values = cache.update(k, v, 0)
        expected = torch.cat([s[0] for s in steps[max(0, t - 2):t + 1]], dim=2)  # itself and 2 before
        torch.testing.assert_close(keys, expected)
    assert cache.get_seq_length() == 6
    assert cache.nbytes() == 2 * (2 * 2 * 4 + 2 * 2 * 3) * 4  # 2 tokens held, however many were seen


def test_sliding_window_cache_takes_a_long_prefill():
    cache = SlidingWindowCache(num_layers=1, window=2)
    k, v = kv(5)
    keys, _ = cache.update(k, v, 0)
    torch.testing.assert_close(keys, k)  # the prefill attends within itself (the mask limits it to the window)
    keys, _ = cache.update(*kv(1, seed=7), 0)
    torch.testing.assert_close(keys[:, :, :1], k[:, :, -1:])


@pytest.mark.parametrize(("call", "error", "match"), [
    (lambda c: c.update(torch.zeros(2, 2, 1, 4), torch.zeros(2, 2, 1, 3), 2), ValueError,
     "layer_idx must be below num_layers=2"),
    (lambda c: c.update(torch.zeros(2, 1, 4), torch.zeros(2, 1, 4), 0), ValueError, r"\(N, Hkv, L, Dh\)"),
    (lambda c: c.update(torch.zeros(3, 2, 1, 4), torch.zeros(3, 2, 1, 3), 0), ValueError, "serves one batch"),
    (lambda c: c.update(torch.zeros(2, 2, 1, 4).double(), torch.zeros(2, 2, 1, 3).double(), 0), ValueError,
     "float64"),
    (lambda c: c.update([0.0], torch.zeros(2, 2, 1, 3), 0), TypeError, "key must be a torch.Tensor"),
    (lambda c: c.update(torch.zeros(2, 2, 1, 4), torch.zeros(2, 2, 1, 3), "0"), TypeError, "layer_idx must be an int"),
])
def test_update_errors(call, error, match):
    cache = KVCache(num_layers=2, max_cache_len=4)
    cache.update(torch.zeros(2, 2, 1, 4), torch.zeros(2, 2, 1, 3), 0)
    with pytest.raises(error, match=match):
        call(cache)


@pytest.mark.parametrize(("call", "error", "match"), [
    (lambda: KVCache(0, 4), ValueError, "num_layers must be positive"),
    (lambda: KVCache(2, 4.0), TypeError, "max_cache_len must be an int"),
    (lambda: SlidingWindowCache(2, 0), ValueError, "window must be positive"),
])
def test_constructor_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_repr_says_how_much_it_holds():
    cache = KVCache(2, 8)
    cache.update(*kv(3), 0)
    assert repr(cache) == "KVCache(num_layers=2, max_cache_len=8, seq_length=3)"
    assert repr(SlidingWindowCache(1, 4)) == "SlidingWindowCache(num_layers=1, window=4, seq_length=0)"


def test_nbytes_counts_the_filled_part_and_allocated_bytes_the_buffers():
    cache = KVCache(num_layers=2, max_cache_len=10)
    for layer in (0, 1):
        cache.update(torch.ones(1, 2, 3, 4), torch.ones(1, 2, 3, 4), layer)
    assert cache.nbytes() == 2 * 2 * (2 * 3 * 4) * 4  # layers x (keys, values) x 3 positions, float32
    assert cache.allocated_bytes() == 2 * 2 * (2 * 10 * 4) * 4  # ... x max_cache_len positions


def test_crop_forgets_the_last_tokens_of_every_cache_that_can():
    from attention_lib import ConcatCache

    for kind in (KVCache, ConcatCache):
        cache = kind(1, 8)
        keys = torch.arange(5.0).reshape(1, 1, 5, 1)
        cache.update(keys, keys, 0)
        cache.crop(3)
        assert cache.get_seq_length() == 3
        got, _ = cache.update(torch.full((1, 1, 1, 1), 9.0), torch.zeros(1, 1, 1, 1), 0)
        assert got.flatten().tolist() == [0.0, 1.0, 2.0, 9.0]
    window = SlidingWindowCache(1, window=3)
    window.update(torch.ones(1, 1, 4, 1), torch.ones(1, 1, 4, 1), 0)
    window.crop(4)  # nothing to forget
    with pytest.raises(ValueError, match="cannot be cropped to max_length=2.*kept only the last 2"):
        window.crop(2)
    with pytest.raises(TypeError, match="max_length must be an int"):
        KVCache(1, 4).crop(1.5)


def test_every_cache_allocates_through_the_one_allocation(monkeypatch):
    from attention_lib import ConcatCache

    calls = []
    original = KVCache._allocate
    monkeypatch.setattr(KVCache, "_allocate", lambda self, *a: calls.append(type(self).__name__) or original(self, *a))
    for cache in (KVCache(1, 4), SlidingWindowCache(1, 3), ConcatCache(1, 4)):
        cache.update(torch.ones(1, 1, 2, 2), torch.ones(1, 1, 2, 2), 0)
        cache.update(torch.ones(1, 1, 1, 2), torch.ones(1, 1, 1, 2), 0)
    assert calls == ["KVCache", "SlidingWindowCache", "ConcatCache"]  # once each, at the first update
