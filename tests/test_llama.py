"""TinyLlama against the real peer: a random transformers LlamaForCausalLM (made from a config, no download) copied
with from_hf_llama gives the same logits, whole and token by token through our cache, and the same greedy tokens
as transformers' own generate; its parts (RMSNorm, SwiGLU) and its errors."""

import inspect

import pytest
import torch

from attention_lib import TinyLlama, from_hf_llama, generate
from attention_lib.llama import RMSNorm

transformers = pytest.importorskip("transformers", reason="transformers is a test dependency: pip install -e .[test]")
from hf_models import hf_llama  # noqa: E402

VOCAB = 50


def prompt(N=2, P=6, seed=1):
    return torch.randint(0, VOCAB, (N, P), generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def pair():
    theirs = hf_llama()
    return theirs, from_hf_llama(theirs)


def test_the_copy_has_the_same_shape_and_parameters(pair):
    theirs, ours = pair
    assert (ours.config["num_heads"], ours.config["num_kv_heads"], ours.config["num_layers"]) == (4, 2, 2)
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in theirs.parameters())


@torch.no_grad()
def test_prefill_logits_equal_transformers(pair):
    theirs, ours = pair
    x = prompt(P=12)
    torch.testing.assert_close(ours(x).logits, theirs(x).logits, atol=1e-5, rtol=1e-5)


@torch.no_grad()
def test_token_by_token_through_our_cache_equals_transformers(pair):
    theirs, ours = pair
    x = prompt(P=12)
    expected = theirs(x).logits  # one pass over all 12 tokens
    cache = ours.new_cache(12)
    steps = [ours(x[:, :5], cache).logits]  # the prefill, then one token at a time
    steps += [ours(x[:, t:t + 1], cache).logits for t in range(5, 12)]
    torch.testing.assert_close(torch.cat(steps, dim=1), expected, atol=1e-5, rtol=1e-5)
    hf_cache = transformers.DynamicCache()  # and step by step against transformers' own cache
    word = "cache" if "cache" in inspect.signature(theirs.forward).parameters else "past_key_values"  # renamed in 5.x
    theirs(x[:, :5], use_cache=True, **{word: hf_cache})
    for t in range(5, 12):
        theirs_step = theirs(x[:, t:t + 1], use_cache=True, **{word: hf_cache}).logits
        torch.testing.assert_close(steps[t - 4], theirs_step, atol=1e-5, rtol=1e-5)


@torch.no_grad()
def test_greedy_tokens_equal_transformers_generate(pair):
    theirs, ours = pair
    x = prompt(P=5)
    expected = theirs.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=12, do_sample=False)
    logits = theirs(expected).logits[:, 4:-1]  # the scores each new token was chosen from
    top2 = logits.topk(2, dim=-1).values
    assert float((top2[..., 0] - top2[..., 1]).min()) > 1e-4  # no near ties: the comparison means something
    for use_cache in (True, False):
        assert torch.equal(generate(ours, x, 12, use_cache=use_cache), expected)


@torch.no_grad()
@pytest.mark.parametrize("kv", [4, 1])
def test_mha_and_mqa_llamas_copy_too(kv):
    theirs = hf_llama(seed=2, num_key_value_heads=kv, rope_parameters={"rope_type": "default", "rope_theta": 500.0})
    ours = from_hf_llama(theirs)
    assert ours.config["rope_base"] == 500.0
    x = prompt(P=9)
    torch.testing.assert_close(ours(x).logits, theirs(x).logits, atol=1e-5, rtol=1e-5)


def test_rmsnorm_equals_transformers():
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    theirs = LlamaRMSNorm(8, eps=1e-5)
    with torch.no_grad():
        theirs.weight.uniform_(0.5, 1.5)
    ours = RMSNorm(8, eps=1e-5)
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(3, 5, 8)
    torch.testing.assert_close(ours(x), theirs(x))
    rms = ours.weight.detach() * x / x.pow(2).mean(-1, keepdim=True).add(1e-5).sqrt()
    torch.testing.assert_close(ours(x), rms)


def test_attention_maps_are_causal_and_one_per_layer():
    torch.manual_seed(0)
    model = TinyLlama(12, embed_dim=16, num_heads=4, num_kv_heads=2, num_layers=3).eval()
    out = model(torch.randint(0, 12, (2, 5)), need_weights=True)
    assert len(out.attentions) == 3
    for w in out.attentions:
        assert w.shape == (2, 4, 5, 5)
        assert bool((w.triu(1) == 0).all())


@pytest.mark.parametrize(("overrides", "match"), [
    ({"attention_bias": True}, "attention_bias"),
    ({"mlp_bias": True}, "mlp_bias"),
    ({"hidden_act": "gelu"}, "hidden_act"),
    ({"head_dim": 8}, "head_dim"),
])
def test_from_hf_llama_refuses_what_it_cannot_copy(overrides, match):
    with pytest.raises(ValueError, match=f"uses .*{match}.*which TinyLlama does not have"):
        from_hf_llama(hf_llama(**overrides))


def test_from_hf_llama_refuses_another_model():
    with pytest.raises(TypeError, match="copies a transformers LlamaForCausalLM, but got Linear"):
        from_hf_llama(torch.nn.Linear(2, 2))


@pytest.mark.parametrize(("ids", "error", "match"), [
    (torch.zeros(2, 3), TypeError, "integer token ids"),
    (torch.zeros(3, dtype=torch.long), ValueError, r"\(N, L\) token ids.*unsqueeze\(0\)"),
    (torch.zeros(1, 0, dtype=torch.long), ValueError, "L >= 1"),
    (torch.tensor([[1, 12]]), ValueError, r"0..11 .*found \[12\]"),
    ([[1, 2]], TypeError, "must be a torch.Tensor"),
])
def test_input_errors(ids, error, match):
    with pytest.raises(error, match=match):
        TinyLlama(12, embed_dim=16)(ids)


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"num_heads": 3}, ValueError, "divisible by num_heads"),
    ({"num_kv_heads": 3}, ValueError, "num_kv_heads among"),
    ({"num_layers": 0}, ValueError, "num_layers must be positive"),
    ({"embed_dim": 24, "num_heads": 8}, ValueError, "dim must be even"),
    ({"eps": 0.0}, ValueError, "eps must be positive"),
])
def test_constructor_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        TinyLlama(12, **kwargs)
