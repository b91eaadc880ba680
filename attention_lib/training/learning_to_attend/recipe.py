"""The training recipe of the tiny transformer, and how to measure it on held-out data.

Built step by step in ``notebooks/12_learning_to_attend.ipynb``. One recipe for every task: AdamW (Loshchilov &
Hutter, 2019) on the cross-entropy of the scored positions, fresh examples at every step, seeded so that the
same call gives the same model on the same machine. Each task carries its settings (``task.recipe``: the
model's size, the steps, the batch size and the learning rate). The shipped models in
``attention_lib/training/trained/`` were made by :func:`train` with them
(``python -m attention_lib.training.learning_to_attend`` remakes them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from ...encoder import TinyTransformer
from ...validation import check_int
from .tasks import IGNORE, TASKS, Task, get_task, make_batch

#: The settings that make each model, by task name (each task carries its own: ``task.recipe``).
RECIPES: dict[str, dict] = {name: task.recipe for name, task in TASKS.items()}
_SIZES = ("embed_dim", "num_heads", "num_layers", "mlp_dim")

#: The seed of the held-out examples every evaluation uses (training uses ``seed``, by default 0).
HELDOUT_SEED = 1234


@dataclass
class TrainingRun:
    """What :func:`train` returns: the model, the loss at every step, and attention maps along the way.

    Attributes:
        model: the trained :class:`~attention_lib.encoder.TinyTransformer`, in eval mode.
        task: the task's name.
        losses: the training loss at every step (a list of floats).
        snapshots: ``{step: attention}``, each ``attention`` a tuple of ``(N, H, L, L)`` maps, per layer, of
            the model on ``probe`` after that many steps (step 0 = before training).
        probe: the ``(N, L)`` inputs the snapshots were taken on.
    """

    model: TinyTransformer
    task: str
    losses: list[float] = field(default_factory=list)
    snapshots: dict[int, tuple[torch.Tensor, ...]] = field(default_factory=dict)
    probe: torch.Tensor | None = None


def build_model(task: str | Task, *, use_positions: bool = True, **sizes) -> TinyTransformer:
    """A fresh (untrained) model sized for ``task`` by its recipe; ``embed_dim=``, ``num_heads=``,
    ``num_layers=`` or ``mlp_dim=`` override it.

    Used by the training of ``notebooks/12_learning_to_attend.ipynb``.

    Raises:
        ValueError: for an unknown task.

    Example:
        >>> build_model("reversal").config["max_len"]
        8
    """
    spec = get_task(task)
    unknown = sorted(set(sizes) - set(_SIZES))
    if unknown:
        raise TypeError(f"unknown model sizes {unknown}; the sizes are {list(_SIZES)}.")
    chosen = {k: spec.recipe[k] for k in _SIZES if k in spec.recipe} | {k: v for k, v in sizes.items() if v is not None}
    return TinyTransformer(len(spec.vocab), len(spec.answers), spec.max_len, use_positions=use_positions,
                           pad=spec.pad, **chosen)


def train(task: str, *, use_positions: bool = True, seed: int = 0, steps: int | None = None,
          batch_size: int | None = None, lr: float | None = None, snapshot_steps=(), probe=None,
          **sizes) -> TrainingRun:
    """Train a fresh tiny transformer on ``task`` with the task's recipe (``task.recipe``).

    Built step by step in ``notebooks/12_learning_to_attend.ipynb``. Seeds ``torch`` with ``seed`` (the
    weights and the examples), so the same call gives the same model on the same machine; a few seconds on a
    2-core CPU.

    Args:
        task: a task name (``"reversal"``, ``"agreement"``, ``"agreement_subject_first"``) or a task.
        use_positions: give the model its learned position embedding.
        seed: the seed of the initial weights and of the training examples.
        steps, batch_size, lr: override the recipe.
        snapshot_steps: the steps after which to record the attention maps on ``probe`` (0 = at the start).
        probe: ``(N, L)`` inputs for the snapshots; default: the first 4 held-out examples.
        **sizes: ``embed_dim``, ``num_heads`` or ``num_layers``, to override the model's size.

    Returns:
        A :class:`TrainingRun`.

    Raises:
        ValueError: for an unknown task or a non-positive number of steps.

    Example:
        >>> run = train("reversal", steps=3, snapshot_steps=(0, 3))
        >>> len(run.losses), sorted(run.snapshots), tuple(run.snapshots[3][0].shape)
        (3, [0, 3], (4, 2, 8, 8))
    """
    spec = get_task(task)
    recipe = spec.recipe
    steps = recipe["steps"] if steps is None else steps
    batch_size = recipe["batch_size"] if batch_size is None else batch_size
    lr = recipe["lr"] if lr is None else lr
    steps = check_int(steps, "steps", minimum=1)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: one thread is faster than two, and far faster on a busy machine
    try:
        return _train(spec, use_positions, seed, steps, batch_size, lr, snapshot_steps, probe, sizes)
    finally:
        torch.set_num_threads(threads)


def _train(spec, use_positions, seed, steps, batch_size, lr, snapshot_steps, probe, sizes) -> TrainingRun:
    torch.manual_seed(seed)
    model = build_model(spec, use_positions=use_positions, **sizes)
    inputs, targets = make_batch(spec, steps * batch_size, seed=seed, split="train")  # every step sees new ones
    if probe is None:
        probe = make_batch(spec, 4, seed=HELDOUT_SEED, split="heldout")[0]
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    run = TrainingRun(model, spec.name, probe=probe)

    def snapshot(step: int) -> None:
        if step in snapshot_steps:
            model.eval()
            with torch.no_grad():
                run.snapshots[step] = tuple(w.clone() for w in model(probe).attention)
            model.train()

    model.train()
    snapshot(0)
    for step in range(steps):
        x = inputs[step * batch_size:(step + 1) * batch_size]  # (B, L)
        y = targets[step * batch_size:(step + 1) * batch_size]  # (B, L)
        logits = model(x).logits  # (B, L, C)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=IGNORE)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        run.losses.append(loss.item())
        snapshot(step + 1)
    model.eval()
    return run


def _check_fits(model, spec: Task) -> None:
    """A model can be measured on a task only if it reads that task's tokens and gives that task's answers."""
    if not isinstance(model, TinyTransformer):
        raise TypeError(f"model must be a TinyTransformer (e.g. train(...).model or load_trained(...).model), but "
                        f"got {type(model).__name__}.")
    config = model.config
    wanted = {"vocab_size": len(spec.vocab), "num_answers": len(spec.answers)}
    wrong = {k: config[k] for k, v in wanted.items() if config[k] != v}
    if wrong or config["max_len"] < spec.max_len:
        found = ", ".join(f"{k}={config[k]}" for k in ("vocab_size", "num_answers", "max_len"))
        raise ValueError(f"this model does not fit the task {spec.name!r}: the task needs vocab_size="
                         f"{wanted['vocab_size']}, num_answers={wanted['num_answers']} and max_len >= {spec.max_len}, "
                         f"but the model has {found}. Was it trained on another task? Evaluate it on its own "
                         f"task, or train one for this task with train({spec.name!r}).")


@torch.no_grad()
def predict(model: TinyTransformer, inputs: torch.Tensor) -> torch.Tensor:
    """The model's answer ids ``(N, L)``: the best-scored answer at every position of ``inputs (N, L)``.

    Built step by step in ``notebooks/12_learning_to_attend.ipynb``.

    Example:
        >>> from attention_lib.training.learning_to_attend import load_trained
        >>> x, y = make_batch("reversal", 3, seed=0, split="heldout")
        >>> torch.equal(predict(load_trained("reversal").model, x), y)
        True
    """
    model.eval()
    return model(inputs).logits.argmax(-1)  # (N, L, C) -> (N, L)


def evaluate(model: TinyTransformer, task: str, *, n: int = 2000, seed: int = HELDOUT_SEED) -> dict[str, float]:
    """Accuracy of ``model`` on ``n`` fresh held-out examples of ``task`` (never seen in training).

    Built step by step in ``notebooks/12_learning_to_attend.ipynb``.

    Args:
        model: a model built for ``task``.
        task: ``"reversal"`` or ``"agreement"``.
        n: how many held-out examples.
        seed: their seed (a different seed gives other held-out examples).

    Raises:
        TypeError: if ``model`` is not a :class:`~attention_lib.encoder.TinyTransformer`.
        ValueError: for an unknown task, or a model built for another task (other vocabulary, answers or length).

    Returns:
        ``{"token_accuracy": ..., "sequence_accuracy": ...}``: the share of scored positions answered right,
        and the share of examples with every scored position right (for agreement the two are the same: one
        verb per sentence).

    Example:
        >>> run = train("reversal", steps=2)
        >>> sorted(evaluate(run.model, "reversal", n=10))
        ['sequence_accuracy', 'token_accuracy']
    """
    spec = get_task(task)
    _check_fits(model, spec)
    inputs, targets = make_batch(spec, n, seed=seed, split="heldout")
    scored = targets != IGNORE  # (N, L)
    right = (predict(model, inputs) == targets) | ~scored
    return {"token_accuracy": float(right[scored].float().mean()),
            "sequence_accuracy": float(right.all(dim=1).float().mean())}
