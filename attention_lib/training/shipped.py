"""The trained weights shipped with the package, and the one safe way to load them.

Every shipped model is a file ``attention_lib/training/trained/<name>.pt`` and is named by ``<name>``, its file's
stem: ``"reversal"``, ``"agreement-1block"`` (lesson 12), ``"induction-2layer"`` (lesson 13),
``"generation-gqa-seed1"`` (lesson 15), ``"latent-32-seed1"`` (lesson 17), ``"draft-distilled-seed0"``
(lesson 18); :func:`shipped_models` lists them.
:func:`load_shipped` is the one loader: it reads a file with ``torch.load(..., weights_only=True)``, which refuses
to unpickle arbitrary objects, checks the kind of model the name says it holds, and builds that model. Each lesson
names its models in its own terms (``load_trained("agreement", num_layers=1)``, ``load_induction(2)``,
``load_lm("gqa", 1)``, ``load_latent_lm(32, 1)``) and calls it.
"""

from __future__ import annotations

import pickle
import re
from pathlib import Path
from typing import NamedTuple

import torch

from ..attention_only import AttentionOnlyTransformer
from ..encoder import TinyTransformer
from ..latent import TinyLatentLM
from ..llama import TinyLlama

#: Where the shipped weights live.
TRAINED_DIR = Path(__file__).resolve().parent / "trained"


class Kind(NamedTuple):
    """One kind of shipped model: the names it goes by, its file's format tag, and how to rebuild it.

    Attributes:
        names: a regular expression that the names of this kind match in full.
        format: the tag its files carry in ``data["format"]``.
        what: what such a file holds, for the error messages.
        remake: the command that remakes the shipped files of this kind.
        model: the class built from the file's ``config``.
        has_task: whether its files name the task the model was trained on (``data["task"]``, the name's first
            part) and store its held-out accuracy (``data["heldout_accuracy"]``) instead of a ``measured`` dict.
    """

    names: str
    format: str
    what: str
    remake: str
    model: type
    has_task: bool = False


#: Every kind of shipped model, by lesson.
KINDS = (
    Kind(r"(reversal|agreement\w*)(-\d+block)?", "attention_lib.trained/1", "a trained model",
         "python3 course.py remake weights-12", TinyTransformer, has_task=True),
    Kind(r"induction-\d+layer", "attention_lib.induction/1", "an induction model",
         "python3 course.py remake weights-13", AttentionOnlyTransformer),
    Kind(r"generation-\w+-seed\d+", "attention_lib.generation/1", "a lesson 15 language model",
         "python3 course.py remake weights-15", TinyLlama),
    Kind(r"latent-\d+-seed\d+", "attention_lib.latent/1", "a lesson 17 latent language model",
         "python3 course.py remake weights-17", TinyLatentLM),
    Kind(r"draft-(trained|distilled)-seed\d+", "attention_lib.draft/1", "a lesson 18 draft model",
         "python3 course.py remake weights-18", TinyLlama),
)


class Shipped(NamedTuple):
    """What :func:`load_shipped` returns: the model, in eval mode and float32, and what was measured when saved."""

    model: torch.nn.Module
    measured: dict


def shipped_models() -> list[str]:
    """The names of the shipped models, sorted.

    Example:
        >>> [name for name in shipped_models() if name.startswith("induction")]
        ['induction-1layer', 'induction-2layer']
    """
    return sorted(p.stem for p in TRAINED_DIR.glob("*.pt"))


def kind_of(name: str) -> Kind:
    """The kind of model called ``name`` (see :data:`KINDS`).

    Raises:
        TypeError: if ``name`` is not a string. ValueError: if no kind of model goes by that name.

    Example:
        >>> kind_of("induction-2layer").what
        'an induction model'
    """
    if not isinstance(name, str):
        raise TypeError(f"a shipped model is named by a string such as 'reversal', but got {type(name).__name__}.")
    for kind in KINDS:
        if re.fullmatch(kind.names, name):
            return kind
    raise ValueError(f"no kind of shipped model is called {name!r}; the shipped models are {shipped_models()}.")


def read_weights(path, format: str, *, remake: str, what: str) -> dict:
    """Read a weights file safely: ``torch.load(..., weights_only=True)``, then check its ``format`` tag.

    Only tensors, numbers, strings and containers of them are accepted, never arbitrary pickled objects.

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


def load_shipped(name: str, *, path=None) -> Shipped:
    """Load the shipped model ``name``, ready to run: ``(model in eval mode, float32, what was measured)``.

    The one loader of the package's trained weights. A lesson-12 model's ``measured`` is
    ``{"heldout_accuracy": ...}``; the others store theirs by name (``"repeated accuracy"``, ``"well-formed"``, ...).

    Args:
        name: the model's name, one of :func:`shipped_models` (with ``path``: any name of its kind).
        path: another file to read instead of the shipped one, holding a model of the kind ``name`` says.

    Raises:
        ValueError: for a name that is not shipped, or a file that is corrupt, of another kind, for another
            task, or that does not fit the model it describes.
        FileNotFoundError: if the file is missing.
        TypeError: if ``name`` is not a string.

    Example:
        >>> model, measured = load_shipped("induction-2layer")
        >>> type(model).__name__, measured["repeated accuracy"] > 0.9
        ('AttentionOnlyTransformer', True)
    """
    kind = kind_of(name)
    if path is None and name not in shipped_models():
        raise ValueError(f"no model called {name!r} ships with attention_lib; the shipped models are "
                         f"{shipped_models()}.")
    path = TRAINED_DIR / f"{name}.pt" if path is None else Path(path)
    data = read_weights(path, kind.format, remake=kind.remake, what=kind.what)
    task = name.split("-")[0]
    if kind.has_task and data.get("task") != task:
        raise ValueError(f"{path} holds a model for task {data.get('task')!r}, not {task!r}.")
    model = kind.model(**data["config"])
    try:
        model.load_state_dict({k: v.float() for k, v in data["state_dict"].items()})
    except (RuntimeError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"{path} does not fit the model it describes: {str(error).splitlines()[0]}") from error
    measured = {"heldout_accuracy": float(data["heldout_accuracy"])} if kind.has_task else dict(data["measured"])
    return Shipped(model.eval(), measured)
