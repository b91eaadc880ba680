"""Paged attention against the references: attention read block by block equals SDPA on the gathered keys (GQA
groups, a part-full last block, several new queries); TinyLlama writes the same tokens on a PagedCache as on a
KVCache, greedy and sampled; a fork shares its prompt's blocks and copies the part-full one before writing; every
bad input is refused, and a pool that runs out changes nothing; transformers' continuous batching (slow)."""

from collections import deque

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from attention_lib import BlockPool, PagedCache, PagedModel, TinyLatentLM, TinyLlama, generate, paged_attention
from attention_lib.paged import read_blocks


def filled(N=2, Hkv=2, S=11, Dh=8, Dv=6, block_size=4, seed=0, num_positions=128):
    """A one-layer paged cache holding ``S`` random positions, and the keys and values written."""
    g = torch.Generator().manual_seed(seed)
    k, v = torch.randn(N, Hkv, S, Dh, generator=g), torch.randn(N, Hkv, S, Dv, generator=g)
    cache = PagedCache(BlockPool(num_positions, block_size), num_layers=1)
    cache.update(k[:, :, :S - 3], v[:, :, :S - 3], 0)  # a prefill, then three single tokens
    for i in range(S - 3, S):
        cache.update(k[:, :, i:i + 1], v[:, :, i:i + 1], 0)
    return cache, k, v


@pytest.mark.parametrize(("H", "Hkv", "S", "L", "block_size"), [
    (4, 4, 11, 1, 4), (4, 2, 11, 1, 4), (4, 1, 16, 1, 4), (6, 2, 9, 3, 8), (2, 2, 5, 5, 16), (4, 2, 33, 2, 2)])
def test_paged_attention_equals_sdpa(H, Hkv, S, L, block_size):
    cache, k, v = filled(Hkv=Hkv, S=S, block_size=block_size)
    q = torch.randn(2, H, L, 8, generator=torch.Generator().manual_seed(9))
    mask = torch.ones(L, S, dtype=torch.bool).tril(S - L)  # the newest L queries: causal, aligned to the end
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    torch.testing.assert_close(paged_attention(q, cache, 0), expected, atol=1e-6, rtol=1e-5)  # measured 6e-8


def test_update_returns_what_was_written_through_the_table():
    cache, k, v = filled(S=11, block_size=4)
    keys, values = cache.gather(0)
    assert torch.equal(keys, k)
    assert torch.equal(values, v)
    assert [len(t) for t in cache.tables] == [3, 3]  # 11 positions in blocks of 4: the last one part-full
    assert cache.pool.num_free == 32 - 6


def test_the_caches_own_read_is_read_blocks_on_a_scattered_pool():
    """gather reads the store without read_blocks' checks (it made the table itself): the same keys and values."""
    _, k, v = filled(N=2, S=23, block_size=4)
    pool = BlockPool(256, 4)
    pool.free = deque(torch.randperm(pool.num_blocks, generator=torch.Generator().manual_seed(0)).tolist())
    scattered = PagedCache(pool, num_layers=1)  # its blocks are scattered over the store, as after serving others
    scattered.update(k, v, 0)
    table = torch.tensor(scattered.tables)
    assert not all(b - a == 1 for t in scattered.tables for a, b in zip(t, t[1:], strict=False))
    both = read_blocks(pool.stores[0], table, 23)
    keys, values = scattered.gather(0)
    assert torch.equal(keys, both[..., :8])
    assert torch.equal(keys, k)
    assert torch.equal(values, both[..., 8:])
    assert torch.equal(values, v)


def tiny_llama(seed=0):
    torch.manual_seed(seed)
    model = TinyLlama(vocab_size=30, embed_dim=32, num_heads=4, num_kv_heads=2).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.3) if p.dim() == 2 else None
    return model


@pytest.mark.parametrize("sampled", [False, True])
def test_the_model_writes_the_same_tokens_on_paged_and_contiguous_caches(sampled):
    model, pool = tiny_llama(), BlockPool(num_positions=256, block_size=4)
    prompt = torch.randint(0, 30, (3, 7), generator=torch.Generator().manual_seed(1))
    choose = {"temperature": 1.0} if sampled else {}
    contiguous = generate(model, prompt, 10, generator=torch.Generator().manual_seed(2), **choose)
    paged_model = PagedModel(model, pool)
    paged = generate(paged_model, prompt, 10, generator=torch.Generator().manual_seed(2), **choose)
    assert torch.equal(paged, contiguous)
    assert len(set(contiguous[:, 7:].flatten().tolist())) > 3
    assert pool.num_free == 64 - 3 * 4  # 16 positions (the last token is never read in) in blocks of 4, 3 texts
    paged_model.cache.free()
    assert pool.num_free == 64


def test_the_latent_model_runs_on_a_paged_cache():
    torch.manual_seed(0)
    model, pool = TinyLatentLM(vocab_size=30).eval(), BlockPool(num_positions=64, block_size=8)
    prompt = torch.randint(0, 30, (2, 5), generator=torch.Generator().manual_seed(1))
    assert torch.equal(generate(PagedModel(model, pool), prompt, 6), generate(model, prompt, 6))


def test_a_fork_shares_the_prompt_and_copies_the_part_full_block_before_writing():
    model, pool = tiny_llama(), BlockPool(num_positions=128, block_size=4)
    prompt = torch.randint(0, 30, (1, 10), generator=torch.Generator().manual_seed(3))
    parent = PagedCache(pool, num_layers=2)
    with torch.no_grad():
        logits = model(prompt, parent).logits[:, -1]
        child = parent.fork()
        assert child.tables == parent.tables
        assert pool.num_free == 32 - 3
        assert [pool.refs[b] for b in parent.tables[0]] == [2, 2, 2]
        before = [t.clone() for t in parent.gather(1)]
        first, second = logits.topk(2).indices[:, :1], logits.topk(2).indices[:, 1:]
        child_logits = model(second, child).logits  # the child writes first: it copies the part-full block
        assert child.tables[0][:2] == parent.tables[0][:2]
        assert child.tables[0][2] != parent.tables[0][2]
        assert all(torch.equal(a, b) for a, b in zip(before, parent.gather(1), strict=True))  # the parent intact
        parent_logits = model(first, parent).logits
    alone = PagedCache(BlockPool(128, 4), 2)
    with torch.no_grad():
        model(prompt, alone)
        torch.testing.assert_close(model(first, alone).logits, parent_logits)
        fresh = PagedCache(BlockPool(128, 4), 2)
        model(prompt, fresh)
        torch.testing.assert_close(model(second, fresh).logits, child_logits)


def test_without_copy_on_write_the_fork_overwrites_its_sibling():
    """The bug the copy prevents: with the shared block written in place, the parent reads the child's token."""
    cache, k, v = filled(N=1, S=6, block_size=4)
    child = cache.fork()
    shared = child.tables[0][1]
    cache.pool.refs[shared] = 1  # pretend nobody else holds it: no copy
    child.update(torch.full((1, 2, 1, 8), 7.0), torch.full((1, 2, 1, 6), 7.0), 0)
    cache._seen[0] += 1  # the parent now reads position 6 too
    assert torch.equal(cache.gather(0)[0][:, :, 6], torch.full((1, 2, 8), 7.0))  # the child's key in the parent


def test_a_pool_that_runs_out_refuses_and_changes_nothing():
    pool = BlockPool(num_positions=16, block_size=4)
    g = torch.Generator().manual_seed(0)
    k = torch.randn(1, 1, 8, 4, generator=g)
    first = PagedCache(pool, num_layers=1)
    first.update(k, k, 0)  # 2 of 4 blocks
    second = PagedCache(pool, num_layers=1)
    second.update(k[:, :, :6], k[:, :, :6], 0)  # the other 2
    tables = [list(first.tables[0]), list(second.tables[0])]
    with pytest.raises(ValueError, match="the pool is out of blocks: 1 more are needed .* 0 of 4 are free"):
        second.update(k[:, :, :3], k[:, :, :3], 0)  # positions 6..8: block 2 has room for 2, the third needs one
    assert [first.tables[0], second.tables[0]] == tables
    assert second.get_seq_length() == 6
    assert pool.num_free == 0
    assert torch.equal(first.gather(0)[0], k)
    assert torch.equal(second.gather(0)[0], k[:, :, :6])
    first.free()
    second.update(k[:, :, :3], k[:, :, :3], 0)  # now it fits
    assert torch.equal(second.gather(0)[0], torch.cat([k[:, :, :6], k[:, :, :3]], dim=2))


def test_bad_block_sizes_are_refused():
    with pytest.raises(ValueError, match="block_size must be a power of two, but block_size=12; use 8 or 16"):
        BlockPool(96, 12)
    with pytest.raises(ValueError, match="block_size must divide num_positions.*use num_positions=112"):
        BlockPool(100, 16)
    with pytest.raises(TypeError, match="block_size"):
        BlockPool(64, 4.0)
    with pytest.raises(TypeError, match="must be a BlockPool"):
        PagedCache("pool", 1)


def test_a_freed_block_is_not_read_again():
    cache, _, _ = filled(N=1, S=6)
    cache.pool.release(cache.tables[0][0])
    with pytest.raises(ValueError, match="block 0 was freed"):
        cache.gather(0)
    with pytest.raises(ValueError, match="block 0 was freed"):
        paged_attention(torch.randn(1, 2, 1, 8), cache, 0)
    with pytest.raises(ValueError, match="block 0 was freed"):
        cache.pool.release(0)  # released twice


def test_a_finished_sequence_is_neither_forked_nor_read():
    cache, _, _ = filled(N=1, S=6)
    cache.free()
    assert cache.pool.num_free == cache.pool.num_blocks
    for action in (cache.fork, lambda: cache.gather(0), lambda: cache.update(torch.ones(1, 2, 1, 8),
                                                                              torch.ones(1, 2, 1, 6), 0),
                   lambda: paged_attention(torch.randn(1, 2, 1, 8), cache, 0), cache.free):
        with pytest.raises(ValueError, match="this sequence is finished"):
            action()


def test_bad_shapes_are_refused():
    cache, _, _ = filled(N=2, Hkv=2, S=6)
    with pytest.raises(ValueError, match="holds 2 sequences"):
        cache.update(torch.ones(3, 2, 1, 8), torch.ones(3, 2, 1, 6), 0)
    with pytest.raises(ValueError, match="holds keys and values of"):
        cache.update(torch.ones(2, 4, 1, 8), torch.ones(2, 4, 1, 6), 0)
    with pytest.raises(ValueError, match="query must be"):
        paged_attention(torch.randn(2, 3, 1, 8), cache, 0)  # 3 heads for 2 key/value heads
    with pytest.raises(ValueError, match="layer_idx must be below"):
        cache.update(torch.ones(2, 2, 1, 8), torch.ones(2, 2, 1, 6), 1)
    with pytest.raises(ValueError, match="index must name one of the 2"):
        cache.fork(2)


def test_a_query_of_another_dtype_than_its_cache_is_refused():
    cache, _, _ = filled(N=1, Hkv=2, S=6)  # float32
    with pytest.raises(TypeError, match=r"query and its cache must share one dtype, but query.dtype=torch.float64 "
                                        r"and the cache holds torch.float32; convert the query with "
                                        r".to\(torch.float32"):
        paged_attention(torch.randn(1, 2, 1, 8, dtype=torch.float64), cache, 0)
    with pytest.raises(TypeError, match="the pool holds torch.float32 keys and values, but got "
                                        "key.dtype=torch.float64"):
        cache.update(torch.ones(1, 2, 1, 8, dtype=torch.float64), torch.ones(1, 2, 1, 6, dtype=torch.float64), 0)
    assert cache.get_seq_length() == 6  # refused before any block was taken
    assert cache.tables == [[0, 1]]


def test_a_pool_takes_only_floating_keys_and_values_of_one_dtype():
    cache = PagedCache(BlockPool(32, 4), num_layers=1)
    with pytest.raises(TypeError, match=r"key must be a floating-point tensor, but key.dtype=torch.int64"):
        cache.update(torch.ones(1, 1, 3, 4, dtype=torch.long), torch.ones(1, 1, 3, 4), 0)
    with pytest.raises(TypeError, match=r"value must be a floating-point tensor, but value.dtype=torch.bool"):
        cache.update(torch.ones(1, 1, 3, 4), torch.ones(1, 1, 3, 4, dtype=torch.bool), 0)
    with pytest.raises(TypeError, match=r"must share one dtype, but found key.dtype=torch.float32, "
                                        r"value.dtype=torch.float64"):
        cache.update(torch.ones(1, 1, 3, 4), torch.ones(1, 1, 3, 4, dtype=torch.float64), 0)
    assert cache.get_seq_length() == 0
    assert cache.pool.num_free == cache.pool.num_blocks  # no block was taken


@pytest.mark.parametrize(("length", "said"), [
    (-1, "length must be non-negative, but length=-1"),
    (9, "length must be at most the 8 positions the table's 2 blocks of 4 hold"),
    (2.0, "length must be an int")])
def test_read_blocks_refuses_lengths_outside_the_table(length, said):
    from attention_lib.paged import read_blocks

    store = torch.arange(32.0).view(8, 4, 1, 1)
    assert read_blocks(store, torch.tensor([[5, 2]]), 8).flatten().tolist() == [*range(20, 24), *range(8, 12)]
    with pytest.raises((TypeError, ValueError), match=said):
        read_blocks(store, torch.tensor([[5, 2]]), length)


def test_read_blocks_refuses_a_table_that_is_not_integer_blocks():
    from attention_lib.paged import read_blocks

    store = torch.zeros(8, 4, 1, 1)
    with pytest.raises(TypeError, match=r"table must be a 2-D integer tensor \(N, blocks\).*"
                                        r"table.dtype=torch.float32"):
        read_blocks(store, torch.tensor([[5.0, 2.0]]), 3)
    with pytest.raises(TypeError, match=r"table must be a 2-D integer tensor.*table.shape=\(2,\)"):
        read_blocks(store, torch.tensor([5, 2]), 3)
    with pytest.raises(TypeError, match="table must be a torch.Tensor"):
        read_blocks(store, [[5, 2]], 3)


@pytest.mark.slow
def test_transformers_continuous_batching_writes_the_same_tokens():
    """transformers' generate_batch (paged attention, continuous batching) and our model on a pool: same tokens."""
    transformers = pytest.importorskip("transformers")
    model = getattr(transformers, "LlamaForCausalLM", None)
    if model is None or not hasattr(model, "generate_batch"):
        pytest.skip("this transformers has no generate_batch (continuous batching)")
    from hf_models import hf_llama

    from attention_lib import from_hf_llama

    theirs = hf_llama(0)
    prompts = [torch.randint(0, 50, (n,), generator=torch.Generator().manual_seed(n)).tolist() for n in (3, 7, 12)]
    config = transformers.GenerationConfig(max_new_tokens=8, do_sample=False, eos_token_id=None, pad_token_id=0)
    outputs = theirs.generate_batch(prompts, generation_config=config)
    ours, pool = from_hf_llama(theirs), BlockPool(num_positions=256, block_size=4)
    by_prompt = {tuple(o.prompt_ids): list(o.generated_tokens) for o in outputs.values()}
    for p in prompts:
        assert generate(PagedModel(ours, pool), torch.tensor([p]), 8)[0, len(p):].tolist() == by_prompt[tuple(p)]


def test_the_serving_benchmark_judges_its_two_targets():
    from attention_lib.bench.serving import serving_targets, time_mla, time_paged

    mla, paged = time_mla((16,), repeats=1, steps=2), time_paged((16,), repeats=1, steps=2)
    assert all(value is None for _, value, _, _ in serving_targets(mla, paged))  # S = 2,048 not run
    made_up = {("expanded", 2048): 10.0, ("absorbed", 2048): 1.0, ("contiguous", 2048): 1.0, ("paged", 2048): 1.2}
    assert [(value, sign, limit) for _, value, sign, limit in serving_targets(made_up, made_up)] == [
        (10.0, ">=", 5.0), (1.2, "<=", 1.3)]


@given(st.integers(1, 3), st.sampled_from([(1, 1), (2, 1), (4, 2), (6, 3)]), st.integers(1, 40), st.data(),
       st.sampled_from([1, 2, 4, 8, 16]), st.sampled_from([torch.float32, torch.float64]))
def test_paged_attention_equals_sdpa_for_any_shape(N, heads, S, data, block_size, dtype):
    H, Hkv = heads
    L = data.draw(st.integers(1, S))
    g = torch.Generator().manual_seed(S * 7 + L)
    k, v = torch.randn(N, Hkv, S, 4, generator=g, dtype=dtype), torch.randn(N, Hkv, S, 3, generator=g, dtype=dtype)
    cache = PagedCache(BlockPool(block_size * -(-S // block_size) * N, block_size), num_layers=1)
    cache.update(k, v, 0)  # the pool holds exactly the blocks it needs: they all come from it
    assert cache.pool.num_free == 0
    q = torch.randn(N, H, L, 4, generator=g, dtype=dtype)
    mask = torch.ones(L, S, dtype=torch.bool).tril(S - L)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    torch.testing.assert_close(paged_attention(q, cache, 0), expected)


def test_the_gallery_bugs_do_what_they_say():
    from attention_lib.experiments.latent_and_paged import NoCopyOnWrite, OffByOneBlock

    k = torch.arange(12.0).view(1, 1, 12, 1)  # key p holds p
    one_block = OffByOneBlock(BlockPool(32, 4), 1)
    assert one_block.update(k[:, :, :4], k[:, :, :4], 0)[0].flatten().tolist() == [0, 1, 2, 3]  # one block: right
    shifted = OffByOneBlock(BlockPool(32, 4), 1)
    assert shifted.update(k[:, :, :10], k[:, :, :10], 0)[0].flatten().tolist() == [8, 9, 0, 0, 0, 1, 2, 3, 4, 5]
    parent = NoCopyOnWrite(BlockPool(32, 4), 1)
    parent.update(k[:, :, :6], k[:, :, :6], 0)
    child = parent.fork()
    parent.update(torch.full((1, 1, 1, 1), 100.0), torch.full((1, 1, 1, 1), 100.0), 0)
    child.update(torch.full((1, 1, 1, 1), 200.0), torch.full((1, 1, 1, 1), 200.0), 0)
    assert parent.gather(0)[0].flatten().tolist()[-1] == 200.0  # the sibling's key, in the parent's cache
    assert parent.tables == child.tables  # no copy was made


def test_the_wasted_memory_table_counts_blocks_exactly():
    from attention_lib.experiments.latent_and_paged import wasted_memory

    lengths = [12, 16, 17, 90]
    rows = wasted_memory(lengths, reserve=128, block_sizes=(4, 16))
    # blocks of 4: 3 + 4 + 5 + 23 = 35 blocks; of 16: 1 + 1 + 2 + 6 = 10 blocks
    assert [(r["reserved"], r["used"]) for r in rows] == [(512, 135), (140, 135), (160, 135)]
    assert rows[0]["unused"] == 1 - 135 / 512


def test_time_mla_times_on_the_threads_it_is_given_and_restores_them(monkeypatch):
    from attention_lib.bench import serving

    seen = []
    monkeypatch.setattr(serving, "_time_mla", lambda *args: seen.append(torch.get_num_threads()) or {})
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        serving.time_mla((8,), threads=1)
        assert seen == [1]
        assert torch.get_num_threads() == 2
        serving.time_mla((8,))
        assert seen == [1, 2]
    finally:
        torch.set_num_threads(before)
