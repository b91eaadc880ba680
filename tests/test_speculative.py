"""Speculative decoding against its references: the target's own greedy text (lesson 15's shipped model and random
transformers Llamas copied with from_hf_llama, several k), transformers' assisted generation, the exact output
distribution of the rejection rule, a chi-square test on its draws, and caches after a rejection equal to caches
that never saw the rejected tokens; and its errors."""

import pytest
import torch

from attention_lib import TinyLlama, from_hf_llama, generate, speculative_generate
from attention_lib.speculative import (
    accept_greedy,
    accept_sampled,
    output_distribution,
    residual_distribution,
    speculative_rounds,
)
from attention_lib.training.generation import load_lm, make_texts, prompts_before_the_verb

transformers = pytest.importorskip("transformers", reason="transformers is a test dependency: pip install -e .[test]")
from hf_models import hf_llama  # noqa: E402

VOCAB = 50


def chi_square_p_value(counts: torch.Tensor, expected: torch.Tensor) -> float:
    """Pearson's chi-square test of ``counts`` against ``expected`` counts (cells with expected > 0)."""
    keep = expected > 0
    stat = ((counts[keep] - expected[keep]) ** 2 / expected[keep]).sum()
    df = int(keep.sum()) - 1
    return float(1 - torch.distributions.Chi2(torch.tensor(float(df))).cdf(stat.float()))


@pytest.fixture(scope="module")
def hf_pair():
    """A random transformers target (4 layers x 64) and draft (1 layer x 32), and our copies of them."""
    target = hf_llama(seed=0, vocab_size=VOCAB, num_hidden_layers=4)
    draft = hf_llama(seed=1, vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=1)
    return target, draft, from_hf_llama(target), from_hf_llama(draft)


def prompts(n, P=5, seed=1):
    return torch.randint(0, VOCAB, (n, 1, P), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("k", [1, 2, 4, 8])
def test_greedy_equals_the_targets_own_greedy_text_on_random_llamas(hf_pair, k):
    _, _, target, draft = hf_pair
    for prompt in prompts(4):
        assert torch.equal(speculative_generate(target, draft, prompt, 20, num_draft_tokens=k),
                           generate(target, prompt, 20))


def test_greedy_equals_transformers_assisted_generation(hf_pair):
    target_hf, draft_hf, target, draft = hf_pair
    for prompt in prompts(3, seed=2):
        theirs = target_hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=16,
                                    do_sample=False, assistant_model=draft_hf)
        assert theirs.shape == (1, 21)
        assert torch.equal(speculative_generate(target, draft, prompt, 16, num_draft_tokens=4), theirs)


def test_a_draft_equal_to_the_target_keeps_every_draft_and_adds_a_bonus(hf_pair):
    _, _, target, _ = hf_pair
    prompt = prompts(1)[0]
    rounds = list(speculative_rounds(target, target, prompt, 15, num_draft_tokens=4))
    assert [(r.drafted, r.accepted, r.new.shape[1]) for r in rounds] == [(4, 4, 5), (4, 4, 5), (4, 4, 5)]
    assert torch.equal(rounds[-1].tokens, generate(target, prompt, 15))


def test_a_random_draft_is_rejected_and_still_gives_the_targets_text(hf_pair):
    _, _, target, draft = hf_pair
    prompt = prompts(1)[0]
    rounds = list(speculative_rounds(target, draft, prompt, 20, num_draft_tokens=4))
    assert any(r.accepted < r.drafted for r in rounds)  # the rejection path is exercised
    assert sum(r.new.shape[1] for r in rounds) == 20
    assert all(r.drafted <= 4 for r in rounds)
    assert torch.equal(rounds[-1].tokens, generate(target, prompt, 20))


def test_each_round_calls_the_draft_once_per_drafted_token_and_the_target_once(hf_pair):
    _, _, target, draft = hf_pair
    calls = {"target": 0, "draft": 0}

    def counted(model, name):
        class Counted(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.inner, self.embed_tokens = model, model.embed_tokens

            def new_cache(self, size):
                return model.new_cache(size)

            def forward(self, *args, **kwargs):
                calls[name] += 1
                return model(*args, **kwargs)
        return Counted()

    rounds = list(speculative_rounds(counted(target, "target"), counted(draft, "draft"), prompts(1)[0], 11,
                                     num_draft_tokens=4))
    assert rounds[-1].drafted == 0  # the last round drafts nothing: the target writes the last token alone
    assert calls == {"target": len(rounds), "draft": sum(r.drafted for r in rounds)}


def _filled(model, tokens):
    cache = model.new_cache(64)
    model(tokens, cache)
    return cache


@torch.no_grad()
def test_caches_after_a_rejection_equal_caches_that_never_saw_the_rejected_tokens(hf_pair):
    _, _, target, draft = hf_pair
    rejected = 0
    for r in speculative_rounds(target, draft, prompts(1)[0], 20, num_draft_tokens=4):
        kept = r.tokens[:, :-1]  # every token but the newest, which the next round reads
        assert r.target_cache.get_seq_length() == kept.shape[1]
        assert r.draft_cache.get_seq_length() <= kept.shape[1]
        for cache, model, length in ((r.target_cache, target, kept.shape[1]),
                                     (r.draft_cache, draft, r.draft_cache.get_seq_length())):
            fresh = _filled(model, kept[:, :length])
            for layer in range(cache.num_layers):
                torch.testing.assert_close(cache.keys[layer][:, :, :length], fresh.keys[layer][:, :, :length],
                                           atol=1e-5, rtol=1e-5)
                torch.testing.assert_close(cache.values[layer][:, :, :length], fresh.values[layer][:, :, :length],
                                           atol=1e-5, rtol=1e-5)
        rejected += r.accepted < r.drafted
    assert rejected > 0


@pytest.mark.parametrize("k", [1, 3, 8])
def test_greedy_equals_the_shipped_models_own_text(k):
    target, _ = load_lm("mha", 0)
    torch.manual_seed(0)
    draft = TinyLlama(target.config["vocab_size"], embed_dim=16, num_heads=2, num_layers=1).eval()
    for prompt in prompts_before_the_verb(make_texts(10, seed=7))[:10]:
        prompt = prompt[None]
        assert torch.equal(speculative_generate(target, draft, prompt, 12, num_draft_tokens=k),
                           generate(target, prompt, 12))


def _random_pq(seed, vocab=12, rows=200):
    g = torch.Generator().manual_seed(seed)
    p = torch.distributions.Dirichlet(torch.full((vocab,), 0.5, dtype=torch.float64)).sample((rows,))
    q = torch.distributions.Dirichlet(torch.full((vocab,), 0.5, dtype=torch.float64)).sample((rows,))
    p[:3, 0] = 0.0  # tokens the target never writes, and one row where the draft is the target
    p[:3] /= p[:3].sum(-1, keepdim=True)
    q[3] = p[3]
    return p, q, g


def test_the_rejection_rule_writes_exactly_the_targets_distribution():
    torch.manual_seed(0)
    p, q, _ = _random_pq(0)
    torch.testing.assert_close(output_distribution(p, q), p, atol=1e-12, rtol=0)
    wrong = torch.minimum(p, q) + (1 - torch.minimum(p, q).sum(-1, keepdim=True)) * (p - q).clamp(min=0)
    assert float((wrong - p).abs().max()) > 1e-3  # the residual not renormalised: the check catches it
    torch.testing.assert_close(residual_distribution(p, p), p)
    residual = residual_distribution(p, q)
    torch.testing.assert_close(residual.sum(-1), torch.ones(len(p), dtype=torch.float64), atol=1e-12, rtol=0)
    differ = torch.arange(len(p)) != 3  # row 3: q == p, nothing is ever rejected, the residual is p
    assert bool((residual[differ][p[differ] <= q[differ]] == 0).all())


def test_draws_of_the_rejection_rule_pass_a_chi_square_test_and_the_draft_argmax_fails_it():
    p = torch.tensor([[0.5, 0.25, 0.15, 0.1], [0.25] * 4], dtype=torch.float64)
    q = torch.tensor([[0.1, 0.2, 0.3, 0.4]], dtype=torch.float64)
    g = torch.Generator().manual_seed(0)
    counts, accepted, n = torch.zeros(4, dtype=torch.float64), 0, 20000
    for _ in range(n):
        drafted = torch.multinomial(q[0], 1, generator=g)
        a, token = accept_sampled(p, q, drafted, g)
        counts[drafted if a else token] += 1
        accepted += a
    assert chi_square_p_value(counts, n * p[0]) > 0.01
    assert abs(accepted / n - float(torch.minimum(p[0], q[0]).sum())) < 0.015  # 1 - TV(p, q) = 0.65
    argmax = torch.zeros(4, dtype=torch.float64)  # accepting the draft's argmax, not a draw: always token 3
    argmax[3] = n
    assert chi_square_p_value(argmax, n * p[0]) < 1e-6


def test_speculative_sampling_writes_the_targets_joint_distribution():
    torch.manual_seed(3)
    target, draft = TinyLlama(4, embed_dim=16, num_layers=2).eval(), TinyLlama(4, embed_dim=8, num_layers=1).eval()
    prompt = torch.tensor([[1, 2]])
    with torch.no_grad():  # the exact joint of the next two tokens, from the target alone
        first = torch.softmax(target(prompt).logits[0, -1].double(), -1)
        second = torch.stack([torch.softmax(target(torch.cat([prompt, torch.tensor([[x]])], 1)).logits[0, -1].double(),
                                            -1) for x in range(4)])
    joint = (first[:, None] * second).flatten()  # (16,)
    g, counts, n = torch.Generator().manual_seed(0), torch.zeros(16, dtype=torch.float64), 1500
    for _ in range(n):
        out = speculative_generate(target, draft, prompt, 2, num_draft_tokens=2, temperature=1.0, generator=g)
        counts[4 * out[0, 2] + out[0, 3]] += 1
    assert chi_square_p_value(counts, n * joint) > 0.01


def test_accept_greedy_keeps_the_agreeing_prefix_and_the_targets_next():
    logits = torch.eye(5)[[2, 4, 1, 0]]  # the target's best: 2, 4, 1, then 0
    assert accept_greedy(logits, torch.tensor([2, 4, 1])) == (3, torch.tensor([0]))  # all kept, the bonus
    a, token = accept_greedy(logits, torch.tensor([2, 3, 1]))
    assert (a, token.tolist()) == (1, [4])  # kept until the first disagreement, then the target's token
    a, token = accept_greedy(logits, torch.tensor([0, 4, 1]))
    assert (a, token.tolist()) == (0, [2])


def test_errors_name_the_problem_and_the_fix():
    torch.manual_seed(0)
    target, draft = TinyLlama(10).eval(), TinyLlama(10, embed_dim=8, num_layers=1).eval()
    prompt = torch.tensor([[1, 2, 3]])
    with pytest.raises(ValueError, match="share a vocabulary.*target has 10 tokens and the draft 12"):
        speculative_generate(target, TinyLlama(12).eval(), prompt, 4)
    with pytest.raises(ValueError, match="batch 1.*prompt.shape=\\(2, 3\\).*prompt\\[i:i \\+ 1\\]"):
        speculative_generate(target, draft, prompt.repeat(2, 1), 4)
    with pytest.raises(ValueError, match="num_draft_tokens"):
        speculative_generate(target, draft, prompt, 4, num_draft_tokens=0)
    with pytest.raises(TypeError, match="num_draft_tokens"):
        speculative_generate(target, draft, prompt, 4, num_draft_tokens=2.0)
    with pytest.raises(ValueError, match="sliding window.*cannot be cropped"):
        speculative_generate(target, TinyLlama(10, window=4).eval(), prompt, 4)
    with pytest.raises(TypeError, match="draft must be a language model with a cache.*Linear"):
        speculative_generate(target, torch.nn.Linear(2, 2), prompt, 4)
    with pytest.raises(ValueError, match="temperature must be 0"):
        speculative_generate(target, draft, prompt, 4, temperature=-1.0)
    with pytest.raises(ValueError, match="token ids must lie in 0..9"):
        speculative_generate(target, draft, torch.tensor([[1, 20]]), 4)
    with pytest.raises(ValueError, match="same vocabulary"):
        residual_distribution(torch.ones(3) / 3, torch.ones(4) / 4)
    assert speculative_generate(target, draft, prompt, 0).shape == (1, 3)


def test_the_gallery_loop_without_a_bug_is_the_package_loop_and_its_bugs_do_what_the_lesson_says(hf_pair):
    from attention_lib.experiments.speculative_decoding import GREEDY_BUGS, speculative_with_bug

    _, _, target, draft = hf_pair
    changed = 0
    for prompt in prompts(4):
        plain = generate(target, prompt, 16)
        text, calls = speculative_with_bug(target, target, prompt, 16, 4)
        assert torch.equal(text, plain)
        assert calls == 4  # the target as its own draft keeps every draft and adds a bonus: 16 = 5 + 5 + 5 + 1
        forgot, more_calls = speculative_with_bug(target, target, prompt, 16, 4, GREEDY_BUGS[1])
        assert torch.equal(forgot, plain)
        assert more_calls > calls  # the bonus token forgotten costs calls, not text
        assert torch.equal(speculative_with_bug(target, draft, prompt, 16, 4, GREEDY_BUGS[0])[0], plain)
        changed += not torch.equal(speculative_with_bug(target, draft, prompt, 16, 4, GREEDY_BUGS[2])[0], plain)
    assert changed >= 3  # the top-left mask in the verify pass changes the text


@pytest.mark.parametrize("bug", ["residual not renormalised", "accepting the draft's argmax while sampling"])
def test_the_sampling_bugs_exact_distributions_match_their_draws(bug):
    from attention_lib.experiments.speculative_decoding import chi_square_p_value, draws, sampling_bug

    p = torch.tensor([0.5, 0.25, 0.15, 0.1], dtype=torch.float64)
    q = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
    wrong = sampling_bug(p, q, bug)
    assert float((wrong - p).abs().max()) > 0.05
    torch.testing.assert_close(wrong.sum(), torch.tensor(1.0, dtype=torch.float64))
    counts = draws(p, q, 4000, bug=bug, seed=3)
    assert chi_square_p_value(counts, wrong) > 0.01  # the gallery's formula is what the bug draws
    assert chi_square_p_value(counts, p) < 1e-6
