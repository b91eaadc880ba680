"""Controls for what the verb-to-subject head causes: agreeing counterparts, activation patching, head by head.

Built step by step in ``notebooks/12_learning_to_attend.ipynb``, beside :mod:`.causes`. A weight on the attractors
that rises with their number may only count the positions they stand in; so each sentence gets an **agreeing
counterpart**, the same words with every attractor noun turned to the subject's number, and the head is read on
both and patched from one into the other:

- :func:`patch_by_attractors`: by the number of attractors, the head's weight on the attractor nouns and on the same
  positions in the counterpart, and the accuracy with the verb row's weights, or the head's output
  (:func:`~attention_lib.patching.patch_head`), taken from the counterpart; every other head's output too;
- :func:`by_attractor_slot`: the accuracy by which distractor slots hold the attractors;
- :func:`head_by_head`: for every head, how often the verb's strongest key is the subject, and the accuracy with its
  verb row zeroed.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass

import torch

from ...interventions import edit_head, remove_keys, zero_rows
from ...patching import patch_head, record_head
from ...validation import check_index
from ..grammar import AGREEMENT, NOUNS, PREPOSITIONS, AgreementTask
from .causes import _sentences, _share, attractor_keys


@dataclass(frozen=True)
class Patched:
    """One model on ``n`` sentences with ``attractors`` attractors, and on their agreeing counterparts.

    Attributes:
        accuracy, clean_accuracy: the share of verbs right, on the sentences and on their counterparts.
        weight_on_attractors, weight_agreeing: the verb's weight on the attractor nouns, and on the same positions in
            the counterpart, where those nouns agree with the subject.
        weight_on_phrases: the verb's weight on the attractors' whole phrases (preposition, determiner, adjectives,
            noun).
        patched_weights, patched_output: the accuracy with the verb row's weights, or the head's output at the verb,
            taken from the counterpart.
        others_patched: the highest accuracy with one *other* head's output (every row) taken from the counterpart.
        removed_nouns, removed_determiners, removed_phrases: the accuracy with the verb row's weight removed (the rest
            renormalised) from the attractor nouns, from their phrases' determiners, or from their whole phrases.
    """

    attractors: int
    n: int
    accuracy: float
    clean_accuracy: float
    weight_on_attractors: float
    weight_agreeing: float
    weight_on_phrases: float
    patched_weights: float
    patched_output: float
    others_patched: float
    removed_nouns: float
    removed_determiners: float
    removed_phrases: float


def agreeing_counterpart(task: AgreementTask, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each sentence with its attractor nouns turned to the subject's number ("a" becomes "the" before a plural).

    Returns:
        ``(clean (N, L), nouns (N, L), phrases (N, L))``: the counterparts, and where the attractor nouns and their
        whole phrases (from the preposition to the noun) stand, as bool masks.

    Example:
        >>> x = AGREEMENT.encode("near a dog the cats purr(s)")[None]
        >>> clean, nouns, phrases = agreeing_counterpart(AGREEMENT, x)
        >>> " ".join(AGREEMENT.decode(clean[0])[:6]), phrases[0, :6].tolist()
        ('near the dogs the cats purr(s)', [True, True, True, False, False, False])
    """
    parse = task.parse(x)
    nouns = attractor_keys(task, x, parse.subject)  # (N, L)
    flip = {task.vocab.index(a): task.vocab.index(b) for pair in NOUNS.items() for a, b in (pair, pair[::-1])}
    prepositions = {task.vocab.index(p) for p in PREPOSITIONS}
    the, a = task.vocab.index("the"), task.vocab.index("a")
    clean, phrases = x.clone(), torch.zeros_like(nouns)
    for i, j in nouns.nonzero().tolist():  # each attractor noun: its phrase runs back to its preposition
        start = max(k for k in range(j) if int(x[i, k]) in prepositions)
        phrases[i, start:j + 1] = True
        clean[i, j] = flip[int(x[i, j])]
        clean[i, start:j] = torch.where(clean[i, start:j] == a, the, clean[i, start:j])  # "a cats" is no phrase
    return clean, nouns, phrases


def patch_by_attractors(model, structures: Sequence[str], *, layer: int, head: int, n: int = 200, seed: int = 70,
                        adjectives: float | None = None, task: AgreementTask = AGREEMENT) -> list[Patched]:
    """:class:`Patched` by the number of attractors, from 1, on the sentences :func:`intervene_by_attractors` draws.

    Example:
        >>> from attention_lib.training.learning_to_attend import load_trained
        >>> rows = patch_by_attractors(load_trained("agreement").model, ["P S P V"], layer=1, head=0, n=50)
        >>> [r.attractors for r in rows], rows[0].clean_accuracy, rows[0].patched_output
        ([1, 2], 1.0, 1.0)
    """
    check_index(layer, "layer", model.config["num_layers"])
    check_index(head, "head", model.config["num_heads"])
    kwargs = {} if adjectives is None else {"adjectives": adjectives}
    return [_patch(model, layer, head, m, task, *_sentences(task, fit, n * len(fit), seed, str(m), attractors=m,
                                                            **kwargs))
            for m in range(1, max(s.split().count("P") for s in structures) + 1)
            for fit in [[s for s in structures if s.split().count("P") >= m]]]


def _patch(model, layer: int, head: int, m: int, task: AgreementTask, x: torch.Tensor, y: torch.Tensor) -> Patched:
    parse = task.parse(x)
    rows, verb = torch.arange(x.shape[0]), parse.verb
    answer = y[rows, verb]
    clean, nouns, phrases = agreeing_counterpart(task, x)
    attention = model.blocks[layer].attention

    def right(inputs, *interventions) -> tuple[torch.Tensor, object]:
        with torch.no_grad(), ExitStack() as stack:
            for intervention in interventions:
                stack.enter_context(intervention)
            out = model(inputs)
        return out.logits[rows, verb].argmax(-1) == answer, out

    right_x, out = right(x)
    with torch.no_grad(), record_head(attention, head) as recorded:
        clean_out = model(clean)
    clean_right = clean_out.logits[rows, verb].argmax(-1) == answer
    row, clean_row = out.attention[layer][rows, head, verb], clean_out.attention[layer][rows, head, verb]  # (N, L)
    clean_weights = clean_out.attention[layer][:, head]  # (N, L, S)
    determiners = phrases & ((x == task.vocab.index("the")) | (x == task.vocab.index("a")))  # (N, L)
    at_verb = (torch.arange(x.shape[1]) == verb[:, None])[..., None]  # (N, L, 1)
    others = []
    for other_layer, block in enumerate(model.blocks):
        for other in range(model.config["num_heads"]):
            if (other_layer, other) != (layer, head):
                with torch.no_grad(), record_head(block.attention, other) as source:
                    model(clean)
                others.append(_share(right(x, patch_head(block.attention, other, source[0]))[0]))
    return Patched(
        m, len(x), _share(right_x), _share(clean_right), float((row * nouns).sum(-1).mean()),
        float((clean_row * nouns).sum(-1).mean()), float((row * phrases).sum(-1).mean()),
        _share(right(x, edit_head(attention, head, lambda w: torch.where(at_verb, clean_weights, w)))[0]),
        _share(right(x, patch_head(attention, head, recorded[0], rows=verb))[0]), max(others, default=float("nan")),
        _share(right(x, edit_head(attention, head, lambda w: remove_keys(w, rows=verb, keys=nouns)))[0]),
        _share(right(x, edit_head(attention, head, lambda w: remove_keys(w, rows=verb, keys=determiners)))[0]),
        _share(right(x, edit_head(attention, head, lambda w: remove_keys(w, rows=verb, keys=phrases)))[0]))


def by_attractor_slot(model, structure: str, *, n: int = 2000, seed: int = 80, adjectives: float | None = None,
                      task: AgreementTask = AGREEMENT) -> dict[str, tuple[float, int]]:
    """The accuracy by which distractors are attractors, on ``n`` sentences of ``structure`` (a coin toss for each).

    Returns:
        ``{marked structure: (accuracy, sentences)}``, the attractors marked with ``*``: ``"P P* S V"`` is the
        second distractor an attractor, the first not.

    Example:
        >>> from attention_lib.training.learning_to_attend import load_trained
        >>> sorted(by_attractor_slot(load_trained("agreement").model, "P S V", n=100))
        ['P S V', 'P* S V']
    """
    x, y = _sentences(task, [structure], n, seed, "slot", **({} if adjectives is None else {"adjectives": adjectives}))
    parse = task.parse(x)
    rows = torch.arange(n)
    with torch.no_grad():
        right = model(x).logits[rows, parse.verb].argmax(-1) == y[rows, parse.verb]
    attractors = attractor_keys(task, x, parse.subject)
    distractors = (x[:, None, :] == torch.tensor([task.vocab.index(w) for p in NOUNS.items() for w in p])[:, None]
                   ).any(1) & (torch.arange(x.shape[1]) != parse.subject[:, None])  # (N, L): every noun but the subject
    slots = [tuple(attractors[i][distractors[i]].tolist()) for i in range(n)]  # per sentence: which P is an attractor
    cells = {}
    for key in sorted(set(slots), key=lambda k: (sum(k), [not s for s in k])):
        marks = iter(key)
        label = " ".join(p + ("*" if p == "P" and next(marks) else "") for p in structure.split())
        chosen = torch.tensor([s == key for s in slots])
        cells[label] = (_share(right[chosen]), int(chosen.sum()))
    return cells


def head_by_head(model, structure: str, *, n: int = 1000, seed: int = 90, adjectives: float | None = None,
                 task: AgreementTask = AGREEMENT) -> tuple[float, dict[tuple[int, int], tuple[float, float]]]:
    """The accuracy on ``n`` sentences of ``structure``, and per head ``(layer, head)``: the share whose verb's
    strongest key is the subject, and the accuracy with that head's verb row zeroed.

    Example:
        >>> from attention_lib.training.learning_to_attend import load_trained
        >>> accuracy, heads = head_by_head(load_trained("agreement").model, "P S V", n=100)
        >>> sorted(heads)
        [(0, 0), (0, 1), (1, 0), (1, 1)]
    """
    x, y = _sentences(task, [structure], n, seed, "heads", **({} if adjectives is None else {"adjectives": adjectives}))
    parse = task.parse(x)
    rows, verb = torch.arange(n), parse.verb
    with torch.no_grad():
        out = model(x)
    accuracy = _share(out.logits[rows, verb].argmax(-1) == y[rows, verb])
    heads = {}
    for layer, block in enumerate(model.blocks):
        for head in range(model.config["num_heads"]):
            with torch.no_grad(), edit_head(block.attention, head, lambda w: zero_rows(w, rows=verb)):
                zeroed = model(x).logits[rows, verb].argmax(-1) == y[rows, verb]
            on_subject = out.attention[layer][rows, head, verb].argmax(-1) == parse.subject
            heads[(layer, head)] = (_share(on_subject), _share(zeroed))
    return accuracy, heads
