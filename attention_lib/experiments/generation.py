"""Lesson 15's experiments: the classic cache bugs, measured with the grammar checker, and where the cache pays.

Built step by step in ``notebooks/15_generation.ipynb``. The first two bugs are reported by users of real libraries
(the issues are named); the other three are the lesson's own, slips of the same kind. Each runs without an error and
writes words, and :func:`bug_gallery` measures what it does to the grammar and to the words:

- ``"top-left mask while decoding"``: SDPA's ``is_causal=True`` (or ``causal_mask(L, S)``) for one new query
  over a cache of ``S`` keys: it sees key 0 alone (pytorch/pytorch#103082, #144858);
- ``"top-left mask in a chunked prefill"``: the prompt read in chunks of 4 with the top-left mask ``causal_mask(4,
  S)`` (SDPA's ``is_causal=True``): query ``i`` of a later chunk sees keys ``0..i``, the start of the prompt, and
  misses its own chunk, itself included, and the chunks between (executorch#21749);
- ``"no mask in the prefill"``: the prompt read without a mask, so its cached keys and values have seen the future;
- ``"positions not offset"``: every new token rotated as if it were at position 0 (LLMs-from-scratch's
  ``current_pos``; transformers' ``position_ids``);
- ``"positions one off"``: every new token rotated as if it were one position further (the offset counted from 1):
  its distances to the prompt's keys are one too long (those to the keys the steps wrote are right). It changes
  which words are written (``"text changed"``, against a correct decode) more often than the grammar checker can
  tell, and the logits (against one whole causal pass) show it (:func:`logit_error`).

Every way of decoding here runs the package's one loop, :func:`attention_lib.generation.generation_steps`, with the
bug in how the prompt or a new token is read.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..generation import generation_steps
from ..masks import causal_mask
from ..training.generation.texts import END, MAX_LEN, PAD, check_sentences, make_texts, prompts_before_the_verb, rates

#: The bugs :func:`generate_with_bug` knows, each with what it does wrong.
BUGS = {
    "top-left mask while decoding": "each new token is masked with causal_mask(1, S): it sees key 0 alone",
    "top-left mask in a chunked prefill": "the prompt goes in chunks of 4 with causal_mask(4, S): query i of a later "
                                          "chunk sees keys 0..i, the prompt's start, not its own chunk",
    "no mask in the prefill": "the prompt goes in with no mask: each word also sees the words after it",
    "positions not offset": "each new token gets position 0 instead of its own",
    "positions one off": "each new token gets the position after its own",
}
CHUNK = 4


def _prefill(model, bug):
    """How the prompt is read into the cache, ``prefill(prompt, cache) -> output``, for ``bug``."""
    def no_mask(prompt, cache):
        P = prompt.shape[1]
        return model(prompt, cache, attn_mask=torch.ones(P, P, dtype=torch.bool))

    def chunked(prompt, cache):
        for start in range(0, prompt.shape[1], CHUNK):
            chunk = prompt[:, start:start + CHUNK]
            S = start + chunk.shape[1]  # the keys once this chunk is in
            out = model(chunk, cache, attn_mask=causal_mask(chunk.shape[1], S))  # top-left: the bug
        return out

    return {"no mask in the prefill": no_mask, "top-left mask in a chunked prefill": chunked}.get(bug)


def _step(model, bug):
    """How a new token is read, ``step(new, cache, S) -> output``, for ``bug`` (``None``: the right way)."""
    return {"top-left mask while decoding": lambda new, cache, S: model(new, cache, attn_mask=causal_mask(1, S)),
            "positions not offset": lambda new, cache, S: model(new, cache, offset=0),
            "positions one off": lambda new, cache, S: model(new, cache, offset=S),  # right: S - 1
            }.get(bug)


@torch.no_grad()
def generate_with_bug(model, prompt: torch.Tensor, max_new_tokens: int, bug: str | None = None, *,
                      stop: int | None = None) -> torch.Tensor:
    """Greedy generation with the cache, done right (``bug=None``) or with one of the :data:`BUGS`.

    Built step by step in ``notebooks/15_generation.ipynb``. ``bug=None`` is ``attention_lib.generate(model,
    prompt, max_new_tokens)``; a bug changes how the prompt or a new token is read, in the same loop
    (:func:`~attention_lib.generation.generation_steps`).

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
        >>> torch.equal(generate_with_bug(model, prompt, 3), generate(model, prompt, 3))
        True
    """
    if bug is not None and bug not in BUGS:
        raise ValueError(f"bug must be None or one of {list(BUGS)}, but bug={bug!r}.")
    tokens = prompt
    for step in generation_steps(model, prompt, max_new_tokens, prefill=_prefill(model, bug), step=_step(model, bug)):
        tokens = step.tokens
        if stop is not None and bool((tokens[:, prompt.shape[1]:] == stop).any(dim=1).all()):  # every text is done
            return torch.cat([tokens, tokens.new_zeros(len(tokens), prompt.shape[1] + max_new_tokens
                                                       - tokens.shape[1])], dim=1)
    return tokens


@torch.no_grad()
def _forced(model, text: torch.Tensor, bug: str | None, prompt_length: int):
    """The next-token logits of ``text`` read token by token (with ``bug``) and in one whole causal pass, positions
    ``prompt_length - 1 .. T - 2``, and which of them count: those whose next token is a word (not padding)."""
    whole = model(text).logits  # (N, T, vocab)
    forced = iter(text[:, t:t + 1] for t in range(prompt_length, text.shape[1]))
    read = _step(model, bug) or (lambda new, cache, S: model(new, cache))
    steps = generation_steps(model, text[:, :prompt_length], text.shape[1] - prompt_length,
                             prefill=_prefill(model, bug), step=lambda new, cache, S: read(next(forced), cache, S))
    stepwise = torch.cat([step.output.logits[:, -1:] for step in steps], dim=1)  # the prompt's last position, then
    counted = text[:, prompt_length:] != PAD  # (N, T - P): the input is a word of the text, up to its full stop
    return stepwise, whole[:, prompt_length - 1:-1], counted


@torch.no_grad()
def logit_error(model, text: torch.Tensor, bug: str | None = None, *, prompt_length: int = 3) -> float:
    """The largest difference between the next-token logits of ``text (N, T)`` read token by token (with ``bug``)
    after a prompt of ``prompt_length``, and those of one whole causal pass: ~1e-6 without a bug.

    Built step by step in ``notebooks/15_generation.ipynb``: the test that finds a bug the words do not show. Only
    the positions of the text count, ``prompt_length - 1`` up to its full stop: after it a padded text is padding,
    which training never scored.

    Example:
        >>> from attention_lib.training.generation import encode, load_lm
        >>> logit_error(load_lm("mha")[0], encode("<bos> the cat purrs softly .")[None]) < 1e-4
        True
    """
    stepwise, whole, counted = _forced(model, text, bug, prompt_length)
    return float((stepwise - whole).abs().amax(dim=-1)[counted].max())


@torch.no_grad()
def top_word_flips(model, text: torch.Tensor, bug: str | None = None, *, prompt_length: int = 3) -> float:
    """The share of the positions :func:`logit_error` compares at which the best-scored next word differs between
    ``text`` read token by token (with ``bug``) and one whole causal pass: 0 without a bug.

    Example:
        >>> from attention_lib.training.generation import encode, load_lm
        >>> top_word_flips(load_lm("mha")[0], encode("<bos> the cat purrs softly .")[None])
        0.0
    """
    stepwise, whole, counted = _forced(model, text, bug, prompt_length)
    return float((stepwise.argmax(-1) != whole.argmax(-1))[counted].float().mean())


def complete_with(model, prompts: Sequence[torch.Tensor], bug: str | None = None) -> list[torch.Tensor]:
    """Each prompt (1-D ids) continued up to ``MAX_LEN`` tokens by :func:`generate_with_bug` with ``bug``; prompts
    of one length go together."""
    out: list[torch.Tensor | None] = [None] * len(prompts)
    for length in sorted({len(p) for p in prompts}):
        rows = [i for i, p in enumerate(prompts) if len(p) == length]
        written = generate_with_bug(model, torch.stack([prompts[i] for i in rows]), MAX_LEN - length, bug, stop=END)
        for i, text in zip(rows, written, strict=True):
            out[i] = text
    return out


def gallery_prompts(n: int = 200, *, seed: int = 1500) -> list[torch.Tensor]:
    """The gallery's prompts: ``n`` seeded sentences of the training structures, each cut one word before the word
    that precedes its verb, so that the prefill writes that word and the verb is written by a decoding step.

    Example:
        >>> from attention_lib.training.generation import decode
        >>> decode(gallery_prompts(1, seed=1500)[0])
        '<bos> the big dogs near the big cats behind the big dog behind the white'
    """
    return [p[:-1] for p in prompts_before_the_verb(make_texts(n, seed=seed, split="train"))]


def bug_gallery(model, *, n: int = 200, seed: int = 1500) -> dict[str, dict[str, float]]:
    """What each bug does: ``{bug or "no bug": {"well-formed", "agreeing", "text changed", "logits off",
    "top word flips"}}``.

    Built step by step in ``notebooks/15_generation.ipynb``. The :func:`gallery_prompts` (the verb is written by a
    decoding step, which three of the bugs change, not by the prefill) are continued every way, and
    :func:`~attention_lib.training.generation.check_sentences` reads the results; ``"text changed"`` is the share
    of continuations that differ from the correct decode's. ``"logits off"`` is :func:`logit_error` and ``"top word
    flips"`` :func:`top_word_flips` on 50 whole texts of the same seed read after a prompt of 6 tokens (two chunks).
    """
    prompts = gallery_prompts(n, seed=seed)
    texts = make_texts(50, seed=seed, split="train")[:, :MAX_LEN]
    right = complete_with(model, prompts)
    gallery = {}
    for name, bug in (("no bug", None), *((b, b) for b in BUGS)):
        written = right if bug is None else complete_with(model, prompts, bug)
        changed = sum(not torch.equal(_upto_end(a), _upto_end(b)) for a, b in zip(written, right, strict=True))
        gallery[name] = rates(check_sentences(written)) | {
            "text changed": changed / len(prompts), "logits off": logit_error(model, texts, bug, prompt_length=6),
            "top word flips": top_word_flips(model, texts, bug, prompt_length=6)}
    return gallery


def _upto_end(text: torch.Tensor) -> torch.Tensor:
    """A written text up to and including its first full stop (all of it if it has none)."""
    ends = (text == END).nonzero()
    return text[:int(ends[0]) + 1] if len(ends) else text


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
    records = []
    for step in generation_steps(model, prompt[None], max_new_tokens, need_weights=True):
        weights = torch.stack([w[0, :, -1] for w in step.output.attentions])  # (layers, H, S): the newest query
        records.append({"tokens": step.tokens[0, :-1].clone(), "written": int(step.new), "weights": weights,
                        "cache_bytes": step.cache.nbytes()})
    return records
