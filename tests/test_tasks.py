"""The toy tasks of lesson 12: reversal (position decides) and agreement (content decides), and their splits."""

import pathlib
import re

import pytest
import torch

import attention_lib
from attention_lib.training.grammar import HELDOUT_STRUCTURES, PREPOSITIONS, STRUCTURES
from attention_lib.training.learning_to_attend.tasks import (
    AGREEMENT,
    IGNORE,
    REVERSAL,
    SUBJECT_FIRST,
    VERB_FORMS,
    Task,
    get_task,
    is_heldout,
    make_batch,
)

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
    for task in ("reversal", "agreement", "agreement_subject_first"):
        a, b, c = (make_batch(task, 20, seed=s)[0] for s in (5, 5, 6))
        assert torch.equal(a, b)
        assert not torch.equal(a, c)


def subject_of(words):
    """The subject, found without the task's parser: the first noun that no preposition before it claims."""
    claimed = False
    for word in words:
        if word in PREPOSITIONS:
            claimed = True
        elif word in NOUNS:
            if not claimed:
                return word
            claimed = False
    raise AssertionError(f"no subject in {words}")


@pytest.mark.parametrize("task", [AGREEMENT, SUBJECT_FIRST])
@pytest.mark.parametrize("split", ["train", "heldout"])
def test_agreement_scores_only_the_verb_with_its_subjects_number(task, split):
    x, y = make_batch(task, 500, seed=1, split=split)
    assert x.shape == (500, 22)
    assert ((y != IGNORE).sum(1) == 1).all(), "exactly one scored position per sentence"
    for ids, target in zip(x, y, strict=True):
        words = task.decode(ids)
        verb = int((target != IGNORE).nonzero())
        assert words[verb] in VERB_FORMS
        assert int(target[verb]) == NOUNS[subject_of(words)], f"the answer is the subject's number: {words}"
        assert all(int(i) == task.pad for i in ids[len(words):]), "padding only at the end"
        for i, det in enumerate(words):  # "a" only before a singular noun (maybe with adjectives between)
            if det == "a":
                assert NOUNS[next(w for w in words[i:] if w in NOUNS)] == 0
    assert 0.4 < float(y[y != IGNORE].float().mean()) < 0.6, "singular and plural about equally often"


def test_the_subject_is_often_not_first_and_has_adjectives():
    x, _ = make_batch("agreement", 2000, seed=3)
    parse = AGREEMENT.parse(x)
    assert 0.4 < float((parse.subject != parse.first_noun).float().mean()) < 0.8
    sentences = [" ".join(AGREEMENT.decode(row)) for row in x]
    assert any(re.search(r"(small|big) (black|white) (cat|dog)s? ", s) for s in sentences), "two adjectives"
    assert any(structure.startswith("P") for structure in parse.structure), "a distractor before the subject"
    first, _ = make_batch("agreement_subject_first", 2000, seed=3)
    parse = SUBJECT_FIRST.parse(first)
    assert torch.equal(parse.subject, parse.first_noun), "the shortcut: the first noun is always the subject"


def test_no_heldout_structure_is_ever_in_training():
    train, _ = make_batch("agreement", 20_000, seed=0)
    seen = set(AGREEMENT.parse(train).structure)
    assert seen == set(STRUCTURES) - set(HELDOUT_STRUCTURES), "every training structure, and nothing else"
    heldout, _ = make_batch("agreement", 3000, seed=1234, split="heldout")
    assert set(AGREEMENT.parse(heldout).structure) == set(HELDOUT_STRUCTURES)
    assert AGREEMENT.is_heldout(heldout).all()
    assert not AGREEMENT.is_heldout(train[:3000]).any()


def test_sentences_of_any_structure_fit_and_parse_back():
    g = torch.Generator().manual_seed(0)
    for structure in ("P P P P S V", "S V", "P S P V P", "S P P P V A"):
        x, y = AGREEMENT.sentences([structure], 50, g, adjectives=0 if structure.count("P") > 3 else 0.4)
        assert set(AGREEMENT.parse(x).structure) == {structure}
        assert ((y != IGNORE).sum(1) == 1).all()
    with pytest.raises(ValueError, match=r"can be 25 tokens long, but the model reads at most 22; use fewer"):
        AGREEMENT.sentences(["P P P P S V"], 5, g)
    with pytest.raises(ValueError, match=r"one S and one V, e.g. 'P S V', but got 'P V'"):
        AGREEMENT.sentences(["P V"], 5, g)


@pytest.mark.parametrize("split", ["train", "heldout"])
def test_neither_the_first_nor_the_nearest_noun_gives_the_answer(split):
    """Each shortcut rule is wrong in a quarter or more of the sentences: only the subject always decides."""
    x, y = make_batch("agreement", 2000, seed=2, split=split)
    first_right = nearest_right = 0
    for ids, target in zip(x, y, strict=True):
        words = AGREEMENT.decode(ids)
        verb = int((target != IGNORE).nonzero())
        nouns = [w for w in words[:verb] if w in NOUNS]
        first_right += NOUNS[nouns[0]] == int(target[verb])
        nearest_right += NOUNS[nouns[-1]] == int(target[verb])
    assert first_right / len(x) < 0.8
    assert nearest_right / len(x) < 0.8


def test_no_task_behaviour_is_chosen_by_comparing_names():
    """A task carries its behaviour: nowhere in the package is a task's name compared with a string."""
    root = pathlib.Path(attention_lib.__file__).parent
    for path in root.rglob("*.py"):
        text = path.read_text()
        assert not re.search(r"""(name|task)\s*[!=]=\s*["'](reversal|agreement)""", text), path
        assert not re.search(r"""["'](reversal|agreement)["']\s*[!=]=""", text), path


def test_tasks_are_objects_with_their_own_behaviour():
    assert isinstance(get_task("reversal"), Task)
    assert REVERSAL.answer_words(["1", "2"], [2, 1]) == ["2", "1"]
    assert AGREEMENT.answer_words(["the", "cats", "purr(s)"], [0, 0, 1]) == ["", "", "purr"]
    assert AGREEMENT.answer_text(["the", "cats", "purr(s)"], ["", "", "purr"]) == "the cats purr"
    assert REVERSAL.recipe["num_layers"] == 1
    assert AGREEMENT.recipe["num_layers"] == 2, "one layer cannot tell a subject from a distractor at one position"


@pytest.mark.parametrize("task", ["reversal", "agreement", "agreement_subject_first"])
def test_training_and_heldout_splits_never_overlap(task):
    spec = get_task(task)
    train, _ = make_batch(task, 4000, seed=0)
    heldout, _ = make_batch(task, 500, seed=1234, split="heldout")
    assert not spec.is_heldout(train).any()
    assert spec.is_heldout(heldout).all()
    seen = {tuple(r.tolist()) for r in train}
    assert not any(tuple(r.tolist()) in seen for r in heldout)


@pytest.mark.parametrize("task", ["reversal", "agreement_subject_first"])
def test_the_hash_holds_out_about_one_in_eight(task):
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
    ("agreement", " ".join(["the"] * 23), r"at most 22 tokens, but got 23"),
    ("agreement", "", "the input is empty"),
])
def test_encode_errors_say_what_is_allowed(task, tokens, match):
    with pytest.raises(ValueError, match=match):
        get_task(task).encode(tokens)


def test_encode_takes_ids_too():
    assert REVERSAL.encode([3, 1, 4, 1, 5, 9, 2, 6]).tolist() == [3, 1, 4, 1, 5, 9, 2, 6]
    ids = AGREEMENT.encode("near the dogs the cat purr(s)")
    assert torch.equal(AGREEMENT.encode(ids.tolist()), ids)
    assert torch.equal(AGREEMENT.encode(ids), ids)


def test_encode_rejects_what_is_neither_tokens_nor_ids():
    with pytest.raises(TypeError, match="not a mix"):
        REVERSAL.encode([1, "2", 3])
    with pytest.raises(TypeError, match="but got float"):
        REVERSAL.encode(1.5)
    with pytest.raises(TypeError, match="a name such as 'reversal' or a Task, but got int"):
        get_task(3)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"task": "sorting", "n": 3}, r"unknown task 'sorting'; the tasks are \['agreement', "
                                  r"'agreement_attractors', 'agreement_subject_first', 'reversal'\]"),
    ({"task": "reversal", "n": 0}, "n must be positive, but n=0"),
    ({"task": "reversal", "n": 3, "split": "test"}, "split must be 'train' or 'heldout'"),
])
def test_make_batch_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_batch(**kwargs)


# --- attractors: distractors whose number disagrees with the subject's ------------------------------------------

def numbers_of(words):
    """The subject's number and the distractors' numbers, read without the task's parser."""
    subject = subject_of(words)
    nouns = [w for w in words if w in NOUNS]
    nouns.remove(subject)
    return NOUNS[subject], [NOUNS[w] for w in nouns]


@pytest.mark.parametrize("structure", ["P P P S V", "S P P V A", "P S V P", "P P S P P V"])
def test_a_sentence_has_exactly_the_attractors_asked_for(structure):
    g = torch.Generator().manual_seed(4)
    distractors = structure.split().count("P")
    adjectives = 0 if distractors > 3 else 0.4
    for m in range(distractors + 1):
        x, y = AGREEMENT.sentences([structure], 200, g, attractors=m, adjectives=adjectives)
        for row, target in zip(x, y, strict=True):
            subject, others = numbers_of(AGREEMENT.decode(row))
            assert sum(n != subject for n in others) == m
            assert int(target[target != IGNORE]) == subject
        which = [[n != s for n in o] for s, o in map(numbers_of, map(AGREEMENT.decode, x))]
        if 0 < m < distractors:  # which distractors disagree is drawn, not always the same ones
            assert len({tuple(w) for w in which}) > 1


def test_uniform_attractors_are_as_many_of_each_number():
    x, _ = AGREEMENT.sentences(["P P P S V"], 4000, torch.Generator().manual_seed(5), attractors="uniform")
    counts = torch.bincount(torch.tensor([sum(n != s for n in o)
                                          for s, o in map(numbers_of, map(AGREEMENT.decode, x))]), minlength=4)
    assert (counts - 1000).abs().max() < 120, counts  # a coin toss for each would give 500 / 1500 / 1500 / 500


def test_by_default_each_distractor_is_a_coin_toss():
    x, _ = AGREEMENT.sentences(["P P P S V"], 4000, torch.Generator().manual_seed(5))
    counts = torch.bincount(torch.tensor([sum(n != s for n in o)
                                          for s, o in map(numbers_of, map(AGREEMENT.decode, x))]), minlength=4)
    assert (counts - torch.tensor([500, 1500, 1500, 500])).abs().max() < 120, counts


def test_the_attractors_task_trains_on_attractors_and_is_measured_on_coin_tosses():
    attractors = get_task("agreement_attractors")
    assert attractors.structures == AGREEMENT.structures
    assert attractors.heldout_structures == AGREEMENT.heldout_structures
    for split in ("train", "heldout"):
        mine, theirs = make_batch(attractors, 300, seed=2, split=split), make_batch(AGREEMENT, 300, seed=2, split=split)
        assert torch.equal(mine[0], theirs[0]) == (split == "heldout")  # the held-out split is the same sentences


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"attractors": 4}, r"'P P P S V' has 3 distractors \(P\), so it cannot have attractors=4; ask for 0 to 3"),
    ({"attractors": -1}, "cannot have attractors=-1"),
    ({"attractors": "all"}, "attractors must be None, a number of distractors or 'uniform', but got 'all'"),
])
def test_attractors_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        AGREEMENT.sentences(["P P P S V"], 5, torch.Generator(), **kwargs)
