"""Training lesson 15's tiny Llama on the grammar's texts, and measuring what it writes.

Built step by step in ``notebooks/15_generation.ipynb``. One recipe (:data:`RECIPE`) for every variant, MHA, GQA
or MQA, with or without a sliding window: AdamW on the next-word cross-entropy of fresh texts at every step,
seeded, on one thread (so the same call gives the same model whatever the machine's thread count).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from ...generation import generate
from ...llama import TinyLlama
from ...validation import check_int
from .texts import MAX_LEN, PAD, VOCAB, check_sentences, make_texts, prompts_before_the_verb, rates, verb_position

#: The model's sizes and the optimisation that make the shipped models.
RECIPE = {"embed_dim": 32, "num_heads": 4, "num_layers": 2, "mlp_dim": 64, "steps": 600, "batch_size": 64,
          "lr": 4e-3, "weight_decay": 0.01}
_SIZES = ("embed_dim", "num_heads", "num_layers", "mlp_dim")
#: The seed of the texts every evaluation uses (training uses ``seed``, by default 0, and others near it).
HELDOUT_SEED = 1234


@dataclass
class LMRun:
    """What :func:`train_lm` returns: the model (in eval mode) and the loss at every step."""

    model: nn.Module
    losses: list[float] = field(default_factory=list)


def build_lm(num_kv_heads: int = 4, *, window: int | None = None, **sizes) -> TinyLlama:
    """A fresh TinyLlama for the grammar's texts, sized by :data:`RECIPE` (``embed_dim=`` ... override it).

    Example:
        >>> build_lm(2).config["num_kv_heads"], build_lm(2).config["vocab_size"]
        (2, 23)
    """
    chosen = {k: RECIPE[k] for k in _SIZES} | {k: v for k, v in sizes.items() if v is not None}
    return TinyLlama(len(VOCAB), num_kv_heads=num_kv_heads, window=window, **chosen)


def next_word_loss(model: TinyLlama, texts: torch.Tensor) -> torch.Tensor:
    """The mean cross-entropy of predicting every next word of ``texts (N, L)`` (padding not scored)."""
    logits = model(texts[:, :-1]).logits  # (N, L - 1, vocab): position i predicts word i + 1
    return F.cross_entropy(logits.transpose(1, 2), texts[:, 1:], ignore_index=PAD)


def train_lm(num_kv_heads: int = 4, *, window: int | None = None, seed: int = 0, steps: int | None = None,
             batch_size: int | None = None, lr: float | None = None,
             build: Callable[[], nn.Module] | None = None) -> LMRun:
    """Train a fresh TinyLlama to continue the grammar's texts, with :data:`RECIPE`, on one thread.

    Built step by step in ``notebooks/15_generation.ipynb``. Seeds ``torch`` with ``seed`` (the weights and the
    texts), so the same call gives the same model on the same machine: about 10 s on one CPU core.

    Args:
        num_kv_heads: 4 (MHA), 2 (GQA) or 1 (MQA), for the recipe's 4 query heads.
        window: a sliding window for every layer, or ``None``.
        seed: the seed of the initial weights and of the texts.
        steps, batch_size, lr: override the recipe.
        build: another model to train the same way: a function of no arguments that returns it fresh, called
            after seeding (lesson 17 trains :class:`~attention_lib.TinyLatentLM` so); then leave
            ``num_kv_heads`` and ``window`` out.

    Raises:
        ValueError: for a size that is not positive, or ``build`` given with ``num_kv_heads`` or ``window``.

    Returns:
        An :class:`LMRun`.

    Example:
        >>> run = train_lm(2, steps=2)
        >>> len(run.losses), run.model.config["num_kv_heads"]
        (2, 2)
    """
    steps = check_int(RECIPE["steps"] if steps is None else steps, "steps", minimum=1)
    batch_size = check_int(RECIPE["batch_size"] if batch_size is None else batch_size, "batch_size", minimum=1)
    lr = RECIPE["lr"] if lr is None else lr
    if build is not None and (num_kv_heads != 4 or window is not None):
        raise ValueError(f"build makes the model, so num_kv_heads={num_kv_heads} and window={window} would be "
                         f"ignored; give either build or num_kv_heads and window.")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same arithmetic whatever the machine's thread count
    try:
        torch.manual_seed(seed)
        model = build_lm(num_kv_heads, window=window) if build is None else build()
        texts = make_texts(steps * batch_size, seed=seed, split="train")  # every step sees new texts
        optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=RECIPE["weight_decay"])
        run = LMRun(model)
        model.train()
        for step in range(steps):
            loss = next_word_loss(model, texts[step * batch_size:(step + 1) * batch_size])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            run.losses.append(loss.item())
        model.eval()
        return run
    finally:
        torch.set_num_threads(threads)


@torch.no_grad()
def verb_agreement(model: TinyLlama, texts: torch.Tensor) -> torch.Tensor:
    """``(N,)`` bool, teacher-forced: does the model score the verb's right form above its other form?

    The model reads each text up to its verb and scores the next word; of the verb's two forms (``purrs``,
    ``purr``), the right one must score higher.
    """
    at = verb_position(texts)  # (N,)
    logits = model(texts[:, :int(at.max())]).logits  # (N, L, vocab)
    scores = logits[torch.arange(len(texts)), at - 1]  # (N, vocab): what comes after the word before the verb
    right = texts[torch.arange(len(texts)), at]  # (N,)
    other = right + torch.where((right - VOCAB.index("purrs")) % 2 == 0, 1, -1)  # the verb's other form
    return scores.gather(1, right[:, None]).squeeze(1) > scores.gather(1, other[:, None]).squeeze(1)


@torch.no_grad()
def complete(model: TinyLlama, prompts: list[torch.Tensor], **options) -> list[torch.Tensor]:
    """Continue each prompt (1-D ids, of any lengths) with :func:`~attention_lib.generate` up to ``MAX_LEN``
    tokens, room for the longest sentence; prompts of one length go together in one batch. ``options`` go to
    ``generate`` (``use_cache``, ``temperature``, ...).

    Returns:
        One 1-D tensor of ``MAX_LEN`` ids per prompt, the prompt first, in the prompts' order.
    """
    out: list[torch.Tensor | None] = [None] * len(prompts)
    for length in sorted({len(p) for p in prompts}):
        rows = [i for i, p in enumerate(prompts) if len(p) == length]
        written = generate(model, torch.stack([prompts[i] for i in rows]), MAX_LEN - length, **options)
        for i, text in zip(rows, written, strict=True):
            out[i] = text
    return out


def quality(model: TinyLlama, *, n: int = 300, seed: int = HELDOUT_SEED) -> dict[str, float]:
    """What a model does on fresh texts: verb agreement (teacher-forced, on training and held-out structures) and
    its greedy completions of ``n`` held-out-seed prompts cut before the verb (well-formed, agreeing).

    Built step by step in ``notebooks/15_generation.ipynb``.

    Returns:
        ``{"agreement": ..., "agreement held out": ..., "well-formed": ..., "agreeing": ...}``, shares in [0, 1].

    Example:
        >>> sorted(quality(build_lm(), n=4))
        ['agreeing', 'agreement', 'agreement held out', 'well-formed']
    """
    seen = make_texts(4 * n, seed=seed, split="train")
    held = make_texts(4 * n, seed=seed + 1, split="heldout")
    written = complete(model, prompts_before_the_verb(make_texts(n, seed=seed + 2, split="train")))
    return {"agreement": float(verb_agreement(model, seen).float().mean()),
            "agreement held out": float(verb_agreement(model, held).float().mean()),
            **rates(check_sentences(written))}

