"""Multi-head latent attention against the real peer: a random transformers DeepseekV3ForCausalLM (dense MLPs, made
from a config, no download) copied with from_hf_deepseek gives the same logits in both forms, whole and through the
latent cache, and the same greedy tokens as transformers' own generate; the expanded and absorbed forms agree to
float64 precision; the cache holds r + Dr numbers per token per layer; what is not supported is refused by name."""

import pytest
import torch

from attention_lib import (
    LatentCache,
    MultiHeadLatentAttention,
    RotaryPositions,
    TinyLatentLM,
    calculate_attention,
    from_hf_deepseek,
    generate,
)

transformers = pytest.importorskip("transformers", reason="transformers is a test dependency: pip install -e .[test]")
from hf_models import far_from_ties  # noqa: E402

VOCAB = 50
#: The issue's shapes: hidden 64, 4 heads, kv_lora_rank 16, qk_rope_head_dim 8, qk_nope_head_dim 16, v_head_dim 16.
SHAPES = {"vocab_size": VOCAB, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 4, "kv_lora_rank": 16, "q_lora_rank": None,
          "qk_rope_head_dim": 8, "qk_nope_head_dim": 16, "v_head_dim": 16, "first_k_dense_replace": 2,
          "n_routed_experts": 4, "num_experts_per_tok": 2, "n_group": 1, "topk_group": 1,
          "max_position_embeddings": 64, "bos_token_id": None, "eos_token_id": None, "pad_token_id": None}


def hf_deepseek(seed=0, **overrides):
    """A tiny random DeepseekV3ForCausalLM with dense MLPs, weights of std 0.1 (tokens far from ties)."""
    torch.manual_seed(seed)
    config = transformers.DeepseekV3Config(**(SHAPES | overrides))
    return far_from_ties(transformers.DeepseekV3ForCausalLM(config).eval())


def prompt(N=2, P=12, seed=1):
    return torch.randint(0, VOCAB, (N, P), generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def pair():
    theirs = hf_deepseek()
    return theirs, from_hf_deepseek(theirs)


def test_the_copy_has_every_parameter(pair):
    theirs, ours = pair
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in theirs.parameters())


@pytest.mark.parametrize("absorbed", [False, True])
@torch.no_grad()
def test_logits_equal_transformers_in_both_forms(pair, absorbed):
    theirs, ours = pair
    ours.absorbed = absorbed
    x = prompt()
    # transformers computes RoPE's angles in float32, we in float64: measured 1.8e-6 on logits up to 3.2
    torch.testing.assert_close(ours(x).logits, theirs(x).logits, atol=1e-5, rtol=1e-5)
    ours.absorbed = False


@pytest.mark.parametrize("absorbed", [False, True])
@torch.no_grad()
def test_token_by_token_through_the_latent_cache_equals_transformers(pair, absorbed):
    theirs, ours = pair
    ours.absorbed = absorbed
    x = prompt()
    cache = ours.new_cache(12)
    steps = [ours(x[:, :5], cache).logits] + [ours(x[:, i:i + 1], cache).logits for i in range(5, 12)]
    torch.testing.assert_close(torch.cat(steps, dim=1), theirs(x).logits, atol=1e-5, rtol=1e-5)
    assert cache.get_seq_length() == 12
    assert isinstance(cache, LatentCache)
    ours.absorbed = False


@pytest.mark.parametrize("absorbed", [False, True])
@torch.no_grad()
def test_cached_greedy_tokens_equal_transformers_generate(pair, absorbed):
    theirs, ours = pair
    ours.absorbed = absorbed
    x = prompt(P=5)
    expected = theirs.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=12, do_sample=False,
                               pad_token_id=0)
    assert torch.equal(generate(ours, x, 12), expected)
    assert len(set(expected[:, 5:].flatten().tolist())) > 3, "the reference writes one token again and again"
    ours.absorbed = False


@torch.no_grad()
def test_expanded_and_absorbed_agree_to_float64_precision():
    torch.manual_seed(0)
    mla = MultiHeadLatentAttention(64, 4, kv_rank=16, rope_dim=8, nope_dim=16, v_dim=16).double()
    x = torch.randn(3, 9, 64, dtype=torch.float64)
    for layer in (mla.q_proj, mla.kv_a_proj_with_mqa, mla.kv_b_proj, mla.o_proj):
        layer.weight.normal_(0.0, 0.3)
    expanded = mla(x)
    mla.absorbed = True
    absorbed = mla(x)
    assert (absorbed - expanded).abs().max() < 1e-13  # measured 7e-15 on outputs up to 8.5: float64 rounding
    assert expanded.abs().max() > 0.1  # not two zeros


@torch.no_grad()
def test_the_expanded_form_is_attention_over_rebuilt_keys():
    """Rebuild every head's key and value from the latent by hand, then plain attention with the causal mask."""
    torch.manual_seed(1)
    mla = MultiHeadLatentAttention(32, 2, kv_rank=8, rope_dim=4, nope_dim=6, v_dim=5).double()
    x = torch.randn(1, 7, 32, dtype=torch.float64)
    q = mla.q_proj(x).view(1, 7, 2, 10).transpose(1, 2)
    q = torch.cat([q[..., :6], mla.rotary(q[..., 6:])], dim=-1)
    latent, k_rope = mla.compress(x)  # (1, 1, 7, 8), (1, 1, 7, 4)
    w_uk, w_uv = mla.up_projections()  # (H, Dn, r), (H, Dv, r)
    k = torch.cat([latent @ w_uk.transpose(-2, -1), k_rope.expand(1, 2, 7, 4)], dim=-1)  # (1, 2, 7, 10)
    v = latent @ w_uv.transpose(-2, -1)  # (1, 2, 7, 5)
    heads = calculate_attention(q, k, v, is_causal=True)[0]  # scale 1/sqrt(Dn + Dr) = 1/sqrt(10): the default
    expected = mla.o_proj(heads.transpose(1, 2).reshape(1, 7, 10))
    torch.testing.assert_close(mla(x), expected, atol=1e-12, rtol=0)


def test_the_latent_is_not_rotated_and_the_rope_key_is():
    torch.manual_seed(2)
    mla = MultiHeadLatentAttention(16, 2, kv_rank=4, rope_dim=4, nope_dim=4, v_dim=4)
    x = torch.randn(1, 1, 16)
    (c0, r0), (c9, r9) = mla.compress(x, offset=0), mla.compress(x, offset=9)
    assert torch.equal(c0, c9)  # the latent does not depend on the position
    assert not torch.allclose(r0, r9)
    torch.testing.assert_close(r9, RotaryPositions(4)(r0, offset=9))


def test_the_cache_holds_r_plus_rope_numbers_per_token():
    model = TinyLatentLM(VOCAB, kv_rank=16, rope_dim=8).eval()
    cache = model.new_cache(10)
    with torch.no_grad():
        model(prompt(N=1, P=10), cache)
    assert cache.numbers_per_token() == 24  # 16 + 8, against 2 * 4 heads * 16 = 128 for MHA of the same heads
    assert cache.nbytes() == 10 * 24 * 2 * 4  # 10 tokens, 2 layers, float32


def test_the_absorbed_form_reads_the_cached_latents_in_place():
    from attention_lib.latent import side_by_side

    cache = LatentCache(num_layers=1, max_cache_len=8)
    latent, k_rope = cache.update(torch.randn(2, 1, 5, 16), torch.randn(2, 1, 5, 8), layer_idx=0)
    joint = side_by_side(latent, k_rope)  # the shared key [c, k_rope] of every cached token
    assert joint.data_ptr() == latent.data_ptr()  # a view: nothing copied
    assert tuple(joint.shape) == (2, 1, 5, 24)
    assert torch.equal(joint, torch.cat([latent, k_rope], dim=-1))
    apart = side_by_side(latent.clone(), k_rope.clone())  # two separate tensors: joined by a copy
    assert apart.data_ptr() != latent.data_ptr()
    assert torch.equal(apart, joint)
    assert torch.equal(side_by_side(latent[:, :, 1:], k_rope[:, :, 1:]), joint[:, :, 1:])  # an offset view too
    assert side_by_side(latent[..., 1:], k_rope).shape[-1] == 23  # not neighbours any more: a copy, still right


def test_the_latent_cache_refuses_what_is_not_a_latent_and_a_rotary_key():
    cache = LatentCache(num_layers=1, max_cache_len=8)
    with pytest.raises(TypeError, match="key"):
        cache.update([1.0], torch.ones(1, 1, 1, 8), 0)
    with pytest.raises(ValueError, match=r"must be \(N, 1, L, r\) and \(N, 1, L, Dr\) with the same N and L"):
        cache.update(torch.ones(1, 1, 3, 16), torch.ones(1, 1, 2, 8), 0)
    cache.update(torch.ones(1, 1, 3, 16), torch.ones(1, 1, 3, 8), 0)
    with pytest.raises(ValueError, match="holds keys of shape"):  # a latent of another size than the first
        cache.update(torch.ones(1, 1, 1, 12), torch.ones(1, 1, 1, 8), 0)


def test_the_model_runs_with_generate_both_forms_give_the_same_tokens():
    torch.manual_seed(3)
    model = TinyLatentLM(VOCAB).eval()
    x = prompt(P=4)
    expanded = generate(model, x, 8)
    model.absorbed = True
    assert torch.equal(generate(model, x, 8), expanded)
    assert torch.equal(generate(model, x, 8, use_cache=False), expanded)


@pytest.mark.parametrize(("overrides", "named"), [
    ({"first_k_dense_replace": 1}, "MoE layers"),
    ({"q_lora_rank": 8}, "q_lora_rank"),
    ({"rope_parameters": {"rope_type": "yarn", "factor": 2.0, "rope_theta": 10000.0,
                          "original_max_position_embeddings": 32}}, "rope scaling"),
    ({"num_key_value_heads": 2}, r"num_key_value_heads.*= num_attention_heads \(here 4"),
    ({"num_key_value_heads": 1}, "num_key_value_heads"),
])
def test_what_is_not_supported_is_refused_by_name(overrides, named):
    with pytest.raises(ValueError, match=named):
        from_hf_deepseek(hf_deepseek(**overrides))


def test_other_models_and_bad_sizes_are_refused():
    with pytest.raises(TypeError, match="copies a transformers DeepseekV3ForCausalLM"):
        from_hf_deepseek(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="kv_rank"):
        MultiHeadLatentAttention(16, 2, kv_rank=0, rope_dim=4, nope_dim=4, v_dim=4)
    with pytest.raises(ValueError, match="even"):
        MultiHeadLatentAttention(16, 2, kv_rank=4, rope_dim=3, nope_dim=4, v_dim=4)
    with pytest.raises(TypeError, match="absorbed"):
        TinyLatentLM(VOCAB).absorbed = "yes"


@torch.no_grad()
def test_rope_makes_logits_shift_invariant_and_the_rotated_latent_breaks_it(pair):
    from attention_lib.experiments.latent_and_paged import with_rotated_latent

    _, ours = pair
    x = prompt()
    assert (ours(x).logits - ours(x, offset=50).logits).abs().max() < 1e-4  # only distances matter
    broken = with_rotated_latent(ours)
    assert (broken(x).logits - broken(x, offset=50).logits).abs().max() > 0.1
    assert isinstance(ours.layers[0].self_attn, MultiHeadLatentAttention)  # the copy was broken, not the model
    assert type(ours.layers[0].self_attn) is MultiHeadLatentAttention


@torch.no_grad()
def test_each_half_of_the_rotated_latent_alone_breaks_the_shift_invariance(pair):
    from attention_lib.experiments.latent_and_paged import with_rope_bug

    _, ours = pair
    x = prompt()
    right = with_rope_bug(ours, turn_latent=False, turn_key=True)
    assert (right(x).logits - ours(x).logits).abs().max() < 1e-6  # the flags off: the model itself
    for turn_latent, turn_key in ((True, True), (False, False), (True, False)):
        broken = with_rope_bug(ours, turn_latent=turn_latent, turn_key=turn_key)
        assert (broken(x).logits - broken(x, offset=50).logits).abs().max() > 0.1, (turn_latent, turn_key)


@torch.no_grad()
def test_the_rotated_latent_is_a_model_bug_its_cache_reads_right(pair):
    from attention_lib.experiments.latent_and_paged import cache_error, latent_bug, with_rotated_latent

    theirs, ours = pair
    x = prompt()
    broken = with_rotated_latent(ours)
    assert cache_error(broken, x) < 1e-4  # token by token through its cache = its own whole pass
    assert (broken(x).logits - theirs(x).logits)[:, 1:].abs().amax(dim=(1, 2)).min() > 1e-3  # not DeepSeek's
    torch.testing.assert_close(broken(x).logits[:, 0], theirs(x).logits[:, 0], atol=1e-5, rtol=0)  # RoPE at 0: none
    assert latent_bug(ours, theirs, x, max_new_tokens=2)["latent rotated, not the rotary key"]["right logits"] == 0.0
