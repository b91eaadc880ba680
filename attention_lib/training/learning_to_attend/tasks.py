"""The toy tasks a tiny transformer learns in seconds: one where position decides, one where content does.

Built step by step in ``notebooks/12_learning_to_attend.ipynb``. Everything is generated here, seeded, on the
CPU (no downloads). A task is an object that carries its own behaviour: how to draw examples, which examples
are held out, how to read an input and how to show the model's answers.

- ``"reversal"`` (:class:`ReversalTask`): read 8 digits, write them backwards. The answer at position ``i``
  is the digit at position ``L - 1 - i``: only *where* a digit sits matters.
- ``"agreement"`` (:class:`~attention_lib.training.grammar.AgreementTask`): choose the verb's form, singular or
  plural, from its subject, wherever the subject sits: "near the dogs the small cat purr(s)" -> "purrs".
  Whole sentence structures are kept out of training to test on.
- ``"agreement_subject_first"``: the same sentences, but the subject always comes first (the shortcut
  lesson 12 shows a model taking);
- ``"agreement_attractors"``: the sentences of ``"agreement"``, trained on as many with 0, 1, 2 and 3 attractors
  (distractors of the other number), lesson 12's training change against attraction.

Each example is a row of token ids ``(N, L)`` with a target row ``(N, L)``; positions that are not scored
hold :data:`IGNORE` (``-100``, what ``torch.nn.functional.cross_entropy`` skips).
"""

from __future__ import annotations

import torch

from ...validation import check_int
from ..grammar import AGREEMENT, ATTRACTORS, SUBJECT_FIRST, VERB_FORMS, AgreementTask
from ..task import IGNORE, Task, is_heldout

#: How many digits the reversal task reads.
REVERSAL_LENGTH = 8

SPLITS = ("train", "heldout")


class ReversalTask(Task):
    """Read ``REVERSAL_LENGTH`` digits and write them backwards: position decides.

    Example:
        >>> x, y = REVERSAL.draw(2, torch.Generator().manual_seed(0))
        >>> torch.equal(y, x.flip(1))
        True
    """

    def _check_length(self, length: int) -> None:
        if length != self.max_len:
            raise ValueError(f"the reversal model reads exactly {self.max_len} digits, but got {length}.")

    def draw(self, n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        ids = torch.randint(0, len(self.vocab), (n, self.max_len), generator=g)
        return ids, ids.flip(1)  # the target at position i is the digit at position L - 1 - i


REVERSAL = ReversalTask("reversal", tuple("0123456789"), tuple("0123456789"), REVERSAL_LENGTH, None,
                        recipe={"embed_dim": 32, "num_heads": 2, "num_layers": 1, "steps": 250, "batch_size": 128,
                                "lr": 3e-3},
                        examples=("3 1 4 1 5 9 2 6", "1 2 3 4 5 6 7 8", "0 0 0 0 9 9 9 9"))


#: Every task by name.
TASKS: dict[str, Task] = {task.name: task for task in (REVERSAL, AGREEMENT, SUBJECT_FIRST, ATTRACTORS)}


def get_task(name: str | Task) -> Task:
    """The task called ``name`` (``"reversal"``, ``"agreement"``, ``"agreement_subject_first"`` or
    ``"agreement_attractors"``).

    Raises:
        ValueError: if there is no such task.
        TypeError: if ``name`` is neither a string nor a :class:`Task`.

    Example:
        >>> get_task("agreement").answers
        ('singular', 'plural')
    """
    if isinstance(name, Task):
        return name
    if not isinstance(name, str):
        raise TypeError(f"a task is a name such as 'reversal' or a Task, but got {type(name).__name__}.")
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; the tasks are {sorted(TASKS)}.")
    return TASKS[name]


def make_batch(task: str | Task, n: int, *, seed: int = 0, split: str = "train"
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` seeded examples of ``task`` from one split: ``(inputs (N, L), targets (N, L))``, int64.

    Built step by step in ``notebooks/12_learning_to_attend.ipynb``. The same ``seed`` gives the same batch;
    use a different seed for held-out data. Targets hold :data:`IGNORE` where nothing is scored (padding, and
    every word but the verb in agreement).

    Args:
        task: a task name (see :func:`get_task`) or a :class:`Task`.
        n: how many examples.
        seed: the seed of the generator that draws them.
        split: ``"train"`` or ``"heldout"`` (disjoint: see the task's ``is_heldout``).

    Returns:
        ``(inputs, targets)``, both ``(N, max_len)``.

    Raises:
        ValueError: for an unknown task or split, or ``n < 1``.

    Example:
        >>> x, y = make_batch("reversal", 2, seed=0)
        >>> torch.equal(y, x.flip(1)), tuple(x.shape)
        (True, (2, 8))
    """
    task = get_task(task)
    if split not in SPLITS:
        raise ValueError(f"split must be 'train' or 'heldout', but split={split!r}.")
    n = check_int(n, "n", minimum=1)
    return task.sample(n, torch.Generator().manual_seed(seed), split)


__all__ = ["AGREEMENT", "ATTRACTORS", "IGNORE", "REVERSAL", "REVERSAL_LENGTH", "SUBJECT_FIRST", "TASKS", "VERB_FORMS",
           "AgreementTask", "ReversalTask", "Task", "get_task", "is_heldout", "make_batch"]
