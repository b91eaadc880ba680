"""The benchmark's decoding part: it runs alone with --decoding (a smoke test: no assertion on times), its grown
cache returns what the pre-allocated one does, and its targets say met, missed or not measured."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attention_lib import ConcatCache, KVCache
from attention_lib.bench.decoding import decoding_targets, print_decoding, time_per_token

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_decoding_alone_prints_its_table_and_targets():
    result = subprocess.run([sys.executable, "-m", "attention_lib.bench", "--decoding", "--quick", "--threads", "1"],
                            capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout
    for heading in ("== environment", "== decoding (CPU): time per generated token", "== decoding targets",
                    "== grouped-query attention (CPU): one decoding step at S=2,048", "== grouped-query targets"):
        assert heading in out
    assert "== ceiling" not in out  # only the decoding part
    assert out.count("not measured") == 2  # --quick stops at a 512 prefix
    for kv, G in ((4, 4), (1, 16)):  # memory, not time: judged on any machine
        assert f"met          {kv} KV heads: the step's peak allocation < G = {G} x its cache" in out


def test_the_grown_cache_returns_what_the_preallocated_one_does():
    grown, fixed = ConcatCache(1, 6), KVCache(1, 6)
    g = torch.Generator().manual_seed(0)
    for L in (3, 1, 2):
        k, v = torch.randn(1, 2, L, 4, generator=g), torch.randn(1, 2, L, 4, generator=g)
        for a, b in zip(grown.update(k, v, 0), fixed.update(k, v, 0), strict=True):
            torch.testing.assert_close(a, b)
    assert grown.get_seq_length() == fixed.get_seq_length() == 6


def test_targets_are_judged_in_their_own_direction(capsys):
    times = {("no cache", 128): 2.0, ("cache", 128): 1.0, ("grown cache", 128): 1.2,
             ("no cache", 2048): 30.0, ("cache", 2048): 1.5, ("grown cache", 2048): 3.0}
    targets = print_decoding(times, repeats=1, steps=1)
    assert [t[1] for t in targets] == [20.0, 1.5]
    out = capsys.readouterr().out
    assert out.count("met ") == 2
    slow = times | {("cache", 2048): 3.0}
    print_decoding(slow, repeats=1, steps=1)
    out = capsys.readouterr().out
    assert "MISSED       cache: per-token time at a 2,048 prefix >= 15x faster than no cache: 10.00" in out
    assert "MISSED       cache: per-token time grows <= 2x from a 128 to a 2,048 prefix: 3.00" in out
    assert [t[1] for t in decoding_targets({("cache", 128): 1.0})] == [None, None]


def test_time_per_token_runs_the_one_loop_for_every_way_and_refuses_an_unknown_one():
    from attention_lib import TinyLlama

    model = TinyLlama(vocab_size=10).eval()
    times = time_per_token(model, (4, 8), repeats=1, steps=2, ways=("no cache", "cache", "grown cache"))
    assert {w: len(t) for w, t in times.items()} == {"no cache": 2, "cache": 2, "grown cache": 2}
    assert all(t > 0 for ts in times.values() for t in ts)
    with pytest.raises(ValueError, match=r"ways must be among \['no cache', 'cache', 'grown cache'\]"):
        time_per_token(model, (4,), ways=("cached",))


def test_a_grouped_query_step_allocates_far_less_than_G_times_its_cache():
    from attention_lib.bench.grouped_query import grouped_query_targets, prefilled_step
    from attention_lib.bench.measure import peak_memory

    for kv in (4, 1):
        step, cache = prefilled_step(kv, 1024)
        assert peak_memory(step) < 0.1 * (16 // kv) * cache.allocated_bytes()
        assert cache.get_seq_length() == 1024
    fake = {16: {"ratio": 1.0, "peak_bytes": 10, "cache_bytes": 16}, 4: {"ratio": 0.7, "peak_bytes": 16,
            "cache_bytes": 4}, 1: {"ratio": 0.3, "peak_bytes": 1, "cache_bytes": 1}}
    assert [(t[1], t[3]) for t in grouped_query_targets(fake)] == [(0.7, 0.6), (0.3, 0.5), (1.0, 1.0),
                                                                   (1 / 16, 1.0)]


def test_the_attention_core_is_the_folded_attention_of_one_new_query():
    from attention_lib import ungroup_heads
    from attention_lib.bench.grouped_query import SHAPE, attention_core_step

    H, Dh = SHAPE["num_heads"], SHAPE["embed_dim"] // SHAPE["num_heads"]
    g = torch.Generator().manual_seed(3)  # the draws attention_core_step makes, in its order
    q = torch.randn(1, H, 1, Dh, generator=g)
    k, v = torch.randn(1, 4, 10, Dh, generator=g), torch.randn(1, 4, 10, Dh, generator=g)
    expected = torch.nn.functional.scaled_dot_product_attention(q, k.repeat_interleave(4, dim=1),
                                                                v.repeat_interleave(4, dim=1))  # (1, H, 1, Dh)
    torch.testing.assert_close(ungroup_heads(attention_core_step(4, 10, seed=3)(), H), expected)


def test_the_paged_target_follows_the_bytes_its_gathers_move():
    """1.3x the contiguous cache; where copying the blocks out alone costs more (memory slow against the rest of a
    step), 1.1x the floor that copy sets."""
    from attention_lib.bench.serving import paged_floor, serving_targets
    cheap = {("contiguous", 2048): 1.0, ("gathers", 2048): 0.1, ("paged", 2048): 1.25}
    dear = {("contiguous", 2048): 1.0, ("gathers", 2048): 0.4, ("paged", 2048): 1.5}
    mla = {("expanded", 2048): 10.0, ("absorbed", 2048): 1.0}
    assert paged_floor(cheap, 2048) == pytest.approx(1.1)
    assert paged_floor(cheap, 512) is None
    assert serving_targets(mla, cheap)[1][1:] == (1.25, "<=", 1.3)
    text, value, sign, limit = serving_targets(mla, dear)[1]
    assert (value, sign, limit) == (1.5, "<=", 1.54)
    assert "1.1x the 1.40 that the gathers' copy sets" in text
