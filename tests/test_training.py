"""The training recipe of lesson 12: the shipped models reach their stated accuracy on fresh held-out data,
and the recipe in the package makes models of that quality (training takes seconds)."""

import pytest
import torch

from attention_lib.training import evaluate, load_trained, make_batch, train
from attention_lib.training.tasks import AGREEMENT, IGNORE

FRESH_SEED = 20_261_130  # neither the training seed nor the seed of the stored held-out measurements


def mirror_share(model) -> torch.Tensor:
    """Per head, the share of rows whose strongest key is the mirror position (the anti-diagonal)."""
    x, _ = make_batch("reversal", 1000, seed=FRESH_SEED, split="heldout")
    with torch.no_grad():
        weights = model(x).attention[0]  # (N, H, L, L)
    return (weights.argmax(-1) == torch.arange(7, -1, -1)).float().mean(dim=(0, 2))


def subject_share(model) -> torch.Tensor:
    """Per head, the share of sentences with a distractor where the verb looks hardest at its subject."""
    x, y = make_batch("agreement", 1000, seed=FRESH_SEED, split="heldout")
    nouns = {AGREEMENT.vocab.index(w) for w in ("cat", "cats", "dog", "dogs")}
    verbs, subjects, keep = [], [], []
    for row, target in zip(x.tolist(), y.tolist(), strict=True):
        verb = next(i for i, t in enumerate(target) if t != IGNORE)
        positions = [i for i in range(verb) if row[i] in nouns]
        verbs.append(verb)
        subjects.append(positions[0])
        keep.append(len(positions) > 1)
    with torch.no_grad():
        weights = model(x).attention[0]  # (N, H, L, L)
    rows = weights[torch.arange(len(x)), :, torch.tensor(verbs)]  # (N, H, L)
    hits = rows.argmax(-1) == torch.tensor(subjects)[:, None]  # (N, H)
    return hits[torch.tensor(keep)].float().mean(0)


@pytest.mark.parametrize("task", ["reversal", "agreement"])
def test_shipped_model_reaches_its_stated_accuracy_on_fresh_heldout_data(task):
    trained = load_trained(task)
    assert trained.heldout_accuracy >= 0.99
    assert evaluate(trained.model, task, n=3000, seed=FRESH_SEED)["sequence_accuracy"] >= 0.99


def test_shipped_models_attend_as_the_lesson_says():
    assert (mirror_share(load_trained("reversal").model) >= 0.95).all()
    assert subject_share(load_trained("agreement").model).max() >= 0.95


@pytest.fixture(scope="module")
def reversal_run():
    return train("reversal", snapshot_steps=(0, 40, 250))


@pytest.fixture(scope="module")
def agreement_run():
    return train("agreement")


def test_recipe_reproduces_the_reversal_model(reversal_run):
    assert evaluate(reversal_run.model, "reversal", n=3000, seed=FRESH_SEED)["sequence_accuracy"] >= 0.99
    assert (mirror_share(reversal_run.model) >= 0.95).all()
    x, _ = make_batch("reversal", 200, seed=FRESH_SEED, split="heldout")
    with torch.no_grad():
        mine, shipped = reversal_run.model(x).attention[0], load_trained("reversal").model(x).attention[0]
    assert float((mine - shipped).abs().mean()) < 0.01, "same recipe and seed: the same maps as the shipped model"


def test_recipe_reproduces_the_agreement_model(agreement_run):
    assert evaluate(agreement_run.model, "agreement", n=3000, seed=FRESH_SEED)["sequence_accuracy"] >= 0.99
    assert subject_share(agreement_run.model).max() >= 0.95


def test_without_positions_reversal_fails():
    run = train("reversal", use_positions=False)
    scores = evaluate(run.model, "reversal", n=1000, seed=FRESH_SEED)
    assert scores["token_accuracy"] < 0.5
    assert scores["sequence_accuracy"] < 0.05
    assert run.losses[-1] > 1.0


def test_losses_and_snapshots(reversal_run):
    assert len(reversal_run.losses) == 250
    assert reversal_run.losses[-1] < 0.05 < 1.0 < reversal_run.losses[0]
    assert sorted(reversal_run.snapshots) == [0, 40, 250]
    first, last = reversal_run.snapshots[0][0], reversal_run.snapshots[250][0]  # (4, H, 8, 8) each
    assert first.shape == (4, 2, 8, 8)
    mirror = torch.arange(7, -1, -1)
    on_mirror = [float(m[:, :, torch.arange(8), mirror].mean()) for m in (first, last)]
    assert on_mirror[0] < 0.3 < 0.9 < on_mirror[1], "the anti-diagonal emerges during training"


def test_training_is_seeded_and_restores_the_thread_count():
    threads = torch.get_num_threads()
    a, b, c = train("reversal", steps=15), train("reversal", steps=15), train("reversal", steps=15, seed=1)
    assert a.losses == b.losses
    assert a.losses != c.losses
    assert torch.get_num_threads() == threads


def test_evaluate_counts_scored_positions_only():
    model = train("agreement", steps=1).model
    scores = evaluate(model, "agreement", n=200)
    assert scores["token_accuracy"] == scores["sequence_accuracy"], "one scored verb per sentence"


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"task": "sorting"}, "unknown task 'sorting'"),
    ({"task": "reversal", "steps": 0}, "steps must be a positive int, but steps=0"),
])
def test_train_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        train(**kwargs)
