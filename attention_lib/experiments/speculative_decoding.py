"""The experiments of ``notebooks/18_speculative_decoding.ipynb``: what one model call costs for 1 or more new
tokens, speculative decoding timed against plain cached greedy (the methods taking turns), and the bug gallery.

The gallery's greedy loop is :func:`~attention_lib.speculative.speculative_rounds` written out once more with one
switch per bug; its sampling bugs are the rejection rule at one position, where the exact distribution it writes
can be summed over its paths and compared with the target's.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch

from ..generation import generate, generation_steps
from ..masks import causal_mask
from ..speculative import (
    accept_greedy,
    accept_sampled,
    output_distribution,
    residual_distribution,
    speculative_generate,
)

#: The gallery's greedy bugs (what each changes in the loop), then its sampling bugs.
GREEDY_BUGS = ("draft cache not rolled back", "bonus token forgotten", "top-left mask in the verify pass")
SAMPLING_BUGS = ("residual not renormalised", "accepting the draft's argmax while sampling")


@torch.no_grad()
def time_call(model, rows: int, *, cached: int = 16, repeats: int = 50) -> float:
    """Seconds for one call of ``model`` on ``rows`` new tokens over ``cached`` cached ones (the median of
    ``repeats``): what a verify pass of ``rows - 1`` drafts costs, against a decoding step (``rows=1``)."""
    cache = model.new_cache(cached + rows)
    model(torch.ones(1, cached, dtype=torch.long), cache)
    times = []
    for _ in range(repeats):
        new = torch.ones(1, rows, dtype=torch.long)
        start = time.perf_counter()
        model(new, cache)
        times.append(time.perf_counter() - start)
        cache.crop(cached)
    return sorted(times)[len(times) // 2]


def race(target, draft, prompts: Sequence[torch.Tensor], lengths: Sequence[int], ks: Sequence[int],
         repeats: int = 3) -> dict[str, list[float]]:
    """Wall time of plain cached greedy and of speculative decoding at each ``k``, taking turns prompt by prompt
    (so that a busy machine slows every method alike), ``repeats`` times; every text is checked equal to the
    target's.

    Returns:
        ``{"plain": [seconds per repeat], "k=1": [...], ...}``.

    Raises:
        AssertionError: if a speculative text differs from the plain one (it never should).
    """
    times = {"plain": [0.0] * repeats} | {f"k={k}": [0.0] * repeats for k in ks}
    for r in range(repeats):
        for prompt, n in zip(prompts, lengths, strict=True):
            start = time.perf_counter()
            plain = generate(target, prompt[None], n)
            times["plain"][r] += time.perf_counter() - start
            for k in ks:
                start = time.perf_counter()
                fast = speculative_generate(target, draft, prompt[None], n, num_draft_tokens=k)
                times[f"k={k}"][r] += time.perf_counter() - start
                assert torch.equal(fast, plain), "a speculative text differs from the target's"
    return times


@torch.no_grad()
def speculative_with_bug(target, draft, prompt: torch.Tensor, max_new_tokens: int, k: int,
                         bug: str | None = None) -> tuple[torch.Tensor, int]:
    """Greedy speculative decoding of ``prompt (1, P)`` with one of :data:`GREEDY_BUGS` (``None``: none).

    Returns:
        ``(tokens (1, P + max_new_tokens), target calls)``.
    """
    if bug is not None and bug not in GREEDY_BUGS:
        raise ValueError(f"bug must be None or one of {list(GREEDY_BUGS)}, but bug={bug!r}.")
    size = prompt.shape[1] + max_new_tokens
    target_cache, draft_cache = target.new_cache(size), draft.new_cache(size * (k + 1))  # room when never cropped
    tokens, calls, fresh = prompt, 0, prompt.shape[1]  # fresh: the newest tokens the draft has not read
    while tokens.shape[1] < size:
        n, drafts = tokens.shape[1], min(k, size - tokens.shape[1] - 1)
        if bug == GREEDY_BUGS[0]:  # the draft's cache still holds every draft, rejected or not
            pending = tokens[:, n - fresh:]
        else:
            draft_cache.crop(min(n - 1, draft_cache.get_seq_length()))
            pending = tokens[:, draft_cache.get_seq_length():]
        steps = list(generation_steps(draft, pending, drafts, cache=draft_cache))
        drafted = torch.cat([s.new for s in steps], dim=1) if steps else tokens[:, :0]
        unread = torch.cat([tokens[:, target_cache.get_seq_length():], drafted], dim=1)
        S = target_cache.get_seq_length() + unread.shape[1]
        mask = causal_mask(unread.shape[1], S) if bug == GREEDY_BUGS[2] else None  # top-left: the start of the text
        logits = target(unread, target_cache, attn_mask=mask).logits[0, -(drafts + 1):]
        calls += 1
        accepted, last = accept_greedy(logits, drafted[0])
        if bug == GREEDY_BUGS[1] and accepted == drafts > 0:  # every draft kept, the target's own token dropped
            new = drafted
            target_cache.crop(n + accepted - 1)
        else:
            new = torch.cat([drafted[:, :accepted], last[None]], dim=1)
            target_cache.crop(n + accepted)
        tokens = torch.cat([tokens, new], dim=1)
        fresh = 2 if accepted == drafts > 0 else 1  # the last draft (never read by the draft) and the target's own
    return tokens[:, :size], calls


def greedy_gallery(target, draft, prompts: Sequence[torch.Tensor], lengths: Sequence[int], k: int = 4
                   ) -> dict[str, dict[str, float]]:
    """Each greedy bug (and ``"no bug"``) on every prompt: the share of texts equal to the target's greedy text, and
    the tokens written per target call.

    Example:
        >>> from attention_lib import TinyLlama
        >>> _ = torch.manual_seed(0)
        >>> model = TinyLlama(10).eval()
        >>> greedy_gallery(model, model, [torch.tensor([1, 2])], [8])["no bug"]
        {'same text': 1.0, 'per call': 4.0}
    """
    out = {}
    for bug in (None, *GREEDY_BUGS):
        same = calls = written = 0
        for prompt, n in zip(prompts, lengths, strict=True):
            text, c = speculative_with_bug(target, draft, prompt[None], n, k, bug)
            same += torch.equal(text, generate(target, prompt[None], n))
            calls, written = calls + c, written + n
        out[bug or "no bug"] = {"same text": same / len(prompts), "per call": written / calls}
    return out


def sampling_bug(p: torch.Tensor, q: torch.Tensor, bug: str | None = None) -> torch.Tensor:
    """The exact distribution of the token the rejection rule writes at one position, with one of
    :data:`SAMPLING_BUGS` (``None``: the rule itself, :func:`~attention_lib.speculative.output_distribution`).

    - ``"residual not renormalised"``: after a rejection the next token is drawn by comparing one uniform number
      with the running sum of ``max(0, p - q)`` (inverse transform sampling); without the division, the sum stops
      short of 1 and the draws that fall past it land on the last token;
    - ``"accepting the draft's argmax while sampling"``: the draft proposes its best token instead of a draw from
      ``q``, while the rule still divides by ``q``.

    Example:
        >>> p = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
        >>> q = torch.tensor([0.2, 0.6, 0.2], dtype=torch.float64)
        >>> torch.allclose(sampling_bug(p, q), p), sampling_bug(p, q, "residual not renormalised").round(decimals=2)
        (True, tensor([0.2900, 0.3000, 0.4100], dtype=torch.float64))
    """
    if bug is None:
        return output_distribution(p, q)
    kept = torch.minimum(p, q)
    rejected = 1 - kept.sum(-1, keepdim=True)
    if bug == SAMPLING_BUGS[0]:
        shortfall = (p - q).clamp(min=0)
        drawn = shortfall.clone()
        drawn[..., -1] += 1 - shortfall.sum(-1)  # what lies past the unnormalised sum goes to the last token
        return kept + rejected * drawn
    if bug == SAMPLING_BUGS[1]:
        best = q.argmax(-1, keepdim=True)
        keep = (p.gather(-1, best) / q.gather(-1, best)).clamp(max=1)  # (..., 1)
        return torch.zeros_like(p).scatter(-1, best, keep) + (1 - keep) * residual_distribution(p, q)
    raise ValueError(f"bug must be None or one of {list(SAMPLING_BUGS)}, but bug={bug!r}.")


def draws(p: torch.Tensor, q: torch.Tensor, n: int, *, bug: str | None = None, seed: int = 0) -> torch.Tensor:
    """Counts ``(vocab,)`` of ``n`` tokens written by the rejection rule at one position (``bug``: as for
    :func:`sampling_bug`), each a draft from ``q`` (its argmax for the argmax bug) accepted or replaced.

    Example:
        >>> p = torch.tensor([0.5, 0.5], dtype=torch.float64)
        >>> int(draws(p, p, 10).sum())
        10
    """
    g = torch.Generator().manual_seed(seed)
    counts = torch.zeros(len(p), dtype=torch.float64)
    rows = torch.stack([p, p])  # the last row would give the bonus token; one draft, so row 0 decides
    for _ in range(n):
        drafted = q.argmax()[None] if bug == SAMPLING_BUGS[1] else torch.multinomial(q, 1, generator=g)
        if bug == SAMPLING_BUGS[0]:
            keep = torch.rand(1, generator=g, dtype=p.dtype) < p[drafted] / q[drafted]
            shortfall = (p - q).clamp(min=0).cumsum(0)
            u = torch.rand(1, generator=g, dtype=p.dtype)
            token = drafted if keep else torch.searchsorted(shortfall, u).clamp(max=len(p) - 1)
        else:
            accepted, token = accept_sampled(rows, q[None], drafted, g)
            token = drafted if accepted else token
        counts[token] += 1
    return counts


def chi_square_p_value(counts: torch.Tensor, probabilities: torch.Tensor, *, smallest: float = 5.0) -> float:
    """Pearson's chi-square test of ``counts`` against ``probabilities``: the chance of a deviation at least this
    large if the draws came from ``probabilities``. Tokens expected fewer than ``smallest`` times are pooled into one
    cell (the test's approximation needs about 5 per cell); a token of probability 0 that was drawn gives 0.0.

    Example:
        >>> round(chi_square_p_value(torch.tensor([50.0, 50.0]), torch.tensor([0.5, 0.5])), 3)
        1.0
    """
    counts, probabilities = counts.double(), probabilities.double()
    expected = counts.sum() * probabilities
    if bool((counts[expected == 0] > 0).any()):
        return 0.0
    small = expected < smallest
    observed = torch.cat([counts[~small], counts[small].sum()[None]])
    expected = torch.cat([expected[~small], expected[small].sum()[None]])
    keep = expected > 0
    stat = ((observed[keep] - expected[keep]) ** 2 / expected[keep]).sum()
    df = torch.tensor(float(int(keep.sum()) - 1))
    return float(1 - torch.distributions.Chi2(df).cdf(stat.float()))
