"""Lesson 15's experiments: the classic cache bugs, measured with the grammar checker, and where the cache pays.

Built step by step in ``notebooks/15_generation.ipynb``. Each bug is one that users of real libraries report; each
runs without an error and writes fluent words, and :func:`bug_gallery` measures what it does to the grammar:

- ``"top-left mask while decoding"``: SDPA's ``is_causal=True`` (or ``causal_mask(L, S)``) for one new query
  over a cache of ``S`` keys: it sees key 0 alone (pytorch/pytorch#103082, #144858);
- ``"top-left mask in a chunked prefill"``: the prompt read in chunks with the top-left mask, so a chunk's
  queries miss the chunks before them (executorch#21749);
- ``"no mask in the prefill"``: the prompt read without a mask, so its cached keys and values have seen the future;
- ``"positions not offset"``: every new token rotated as if it were at position 0 (LLMs-from-scratch's
  ``current_pos``, transformers' ``cache_position``).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence

import torch

from ..masks import causal_mask
from ..training.generation.texts import END, MAX_LEN, check_sentences, make_texts, prompts_before_the_verb, rates

#: The bugs :func:`decode` knows, each with what it does wrong.
BUGS = {
    "top-left mask while decoding": "each new token is masked with causal_mask(1, S): it sees key 0 alone",
    "top-left mask in a chunked prefill": "the prompt goes in chunks of 4 with causal_mask(4, S): a chunk misses "
                                          "the chunks before it",
    "no mask in the prefill": "the prompt goes in with no mask: each word also sees the words after it",
    "positions not offset": "each new token gets position 0 instead of its own",
}
CHUNK = 4


@torch.no_grad()
def decode(model, prompt: torch.Tensor, max_new_tokens: int, bug: str | None = None, *, stop: int | None = None
           ) -> torch.Tensor:
    """Greedy generation with the cache, done right (``bug=None``) or with one of the :data:`BUGS`.

    Built step by step in ``notebooks/15_generation.ipynb``. ``bug=None`` gives exactly what
    ``attention_lib.generate(model, prompt, max_new_tokens)`` gives.

    Args:
        model: a :class:`~attention_lib.TinyLlama`.
        prompt: ``(N, P)`` token ids.
        max_new_tokens: how many tokens to write.
        bug: ``None`` or a key of :data:`BUGS`.
        stop: a token id (such as the full stop's) after which a text is finished: once every text has
            written it, the rest is left as padding (id 0), to save time.

    Returns:
        ``(N, P + max_new_tokens)``: the prompt, then the new tokens.

    Raises:
        ValueError: for an unknown bug.

    Example:
        >>> from attention_lib.training.generation import load_lm
        >>> from attention_lib import generate
        >>> model = load_lm("mha")[0]
        >>> prompt = torch.tensor([[1, 13, 3, 8, 3, 5]])  # <bos> near the dogs the cat
        >>> torch.equal(decode(model, prompt, 3), generate(model, prompt, 3))
        True
    """
    if bug is not None and bug not in BUGS:
        raise ValueError(f"bug must be None or one of {list(BUGS)}, but bug={bug!r}.")
    P = prompt.shape[1]
    cache = model.new_cache(P + max_new_tokens)
    if bug == "no mask in the prefill":
        logits = model(prompt, cache, attn_mask=torch.ones(P, P, dtype=torch.bool)).logits
    elif bug == "top-left mask in a chunked prefill":
        for start in range(0, P, CHUNK):
            chunk = prompt[:, start:start + CHUNK]
            S = start + chunk.shape[1]  # the keys once this chunk is in
            logits = model(chunk, cache, attn_mask=causal_mask(chunk.shape[1], S)).logits  # top-left: the bug
    else:
        logits = model(prompt, cache).logits
    tokens = prompt
    for step in range(max_new_tokens):
        new = logits[:, -1].argmax(-1, keepdim=True)  # (N, 1): greedy
        tokens = torch.cat([tokens, new], dim=1)
        if step == max_new_tokens - 1:
            break
        if stop is not None and bool((tokens[:, P:] == stop).any(dim=1).all()):  # every text is finished
            return torch.cat([tokens, tokens.new_zeros(len(tokens), max_new_tokens - step - 1)], dim=1)
        S = tokens.shape[1]  # the keys once the new token is in
        if bug == "top-left mask while decoding":
            logits = model(new, cache, attn_mask=causal_mask(1, S)).logits
        elif bug == "positions not offset":
            logits = model(new, cache, offset=0).logits
        else:
            logits = model(new, cache).logits
    return tokens


def complete_with(model, prompts: Sequence[torch.Tensor], bug: str | None = None) -> list[torch.Tensor]:
    """Each prompt (1-D ids) continued up to ``MAX_LEN`` tokens by :func:`decode` with ``bug``; prompts of one
    length go together."""
    out: list[torch.Tensor | None] = [None] * len(prompts)
    for length in sorted({len(p) for p in prompts}):
        rows = [i for i, p in enumerate(prompts) if len(p) == length]
        written = decode(model, torch.stack([prompts[i] for i in rows]), MAX_LEN - length, bug, stop=END)
        for i, text in zip(rows, written, strict=True):
            out[i] = text
    return out


def bug_gallery(model, *, n: int = 200, seed: int = 1500) -> dict[str, dict[str, float]]:
    """What each bug does to the grammar: ``{bug or "no bug": {"well-formed": ..., "agreeing": ...}}``.

    Built step by step in ``notebooks/15_generation.ipynb``. ``n`` seeded sentences of the grammar's training
    structures are cut before their verb; each way of decoding continues every prompt, and
    :func:`~attention_lib.training.generation.check_sentences` reads the results.
    """
    prompts = prompts_before_the_verb(make_texts(n, seed=seed, split="train"))
    return {name: rates(check_sentences(complete_with(model, prompts, bug)))
            for name, bug in (("no bug", None), *((b, b) for b in BUGS))}


@torch.no_grad()
def time_per_token(model, prefixes: Sequence[int] = (4, 16, 64, 256, 1024), *, repeats: int = 5, steps: int = 4,
                   vocab: int | None = None) -> dict[str, list[float]]:
    """Median seconds to write one token after a prefix of each length, ``{"no cache": [...], "cache": [...]}``.

    Built step by step in ``notebooks/15_generation.ipynb``. Both ways run interleaved, ``repeats`` times each;
    without a cache a step reads the whole text again, with one it reads the new token only.
    """
    vocab = model.config["vocab_size"] if vocab is None else vocab
    result: dict[str, list[float]] = {"no cache": [], "cache": []}
    for P in prefixes:
        text = torch.randint(3, vocab, (1, P + steps), generator=torch.Generator().manual_seed(P))
        medians: dict[str, list[float]] = {"no cache": [], "cache": []}
        for r in range(repeats + 1):  # the first round warms up
            for way in (("no cache", "cache") if r % 2 else ("cache", "no cache")):
                times = []
                cache = model.new_cache(P + steps) if way == "cache" else None
                if cache is not None:
                    model(text[:, :P], cache)
                for t in range(P, P + steps):
                    start = time.perf_counter()
                    model(text[:, t:t + 1], cache) if cache is not None else model(text[:, :t + 1])
                    times.append(time.perf_counter() - start)
                if r:
                    medians[way].append(statistics.median(times))
        for way in result:
            result[way].append(statistics.median(medians[way]))
    return result


@torch.no_grad()
def watch_generation(model, prompt: torch.Tensor, max_new_tokens: int) -> list[dict]:
    """Greedy generation with the cache, one record per step: what the newest token saw, and what it wrote.

    Built step by step in ``notebooks/15_generation.ipynb`` (its explorer steps through these records). Step ``t``
    is the query of the last token so far: it attends over the ``S`` tokens in the cache (its own included) and
    the model writes the next token from it.

    Args:
        model: a :class:`~attention_lib.TinyLlama`.
        prompt: ``(P,)`` token ids of one text.
        max_new_tokens: how many steps.

    Returns:
        ``[{"tokens": ids so far (S,), "written": the id chosen, "weights": (layers, H, S), "cache_bytes": int}]``.

    Example:
        >>> from attention_lib.training.generation import encode, load_lm
        >>> steps = watch_generation(load_lm("mha")[0], encode("<bos> the cat"), 2)
        >>> [tuple(s["weights"].shape) for s in steps]
        [(2, 4, 3), (2, 4, 4)]
    """
    cache = model.new_cache(len(prompt) + max_new_tokens)
    tokens = prompt[None]  # (1, P)
    out = model(tokens, cache, need_weights=True)
    steps = []
    for _ in range(max_new_tokens):
        weights = torch.stack([w[0, :, -1] for w in out.attentions])  # (layers, H, S): the newest query's rows
        new = out.logits[:, -1].argmax(-1, keepdim=True)  # (1, 1)
        steps.append({"tokens": tokens[0].clone(), "written": int(new), "weights": weights,
                      "cache_bytes": cache.nbytes()})
        tokens = torch.cat([tokens, new], dim=1)
        out = model(new, cache, need_weights=True)
    return steps
