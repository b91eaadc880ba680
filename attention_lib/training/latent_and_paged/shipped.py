"""Lesson 17's shipped models: tiny language models with multi-head latent attention, trained on lesson 15's
grammar with lesson 15's recipe, at the three cache sizes of lesson 15's MHA, GQA and MQA, over the same seeds.

Built step by step in ``notebooks/17_latent_and_paged.ipynb``. Each model is lesson 15's TinyLlama with
:class:`~attention_lib.MultiHeadLatentAttention` in place of its attention (:class:`~attention_lib.TinyLatentLM`):
the same width, heads, layers, MLP, texts, optimiser and steps (:data:`~attention_lib.training.generation.RECIPE`),
a latent of ``r = C - Dr`` numbers so that the cache holds ``C`` per token per layer, as many as the model of lesson
15 it is compared with. The weights live in ``attention_lib/training/trained/latent-<C>-seed<seed>.pt`` (float16,
loaded as float32) with what :func:`~attention_lib.training.generation.quality` measured on them;
``python3 course.py remake weights-17`` remakes them (about 3 minutes on one core).
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch

from ...latent import TinyLatentLM
from ...validation import check_int
from ..generation.recipe import HELDOUT_SEED, RECIPE, LMRun, next_word_loss, quality, train_lm
from ..generation.shipped import KV_HEADS, round_weights
from ..generation.shipped import SEEDS as LESSON_15_SEEDS
from ..generation.texts import VOCAB, make_texts, subject_position, verb_position
from ..shipped import TRAINED_DIR, load_shipped

_FORMAT = "attention_lib.latent/1"
#: The cache sizes, in numbers per token per layer, by the lesson 15 model with as many: ``2 · Hkv · Dh`` (keys and
#: values of ``Hkv`` heads of ``Dh = 8``): MHA 64, GQA 32, MQA 16.
CACHE_NUMBERS = {variant: 2 * kv * RECIPE["embed_dim"] // RECIPE["num_heads"] for variant, kv in KV_HEADS.items()}
#: Each head of the latent models: a rotary part ``Dr = 4`` and a position-free part ``Dn = 8`` of every query and
#: key, values of ``Dv = 8`` (``Dn = Dv = E / H`` as lesson 15's heads, ``Dr = Dn / 2`` as in DeepSeek-V3).
LATENT = {"rope_dim": 4, "nope_dim": 8, "v_dim": 8}
#: The seeds shipped: lesson 15's.
SEEDS = LESSON_15_SEEDS


def build_latent_lm(cache_numbers: int) -> TinyLatentLM:
    """A fresh latent model for the grammar's texts that caches ``cache_numbers`` per token per layer.

    Lesson 15's sizes (:data:`~attention_lib.training.generation.RECIPE`), :data:`LATENT` heads and a latent of
    ``r = cache_numbers - Dr``.

    Raises:
        TypeError, ValueError: if ``cache_numbers`` is not an int above ``Dr``.

    Example:
        >>> model = build_latent_lm(32)
        >>> model.config["kv_rank"], model.config["kv_rank"] + model.config["rope_dim"]  # r, and r + Dr cached
        (28, 32)
    """
    cache_numbers = check_int(cache_numbers, "cache_numbers", minimum=LATENT["rope_dim"] + 1,
                              fix=f"lesson 15's models cache {sorted(CACHE_NUMBERS.values())} numbers per token.")
    sizes = {k: RECIPE[k] for k in ("embed_dim", "num_heads", "num_layers", "mlp_dim")}
    return TinyLatentLM(len(VOCAB), **sizes, kv_rank=cache_numbers - LATENT["rope_dim"], **LATENT)


def train_latent_lm(cache_numbers: int, *, seed: int = 0, steps: int | None = None) -> LMRun:
    """Train :func:`build_latent_lm` with lesson 15's recipe (:func:`~attention_lib.training.generation.train_lm`).

    Example:
        >>> run = train_latent_lm(16, steps=2)
        >>> len(run.losses), type(run.model).__name__
        (2, 'TinyLatentLM')
    """
    return train_lm(seed=seed, steps=steps, build=lambda: build_latent_lm(cache_numbers))


def unseen_texts(trained_seed: int, *, n: int = 2000, seed: int = HELDOUT_SEED) -> torch.Tensor:
    """``n`` fresh texts of the training structures ``(n, MAX_LEN)``, none of them a text that the recipe trains
    seed ``trained_seed`` on: in a 23-word grammar short sentences recur, and about 15 % of fresh draws repeat a
    training text, so those are left out (what remains leans to the longer sentences).

    Example:
        >>> len(unseen_texts(0, n=10))
        10
    """
    return _unseen_texts(check_int(trained_seed, "trained_seed", minimum=0), check_int(n, "n", minimum=1),
                         check_int(seed, "seed", minimum=0)).clone()


@functools.lru_cache(maxsize=4)
def _trained_texts(trained_seed: int) -> frozenset:
    trained = make_texts(RECIPE["steps"] * RECIPE["batch_size"], seed=trained_seed, split="train")
    return frozenset(tuple(text.tolist()) for text in trained)


@functools.lru_cache(maxsize=16)
def _unseen_texts(trained_seed: int, n: int, seed: int) -> torch.Tensor:
    seen = _trained_texts(trained_seed)
    drawn = make_texts(2 * n, seed=seed, split="train")
    kept = [text for text in drawn if tuple(text.tolist()) not in seen][:n]
    if len(kept) < n:  # pragma: no cover - 2n draws leave about 1.7n
        raise ValueError(f"only {len(kept)} of {2 * n} fresh texts are unseen; ask for fewer.")
    return torch.stack(kept)


@torch.no_grad()
def fresh_text_loss(model, trained_seed: int, *, n: int = 2000, seed: int = HELDOUT_SEED) -> float:
    """The mean next-word cross-entropy (nats) of ``model`` on :func:`unseen_texts` of ``trained_seed``, the seed it
    was trained with: lesson 15's loss, on texts it never saw, for both kinds of model. ``seed`` draws the texts
    (another seed, another draw of ``n``).

    Example:
        >>> fresh_text_loss(build_latent_lm(16), 0, n=8) > 2.0  # untrained: near log(23 words) = 3.1
        True
    """
    return float(next_word_loss(model.eval(), unseen_texts(trained_seed, n=n, seed=seed)))


#: Lesson 15's texts whose subject stands far from its verb (its sliding-window section): the agreement a whole-text
#: loss hardly sees, since the verb is one word of about ten.
FAR_STRUCTURES = ("S P P V", "S P P P V", "P S P P V", "S P V", "S V", "P S V")


def subject_far_back(distance: int = 8, *, n: int = 3000, seed: int = 999) -> torch.Tensor:
    """Of ``n`` texts of :data:`FAR_STRUCTURES`, those whose subject is ``distance`` or more words before the verb.

    Example:
        >>> from attention_lib.training.generation import subject_position, verb_position
        >>> far = subject_far_back(8, n=200)
        >>> bool((verb_position(far) - subject_position(far) >= 8).all())
        True
    """
    texts = make_texts(n, seed=seed, structures=list(FAR_STRUCTURES))
    return texts[verb_position(texts) - subject_position(texts) >= check_int(distance, "distance", minimum=1)]


def shipped_path(cache_numbers: int = 32, seed: int = 0) -> Path:
    """Where a shipped latent model lives: ``latent-<cache_numbers>-seed<seed>.pt``.

    Raises:
        ValueError: for a cache size or seed that is not shipped.

    Example:
        >>> shipped_path(16, 2).name
        'latent-16-seed2.pt'
    """
    if cache_numbers not in CACHE_NUMBERS.values():
        raise ValueError(f"cache_numbers must be one of {sorted(CACHE_NUMBERS.values())} (the caches of lesson 15's "
                         f"MHA, GQA and MQA), but cache_numbers={cache_numbers!r}; train another with "
                         f"train_latent_lm(cache_numbers).")
    if seed not in SEEDS:
        raise ValueError(f"the latent models ship for seeds {list(SEEDS)}, but seed={seed!r}; train another with "
                         f"train_latent_lm(cache_numbers, seed=...).")
    return TRAINED_DIR / f"latent-{cache_numbers}-seed{seed}.pt"


def load_latent_lm(cache_numbers: int = 32, seed: int = 0) -> tuple[TinyLatentLM, dict[str, float]]:
    """Load a shipped latent model: ``(model in eval mode, float32, what was measured when saved)``.

    Built step by step in ``notebooks/17_latent_and_paged.ipynb``; read by
    :func:`~attention_lib.training.load_shipped` (``torch.load(..., weights_only=True)``).

    Raises:
        ValueError: for a size or seed that is not shipped, or a file that is corrupt or not such a model.
        FileNotFoundError: if the file is missing.

    Example:
        >>> model, measured = load_latent_lm(16, 0)
        >>> model.config["kv_rank"] + model.config["rope_dim"], measured["well-formed"] > 0.9
        (16, True)
    """
    return load_shipped(shipped_path(cache_numbers, seed).stem)


def main() -> None:  # pragma: no cover - run by hand to remake the shipped weights
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)  # training does so too; measuring on one thread as well keeps every number reproducible
    for numbers in CACHE_NUMBERS.values():
        for seed in SEEDS:
            model = round_weights(train_latent_lm(numbers, seed=seed).model)
            measured = quality(model)
            state = {k: v.detach().cpu().half().clone() for k, v in model.state_dict().items()}
            torch.save({"format": _FORMAT, "config": dict(model.config), "measured": measured, "state_dict": state},
                       shipped_path(numbers, seed))
            print(f"latent {numbers} seed {seed}: " + ", ".join(f"{k} {v:.3f}" for k, v in measured.items()),
                  flush=True)
