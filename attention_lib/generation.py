"""Generation: write a text one token at a time, each new token predicted from everything before it.

Built step by step in ``notebooks/15_generation.ipynb``. A language model scores every word of its vocabulary as
the next one; :func:`generate` picks one (the best at temperature 0, a draw otherwise), appends it, and asks
again. Without a cache every step reads the whole text again; with one (``use_cache=True``, the default, as in
transformers' ``generate``) the prompt is read once and every later step reads one token.
"""

from __future__ import annotations

import torch

from .validation import check_bool, check_int, check_number, check_token_ids


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

    Example:
        >>> next_token(torch.tensor([[0.1, 2.0, -1.0]]))
        tensor([[1]])
        >>> g = torch.Generator().manual_seed(0)
        >>> next_token(torch.tensor([[0.1, 2.0, -1.0]]), temperature=1.0, top_k=1, generator=g)  # only the best
        tensor([[1]])
    """
    if temperature == 0.0:
        return logits.argmax(dim=-1, keepdim=True)  # (N, vocab) -> (N, 1)
    scaled = logits / temperature
    if top_k is not None:  # everything below the k-th best score is never drawn
        kth = scaled.topk(min(top_k, scaled.shape[-1]), dim=-1).values[:, -1:]  # (N, 1)
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    probabilities = torch.softmax(scaled.float(), dim=-1)  # (N, vocab), rows sum to 1
    return torch.multinomial(probabilities, 1, generator=generator)  # (N, 1)


@torch.no_grad()
def generate(model, prompt: torch.Tensor, max_new_tokens: int, *, use_cache: bool = True, temperature: float = 0.0,
             top_k: int | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
    """Continue ``prompt`` by ``max_new_tokens`` tokens, one at a time: ``(N, P) -> (N, P + max_new_tokens)``.

    Built step by step in ``notebooks/15_generation.ipynb``. Each step scores the next token at the last
    position and chooses it with :func:`next_token`. With ``use_cache=True`` the model first reads the whole
    prompt into a cache (the *prefill*), then reads only the newest token at each step; with ``False`` it reads
    the whole text again at every step. Both give the same tokens (up to float rounding in near ties).

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
    max_new_tokens = check_int(max_new_tokens, "max_new_tokens", minimum=0, fix="pass how many tokens to add.")
    check_bool(use_cache, "use_cache")
    temperature = check_number(temperature, "temperature", fix="use 0.0 for greedy, 1.0 for the model's own odds.")
    if temperature < 0:
        raise ValueError(f"temperature must be 0 (greedy) or positive, but temperature={temperature}.")
    if top_k is not None:
        top_k = check_int(top_k, "top_k", minimum=1, fix="pass None to draw among all tokens.")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, but got {type(generator).__name__}; use "
                        f"torch.Generator().manual_seed(0).")
    check_token_ids(prompt, getattr(getattr(model, "embed_tokens", None), "num_embeddings", None), "prompt")
    if use_cache and not callable(getattr(model, "new_cache", None)):
        raise TypeError(f"use_cache=True needs a model with a new_cache(max_cache_len) method, such as TinyLlama, "
                        f"but {type(model).__name__} has none; pass use_cache=False.")
    choose = {"temperature": temperature, "top_k": top_k, "generator": generator}
    tokens = prompt
    if max_new_tokens == 0:
        return tokens
    if not use_cache:
        for _ in range(max_new_tokens):  # read the whole text again at every step
            logits = model(tokens).logits[:, -1]  # (N, L, vocab) -> (N, vocab): the last position
            tokens = torch.cat([tokens, next_token(logits, **choose)], dim=1)  # (N, L + 1)
        return tokens
    cache = model.new_cache(prompt.shape[1] + max_new_tokens)
    logits = model(prompt, cache).logits[:, -1]  # the prefill: the whole prompt once, (N, vocab)
    for step in range(max_new_tokens):
        new = next_token(logits, **choose)  # (N, 1)
        tokens = torch.cat([tokens, new], dim=1)
        if step < max_new_tokens - 1:
            logits = model(new, cache).logits[:, -1]  # one token in; its keys and values join the cache
    return tokens
