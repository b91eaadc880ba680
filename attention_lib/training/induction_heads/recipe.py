"""The recipe that grows induction heads on a CPU, and how to measure a model on fresh repeated sequences.

Built step by step in ``notebooks/13_induction_heads.ipynb``. An attention-only transformer learns to predict the
next token of the repeated sequences of :mod:`~attention_lib.training.induction_heads.repeats`; the shipped models
(``trained/induction-2layer.pt``, ``trained/induction-1layer.pt``) were made by :func:`train_induction` with
:data:`RECIPE`; ``python -m attention_lib.training.induction_heads`` remakes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from ...attention_only import AttentionOnlyTransformer, all_head_scores
from ...validation import check_int
from .repeats import MAX_REPEAT, MIN_REPEAT, SEQ_LEN, VOCAB, make_repeats, repeated_part

#: The model's sizes and the optimisation that make the shipped models (AdamW, fresh sequences every step).
RECIPE = {"embed_dim": 64, "num_heads": 2, "steps": 400, "batch_size": 64, "lr": 3e-3, "weight_decay": 0.01}
#: The seed of the fresh sequences every evaluation uses (training uses ``seed``, by default 0).
HELDOUT_SEED = 1234


@dataclass
class InductionRun:
    """What :func:`train_induction` returns.

    Attributes:
        model: the trained :class:`~attention_lib.attention_only.AttentionOnlyTransformer`, in eval mode.
        repeated_losses: the loss on the repeated part of each training batch, one per step.
        other_losses: the loss on the other (random) predictions of each batch, one per step.
        scores: ``{step: all_head_scores(...)}`` on a fixed probe batch, every ``track_every`` steps.
    """

    model: AttentionOnlyTransformer
    repeated_losses: list[float] = field(default_factory=list)
    other_losses: list[float] = field(default_factory=list)
    scores: dict[int, dict[str, torch.Tensor]] = field(default_factory=dict)


def build_model(num_layers: int = 2) -> AttentionOnlyTransformer:
    """A fresh attention-only transformer sized by :data:`RECIPE`. Example: ``build_model(1).config["num_layers"]``."""
    return AttentionOnlyTransformer(len(VOCAB), SEQ_LEN, embed_dim=RECIPE["embed_dim"],
                                    num_heads=RECIPE["num_heads"], num_layers=num_layers)


def train_induction(num_layers: int = 2, *, seed: int = 0, steps: int | None = None, min_repeat: int = MIN_REPEAT,
                    max_repeat: int = MAX_REPEAT, track_every: int = 0) -> InductionRun:
    """Train a fresh attention-only model on repeated sequences with :data:`RECIPE`: next-token loss everywhere.

    Built step by step in ``notebooks/13_induction_heads.ipynb``. Seeded (weights and sequences) and run on one
    thread, so the same call gives the same model on the same machine (with
    ``torch.use_deterministic_algorithms(True)``); 400 steps take seconds on a laptop CPU.

    Args:
        num_layers: 2 (grows induction heads) or 1 (cannot: it has no earlier layer to build on).
        seed: the seed of the initial weights and of the training sequences.
        steps: override :data:`RECIPE`'s number of steps.
        min_repeat, max_repeat: the range of the repeat length ``k`` (equal: a fixed-length repeat).
        track_every: record both head scores on 256 fixed probe sequences every this many steps (0: never).

    Raises:
        ValueError: for a non-positive number of steps or bad repeat lengths.

    Example:
        >>> run = train_induction(steps=3, track_every=3)
        >>> len(run.repeated_losses), sorted(run.scores), tuple(run.scores[3]["induction"].shape)
        (3, [0, 3], (2, 2))
    """
    steps = RECIPE["steps"] if steps is None else steps
    steps = check_int(steps, "steps", minimum=1)
    batches = make_repeats(steps * RECIPE["batch_size"], seed=seed, min_repeat=min_repeat, max_repeat=max_repeat)
    probe = make_repeats(256, seed=HELDOUT_SEED + 1)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: one thread is faster, and the result is the same on every run
    try:
        torch.manual_seed(seed)
        run = InductionRun(build_model(num_layers))
        optimizer = torch.optim.AdamW(run.model.parameters(), lr=RECIPE["lr"], weight_decay=RECIPE["weight_decay"])
        B = RECIPE["batch_size"]
        for step in range(steps + 1):
            if track_every and step % track_every == 0:
                with torch.no_grad():
                    run.scores[step] = all_head_scores(run.model(probe.tokens).attention, probe.lengths)
            if step == steps:
                break
            x, k = batches.tokens[step * B:(step + 1) * B], batches.lengths[step * B:(step + 1) * B]
            logits = run.model(x, need_weights=False).logits[:, :-1]  # (B, L - 1, V): row i scores token i + 1
            losses = F.cross_entropy(logits.transpose(1, 2), x[:, 1:], reduction="none")  # (B, L - 1)
            optimizer.zero_grad()
            losses.mean().backward()
            optimizer.step()
            repeated = repeated_part(k, x.shape[1])
            run.repeated_losses.append(float(losses.detach()[repeated].mean()))
            run.other_losses.append(float(losses.detach()[~repeated].mean()))
    finally:
        torch.set_num_threads(threads)
    run.model.eval()
    return run


@torch.no_grad()
def evaluate_induction(model: AttentionOnlyTransformer, *, n: int = 2000, seed: int = HELDOUT_SEED,
                       min_repeat: int = MIN_REPEAT, max_repeat: int = MAX_REPEAT, ablate=()) -> dict[str, float]:
    """Next-token accuracy and loss on ``n`` fresh sequences: on the repeated part, and on the rest.

    Built step by step in ``notebooks/13_induction_heads.ipynb``.

    Args:
        model: an :class:`~attention_lib.attention_only.AttentionOnlyTransformer` trained on this task.
        n, seed: how many fresh sequences, and their seed (training uses other seeds).
        min_repeat, max_repeat: the range of the repeat length.
        ablate: ``(layer, head)`` pairs to zero (see the model's ``forward``).

    Returns:
        ``{"repeated accuracy", "repeated loss", "other accuracy", "other loss"}``.

    Example:
        >>> sorted(evaluate_induction(build_model(), n=4))[0]
        'other accuracy'
    """
    tokens, lengths = make_repeats(n, seed=seed, min_repeat=min_repeat, max_repeat=max_repeat)
    logits = model(tokens, ablate=ablate, need_weights=False).logits[:, :-1]  # (N, L - 1, V)
    losses = F.cross_entropy(logits.transpose(1, 2), tokens[:, 1:], reduction="none")  # (N, L - 1)
    right = (logits.argmax(-1) == tokens[:, 1:]).float()
    repeated = repeated_part(lengths, tokens.shape[1])
    return {"repeated accuracy": float(right[repeated].mean()), "repeated loss": float(losses[repeated].mean()),
            "other accuracy": float(right[~repeated].mean()), "other loss": float(losses[~repeated].mean())}
