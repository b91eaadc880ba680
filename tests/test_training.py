"""The training recipe of lesson 12: the shipped models reach their stated accuracy on fresh held-out data,
and the recipe in the package makes models of that quality (training takes seconds)."""

import pytest
import torch

from attention_lib.training import evaluate, load_trained, make_batch, train
from attention_lib.training.grammar import HELDOUT_STRUCTURES
from attention_lib.training.probes import probe_agreement, subject_head
from attention_lib.training.tasks import get_task

FRESH_SEED = 20_261_130  # neither the training seed nor the seed of the stored held-out measurements


def mirror_share(model) -> torch.Tensor:
    """Per head, the share of rows whose strongest key is the mirror position (the anti-diagonal)."""
    x, _ = make_batch("reversal", 1000, seed=FRESH_SEED, split="heldout")
    with torch.no_grad():
        weights = model(x).attention[0]  # (N, H, L, L)
    return (weights.argmax(-1) == torch.arange(7, -1, -1)).float().mean(dim=(0, 2))


MOVED = ["P S V", "P P S V", "P S P V", "P P P S V"]  # the subject is not the first noun


def subject_probes(model, structures=HELDOUT_STRUCTURES):
    """The model's accuracy and its verb-to-subject head on fresh sentences of each structure."""
    layer, head = subject_head(model, seed=FRESH_SEED)
    return probe_agreement(model, structures, layer=layer, head=head, n=500, seed=FRESH_SEED)


@pytest.mark.parametrize(("task", "least"), [("reversal", 0.99), ("agreement", 0.9)])
def test_shipped_model_reaches_its_stated_accuracy_on_fresh_heldout_data(task, least):
    trained = load_trained(task)
    assert trained.heldout_accuracy >= least
    fresh = evaluate(trained.model, task, n=3000, seed=FRESH_SEED)["sequence_accuracy"]
    assert abs(fresh - trained.heldout_accuracy) < 0.02


def test_shipped_models_attend_as_the_lesson_says():
    assert (mirror_share(load_trained("reversal").model) >= 0.95).all()
    probes = subject_probes(load_trained("agreement").model)
    assert sum(p.on_subject for p in probes) / len(probes) >= 0.8, "the verb's head finds the subject"
    moved = [p for p in probes if not p.structure.startswith("S")]
    assert max(p.on_first_noun for p in moved) <= 0.05, "where the subject is not first, not the first noun"


@pytest.fixture(scope="module")
def reversal_run():
    return train("reversal", snapshot_steps=(0, 40, 250))


@pytest.fixture(scope="module")
def agreement_run():
    return train("agreement")


def test_subject_first_data_teaches_a_shortcut():
    """Trained on sentences whose subject is always first, a model fails when the subject moves."""
    model = train("agreement_subject_first").model
    assert evaluate(model, "agreement_subject_first", n=1000, seed=FRESH_SEED)["sequence_accuracy"] >= 0.99
    layer, head = subject_head(model, get_task("agreement_subject_first"))
    moved = probe_agreement(model, MOVED, layer=layer, head=head, n=500, seed=FRESH_SEED)
    assert max(p.accuracy for p in moved) < 0.7
    assert max(p.on_subject for p in moved) < 0.3


def test_recipe_reproduces_the_reversal_model(reversal_run):
    assert evaluate(reversal_run.model, "reversal", n=3000, seed=FRESH_SEED)["sequence_accuracy"] >= 0.99
    assert (mirror_share(reversal_run.model) >= 0.95).all()
    x, _ = make_batch("reversal", 200, seed=FRESH_SEED, split="heldout")
    with torch.no_grad():
        mine, shipped = reversal_run.model(x).attention[0], load_trained("reversal").model(x).attention[0]
    assert float((mine - shipped).abs().mean()) < 0.01, "same recipe and seed: the same maps as the shipped model"


def test_recipe_reproduces_the_agreement_model(agreement_run):
    assert evaluate(agreement_run.model, "agreement", n=3000, seed=FRESH_SEED)["sequence_accuracy"] >= 0.9
    probes = subject_probes(agreement_run.model, MOVED)
    assert min(p.accuracy for p in probes) >= 0.8, "right on at least 4 in 5 sentences of every moved structure"
    x, _ = make_batch("agreement", 200, seed=FRESH_SEED, split="heldout")
    with torch.no_grad():
        mine, shipped = agreement_run.model(x).attention, load_trained("agreement").model(x).attention
    assert max(float((a - b).abs().mean()) for a, b in zip(mine, shipped, strict=True)) < 0.01


def test_a_structures_probe_does_not_depend_on_the_other_structures_listed():
    model = load_trained("agreement").model
    alone = probe_agreement(model, ["P S P P V P"], layer=1, head=0, n=200, adjectives=0)[0]
    listed = probe_agreement(model, ["P P P P S V", "P S P P V P"], layer=1, head=0, n=200, adjectives=0)[1]
    assert alone == listed


def test_other_runs_of_the_agreement_recipe_give_what_lesson_12_says():
    """Lesson 12 says what other seeds of the agreement recipe give: 92 %, 86 % and 89 % on the held-out structures
    for seeds 1, 2 and 3; and, over seeds 0 to 3, 51 % to 54 % on ``P P P P S V`` sentences and 53 % to 95 % on
    ``P S P P V P`` ones (no adjectives). Each within a point and a half of the lesson's numbers."""
    models = {0: load_trained("agreement").model} | {seed: train("agreement", seed=seed).model for seed in (1, 2, 3)}
    for seed, stated in ((1, 0.92), (2, 0.86), (3, 0.89)):
        accuracy = evaluate(models[seed], "agreement")["sequence_accuracy"]
        assert abs(accuracy - stated) < 0.015, (seed, accuracy)
    beyond = {"P P P P S V": [], "P S P P V P": []}  # the lesson probes them in a longer list: same sentences
    for model in models.values():  # the accuracy does not depend on which head is probed
        for probe in probe_agreement(model, list(beyond), layer=1, head=0, adjectives=0):
            beyond[probe.structure].append(probe.accuracy)
    for structure, (low, high) in {"P P P P S V": (0.51, 0.54), "P S P P V P": (0.53, 0.95)}.items():
        found = (min(beyond[structure]), max(beyond[structure]))
        assert abs(found[0] - low) < 0.015, (structure, found)
        assert abs(found[1] - high) < 0.015, (structure, found)


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


def test_evaluate_refuses_a_model_of_another_task():
    with pytest.raises(ValueError, match=r"does not fit the task 'reversal': the task needs vocab_size=10, "
                                         r"num_answers=10 and max_len >= 8, but the model has vocab_size=18, "
                                         r"num_answers=2, max_len=22. Was it trained on another task"):
        evaluate(load_trained("agreement").model, "reversal")
    with pytest.raises(ValueError, match="does not fit the task 'agreement'"):
        evaluate(load_trained("reversal").model, "agreement")
    with pytest.raises(TypeError, match="model must be a TinyTransformer.*but got str"):
        evaluate("reversal", "reversal")
    subject_first = train("agreement_subject_first", steps=1).model  # the same sentences: it can be measured
    assert 0 <= evaluate(subject_first, "agreement", n=50)["sequence_accuracy"] <= 1


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"task": "sorting"}, "unknown task 'sorting'"),
    ({"task": "reversal", "steps": 0}, "steps must be positive, but steps=0"),
])
def test_train_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        train(**kwargs)
