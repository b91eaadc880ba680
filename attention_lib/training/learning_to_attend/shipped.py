"""Lesson 12's trained tiny transformers: the models that ship, saving one, and loading one by its task.

Built step by step in ``notebooks/12_learning_to_attend.ipynb``. The weights live in
``attention_lib/training/trained/<task>.pt`` (under 100 KB each): a plain dict of tensors, numbers and strings,
read by the package's one loader, :func:`attention_lib.training.load_shipped`. They were made by
:func:`~attention_lib.training.learning_to_attend.train` with each task's recipe; to remake them, run
``python -m attention_lib.training.learning_to_attend``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from ...encoder import TinyTransformer
from ..shipped import TRAINED_DIR, load_shipped
from .recipe import evaluate, train
from .tasks import Task, get_task

#: The trained models that ship with the package: ``(task, num_layers)``, ``None`` for the task's recipe.
SHIPPED = (("reversal", None), ("agreement", None), ("agreement", 1), ("agreement_subject_first", None))
_FORMAT = "attention_lib.trained/1"  # the file format's name, kept when modules move


@dataclass
class TrainedModel:
    """A trained model with its task: encode an input, run it, read the answer and the attention maps.

    Attributes:
        task: the :class:`~attention_lib.training.task.Task` it was trained on.
        model: the :class:`~attention_lib.encoder.TinyTransformer`, in eval mode.
        heldout_accuracy: the sequence accuracy measured on held-out data when it was saved.
    """

    task: Task
    model: TinyTransformer
    heldout_accuracy: float

    @torch.no_grad()
    def run(self, tokens) -> tuple[list[str], list[str], tuple[torch.Tensor, ...]]:
        """Run the model on one input: ``(tokens, answers, attention)``.

        Args:
            tokens: a string of space-separated tokens, a list of tokens from ``task.vocab``, or a list (or
                1-D tensor) of their ids.

        Returns:
            ``tokens`` as a list; ``answers``, one per token, as the task shows them (for agreement, the
            verb's filled-in form at the verb and ``""`` elsewhere); ``attention``, one ``(H, L, L)`` map per
            layer.

        Raises:
            TypeError: if ``tokens`` is neither text, tokens nor ids.
            ValueError: if the input is too long, has the wrong length, or holds unknown tokens or ids (the
                message lists the allowed tokens).

        Example:
            >>> trained = load_trained("agreement")
            >>> trained.run("the cat near the dogs purr(s)")[1][-1]
            'purrs'
        """
        ids = self.task.encode(tokens)  # (L,)
        out = self.model(ids.unsqueeze(0))  # (1, L) -> logits (1, L, C)
        tokens = self.task.decode(ids)
        best = out.logits[0].argmax(-1).tolist()  # (L,)
        return tokens, self.task.answer_words(tokens, best), tuple(w[0] for w in out.attention)


def save_trained(model: TinyTransformer, task: str | Task, path, heldout_accuracy: float) -> None:
    """Save ``model`` as a plain dict (tensors, numbers, strings) that :func:`load_trained` reads safely.

    Makes the weights that ``notebooks/12_learning_to_attend.ipynb`` loads.

    Args:
        model: a :class:`~attention_lib.encoder.TinyTransformer`.
        task: the task it was trained on.
        path: where to write the file.
        heldout_accuracy: its measured held-out sequence accuracy, stored with it.

    Raises:
        ValueError: for an unknown task.

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "mine.pt"
        >>> save_trained(load_trained("reversal").model, "reversal", path, 1.0)
        >>> load_trained("reversal", path=path).heldout_accuracy
        1.0
    """
    state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    torch.save({"format": _FORMAT, "task": get_task(task).name, "config": dict(model.config),
                "heldout_accuracy": float(heldout_accuracy), "state_dict": state}, path)



def shipped_path(task: str | Task, num_layers: int | None = None) -> Path:
    """Where the shipped model of ``task`` with ``num_layers`` blocks (``None``: the recipe's) lives.

    Example:
        >>> shipped_path("agreement", 1).name, shipped_path("agreement").name
        ('agreement-1block.pt', 'agreement.pt')
    """
    spec = get_task(task)
    if num_layers is None or num_layers == spec.recipe.get("num_layers", 1):
        return TRAINED_DIR / f"{spec.name}.pt"
    return TRAINED_DIR / f"{spec.name}-{num_layers}block.pt"


def load_trained(task: str | Task, path=None, *, num_layers: int | None = None) -> TrainedModel:
    """Load the shipped trained model for ``task``, ready to run (no training needed).

    Built step by step in ``notebooks/12_learning_to_attend.ipynb``. The file is read by
    :func:`~attention_lib.training.load_shipped` (``torch.load(..., weights_only=True)``: only tensors, numbers,
    strings and containers of them are accepted, never arbitrary pickled objects); the model's name is its file's,
    :func:`shipped_path`.

    Args:
        task: ``"reversal"`` (reverse 8 digits), ``"agreement"`` (the verb's form from its subject) or
            ``"agreement_subject_first"`` (the same, trained only on sentences whose subject comes first).
        path: another weights file to read instead of the shipped one (e.g. one made by :func:`save_trained`).
        num_layers: the shipped model with this many blocks (``None``: the recipe's); ``"agreement"`` ships with
            1 block too, made by ``train("agreement", num_layers=1)``.

    Returns:
        A :class:`TrainedModel` in eval mode, on the CPU.

    Raises:
        ValueError: for an unknown task, or a file that is corrupt, not a trained model, or for another task.
        FileNotFoundError: if the weights file is missing.

    Example:
        >>> trained = load_trained("reversal")
        >>> trained.run("1 2 3 4 5 6 7 8")[1]
        ['8', '7', '6', '5', '4', '3', '2', '1']
        >>> trained.heldout_accuracy >= 0.99
        True
    """
    spec = get_task(task)
    recipe_layers = spec.recipe.get("num_layers", 1)
    wanted = (spec.name, None if num_layers in (None, recipe_layers) else num_layers)
    if path is None and wanted not in SHIPPED:
        shipped = [name if layers is None else f"{name} with num_layers={layers}" for name, layers in SHIPPED]
        raise ValueError(f"no trained model of {spec.name!r}"
                         f"{'' if wanted[1] is None else f' with num_layers={num_layers}'} ships with attention_lib "
                         f"(only {shipped}); train one with "
                         f"attention_lib.training.learning_to_attend.train({spec.name!r}"
                         f"{'' if wanted[1] is None else f', num_layers={num_layers}'}).")
    model, measured = load_shipped(shipped_path(spec, num_layers).stem, path=path)
    return TrainedModel(spec, model, measured["heldout_accuracy"])


def main() -> None:  # pragma: no cover - run by hand to remake the shipped weights
    torch.use_deterministic_algorithms(True)
    TRAINED_DIR.mkdir(exist_ok=True)
    for name, num_layers in SHIPPED:
        run = train(name, num_layers=num_layers)
        accuracy = evaluate(run.model, name)["sequence_accuracy"]
        save_trained(run.model, name, shipped_path(name, num_layers), accuracy)
        print(f"{shipped_path(name, num_layers).name}: held-out sequence accuracy {accuracy:.1%}, "
              f"{len(run.losses)} steps")
