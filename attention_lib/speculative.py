"""Speculative decoding: a small draft writes ``k`` tokens, the target checks them all in one call.

A model that writes one token per forward pass reads all its weights and its whole cache for every token. A
pass over ``k + 1`` new tokens costs about the same as a pass over one, so a cheap *draft* model proposes ``k``
tokens, the *target* reads them all at once over its cache (the bottom-right chunk mask of a chunked prefill,
:func:`~attention_lib.masks.decoding_mask`), keeps the longest prefix it agrees with plus one token of its own,
and both caches are cropped back to the kept text (Leviathan, Kalman & Matias, 2023; Chen et al., 2023).

- greedy (``temperature=0``): a drafted token is kept when it is the target's best; the text is exactly the
  target's own greedy text;
- sampling: a drafted token ``x`` is kept with probability ``min(1, p(x) / q(x))``, else replaced by a draw from
  :func:`residual_distribution` ``max(0, p - q)`` renormalised; the text is then distributed exactly as the
  target's own draws (:func:`output_distribution` sums the paths).

:func:`speculative_rounds` is the loop, one round at a time (the draft's proposals are written by the loop of
:func:`~attention_lib.generation.generation_steps`, the course's one decoding loop, its arguments checked once per
text rather than once per round); :func:`speculative_generate` runs it to the end.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import torch

from .generation import _check_choice, _decode
from .validation import check_int, check_tensor, check_token_ids


class Round(NamedTuple):
    """One round of :func:`speculative_rounds`: ``tokens (1, n)`` so far, how many tokens were ``drafted`` and
    how many of them ``accepted``, the ``new (1, a + 1)`` tokens kept (the accepted ones and the target's), and
    both caches, cropped to the kept text (every token but the newest)."""

    tokens: torch.Tensor
    drafted: int
    accepted: int
    new: torch.Tensor
    target_cache: object
    draft_cache: object


def residual_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """What to draw from after a rejection: ``max(0, p - q)`` renormalised, over the last dimension.

    Where the target gives a token more than the draft did, it was under-proposed; the residual draws those tokens
    in proportion to the shortfall. When ``p == q`` nothing is ever rejected and the residual is ``p`` itself.

    Args:
        p: ``(..., vocab)``, the target's probabilities; q: ``(..., vocab)``, the draft's.

    Returns:
        ``(..., vocab)``, rows that sum to 1.

    Raises:
        TypeError: if ``p`` or ``q`` is not a floating-point tensor.
        ValueError: if their shapes differ.

    Example:
        >>> residual_distribution(torch.tensor([0.5, 0.3, 0.2]), torch.tensor([0.2, 0.6, 0.2]))
        tensor([1., 0., 0.])
    """
    for name, x in (("p", p), ("q", q)):
        check_tensor(x, name, min_dim=1)
    if p.shape != q.shape:
        raise ValueError(f"p and q must be probabilities over the same vocabulary, (..., vocab), but p.shape="
                         f"{tuple(p.shape)} and q.shape={tuple(q.shape)}; pass the target's and the draft's rows.")
    shortfall = (p - q).clamp(min=0)  # (..., vocab)
    total = shortfall.sum(-1, keepdim=True)
    return torch.where(total > 0, shortfall / total.clamp(min=torch.finfo(p.dtype).tiny), p)


def output_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """The exact distribution of the token that the rejection rule writes, summed over its two paths.

    Drafted ``x ~ q`` and kept with probability ``min(1, p(x) / q(x))``: ``min(q(x), p(x))``; or rejected (with
    probability ``1 - sum min(p, q)``) and replaced by a draw from :func:`residual_distribution`. The sum is ``p``:
    speculative sampling writes what the target would.

    Args:
        p, q: ``(..., vocab)``, the target's and the draft's probabilities.

    Returns:
        ``(..., vocab)``: equal to ``p`` up to rounding.

    Example:
        >>> p = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
        >>> q = torch.tensor([0.2, 0.6, 0.2], dtype=torch.float64)
        >>> torch.allclose(output_distribution(p, q), p)
        True
    """
    kept = torch.minimum(p, q)  # q(x) * min(1, p(x) / q(x))
    rejected = 1 - kept.sum(-1, keepdim=True)  # (..., 1)
    return kept + rejected * residual_distribution(p, q)


def accept_greedy(target_logits: torch.Tensor, drafted: torch.Tensor) -> tuple[int, torch.Tensor]:
    """Greedy acceptance: keep the drafted tokens while each is the target's best; then the target's own token.

    Args:
        target_logits: ``(k + 1, vocab)``, the target's scores at the ``k`` drafted positions and the one after.
        drafted: ``(k,)`` the drafted tokens.

    Returns:
        ``(a, token)``: how many drafted tokens are kept, and the target's best token after them, ``(1,)`` (a
        correction when ``a < k``, a bonus when ``a == k``).

    Example:
        >>> accept_greedy(torch.tensor([[0.0, 1.0], [1.0, 0.0], [0.0, 1.0]]), torch.tensor([1, 1]))
        (1, tensor([0]))
    """
    best = target_logits.argmax(-1)  # (k + 1,)
    wanted, proposed = best.tolist(), drafted.tolist()  # one read each, then plain Python
    accepted = 0
    while accepted < len(proposed) and proposed[accepted] == wanted[accepted]:  # the length of the agreeing prefix
        accepted += 1
    return accepted, best[accepted:accepted + 1]


def accept_sampled(p: torch.Tensor, q: torch.Tensor, drafted: torch.Tensor,
                   generator: torch.Generator | None = None) -> tuple[int, torch.Tensor]:
    """The rejection rule: keep drafted token ``x`` with probability ``min(1, p(x) / q(x))``, in order; at the first
    rejection draw from :func:`residual_distribution`; if all are kept, draw a bonus token from the last row of ``p``.

    Args:
        p: ``(k + 1, vocab)``, the target's probabilities; q: ``(k, vocab)``, the draft's; drafted: ``(k,)``.
        generator: a seeded ``torch.Generator`` (``None``: torch's global one).

    Returns:
        ``(a, token)``: how many drafted tokens are kept, and the one drawn after them, ``(1,)``.

    Example:
        >>> p = torch.tensor([[0.0, 1.0], [0.5, 0.5]]); q = torch.tensor([[1.0, 0.0]])
        >>> accept_sampled(p, q, torch.tensor([0]))  # p(0) = 0: always rejected, the residual is token 1
        (0, tensor([1]))
    """
    k = len(drafted)
    rows = torch.arange(k)
    ratio = p[rows, drafted] / q[rows, drafted]  # (k,)
    coins = torch.rand(k, generator=generator, dtype=ratio.dtype)
    kept = (coins < ratio).int()  # p >= q always keeps (a coin is below 1)
    accepted = int(kept.cumprod(0).sum())
    last = p[accepted] if accepted == k else residual_distribution(p[accepted], q[accepted])
    return accepted, torch.multinomial(last.float(), 1, generator=generator)


def _check_pair(target, draft, prompt, num_draft_tokens) -> int:
    for name, model in (("target", target), ("draft", draft)):
        if not callable(getattr(model, "new_cache", None)) or not hasattr(model, "embed_tokens"):
            raise TypeError(f"{name} must be a language model with a cache, such as TinyLlama, but got "
                            f"{type(model).__name__}, which has no new_cache(max_cache_len) method.")
        if getattr(model, "window", None) is not None:
            raise ValueError(f"the {name} has a sliding window ({model.window}): its cache drops old keys and cannot "
                             f"be cropped back after a rejection; use models without a window.")
    vocab, draft_vocab = target.embed_tokens.num_embeddings, draft.embed_tokens.num_embeddings
    if vocab != draft_vocab:
        raise ValueError(f"the draft and the target must share a vocabulary, but the target has {vocab} tokens and "
                         f"the draft {draft_vocab}; train the draft on the target's tokens.")
    check_token_ids(prompt, vocab, "prompt")
    if prompt.shape[0] != 1:
        raise ValueError(f"speculative decoding here writes one text at a time (batch 1: each text accepts a "
                         f"different number of tokens), but prompt.shape={tuple(prompt.shape)}; pass prompt[i:i + 1].")
    return check_int(num_draft_tokens, "num_draft_tokens", minimum=1, fix="draft at least one token per round.")


@torch.no_grad()
def speculative_rounds(target, draft, prompt: torch.Tensor, max_new_tokens: int, *, num_draft_tokens: int = 4,
                       temperature: float = 0.0, generator: torch.Generator | None = None) -> Iterator[Round]:
    """Speculative decoding one round at a time: draft ``k`` tokens, verify them in one target call, keep, roll back.

    Each round: the draft writes ``k`` tokens with the loop of :func:`~attention_lib.generation.generation_steps`
    over its own cache; the target reads every token it has not yet read (the last kept one and the ``k`` drafts)
    in one call, the chunk mask aligned bottom-right as in a chunked prefill; :func:`accept_greedy`
    (``temperature=0``) or :func:`accept_sampled` keeps ``a`` drafts and adds one token; both caches are cropped to
    the kept text. The first round's target call is also the prompt's prefill. A round near the end drafts fewer
    tokens, so that the text stops at exactly ``max_new_tokens``.

    Args:
        target, draft, prompt, max_new_tokens, num_draft_tokens, temperature, generator: as for
            :func:`speculative_generate`.

    Yields:
        :class:`Round` s, until ``max_new_tokens`` tokens are written; one target call each.

    Raises:
        TypeError, ValueError: as for :func:`speculative_generate`, at the first round.
    """
    k = _check_pair(target, draft, prompt, num_draft_tokens)
    max_new_tokens = check_int(max_new_tokens, "max_new_tokens", minimum=0, fix="pass how many tokens to add.")
    temperature, _ = _check_choice(temperature, None, generator)
    size = prompt.shape[1] + max_new_tokens
    target_cache, draft_cache = target.new_cache(size), draft.new_cache(size)
    tokens = prompt
    while tokens.shape[1] < size:
        n, drafts = tokens.shape[1], min(k, size - tokens.shape[1] - 1)  # the last round may draft fewer
        # checked once above, so each round runs the decoding loop itself (generation_steps without its checks)
        steps = list(_decode(draft, tokens[:, draft_cache.get_seq_length():], drafts, cache=draft_cache,
                             choose=(temperature, None, generator)))  # [(new (1, 1), output)] * drafts
        unread = torch.cat([tokens[:, target_cache.get_seq_length():], *(new for new, _ in steps)], dim=1)
        logits = target(unread, target_cache).logits[0, -(drafts + 1):]  # (drafts + 1, vocab)
        drafted = unread[0, unread.shape[1] - drafts:]  # (drafts,)
        if temperature == 0.0:
            accepted, last = accept_greedy(logits, drafted)
        else:
            q = torch.stack([torch.softmax(out.logits[0, -1].double() / temperature, -1) for _, out in steps]) \
                if steps else logits.new_zeros(0, logits.shape[-1], dtype=torch.float64)
            p = torch.softmax(logits.double() / temperature, -1)
            accepted, last = accept_sampled(p, q, drafted, generator)
        new = torch.cat([drafted[:accepted], last])[None]  # (1, a + 1)
        tokens = torch.cat([tokens, new], dim=1)
        target_cache.crop(n + accepted)  # the rejected drafts leave; the new last token is read next round
        draft_cache.crop(min(n + accepted, draft_cache.get_seq_length()))
        yield Round(tokens, drafts, accepted, new, target_cache, draft_cache)


def speculative_generate(target, draft, prompt: torch.Tensor, max_new_tokens: int, *, num_draft_tokens: int = 4,
                         temperature: float = 0.0, generator: torch.Generator | None = None) -> torch.Tensor:
    """Continue ``prompt`` by ``max_new_tokens`` tokens with a draft's help: ``(1, P) -> (1, P + max_new_tokens)``.

    :func:`speculative_rounds` run to the end. At ``temperature=0`` the text is the target's own greedy text
    (:func:`~attention_lib.generate`), token for token, whatever the draft; at a positive temperature it is a draw
    from the target's own distribution. Only the number of target calls depends on the draft: one per round,
    ``1 + accepted`` tokens each. transformers calls this ``generate(..., assistant_model=draft)``.

    Args:
        target: the model whose text is wanted, with ``new_cache`` (such as :class:`~attention_lib.TinyLlama`).
        draft: a smaller model over the same vocabulary, with ``new_cache``.
        prompt: ``(1, P)`` int64 token ids: one text (each text keeps a different number of drafts per round).
        max_new_tokens: how many tokens to add.
        num_draft_tokens: ``k >= 1``, the tokens the draft proposes per round.
        temperature: ``0`` (greedy) or positive (both models' scores divided by it, as in :func:`next_token`).
        generator: a seeded ``torch.Generator`` for the draws and the acceptance coins.

    Returns:
        ``(1, P + max_new_tokens)`` int64: the prompt, then the new tokens.

    Raises:
        TypeError: for a model without a cache, a prompt that is not integer ids, a non-integer count.
        ValueError: for models with different vocabularies or a sliding window, a batch of more than one text,
            ``num_draft_tokens < 1``, a negative count or temperature.

    Example:
        >>> from attention_lib import TinyLlama, generate
        >>> _ = torch.manual_seed(0)
        >>> target, draft = TinyLlama(10, num_layers=2).eval(), TinyLlama(10, embed_dim=8, num_layers=1).eval()
        >>> prompt = torch.tensor([[1, 2, 3]])
        >>> torch.equal(speculative_generate(target, draft, prompt, 8), generate(target, prompt, 8))
        True
    """
    tokens = prompt
    for done in speculative_rounds(target, draft, prompt, max_new_tokens, num_draft_tokens=num_draft_tokens,
                                   temperature=temperature, generator=generator):
        tokens = done.tokens
    return tokens

