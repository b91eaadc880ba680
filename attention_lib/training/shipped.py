"""The trained tiny transformers shipped with the package, and the one safe way to load them.

Built step by step in ``notebooks/12_learning_to_attend.ipynb``. The weights live in
``attention_lib/training/trained/<task>.pt`` (under 100 KB each): a plain dict of tensors, numbers and strings, read
with ``torch.load(..., weights_only=True)``, which refuses to unpickle arbitrary objects. They were made by
:func:`attention_lib.training.train` with each task's recipe; to remake them, run
``python -m attention_lib.training.shipped``.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from pathlib import Path

import torch

from ..encoder import TinyTransformer
from .tasks import Task, get_task

#: Where the shipped weights live.
TRAINED_DIR = Path(__file__).resolve().parent / "trained"
#: The tasks whose trained models ship with the package.
SHIPPED = ("reversal", "agreement")
_FORMAT = "attention_lib.trained/1"


@dataclass
class TrainedModel:
    """A trained model with its task: encode an input, run it, read the answer and the attention maps.

    Attributes:
        task: the :class:`~attention_lib.training.tasks.Task` it was trained on.
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



def read_weights(path, format: str, *, remake: str, what: str) -> dict:
    """Read a shipped weights file safely: ``torch.load(..., weights_only=True)``, then check its ``format`` tag.

    Only tensors, numbers, strings and containers of them are accepted, never arbitrary pickled objects.
    Shared by every loader of shipped models (:func:`load_trained`, lesson 13's ``load_induction``).

    Args:
        path: the ``.pt`` file.
        format: the tag the file must carry in ``data["format"]``.
        remake: the command that remakes the file, named in the error messages.
        what: what the file should hold, for the error messages (e.g. ``"a trained model"``).

    Returns:
        The file's dict.

    Raises:
        FileNotFoundError: if the file is missing.
        ValueError: if it is corrupt, holds objects other than tensors, or is not tagged ``format``.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"the weights file {path} is missing; reinstall attention_lib, or remake it with "
                                f"`{remake}`.")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, ValueError) as error:
        raise ValueError(f"{path} is not a readable weights file ({type(error).__name__}: "
                         f"{str(error).splitlines()[0] if str(error) else 'no details'}); it may be corrupt or "
                         f"hold objects other than tensors. Reinstall attention_lib or remake it with "
                         f"`{remake}`.") from error
    if not isinstance(data, dict) or data.get("format") != format:
        raise ValueError(f"{path} is not {what} of attention_lib (expected a dict with format={format!r}).")
    return data

def load_trained(task: str | Task, path=None) -> TrainedModel:
    """Load the shipped trained model for ``task``, ready to run (no training needed).

    Built step by step in ``notebooks/12_learning_to_attend.ipynb``. The file is read with
    ``torch.load(..., weights_only=True)``: only tensors, numbers, strings and containers of them are
    accepted, never arbitrary pickled objects.

    Args:
        task: ``"reversal"`` (reverse 8 digits) or ``"agreement"`` (the verb's form from its subject).
        path: another weights file to read instead of the shipped one (e.g. one made by :func:`save_trained`).

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
    if path is None and spec.name not in SHIPPED:
        raise ValueError(f"no trained model of {spec.name!r} ships with attention_lib (only {list(SHIPPED)}); "
                         f"train one with attention_lib.training.train({spec.name!r}).")
    path = TRAINED_DIR / f"{spec.name}.pt" if path is None else Path(path)
    data = read_weights(path, _FORMAT, remake="python -m attention_lib.training.shipped", what="a trained model")
    if data.get("task") != spec.name:
        raise ValueError(f"{path} holds a model for task {data.get('task')!r}, not {spec.name!r}.")
    model = TinyTransformer(**data["config"])
    try:
        model.load_state_dict(data["state_dict"])
    except (RuntimeError, KeyError, TypeError) as error:
        raise ValueError(f"{path} does not fit the model it describes: {str(error).splitlines()[0]}") from error
    return TrainedModel(spec, model.eval(), float(data["heldout_accuracy"]))


def main() -> None:  # pragma: no cover - run by hand to remake the shipped weights
    from .recipe import evaluate, train

    TRAINED_DIR.mkdir(exist_ok=True)
    for name in SHIPPED:
        run = train(name)
        accuracy = evaluate(run.model, name)["sequence_accuracy"]
        save_trained(run.model, name, TRAINED_DIR / f"{name}.pt", accuracy)
        print(f"{name}: held-out sequence accuracy {accuracy:.1%}, {len(run.losses)} steps")


if __name__ == "__main__":  # pragma: no cover
    main()
