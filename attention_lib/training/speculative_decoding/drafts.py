"""Drafts for lesson 15's shipped model: trained on the same texts, or distilled from the target itself.

Built step by step in ``notebooks/18_speculative_decoding.ipynb``. A draft is useful when the target agrees with
what it proposes. A draft trained on the texts learns the texts' distribution; a draft distilled from the target
(the KL divergence of its next-word distribution from the target's, at every position of fresh texts) learns the
target's own choices, its mistakes included, which is what greedy verification rewards. Both are one-layer
TinyLlamas of :data:`DRAFT_SIZES`, trained seeded on one thread.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ...generation import generate
from ...llama import TinyLlama
from ...speculative import speculative_rounds
from ...validation import check_int
from ..generation.recipe import HELDOUT_SEED, train_lm
from ..generation.texts import END, MAX_LEN, PAD, VOCAB, make_texts, prompts_before_the_verb
from ..shipped import TRAINED_DIR, load_shipped

#: The draft's sizes: one block of width 16 (the target: two of width 32).
DRAFT_SIZES = {"embed_dim": 16, "num_heads": 2, "num_layers": 1, "mlp_dim": 32}
#: Steps of each training (the texts' batch: the lesson 15 recipe's 64).
STEPS = 400


def build_draft() -> TinyLlama:
    """A fresh draft of :data:`DRAFT_SIZES` over lesson 15's vocabulary.

    Example:
        >>> sum(p.numel() for p in build_draft().parameters())  # the target: 22,112
        3344
    """
    return TinyLlama(len(VOCAB), **DRAFT_SIZES)


def train_draft(seed: int = 0, *, steps: int = STEPS) -> TinyLlama:
    """A draft trained on the texts (next-word cross-entropy), lesson 15's recipe at the draft's sizes.

    Built step by step in ``notebooks/18_speculative_decoding.ipynb``.

    Example:
        >>> train_draft(0, steps=2).config["num_layers"]
        1
    """
    return train_lm(seed=seed, steps=check_int(steps, "steps", minimum=1), build=build_draft).model


def distill_draft(target: TinyLlama, seed: int = 0, *, steps: int = STEPS, batch_size: int = 64,
                  lr: float = 4e-3) -> TinyLlama:
    """A draft distilled from ``target``: at every position of fresh texts, the KL divergence of the draft's
    next-word distribution from the target's, minimised with AdamW; seeded, on one thread.

    Built step by step in ``notebooks/18_speculative_decoding.ipynb``.

    Args:
        target: the model to imitate (lesson 15's shipped model).
        seed: the seed of the draft's weights and of the texts.
        steps, batch_size, lr: the optimisation.

    Returns:
        The draft, in eval mode.

    Example:
        >>> from attention_lib.training.generation import load_lm
        >>> distill_draft(load_lm("mha", 0)[0], steps=2).config["embed_dim"]
        16
    """
    steps = check_int(steps, "steps", minimum=1)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same arithmetic whatever the machine's thread count
    try:
        torch.manual_seed(seed)
        draft = build_draft()
        texts = make_texts(steps * batch_size, seed=seed, split="train")
        optimizer = torch.optim.AdamW(draft.parameters(), lr=lr, weight_decay=0.01)
        draft.train()
        for step in range(steps):
            batch = texts[step * batch_size:(step + 1) * batch_size, :-1]
            with torch.no_grad():
                teacher = F.log_softmax(target(batch).logits, -1)  # (N, L, vocab)
            student = F.log_softmax(draft(batch).logits, -1)
            real = (batch != PAD).unsqueeze(-1)  # padding is not scored
            loss = ((teacher.exp() * (teacher - student)) * real).sum() / real.sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        return draft.eval()
    finally:
        torch.set_num_threads(threads)


def sentence_length(target: TinyLlama, prompt: torch.Tensor) -> int:
    """How many tokens the target writes after ``prompt`` (1-D ids) up to and including its first full stop (or to
    ``MAX_LEN``): what is measured, so that no round drafts past the end of the sentence.

    Example:
        >>> from attention_lib.training.generation import encode, load_lm
        >>> sentence_length(load_lm("mha", 0)[0], encode("<bos> the cat purrs"))
        1
    """
    written = generate(target, prompt[None], MAX_LEN - len(prompt))[0, len(prompt):]
    ends = (written == END).nonzero()
    return int(ends[0, 0]) + 1 if len(ends) else len(written)


def acceptance(target: TinyLlama, draft: TinyLlama, prompts: list[torch.Tensor], k: int = 4) -> dict[str, float]:
    """How the target receives a draft's proposals, greedy, over ``prompts`` (1-D ids) each written to the end of
    its sentence (:func:`sentence_length`).

    Returns:
        ``{"accepted": share of drafted tokens kept, "per call": tokens written per target call, "calls": target
        calls in all, "tokens": tokens written}``.

    Example:
        >>> from attention_lib.training.generation import load_lm
        >>> target = load_lm("mha", 0)[0]
        >>> acceptance(target, target, [torch.tensor([1, 3, 5])], k=4)["accepted"]  # the target drafting for itself
        1.0
    """
    drafted = accepted = calls = written = 0
    for prompt in prompts:
        length = sentence_length(target, prompt)
        for r in speculative_rounds(target, draft, prompt[None], length, num_draft_tokens=k):
            drafted, accepted = drafted + r.drafted, accepted + r.accepted
            calls, written = calls + 1, written + r.new.shape[1]
    return {"accepted": accepted / max(drafted, 1), "per call": written / max(calls, 1), "calls": calls,
            "tokens": written}


#: The drafts shipped: trained on the texts and distilled from lesson 15's ``mha`` seed-0 model, three seeds each.
KINDS, SEEDS = ("trained", "distilled"), (0, 1, 2)
_FORMAT = "attention_lib.draft/1"


def shipped_path(kind: str, seed: int):
    """Where a shipped draft lives: ``training/trained/draft-<kind>-seed<seed>.pt``.

    Raises:
        ValueError: for a kind or seed that is not shipped.
    """
    if kind not in KINDS or seed not in SEEDS:
        raise ValueError(f"the drafts ship as kind in {list(KINDS)} and seed in {list(SEEDS)}, but kind={kind!r} and "
                         f"seed={seed!r}; make another with train_draft(seed) or distill_draft(target, seed).")
    return TRAINED_DIR / f"draft-{kind}-seed{seed}.pt"


def load_draft(kind: str = "distilled", seed: int = 0) -> tuple[TinyLlama, dict[str, float]]:
    """Load a shipped draft: ``(model in eval mode, float32, what was measured when saved)``.

    Built step by step in ``notebooks/18_speculative_decoding.ipynb``. Read by
    :func:`~attention_lib.training.load_shipped` as ``"draft-<kind>-seed<seed>"``; ``python3 course.py remake
    weights-18`` remakes them.

    Example:
        >>> draft, measured = load_draft("distilled", 0)
        >>> draft.config["num_layers"], measured["accepted"] > 0.3
        (1, True)
    """
    return load_shipped(shipped_path(kind, seed).stem)


def main() -> None:  # pragma: no cover - run by hand to remake the shipped drafts
    torch.use_deterministic_algorithms(True)
    target = load_shipped("generation-mha-seed0").model
    prompts = prompts_before_the_verb(make_texts(100, seed=HELDOUT_SEED, split="train"))
    for kind in KINDS:
        for seed in SEEDS:
            draft = train_draft(seed) if kind == "trained" else distill_draft(target, seed)
            with torch.no_grad():
                for p in draft.parameters():
                    p.copy_(p.half().float())  # measured as it will be loaded
            measured = acceptance(target, draft, prompts)
            state = {k: v.detach().half().clone() for k, v in draft.state_dict().items()}
            torch.save({"format": _FORMAT, "config": dict(draft.config), "measured": measured, "state_dict": state},
                       shipped_path(kind, seed))
            print(f"draft-{kind}-seed{seed}: {measured}", flush=True)
