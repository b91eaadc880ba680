"""Lesson 13's shipped models (two layers, which grow induction heads, and one layer, which cannot): saving and
loading them.

Built step by step in ``notebooks/13_induction_heads.ipynb``. The weights live in
``attention_lib/training/trained/induction-<n>layer.pt``, read by the package's one loader,
:func:`attention_lib.training.load_shipped`; ``python -m attention_lib.training.induction_heads`` remakes them.
"""

from __future__ import annotations

import torch

from ...attention_only import AttentionOnlyTransformer
from ..shipped import TRAINED_DIR, load_shipped
from .recipe import evaluate_induction, train_induction

_FORMAT = "attention_lib.induction/1"  # the file format's name, kept when modules move


def save_induction(model: AttentionOnlyTransformer, path, measured: dict[str, float]) -> None:
    """Save ``model`` as a plain dict (tensors, numbers, strings) that :func:`load_induction` reads safely."""
    state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    torch.save({"format": _FORMAT, "config": dict(model.config), "measured": dict(measured), "state_dict": state},
               path)


def load_induction(num_layers: int = 2, path=None) -> tuple[AttentionOnlyTransformer, dict[str, float]]:
    """Load a shipped induction model, ready to run: ``(model in eval mode, what was measured when it was saved)``.

    Built step by step in ``notebooks/13_induction_heads.ipynb``. Read by
    :func:`~attention_lib.training.load_shipped` (``torch.load(..., weights_only=True)``, which accepts tensors,
    numbers, strings and containers of them, never arbitrary pickled objects) as ``"induction-<num_layers>layer"``.

    Args:
        num_layers: 2 or 1, the shipped model to load.
        path: another file to read instead (e.g. one written by :func:`save_induction`).

    Raises:
        ValueError: for another number of layers, or a file that is corrupt or not an induction model.
        FileNotFoundError: if the file is missing.

    Example:
        >>> model, measured = load_induction(2)
        >>> model.config["num_layers"], measured["repeated accuracy"] > 0.9
        (2, True)
    """
    if path is None and num_layers not in (1, 2):
        raise ValueError(f"the shipped induction models have 1 or 2 layers, but num_layers={num_layers!r}.")
    return load_shipped(f"induction-{num_layers}layer", path=path)


def main() -> None:  # pragma: no cover - run by hand to remake the shipped weights
    torch.use_deterministic_algorithms(True)
    for layers in (2, 1):
        run = train_induction(layers)
        measured = evaluate_induction(run.model)
        save_induction(run.model, TRAINED_DIR / f"induction-{layers}layer.pt", measured)
        print(f"{layers} layer(s): {measured}")
