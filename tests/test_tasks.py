"""The toy tasks of lesson 12: reversal (position decides) and agreement (content decides), and their splits."""

import pytest
import torch

from attention_lib.training.tasks import AGREEMENT, IGNORE, REVERSAL, VERB_FORMS, get_task, is_heldout, make_batch

NOUNS = {"cat": 0, "dog": 0, "cats": 1, "dogs": 1}


def test_reversal_targets_are_the_digits_backwards():
    x, y = make_batch("reversal", 50, seed=3)
    assert x.shape == y.shape == (50, 8)
    assert x.dtype == y.dtype == torch.long
    assert torch.equal(y[:, 0], x[:, 7])
    assert torch.equal(y[:, 7], x[:, 0])
    assert torch.equal(y, x.flip(1))
    assert int(x.min()) >= 0
    assert int(x.max()) <= 9


def test_batches_are_seeded():
    for task in ("reversal", "agreement"):
        a, b, c = (make_batch(task, 20, seed=s)[0] for s in (5, 5, 6))
        assert torch.equal(a, b)
        assert not torch.equal(a, c)


def test_agreement_scores_only_the_verb_with_its_subjects_number():
    x, y = make_batch("agreement", 500, seed=1)
    assert x.shape == (500, AGREEMENT.max_len)
    assert ((y != IGNORE).sum(1) == 1).all(), "exactly one scored position per sentence"
    with_distractor = 0
    for ids, target in zip(x, y, strict=True):
        words = AGREEMENT.decode(ids)
        verb = int((target != IGNORE).nonzero())
        assert words[verb] in VERB_FORMS
        nouns = [w for w in words[:verb] if w in NOUNS]
        assert int(target[verb]) == NOUNS[nouns[0]], f"the answer is the subject's number: {words}"
        with_distractor += len(nouns) > 1
        assert all(int(i) == AGREEMENT.pad for i in ids[len(words):]), "padding only at the end"
        for i, det in enumerate(words):  # "a" only before a singular noun (maybe with an adjective between)
            if det == "a":
                assert NOUNS[next(w for w in words[i:] if w in NOUNS)] == 0
    assert with_distractor > 300
    assert 0.4 < float(y[y != IGNORE].float().mean()) < 0.6, "singular and plural about equally often"


def test_distractors_often_disagree_with_the_subject():
    """The nearest noun before the verb gives the answer only about half of the time when there is a distractor."""
    x, y = make_batch("agreement", 2000, seed=2, split="heldout")
    right, total = 0, 0
    for ids, target in zip(x, y, strict=True):
        words = AGREEMENT.decode(ids)
        verb = int((target != IGNORE).nonzero())
        nouns = [w for w in words[:verb] if w in NOUNS]
        if len(nouns) > 1:
            total += 1
            right += NOUNS[nouns[-1]] == int(target[verb])
    assert 0.4 < right / total < 0.6


@pytest.mark.parametrize("task", ["reversal", "agreement"])
def test_training_and_heldout_splits_never_overlap(task):
    train, _ = make_batch(task, 4000, seed=0)
    heldout, _ = make_batch(task, 500, seed=1234, split="heldout")
    assert not is_heldout(train).any()
    assert is_heldout(heldout).all()
    seen = {tuple(r.tolist()) for r in train}
    assert not any(tuple(r.tolist()) in seen for r in heldout)
    spec = get_task(task)
    anything = torch.randint(0, len(spec.vocab), (4000, spec.max_len), generator=torch.Generator().manual_seed(0))
    share = float(is_heldout(anything).float().mean())
    assert 0.08 < share < 0.17, "about 1 in 8 of all possible examples is held out"


def test_encode_and_decode_round_trip():
    assert REVERSAL.encode("3 1 4 1 5 9 2 6").tolist() == [3, 1, 4, 1, 5, 9, 2, 6]
    sentence = ["the", "cat", "near", "the", "dogs", "purr(s)"]
    assert AGREEMENT.decode(AGREEMENT.encode(sentence)) == sentence
    assert get_task(REVERSAL) is REVERSAL


@pytest.mark.parametrize(("task", "tokens", "match"), [
    ("reversal", "1 2 3", r"exactly 8 digits, but got 3"),
    ("reversal", "1 2 3 4 5 6 7 8 9", r"at most 8 tokens, but got 9"),
    ("reversal", "1 2 3 4 5 6 7 x", r"\['x'\] are not in the reversal vocabulary; allowed: \['0', '1'"),
    ("agreement", "the mouse purr(s)", r"\['mouse'\] are not in the agreement vocabulary; allowed: .*'cats'"),
    ("agreement", "the cat <pad> purr(s)", r"\['<pad>'\] are not in the agreement vocabulary"),
    ("agreement", " ".join(["the"] * 14), r"at most 13 tokens, but got 14"),
    ("agreement", "", "the input is empty"),
])
def test_encode_errors_say_what_is_allowed(task, tokens, match):
    with pytest.raises(ValueError, match=match):
        get_task(task).encode(tokens)


def test_encode_rejects_non_strings():
    with pytest.raises(TypeError, match="a string or a list of token strings"):
        REVERSAL.encode([1, 2, 3])


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"task": "sorting", "n": 3}, r"unknown task 'sorting'; the tasks are \['agreement', 'reversal'\]"),
    ({"task": "reversal", "n": 0}, "n must be a positive int"),
    ({"task": "reversal", "n": 3, "split": "test"}, "split must be 'train' or 'heldout'"),
])
def test_make_batch_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_batch(**kwargs)
