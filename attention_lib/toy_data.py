"""The course's toy data, in one place: one small sentence you can read by eye, and seeded random tensors.

Every lesson uses the same sentence, "the cat purred softly", and the same notation: ``L`` queries, ``S`` keys
and values, vectors of size ``E`` (queries and keys) and ``Ev`` (values). Introduced in
``notebooks/01_cocktail_party.ipynb``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

#: The toy sentence, one token per word.
TOKENS: tuple[str, ...] = ("the", "cat", "purred", "softly")

#: What each of the 4 hand-made features means (the columns of every toy vector).
FEATURES: tuple[str, ...] = ("animal", "action", "gentle", "grammar")

#: A tiny vocabulary of hand-made embeddings over ``FEATURES`` (one row per word).
VOCAB: dict[str, tuple[float, float, float, float]] = {
    "the": (0.0, 0.0, 0.0, 1.0),
    "a": (0.0, 0.0, 0.0, 0.9),
    "cat": (1.0, 0.0, 0.3, 0.0),
    "dog": (1.0, 0.0, 0.0, 0.0),
    "purred": (0.2, 1.0, 0.8, 0.0),
    "barked": (0.2, 1.0, 0.0, 0.0),
    "sat": (0.0, 0.8, 0.2, 0.0),
    "softly": (0.0, 0.3, 1.0, 0.1),
}

# What each word of TOKENS is looking for (its query), over the same features:
# "the" looks for its noun, "cat" for what it did, "purred" asks "are you a furry animal?",
# "softly" looks for the action it describes.
_QUERIES = {
    "the": (3.0, 0.0, 0.0, 0.0),
    "cat": (0.0, 3.0, 0.0, 0.0),
    "purred": (5.0, 0.0, 0.0, 0.0),
    "softly": (0.0, 4.0, 0.0, 0.0),
}


@dataclass(frozen=True)
class ToySentence:
    """The toy sentence's tokens and its hand-made ``query (L, E)``, ``key (S, E)`` and ``value (S, Ev)``."""

    tokens: tuple[str, ...]
    features: tuple[str, ...]
    embeddings: torch.Tensor
    query: torch.Tensor
    key: torch.Tensor
    value: torch.Tensor


def embed(tokens, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Look up the hand-made embeddings of ``tokens`` in :data:`VOCAB`: shape ``(len(tokens), 4)``.

    Raises:
        ValueError: if a token is not in the vocabulary.

    Example:
        >>> embed(["the", "cat"])
        tensor([[0.0000, 0.0000, 0.0000, 1.0000],
                [1.0000, 0.0000, 0.3000, 0.0000]])
    """
    unknown = [t for t in tokens if t not in VOCAB]
    if unknown:
        raise ValueError(f"unknown tokens {unknown}; the toy vocabulary is {sorted(VOCAB)}.")
    return torch.tensor([VOCAB[t] for t in tokens], dtype=dtype)


def toy_sentence(dtype: torch.dtype = torch.float32) -> ToySentence:
    """The course's sentence "the cat purred softly" with readable, hand-made vectors (on the CPU).

    Keys and values are the words' embeddings (what each word offers and hands over); queries say what each
    word looks for, so "purred" (query ``[5, 0, 0, 0]``: "an animal?") matches "cat" best.

    Example:
        >>> s = toy_sentence()
        >>> s.tokens, tuple(s.query.shape), tuple(s.key.shape), tuple(s.value.shape)
        (('the', 'cat', 'purred', 'softly'), (4, 4), (4, 4), (4, 4))
    """
    emb = embed(TOKENS, dtype)
    query = torch.tensor([_QUERIES[t] for t in TOKENS], dtype=dtype)
    return ToySentence(TOKENS, FEATURES, emb, query, emb.clone(), emb.clone())


#: A batch of sentences of different lengths, for padding masks (lesson 08).
BATCH_SENTENCES: tuple[tuple[str, ...], ...] = (
    ("the", "cat", "purred", "softly"),
    ("the", "dog", "barked"),
    ("a", "cat", "sat"),
)


def sentence_batch(sentences=BATCH_SENTENCES, dtype: torch.dtype = torch.float32):
    """Embed sentences of different lengths into one zero-padded batch.

    Returns:
        ``(embeddings, lengths)``: ``embeddings`` is ``(N, S, 4)`` with zeros after each sentence's end and
        ``lengths`` is a ``(N,)`` int64 tensor.

    Example:
        >>> x, lengths = sentence_batch()
        >>> tuple(x.shape), lengths.tolist()
        ((3, 4, 4), [4, 3, 3])
    """
    longest = max(len(s) for s in sentences)
    x = torch.zeros(len(sentences), longest, len(FEATURES), dtype=dtype)
    for i, sentence in enumerate(sentences):
        x[i, : len(sentence)] = embed(sentence, dtype)
    return x, torch.tensor([len(s) for s in sentences])


def random_qkv(*batch: int, L: int = 4, S: int | None = None, E: int = 8, Ev: int | None = None,
               seed: int = 0, dtype: torch.dtype = torch.float32, device=None):
    """Seeded random ``query (*batch, L, E)``, ``key (*batch, S, E)``, ``value (*batch, S, Ev)``.

    Drawn on the CPU with their own generator (so the same numbers on every device), then moved to
    ``device``. ``S`` defaults to ``L`` and ``Ev`` to ``E``.

    Example:
        >>> q, k, v = random_qkv(2, L=3, S=5, E=4, Ev=6)
        >>> tuple(q.shape), tuple(k.shape), tuple(v.shape)
        ((2, 3, 4), (2, 5, 4), (2, 5, 6))
    """
    S = L if S is None else S
    Ev = E if Ev is None else Ev
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*batch, L, E, generator=g, dtype=dtype)
    k = torch.randn(*batch, S, E, generator=g, dtype=dtype)
    v = torch.randn(*batch, S, Ev, generator=g, dtype=dtype)
    if device is not None:
        q, k, v = q.to(device), k.to(device), v.to(device)
    return q, k, v
