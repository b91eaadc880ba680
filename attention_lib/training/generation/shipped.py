"""Lesson 15's shipped models: tiny Llamas trained on the grammar's texts, MHA, GQA and MQA over 3 seeds, and two
with a sliding window; and the one safe way to load them.

Built step by step in ``notebooks/15_generation.ipynb``. The weights live in
``attention_lib/training/trained/generation-<variant>-seed<seed>.pt``, stored in float16 (about 45 KB each) and
loaded as float32; what each model does (:func:`~attention_lib.training.generation.recipe.quality`, measured on
the rounded weights) is stored with it. They were made by :func:`~attention_lib.training.generation.train_lm`
with :data:`~attention_lib.training.generation.RECIPE`, on one thread; ``python -m
attention_lib.training.generation`` remakes them (about 3 minutes on one core).
"""

from __future__ import annotations

from pathlib import Path

import torch

from ...llama import TinyLlama
from ..shipped import TRAINED_DIR, load_shipped
from .recipe import quality, train_lm

_FORMAT = "attention_lib.generation/1"
#: The variants, by their number of key/value heads (of 4 query heads).
KV_HEADS = {"mha": 4, "gqa": 2, "mqa": 1}
SEEDS = (0, 1, 2)
#: The sliding windows shipped (MHA, seed 0).
WINDOWS = (4, 8)


def shipped_path(variant: str = "mha", seed: int = 0) -> Path:
    """Where a shipped model lives: ``variant`` is ``"mha"``, ``"gqa"``, ``"mqa"``, ``"window4"`` or ``"window8"``.

    Raises:
        ValueError: for a variant or seed that is not shipped.

    Example:
        >>> shipped_path("gqa", 1).name
        'generation-gqa-seed1.pt'
    """
    variants = [*KV_HEADS, *(f"window{w}" for w in WINDOWS)]
    if variant not in variants:
        raise ValueError(f"variant must be one of {variants}, but variant={variant!r}.")
    seeds = SEEDS if variant in KV_HEADS else (0,)
    if seed not in seeds:
        raise ValueError(f"the {variant} model ships for seeds {list(seeds)}, but seed={seed!r}; train another "
                         f"with attention_lib.training.generation.train_lm(seed=...).")
    return TRAINED_DIR / f"generation-{variant}-seed{seed}.pt"


def round_weights(model: TinyLlama) -> TinyLlama:
    """Round every weight to float16 and back, in place: the model as it will be loaded from its file."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.half().float())
    return model


def save_lm(model: TinyLlama, path, measured: dict[str, float]) -> None:
    """Save ``model`` (float16 weights, its config, ``measured``) as a plain dict that :func:`load_lm` reads safely."""
    state = {k: v.detach().cpu().half().clone() for k, v in model.state_dict().items()}
    torch.save({"format": _FORMAT, "config": dict(model.config), "measured": dict(measured), "state_dict": state},
               path)


def load_lm(variant: str = "mha", seed: int = 0, *, path=None) -> tuple[TinyLlama, dict[str, float]]:
    """Load a shipped model, ready to generate: ``(model in eval mode, float32, what was measured when saved)``.

    Built step by step in ``notebooks/15_generation.ipynb``. Read by :func:`~attention_lib.training.load_shipped`
    (``torch.load(..., weights_only=True)``: only tensors, numbers, strings and containers of them, never arbitrary
    pickled objects) as ``"generation-<variant>-seed<seed>"``.

    Args:
        variant: ``"mha"`` (4 key/value heads), ``"gqa"`` (2), ``"mqa"`` (1), ``"window4"`` or ``"window8"``.
        seed: 0, 1 or 2 (the windows: 0).
        path: another file to read instead (one written by :func:`save_lm`).

    Raises:
        ValueError: for a variant or seed that is not shipped, or a file that is corrupt or not such a model.
        FileNotFoundError: if the file is missing.

    Example:
        >>> model, measured = load_lm("gqa", 0)
        >>> model.config["num_kv_heads"], measured["well-formed"] > 0.9
        (2, True)
    """
    return load_shipped((shipped_path(variant, seed) if path is None else shipped_path()).stem, path=path)


def main() -> None:  # pragma: no cover - run by hand to remake the shipped weights
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)  # training does so too; measuring on one thread as well keeps every number reproducible
    jobs = [(v, kv, None, s) for v, kv in KV_HEADS.items() for s in SEEDS]
    jobs += [(f"window{w}", 4, w, 0) for w in WINDOWS]
    for variant, kv, window, seed in jobs:
        model = round_weights(train_lm(kv, window=window, seed=seed).model)
        measured = quality(model)
        save_lm(model, shipped_path(variant, seed), measured)
        print(f"{variant} seed {seed}: " + ", ".join(f"{k} {v:.3f}" for k, v in measured.items()), flush=True)
