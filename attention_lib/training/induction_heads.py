"""The repeated-sequence task, the recipe that grows induction heads on a CPU, and the shipped weights.

Built step by step in ``notebooks/13_induction_heads.ipynb``. A sequence is 32 random tokens whose first ``k``
tokens (``k`` drawn from 6 to 16) are repeated right after themselves: ``A B C D E F A B C D E F x y z ...``.
The next token is predictable only inside the copy, and only by looking back at the first time round; where
the copy starts changes from one sequence to the next, so no rule based on position alone can find it.
Everything is generated here, seeded, on the CPU (no downloads). The shipped models
(``trained/induction-2layer.pt``, ``trained/induction-1layer.pt``) were made by :func:`train_induction` with
:data:`RECIPE`; ``python -m attention_lib.training.induction_heads`` remakes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import torch
import torch.nn.functional as F

from ..attention_only import AttentionOnlyTransformer, all_head_scores
from ..validation import check_int
from .shipped import read_weights

#: The 32 tokens: one character each, so a sequence can be typed as a string.
VOCAB = tuple("abcdefghijklmnopqrstuvwxyz012345")
#: The length of every training sequence, and the range of the repeated segment's length ``k``.
SEQ_LEN, MIN_REPEAT, MAX_REPEAT = 32, 6, 16
#: The model's sizes and the optimisation that make the shipped models (AdamW, fresh sequences every step).
RECIPE = {"embed_dim": 64, "num_heads": 2, "steps": 400, "batch_size": 64, "lr": 3e-3, "weight_decay": 0.01}
#: The seed of the fresh sequences every evaluation uses (training uses ``seed``, by default 0).
HELDOUT_SEED = 1234
TRAINED_DIR = Path(__file__).resolve().parent / "trained"
_FORMAT = "attention_lib.induction/1"  # the file format's name, kept when modules move


class RepeatBatch(NamedTuple):
    """``tokens (N, L)`` int64 ids and ``lengths (N,)``: tokens ``0..k-1`` are repeated at ``k..2k-1``."""

    tokens: torch.Tensor
    lengths: torch.Tensor


def make_repeats(n: int, *, seed: int = 0, min_repeat: int = MIN_REPEAT, max_repeat: int = MAX_REPEAT,
                 length: int = SEQ_LEN) -> RepeatBatch:
    """``n`` seeded sequences of random tokens whose first ``k`` tokens are repeated right after themselves.

    Built step by step in ``notebooks/13_induction_heads.ipynb``. ``k`` is drawn uniformly from
    ``min_repeat..max_repeat`` for each sequence (``min_repeat == max_repeat`` gives a fixed-length repeat).

    Raises:
        ValueError: if ``n < 1`` or the lengths do not fit (``1 <= min_repeat <= max_repeat``, ``2 * max_repeat
            <= length``).

    Example:
        >>> batch = make_repeats(2, seed=0, min_repeat=3, max_repeat=3, length=8)
        >>> torch.equal(batch.tokens[:, :3], batch.tokens[:, 3:6]), batch.lengths.tolist()
        (True, [3, 3])
    """
    n = check_int(n, "n", minimum=1)
    if not (isinstance(min_repeat, int) and isinstance(max_repeat, int) and 1 <= min_repeat <= max_repeat
            and 2 * max_repeat <= length):
        raise ValueError(f"need 1 <= min_repeat <= max_repeat <= length // 2, but min_repeat={min_repeat!r}, "
                         f"max_repeat={max_repeat!r}, length={length!r}: the segment and its copy must fit.")
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, len(VOCAB), (n, length), generator=g)  # (N, L)
    k = torch.randint(min_repeat, max_repeat + 1, (n,), generator=g)  # (N,)
    i = torch.arange(length)[None]  # (1, L)
    source = torch.where((i >= k[:, None]) & (i < 2 * k[:, None]), i - k[:, None], i)  # copy positions read i - k
    return RepeatBatch(tokens.gather(1, source), k)


def repeated_part(lengths: torch.Tensor, length: int) -> torch.Tensor:
    """Which predictions are predictable: ``(N, L - 1)`` bool, ``True`` at query ``i`` when ``k <= i <= 2k - 2``.

    Query ``i`` predicts the token at ``i + 1``; inside the copy, that token was seen before. Everywhere else
    (the first segment, the last token of the copy, the random tail) the next token is random.

    Example:
        >>> repeated_part(torch.tensor([3]), 8).int()
        tensor([[0, 0, 0, 1, 1, 0, 0]], dtype=torch.int32)
    """
    i = torch.arange(length - 1)[None]  # (1, L - 1)
    return (i >= lengths[:, None]) & (i <= 2 * lengths[:, None] - 2)


def encode(text: str) -> torch.Tensor:
    """Turn a string of tokens (one character each; spaces are ignored) into ids ``(L,)``.

    Raises:
        TypeError: if ``text`` is not a string. ValueError: if it is empty, too long or has unknown characters.

    Example:
        >>> encode("abc abc").tolist()
        [0, 1, 2, 0, 1, 2]
    """
    if not isinstance(text, str):
        raise TypeError(f"a sequence is a string of tokens such as 'abcdabcd', but got {type(text).__name__}.")
    chars = [c for c in text if not c.isspace()]
    unknown = sorted({c for c in chars if c not in VOCAB})
    if unknown:
        raise ValueError(f"tokens {unknown} are not in the vocabulary; allowed: a-z and 0-5.")
    if not chars or len(chars) > SEQ_LEN:
        raise ValueError(f"a sequence has 1 to {SEQ_LEN} tokens, but got {len(chars)}.")
    return torch.tensor([VOCAB.index(c) for c in chars])


def decode(ids) -> str:
    """Turn ids back into a string. Example: ``decode(encode("abab")) == "abab"``."""
    return "".join(VOCAB[int(i)] for i in ids)


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


def save_induction(model: AttentionOnlyTransformer, path, measured: dict[str, float]) -> None:
    """Save ``model`` as a plain dict (tensors, numbers, strings) that :func:`load_induction` reads safely."""
    state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    torch.save({"format": _FORMAT, "config": dict(model.config), "measured": dict(measured), "state_dict": state},
               path)


def load_induction(num_layers: int = 2, path=None) -> tuple[AttentionOnlyTransformer, dict[str, float]]:
    """Load a shipped induction model, ready to run: ``(model in eval mode, what was measured when it was saved)``.

    Built step by step in ``notebooks/13_induction_heads.ipynb``. Read with ``torch.load(...,
    weights_only=True)``, which accepts tensors, numbers, strings and containers of them, never arbitrary
    pickled objects.

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
    if path is None:
        if num_layers not in (1, 2):
            raise ValueError(f"the shipped induction models have 1 or 2 layers, but num_layers={num_layers!r}.")
        path = TRAINED_DIR / f"induction-{num_layers}layer.pt"
    data = read_weights(path, _FORMAT, remake="python -m attention_lib.training.induction_heads",
                        what="an induction model")
    model = AttentionOnlyTransformer(**data["config"])
    try:
        model.load_state_dict(data["state_dict"])
    except (RuntimeError, KeyError, TypeError) as error:
        raise ValueError(f"{path} does not fit the model it describes: {str(error).splitlines()[0]}") from error
    return model.eval(), dict(data["measured"])


def main() -> None:  # pragma: no cover - run by hand to remake the shipped weights
    torch.use_deterministic_algorithms(True)
    for layers in (2, 1):
        run = train_induction(layers)
        measured = evaluate_induction(run.model)
        save_induction(run.model, TRAINED_DIR / f"induction-{layers}layer.pt", measured)
        print(f"{layers} layer(s): {measured}")


if __name__ == "__main__":  # pragma: no cover
    main()
