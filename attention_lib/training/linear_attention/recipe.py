"""One recipe for every attention layer: lessons 13's and 15's models and recipes, with the softmax swapped out.

Used in ``notebooks/19_linear_attention.ipynb``. Each task keeps its own lesson's model, sizes and
optimisation; only the attention layers change (:data:`VARIANTS`):

- **induction** (lesson 13): the attention-only model of :data:`~attention_lib.training.induction_heads.RECIPE`
  on repeated sequences, 400 steps, scored on the repeated part (:func:`train_copying` is lesson 13's training loop
  with the model and the sequences' lengths as arguments; with ``"softmax"`` it makes lesson 13's own model);
- **grammar** (lesson 15): the tiny Llama of :data:`~attention_lib.training.generation.RECIPE`, trained by lesson
  15's own :func:`~attention_lib.training.generation.train_lm`, scored on its verb agreement, on the training
  structures, on held-out ones, and by how far back the subject is.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from ...attention_only import AttentionOnlyTransformer
from ...linear_models import LinearAttentionOnlyTransformer, LinearTinyLlama
from ...validation import check_int
from ..generation.recipe import HELDOUT_SEED as TEXTS_SEED
from ..generation.recipe import RECIPE as LM_RECIPE
from ..generation.recipe import build_lm, train_lm, verb_agreement
from ..generation.study import by_distance
from ..generation.texts import VOCAB as WORDS
from ..generation.texts import make_texts
from ..induction_heads.recipe import HELDOUT_SEED
from ..induction_heads.recipe import RECIPE as INDUCTION_RECIPE
from ..induction_heads.repeats import MAX_REPEAT, MIN_REPEAT, SEQ_LEN, make_repeats, repeated_part
from ..induction_heads.repeats import VOCAB as TOKENS

#: The variants: one layer type per layer of the two-layer models (the hybrid keeps its last layer softmax, as
#: Qwen3-Next keeps the last of every four).
VARIANTS = {"softmax": ("softmax", "softmax"), "linear": ("linear", "linear"),
            "gated delta": ("gated_delta", "gated_delta"), "hybrid": ("gated_delta", "softmax")}


def _layer_types(variant: str) -> tuple[str, ...]:
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {list(VARIANTS)}, but variant={variant!r}.")
    return VARIANTS[variant]


def build_copier(variant: str = "linear", *, key_dim: int | None = None, max_len: int = SEQ_LEN) -> nn.Module:
    """A fresh model of lesson 13's sizes for ``variant``: lesson 13's own
    :class:`~attention_lib.AttentionOnlyTransformer` for ``"softmax"``, else a
    :class:`~attention_lib.linear_models.LinearAttentionOnlyTransformer`.

    Args:
        variant: a key of :data:`VARIANTS`.
        key_dim: ``Dk`` of the fixed-state layers (default 32, the softmax heads' size); not for ``"softmax"``.
        max_len: the longest sequence (the learned positions).

    Raises:
        ValueError: for an unknown variant, or ``key_dim`` with ``"softmax"``.

    Example:
        >>> type(build_copier("softmax")).__name__, build_copier("hybrid").config["layer_types"]
        ('AttentionOnlyTransformer', ('gated_delta', 'softmax'))
    """
    types = _layer_types(variant)
    sizes = {"embed_dim": INDUCTION_RECIPE["embed_dim"], "num_heads": INDUCTION_RECIPE["num_heads"]}
    if variant == "softmax":
        if key_dim is not None:
            raise ValueError(f"key_dim sizes the fixed-state layers' state; the softmax model has none (its cache "
                             f"grows with the text), but key_dim={key_dim!r}.")
        return AttentionOnlyTransformer(len(TOKENS), max_len, num_layers=2, **sizes)
    return LinearAttentionOnlyTransformer(len(TOKENS), max_len, layer_types=types, key_dim=key_dim, **sizes)


@dataclass
class CopyRun:
    """What :func:`train_copying` returns: the model (in eval mode) and the loss on the repeated part per step."""

    model: nn.Module
    repeated_losses: list[float] = field(default_factory=list)


def train_copying(variant: str = "linear", *, seed: int = 0, steps: int | None = None, key_dim: int | None = None,
                  min_repeat: int = MIN_REPEAT, max_repeat: int = MAX_REPEAT, length: int = SEQ_LEN) -> CopyRun:
    """Train ``variant`` on lesson 13's repeated sequences with lesson 13's recipe, on one thread.

    Used in ``notebooks/19_linear_attention.ipynb``. Lesson 13's loop
    (:func:`~attention_lib.training.induction_heads.train_induction`: seeded weights and sequences, AdamW, the
    next-token loss everywhere), with the model and the sequences' length as arguments; with ``"softmax"`` and the
    default lengths it makes the same model as ``train_induction(2, seed=seed)``.

    Args:
        variant: a key of :data:`VARIANTS`.
        seed: the seed of the initial weights and of the sequences.
        steps: override the recipe's 400 steps.
        key_dim: ``Dk`` of the fixed-state layers (see :func:`build_copier`).
        min_repeat, max_repeat, length: the repeated part's lengths and the sequences' length.

    Raises:
        ValueError: for an unknown variant, a non-positive number of steps or lengths that do not fit.

    Example:
        >>> run = train_copying("gated delta", steps=2)
        >>> len(run.repeated_losses), run.model.training
        (2, False)
    """
    steps = check_int(INDUCTION_RECIPE["steps"] if steps is None else steps, "steps", minimum=1)
    batches = make_repeats(steps * INDUCTION_RECIPE["batch_size"], seed=seed, min_repeat=min_repeat,
                           max_repeat=max_repeat, length=length)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: one thread, the same result on every run
    try:
        torch.manual_seed(seed)
        run = CopyRun(build_copier(variant, key_dim=key_dim, max_len=length))
        optimizer = torch.optim.AdamW(run.model.parameters(), lr=INDUCTION_RECIPE["lr"],
                                      weight_decay=INDUCTION_RECIPE["weight_decay"])
        B = INDUCTION_RECIPE["batch_size"]
        for step in range(steps):
            x, k = batches.tokens[step * B:(step + 1) * B], batches.lengths[step * B:(step + 1) * B]
            logits = run.model(x, need_weights=False).logits[:, :-1]  # (B, L - 1, V): row i scores token i + 1
            losses = F.cross_entropy(logits.transpose(1, 2), x[:, 1:], reduction="none")  # (B, L - 1)
            optimizer.zero_grad()
            losses.mean().backward()
            optimizer.step()
            run.repeated_losses.append(float(losses.detach()[repeated_part(k, length)].mean()))
    finally:
        torch.set_num_threads(threads)
    run.model.eval()
    return run


@torch.no_grad()
def copying_accuracy(model: nn.Module, repeat: int, *, n: int = 1000, length: int = SEQ_LEN,
                     seed: int = HELDOUT_SEED) -> float:
    """Next-token accuracy on the repeated part of ``n`` fresh sequences whose repeated part is ``repeat`` long.

    Example:
        >>> 0 <= copying_accuracy(build_copier("linear"), 4, n=8) <= 1
        True
    """
    tokens, lengths = make_repeats(n, seed=seed, min_repeat=repeat, max_repeat=repeat, length=length)
    right = model(tokens, need_weights=False).logits[:, :-1].argmax(-1) == tokens[:, 1:]
    return float(right[repeated_part(lengths, length)].float().mean())


def build_writer(variant: str = "linear") -> nn.Module:
    """A fresh model of lesson 15's sizes for ``variant``: lesson 15's own :class:`~attention_lib.TinyLlama`
    (4 key/value heads) for ``"softmax"``, else a :class:`~attention_lib.linear_models.LinearTinyLlama`.

    Example:
        >>> type(build_writer("softmax")).__name__, build_writer("linear").config["layer_types"]
        ('TinyLlama', ('linear', 'linear'))
    """
    types = _layer_types(variant)
    if variant == "softmax":
        return build_lm(4)
    sizes = {k: LM_RECIPE[k] for k in ("embed_dim", "num_heads", "mlp_dim")}
    return LinearTinyLlama(len(WORDS), layer_types=types, **sizes)


def train_writer(variant: str = "linear", *, seed: int = 0, steps: int | None = None):
    """Train ``variant`` on lesson 15's texts with lesson 15's own :func:`~attention_lib.training.generation.
    train_lm` (600 steps, seeded, one thread); an :class:`~attention_lib.training.generation.recipe.LMRun`.

    Example:
        >>> len(train_writer("hybrid", steps=2).losses)
        2
    """
    _layer_types(variant)
    return train_lm(seed=seed, steps=steps, build=lambda: build_writer(variant))


def agreement(model: nn.Module, *, n: int = 1200) -> dict[str, float]:
    """The verb's right form scored above its other form (teacher-forced, lesson 15's
    :func:`~attention_lib.training.generation.verb_agreement`): on ``n`` texts of the training structures, of the
    held-out structures, and on lesson 15's 3,000 texts by how far back the subject is (1-3, 4-7, 8 or more words).

    Example:
        >>> sorted(agreement(build_writer("linear"), n=8))[:2]
        ['agreement', 'agreement held out']
    """
    seen = make_texts(n, seed=TEXTS_SEED, split="train")
    held = make_texts(n, seed=TEXTS_SEED + 1, split="heldout")
    found = {"agreement": float(verb_agreement(model, seen).float().mean()),
             "agreement held out": float(verb_agreement(model, held).float().mean())}
    return found | {f"agreement, subject {d} back": v for d, v in by_distance(model).items()}
