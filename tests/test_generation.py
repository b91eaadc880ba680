"""generate: the prompt comes back first, the cached loop writes the same tokens as the uncached one (greedy and
seeded sampling; MHA, GQA, MQA, with RoPE, with a sliding window), sampling follows temperature and top_k, and bad
arguments get clear errors."""

import pytest
import torch

from attention_lib import TinyLlama, generate, next_token

pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py


def llama(kv=2, window=None, seed=0):
    torch.manual_seed(seed)
    model = TinyLlama(20, embed_dim=32, num_heads=4, num_kv_heads=kv, num_layers=2, window=window).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.3)  # far from ties, so greedy choices are clear-cut
    return model


PROMPT = torch.tensor([[1, 5, 7, 2], [3, 3, 9, 11]])


@pytest.mark.parametrize(("kv", "window"), [(4, None), (2, None), (1, None), (2, 3), (1, 5)])
def test_cached_and_uncached_write_the_same_tokens(kv, window):
    model = llama(kv, window)
    greedy = generate(model, PROMPT, 16)
    assert torch.equal(greedy, generate(model, PROMPT, 16, use_cache=False))
    for seed in (0, 1):
        sampled = [generate(model, PROMPT, 16, use_cache=c, temperature=1.0,
                            generator=torch.Generator().manual_seed(seed)) for c in (True, False)]
        assert torch.equal(*sampled)
        assert not torch.equal(sampled[0], greedy)  # sampling does draw


def test_cached_logits_equal_the_whole_pass():
    model = llama(kv=2, window=4)
    tokens = generate(model, PROMPT, 10)
    whole = model(tokens).logits
    cache = model.new_cache(tokens.shape[1])
    steps = [model(tokens[:, :4], cache).logits] + [model(tokens[:, t:t + 1], cache).logits for t in range(4, 14)]
    torch.testing.assert_close(torch.cat(steps, dim=1), whole, atol=1e-5, rtol=1e-5)


def test_the_prompt_comes_first_and_greedy_takes_the_best_token():
    model = llama()
    out = generate(model, PROMPT, 3)
    assert out.shape == (2, 7)
    assert out.dtype == torch.long
    assert torch.equal(out[:, :4], PROMPT)
    assert torch.equal(out[:, 4], model(PROMPT).logits[:, -1].argmax(-1))
    assert torch.equal(generate(model, PROMPT, 0), PROMPT)


def test_seeded_sampling_repeats_and_other_seeds_differ():
    model = llama()
    draw = lambda seed: generate(model, PROMPT, 20, temperature=1.5, generator=torch.Generator().manual_seed(seed))
    assert torch.equal(draw(3), draw(3))
    assert not torch.equal(draw(3), draw(4))


def test_top_k_one_is_greedy_and_top_k_limits_the_draws():
    logits = torch.tensor([[0.0, 3.0, 2.9, -1.0]]).expand(4000, 4)
    g = torch.Generator().manual_seed(0)
    assert bool((next_token(logits, temperature=1.0, top_k=1, generator=g) == 1).all())
    drawn = next_token(logits, temperature=1.0, top_k=2, generator=g)
    assert set(drawn.flatten().tolist()) == {1, 2}
    everything = next_token(logits, temperature=1.0, generator=g)
    assert set(everything.flatten().tolist()) == {0, 1, 2, 3}


def test_temperature_sharpens_and_flattens():
    logits = torch.tensor([[0.0, 1.0]]).expand(20000, 2)
    share = {t: float(next_token(logits, temperature=t, generator=torch.Generator().manual_seed(0)).float().mean())
             for t in (0.25, 1.0, 4.0)}
    expected = {t: float(torch.softmax(torch.tensor([0.0, 1.0]) / t, 0)[1]) for t in share}
    for t in share:
        assert abs(share[t] - expected[t]) < 0.015, (t, share[t], expected[t])
    assert share[0.25] > share[1.0] > share[4.0]


class NoCache(torch.nn.Module):
    """A model without new_cache: it scores token 0 best at every position."""

    def forward(self, ids):
        return type("Out", (), {"logits": torch.zeros(*ids.shape, 3).index_fill(-1, torch.tensor([0]), 1.0)})()


def test_a_model_without_a_cache_generates_with_use_cache_false():
    assert generate(NoCache(), PROMPT, 2, use_cache=False)[:, 4:].tolist() == [[0, 0], [0, 0]]
    with pytest.raises(TypeError, match="needs a model with a new_cache.*pass use_cache=False"):
        generate(NoCache(), PROMPT, 2)


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"max_new_tokens": -1}, ValueError, "max_new_tokens must be non-negative"),
    ({"max_new_tokens": 2.0}, TypeError, "max_new_tokens must be an int"),
    ({"temperature": -0.5}, ValueError, "temperature must be 0 .greedy. or positive"),
    ({"temperature": "hot"}, TypeError, "temperature must be a number"),
    ({"top_k": 0}, ValueError, "top_k must be positive"),
    ({"generator": 0}, TypeError, r"generator must be a torch.Generator.*manual_seed\(0\)"),
    ({"use_cache": 1}, TypeError, "use_cache must be True or False"),
    ({"prompt": PROMPT.float()}, TypeError, "prompt must be integer token ids"),
    ({"prompt": PROMPT[0]}, ValueError, r"prompt must be \(N, L\) token ids"),
    ({"prompt": torch.tensor([[1, 20]])}, ValueError, r"0..19 .*found \[20\]"),
])
def test_errors(kwargs, error, match):
    args = {"prompt": PROMPT, "max_new_tokens": 2} | kwargs
    with pytest.raises(error, match=match):
        generate(llama(), args.pop("prompt"), args.pop("max_new_tokens"), **args)


@pytest.mark.parametrize(("logits", "kwargs", "error", "match"), [
    (torch.zeros(2, 5), {"temperature": -1.0}, ValueError, r"temperature must be 0 \(greedy\) or positive.*worst"),
    (torch.zeros(2, 5), {"temperature": 1.0, "top_k": 0}, ValueError, "top_k must be positive"),
    (torch.zeros(2, 5), {"temperature": 1.0, "top_k": 2.5}, TypeError, "top_k must be an int"),
    (torch.zeros(2, 5), {"temperature": "hot"}, TypeError, "temperature must be a number"),
    (torch.zeros(2, 5), {"temperature": 1.0, "generator": 0}, TypeError, "generator must be a torch.Generator"),
    (torch.zeros(2, 3, 5), {}, ValueError, r"logits must be \(N, vocab\).*logits\[:, -1\]"),
    (torch.zeros(5), {}, ValueError, r"logits must be \(N, vocab\).*shape=\(5,\); pass logits\[None\]"),
    (torch.zeros(2, 5, dtype=torch.long), {}, TypeError, "logits must be a floating-point tensor"),
    ([[0.0, 1.0]], {}, TypeError, "logits must be a torch.Tensor"),
])
def test_next_token_checks_every_argument(logits, kwargs, error, match):
    with pytest.raises(error, match=match):
        next_token(logits, **kwargs)


def test_generation_steps_yield_what_generate_returns_and_call_the_model_only_when_asked():
    from attention_lib.generation import generation_steps

    model = llama()
    calls = []
    steps = generation_steps(model, PROMPT, 5, step=lambda new, cache, S: calls.append(S) or model(new, cache))
    first = next(steps)
    assert first.tokens.shape == (2, 5)
    assert calls == []
    rest = list(steps)
    assert calls == [5, 6, 7, 8]  # one call per later token (S keys once it is in), none after the last
    assert torch.equal(rest[-1].tokens, generate(model, PROMPT, 5))
    assert torch.equal(torch.cat([s.new for s in [first, *rest]], dim=1), rest[-1].tokens[:, 4:])
