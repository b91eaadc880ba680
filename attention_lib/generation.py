"""Generation: write a text one token at a time, each new token predicted from everything before it.

Built step by step in ``notebooks/15_generation.ipynb``. A language model scores every word of its vocabulary as
the next one; :func:`next_token` picks one (the best at temperature 0, a draw otherwise), it is appended, and the
model is asked again. :func:`generation_steps` is that loop, one step at a time; :func:`generate` runs it to the
end. Without a cache every step reads the whole text again; with one (``use_cache=True``, the default, as in
transformers' ``generate``) the prompt is read once and every later step reads one token. The bug gallery, the
explorer's records and the benchmark's per-token timer all run :func:`generation_steps`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NamedTuple

import torch

from .validation import check_bool, check_int, check_number, check_tensor, check_token_ids


class Step(NamedTuple):
    """One step of :func:`generation_steps`: ``tokens (N, P + t + 1)`` so far, the ``new (N, 1)`` token, the model
    ``output`` that scored it (its ``.logits``, and ``.attentions`` with ``need_weights``), and the ``cache``."""

    tokens: torch.Tensor
    new: torch.Tensor
    output: object
    cache: object


def _check_choice(temperature, top_k, generator) -> tuple[float, int | None]:
    """The checks of how the next token is chosen, shared by :func:`next_token` and :func:`generate`."""
    temperature = check_number(temperature, "temperature", fix="use 0.0 for greedy, 1.0 for the model's own odds.")
    if temperature < 0:  # logits / a negative temperature would make the worst token the likeliest
        raise ValueError(f"temperature must be 0 (greedy) or positive, but temperature={temperature}; a negative "
                         f"one draws the worst tokens first. Use 0.0 for greedy, 1.0 for the model's own odds.")
    if top_k is not None:
        top_k = check_int(top_k, "top_k", minimum=1, fix="pass None to draw among all tokens.")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, but got {type(generator).__name__}; use "
                        f"torch.Generator().manual_seed(0).")
    return temperature, top_k


def next_token(logits: torch.Tensor, *, temperature: float = 0.0, top_k: int | None = None,
               generator: torch.Generator | None = None) -> torch.Tensor:
    """Choose the next token from the scores of the last position: ``(N, vocab) -> (N, 1)``.

    Built step by step in ``notebooks/15_generation.ipynb``. At temperature 0 the best-scored token (greedy);
    otherwise a draw from ``softmax(logits / temperature)``, among the ``top_k`` best only when given.

    Args:
        logits: ``(N, vocab)``, the model's scores for the next token.
        temperature: ``0`` for greedy; above 0, how flat the distribution is (1 = the model's own).
        top_k: draw only among the ``top_k`` best tokens (``None``: all of them).
        generator: a seeded ``torch.Generator`` for the draws (``None``: torch's global one).

    Returns:
        ``(N, 1)`` int64 token ids.

    Raises:
        TypeError: if ``logits`` is not a floating-point tensor, ``temperature`` not a number, ``top_k`` not an int
            or ``generator`` not a ``torch.Generator``.
        ValueError: if ``logits`` is not 2-D, ``temperature`` is negative or ``top_k < 1``.

    Example:
        >>> next_token(torch.tensor([[0.1, 2.0, -1.0]]))
        tensor([[1]])
        >>> g = torch.Generator().manual_seed(0)
        >>> next_token(torch.tensor([[0.1, 2.0, -1.0]]), temperature=1.0, top_k=1, generator=g)  # only the best
        tensor([[1]])
    """
    check_tensor(logits, "logits", min_dim=0)  # a tensor of real numbers; its shape is checked next
    if logits.dim() != 2:
        fix = "logits[None]" if logits.dim() == 1 else "model(ids).logits[:, -1]"
        raise ValueError(f"logits must be (N, vocab), the scores of the last position, but logits.shape="
                         f"{tuple(logits.shape)}; pass {fix}.")
    temperature, top_k = _check_choice(temperature, top_k, generator)
    return _choose(logits, temperature, top_k, generator)


def _choose(logits: torch.Tensor, temperature: float, top_k: int | None, generator) -> torch.Tensor:
    """:func:`next_token` without its checks: the decoding loop checks its arguments once, not at every step."""
    if temperature == 0.0:
        return logits.argmax(dim=-1, keepdim=True)  # (N, vocab) -> (N, 1)
    scaled = logits / temperature
    if top_k is not None:  # everything below the k-th best score is never drawn
        kth = scaled.topk(min(top_k, scaled.shape[-1]), dim=-1).values[:, -1:]  # (N, 1)
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    probabilities = torch.softmax(scaled.float(), dim=-1)  # (N, vocab), rows sum to 1
    return torch.multinomial(probabilities, 1, generator=generator)  # (N, 1)


@torch.no_grad()
def generation_steps(model, prompt: torch.Tensor, max_new_tokens: int, *, use_cache: bool = True,
                     temperature: float = 0.0, top_k: int | None = None, generator: torch.Generator | None = None,
                     need_weights: bool = False, cache=None, prefill: Callable | None = None,
                     step: Callable | None = None) -> Iterator[Step]:
    """Generate one token at a time, yielding a :class:`Step` after each: the loop that :func:`generate` runs.

    Built step by step in ``notebooks/15_generation.ipynb``. With ``use_cache`` the model first reads the whole
    prompt into a new cache (the *prefill*), then only the newest token at each step; without, it reads the whole
    text again. The model is called for a step only when the next one is asked for, so stopping early (at an end
    token, say) costs nothing more.

    Args:
        model, prompt, max_new_tokens, use_cache, temperature, top_k, generator: as for :func:`generate`.
        need_weights: ask the model for its attention weights too (``Step.output.attentions``).
        cache: an empty cache to fill (such as a :class:`~attention_lib.ConcatCache`) instead of
            ``model.new_cache(P + max_new_tokens)``; with ``use_cache`` only.
        prefill: ``prefill(prompt, cache)`` instead of ``model(prompt, cache)`` (the bug gallery reads the prompt
            wrongly on purpose); ``step``: ``step(new, cache, S)`` instead of ``model(new, cache)``, ``S`` the
            number of keys once ``new`` is in. Both return the model's output.

    Yields:
        ``max_new_tokens`` steps, ``Step(tokens (N, P + t + 1), new (N, 1), output, cache)``.

    Raises:
        TypeError, ValueError: as for :func:`generate`, at the first step.

    Example:
        >>> from attention_lib import TinyLlama
        >>> _ = torch.manual_seed(0)
        >>> steps = generation_steps(TinyLlama(vocab_size=10).eval(), torch.tensor([[1, 2, 3]]), 4)
        >>> [tuple(s.tokens.shape) for s in steps]
        [(1, 4), (1, 5), (1, 6), (1, 7)]
    """
    max_new_tokens = check_int(max_new_tokens, "max_new_tokens", minimum=0, fix="pass how many tokens to add.")
    check_bool(use_cache, "use_cache")
    check_bool(need_weights, "need_weights")
    temperature, top_k = _check_choice(temperature, top_k, generator)
    check_token_ids(prompt, getattr(getattr(model, "embed_tokens", None), "num_embeddings", None), "prompt")
    if use_cache and not callable(getattr(model, "new_cache", None)):
        raise TypeError(f"use_cache=True needs a model with a new_cache(max_cache_len) method, such as TinyLlama, "
                        f"but {type(model).__name__} has none; pass use_cache=False.")
    if max_new_tokens == 0:
        return
    if use_cache and cache is None:
        cache = model.new_cache(prompt.shape[1] + max_new_tokens)
    tokens = prompt
    for new, output in _decode(model, prompt, max_new_tokens, cache=cache if use_cache else None,
                               use_cache=use_cache, choose=(temperature, top_k, generator), need_weights=need_weights,
                               prefill=prefill, step=step, full_text=not use_cache):
        tokens = torch.cat([tokens, new], dim=1)  # (N, P + t + 1)
        yield Step(tokens, new, output, cache)


def _decode(model, prompt, max_new_tokens, *, cache, use_cache=True, choose=(0.0, None, None), need_weights=False,
            prefill=None, step=None, full_text=False) -> Iterator[tuple[torch.Tensor, object]]:
    """The loop of :func:`generation_steps` without its checks: ``(new (N, 1), output)`` per step, ``max_new_tokens``
    of them. Speculative decoding's draft runs it once per round on arguments checked once per text."""
    if max_new_tokens == 0:
        return
    weights = {"need_weights": True} if need_weights else {}
    if prefill is not None:
        output = prefill(prompt, cache)
    else:  # the prefill: the whole prompt once (without a cache: the first of the full reads)
        output = model(prompt, cache, **weights) if use_cache else model(prompt, **weights)
    tokens, length = prompt, prompt.shape[1]
    for t in range(max_new_tokens):
        new = _choose(output.logits[:, -1], *choose)  # (N, 1)
        length += 1
        if full_text:  # only a loop without a cache reads the whole text again
            tokens = torch.cat([tokens, new], dim=1)
        yield new, output
        if t == max_new_tokens - 1:
            break
        if step is not None:
            output = step(new, cache, length)
        elif use_cache:
            output = model(new, cache, **weights)  # one token in; its keys and values join the cache
        else:
            output = model(tokens, **weights)  # the whole text again


@torch.no_grad()
def generate(model, prompt: torch.Tensor, max_new_tokens: int, *, use_cache: bool = True, temperature: float = 0.0,
             top_k: int | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
    """Continue ``prompt`` by ``max_new_tokens`` tokens, one at a time: ``(N, P) -> (N, P + max_new_tokens)``.

    Built step by step in ``notebooks/15_generation.ipynb``; :func:`generation_steps` run to the end. Each step
    scores the next token at the last position and chooses it with :func:`next_token`. With ``use_cache=True`` the
    model first reads the whole prompt into a cache (the *prefill*), then reads only the newest token at each step;
    with ``False`` it reads the whole text again at every step. Both give the same tokens (up to float rounding in
    near ties). It stops after ``max_new_tokens``, not at an end token: the caller cuts the text after the first
    end token it wants (transformers' ``generate`` stops at ``eos_token_id``).

    Args:
        model: a language model called as ``model(ids, cache)`` that returns ``.logits (N, L, vocab)``, with a
            ``new_cache(max_cache_len)`` method when ``use_cache`` (such as :class:`~attention_lib.TinyLlama`).
        prompt: ``(N, P)`` int64 token ids, ``P >= 1``.
        max_new_tokens: how many tokens to add (0 returns the prompt).
        use_cache: keep the keys and values of earlier tokens instead of recomputing them.
        temperature: ``0`` (greedy) or a positive number (seeded sampling with ``generator``).
        top_k: sample only among the ``top_k`` best tokens (``None``: all).
        generator: a ``torch.Generator`` for the draws, e.g. ``torch.Generator().manual_seed(0)``.

    Returns:
        ``(N, P + max_new_tokens)`` int64: the prompt, then the new tokens.

    Raises:
        TypeError: for an argument of the wrong type (a float prompt, a non-integer count, a generator that
            is not a ``torch.Generator``), or a model without ``new_cache`` when ``use_cache``.
        ValueError: for a prompt that is not ``(N, P)`` ids of the model's vocabulary, a negative count or
            temperature, or ``top_k < 1``.

    Example:
        >>> from attention_lib import TinyLlama
        >>> _ = torch.manual_seed(0)
        >>> model = TinyLlama(vocab_size=10).eval()
        >>> prompt = torch.tensor([[1, 2, 3]])
        >>> out = generate(model, prompt, 4)
        >>> out.shape, torch.equal(out[:, :3], prompt), torch.equal(out, generate(model, prompt, 4, use_cache=False))
        (torch.Size([1, 7]), True, True)
    """
    tokens = prompt
    for done in generation_steps(model, prompt, max_new_tokens, use_cache=use_cache, temperature=temperature,
                                 top_k=top_k, generator=generator):
        tokens = done.tokens
    return tokens
