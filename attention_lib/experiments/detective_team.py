"""Lesson 09's experiment: two hand-made detectives, run through :class:`attention_lib.MultiHeadAttention`."""

from __future__ import annotations

import torch

from ..multihead import MultiHeadAttention
from ..toy_data import FEATURES, toy_sentence
from ..validation import check_number


def detective_projections(clues: tuple[str, str] = ("animal", "action"), loudness: float = 5.0):
    """The hand-made projections ``W_q, W_k, W_v, W_o`` (each ``(E, E)``, ``E = 4``) of lesson 09's two detectives.

    Used by :func:`detective_team` in ``notebooks/09_detective_team.ipynb``. Rows 0-1 of each matrix belong to
    detective 0, rows 2-3 to detective 1. Detective 0's questions are asked by grammar words and actions,
    detective 1's by animals and gentle words, each ``loudness`` strong; detective ``h``'s keys advertise the feature
    ``clues[h]``, so ``clues`` says what each detective looks for. ``W_v`` hands detective 0 the features
    animal and grammar, detective 1 action and gentle; ``W_o = W_vᵀ`` puts them back in order.

    Args:
        clues: the feature each detective's keys advertise, two of ``attention_lib.toy_data.FEATURES``.
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
    loudness = check_number(loudness, "loudness", minimum=0.0, fix="the lesson uses 5.0.")
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
