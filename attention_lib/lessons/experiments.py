"""The small experiments the lessons run and the explorers redraw: each one a plain, tested function.

Every function here computes through the package's own steps (``matchmaker``, ``scaler``, ``percentages``,
``calculate_attention``, ``MultiHeadAttention``), so what a lesson prints and what its explorer draws come from
the same code. The explorers in :mod:`attention_lib.widgets` only wire these to sliders.
"""

from __future__ import annotations

import torch

from ..attention import matchmaker, percentages, scaler
from ..masks import causal_mask, padding_mask
from ..multihead import MultiHeadAttention
from ..validation import check_number
from .data import FEATURES, toy_sentence

#: The masks of lesson 08's explorer.
MASK_KINDS: tuple[str, ...] = ("none", "causal", "padding", "causal + padding")


def scaler_weights(d_k: int, scaled: bool = True, *, queries: int = 200, keys: int = 8,
                   seed: int = 0) -> torch.Tensor:
    """Attention weights ``(queries, keys)`` for random unit-variance queries and keys of size ``d_k``.

    Built step by step in ``notebooks/04_scaler.ipynb``.

    Args:
        d_k: the size ``E`` of each query and key vector (a positive integer).
        scaled: divide the scores by ``√d_k`` (the scaler) before the softmax.
        queries, keys: how many random queries ``L`` and keys ``S`` to draw.
        seed: the seed of the CPU generator, so the same ``d_k`` always gives the same weights.

    Returns:
        The weights ``(L, S)``, each row summing to 1.

    Raises:
        ValueError: if ``d_k``, ``queries`` or ``keys`` is not a positive integer.

    Example:
        >>> w = scaler_weights(16, queries=3, keys=5)
        >>> tuple(w.shape), torch.allclose(w.sum(-1), torch.ones(3))
        ((3, 5), True)
    """
    for name, size in (("d_k", d_k), ("queries", queries), ("keys", keys)):
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"{name} must be a positive integer, but {name}={size!r}; try {name}=64.")
    g = torch.Generator().manual_seed(seed)
    query = torch.randn(queries, d_k, generator=g)  # (L, E)
    key = torch.randn(keys, d_k, generator=g)  # (S, E)
    scores = matchmaker(query, key)  # (L, E) @ (E, S) -> (L, S)
    if scaled:
        scores = scaler(scores, d_k)
    return percentages(scores)


def temperature_weights(temperature: float = 1.0) -> torch.Tensor:
    """The toy sentence's attention weights ``(L, S)`` with the scaled scores divided by ``temperature``.

    Built step by step in ``notebooks/05_percentages.ipynb``.

    Args:
        temperature: a positive number; ``1`` is plain attention.

    Returns:
        The weights ``(4, 4)``, one row per word of "the cat purred softly", each summing to 1.

    Raises:
        TypeError: if ``temperature`` is not a number.
        ValueError: if it is not a finite positive number.

    Example:
        >>> temperature_weights(1.0)[2].round(decimals=2)  # "purred" looks at "cat"
        tensor([0.0600, 0.7700, 0.1000, 0.0600])
    """
    temperature = check_number(temperature, "temperature", positive=True, fix="use 1.0 for plain softmax.")
    s = toy_sentence()
    scores = scaler(matchmaker(s.query, s.key), s.query.size(-1))  # (L, S)
    return percentages(scores / temperature)


def batch_mask(kind: str, lengths: torch.Tensor, S: int) -> torch.Tensor:
    """The bool mask ``(N, S, S)`` of one of :data:`MASK_KINDS` for a padded batch (``True`` = may attend).

    Built step by step in ``notebooks/08_masking.ipynb``.

    Args:
        kind: one of ``"none"``, ``"causal"``, ``"padding"``, ``"causal + padding"``.
        lengths: ``(N,)``, the number of real tokens of each sentence.
        S: the padded length.

    Returns:
        A bool tensor ``(N, S, S)``: ``[n, i, j]`` says whether word ``i`` of sentence ``n`` may attend to
        word ``j``.

    Raises:
        ValueError: if ``kind`` is not one of :data:`MASK_KINDS`.

    Example:
        >>> batch_mask("causal + padding", torch.tensor([2]), 3).int()
        tensor([[[1, 0, 0],
                 [1, 1, 0],
                 [1, 1, 0]]], dtype=torch.int32)
    """
    if kind not in MASK_KINDS:
        raise ValueError(f"kind must be one of {MASK_KINDS}, but kind={kind!r}.")
    N = lengths.shape[0]
    mask = torch.ones(N, S, S, dtype=torch.bool, device=lengths.device)  # (N, L, S) with L = S: self-attention
    if "causal" in kind:
        mask = mask & causal_mask(S, S, device=lengths.device)  # (N, L, S) & (L, S) -> (N, L, S)
    if "padding" in kind:
        mask = mask & padding_mask(lengths, S)  # (N, L, S) & (N, 1, S) -> (N, L, S)
    return mask


def detective_projections(clues: tuple[str, str] = ("animal", "action"), loudness: float = 5.0):
    """The hand-made projections ``W_q, W_k, W_v, W_o`` (each ``(E, E)``, ``E = 4``) of lesson 09's two detectives.

    Built step by step in ``notebooks/09_detective_team.ipynb``. Rows 0-1 of each matrix belong to detective 0,
    rows 2-3 to detective 1. Detective 0's questions are asked by grammar words and actions, detective 1's by
    animals and gentle words, each ``loudness`` strong; detective ``h``'s keys advertise the feature
    ``clues[h]``, so ``clues`` says what each detective looks for. ``W_v`` hands detective 0 the features
    animal and grammar, detective 1 action and gentle; ``W_o = W_vᵀ`` puts them back in order.

    Args:
        clues: the feature each detective's keys advertise, two of ``attention_lib.lessons.data.FEATURES``.
        loudness: how strongly the questions are asked (it multiplies the queries), a number ``>= 0``.

    Returns:
        ``(W_q, W_k, W_v, W_o)``, each ``(4, 4)`` and stored like ``nn.Linear.weight``, ``(out, in)``.

    Raises:
        ValueError: if a clue is not a feature or ``loudness`` is negative.

    Example:
        >>> W_q, W_k, W_v, W_o = detective_projections(("gentle", "action"))
        >>> W_k[0].tolist()  # detective 0's keys now advertise "gentle"
        [0.0, 0.0, 1.0, 0.0]
    """
    if len(clues) != 2 or any(c not in FEATURES for c in clues):
        raise ValueError(f"clues must be two of {list(FEATURES)} (one per detective), but clues={clues!r}.")
    if isinstance(loudness, bool) or not isinstance(loudness, int | float) or not loudness >= 0:
        raise ValueError(f"loudness must be a number >= 0, but loudness={loudness!r}; the lesson uses 5.0.")
    animal, action, gentle, grammar = range(4)
    W_q = torch.zeros(4, 4)
    for row, asker in enumerate((grammar, action, animal, gentle)):  # who asks each detective's questions
        W_q[row, asker] = float(loudness)
    W_k = torch.zeros(4, 4)
    for h, clue in enumerate(clues):  # each detective's two key rows advertise its clue
        W_k[2 * h : 2 * h + 2, FEATURES.index(clue)] = 1.0
    W_v = torch.zeros(4, 4)
    for row, feature in enumerate((animal, grammar, action, gentle)):
        W_v[row, feature] = 1.0
    return W_q, W_k, W_v, W_v.T.clone()


def detective_team(clues: tuple[str, str] = ("animal", "action"), loudness: float = 5.0,
                   num_heads: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """Run lesson 09's detectives on "the cat purred softly" with :class:`attention_lib.MultiHeadAttention`.

    Built step by step in ``notebooks/09_detective_team.ipynb``. With ``num_heads=2`` each detective attends
    with its own softmax; with ``num_heads=1`` the same four query and key numbers go to one lone detective,
    whose single softmax must share each word's attention between both clues.

    Args:
        clues: the feature each detective looks for (see :func:`detective_projections`).
        loudness: how strongly the questions are asked.
        num_heads: ``1`` (one lone detective) or ``2`` (the team); any divisor of ``E = 4`` works.

    Returns:
        ``(output, weights)``: the new vectors ``(L, E) = (4, 4)`` and the per-head weights ``(H, L, S)``.

    Raises:
        ValueError: as :func:`detective_projections`, or if ``num_heads`` does not divide 4.

    Example:
        >>> _, w = detective_team()
        >>> w.shape, round(float(w[0, 2, 1]), 3)  # detective 0 sends "purred" to "cat"
        (torch.Size([2, 4, 4]), 0.895)
    """
    weights = detective_projections(clues, loudness)
    module = MultiHeadAttention(embed_dim=4, num_heads=num_heads, bias=False)
    with torch.no_grad():
        for layer, W in zip((module.q_proj, module.k_proj, module.v_proj, module.out_proj), weights, strict=True):
            layer.weight.copy_(W)
        x = toy_sentence().embeddings.unsqueeze(0)  # (N, L, E) = (1, 4, 4)
        output, per_head = module(x, x, x)  # (1, L, E), (1, H, L, S)
    return output[0], per_head[0]

