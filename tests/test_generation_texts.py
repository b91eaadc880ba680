"""Lesson 15's texts and the grammar checker: the texts are the grammar's sentences framed for a language model,
and the checker accepts every sentence the grammar makes and refuses the slips a model can make."""

import pytest
import torch

from attention_lib.training.generation import check_sentences, decode, encode, make_texts, prompts_before_the_verb
from attention_lib.training.generation.texts import (
    BOS,
    END,
    MAX_LEN,
    PAD,
    VOCAB,
    rates,
    subject_position,
    verb_position,
)
from attention_lib.training.grammar import HELDOUT_STRUCTURES, STRUCTURES


def test_texts_are_framed_sentences_with_the_verb_in_its_right_form():
    texts = make_texts(500, seed=0)
    assert texts.shape == (500, MAX_LEN)
    assert bool((texts[:, 0] == BOS).all())
    for row in texts:
        words = decode(row).split()
        assert words[-1] == "."
        assert words.count(".") == 1
        assert "(s)" not in " ".join(words)
    verdicts = check_sentences(texts)
    assert all(v.well_formed and v.agrees for v in verdicts)
    assert {v.structure for v in verdicts} <= set(STRUCTURES) - set(HELDOUT_STRUCTURES)


def test_the_heldout_split_has_only_heldout_structures_and_the_checker_accepts_every_structure():
    held = check_sentences(make_texts(300, seed=1, split="heldout"))
    assert {v.structure for v in held} == set(HELDOUT_STRUCTURES)
    every = check_sentences(make_texts(2000, seed=2, structures=STRUCTURES))
    assert {v.structure for v in every} == set(STRUCTURES)
    assert all(v.well_formed and v.agrees for v in every)


def test_padding_follows_the_full_stop_and_seeds_repeat():
    texts = make_texts(50, seed=3)
    ends = (texts == END).int().argmax(1)
    for row, end in zip(texts, ends, strict=True):
        assert bool((row[end + 1:] == PAD).all())
    assert torch.equal(make_texts(5, seed=4), make_texts(5, seed=4))
    assert not torch.equal(make_texts(5, seed=4), make_texts(5, seed=5))


@pytest.mark.parametrize(("text", "structure", "well_formed", "agrees"), [
    ("<bos> the cat purrs .", "S V", True, True),
    ("<bos> the cats purr softly .", "S V A", True, True),
    ("<bos> near the dogs the small black cat purrs .", "P S V", True, True),
    ("<bos> the cat near the dogs purr .", "S P V", True, False),  # agreement with the nearer noun
    ("<bos> near a dog the cats barks .", "P S V", True, False),
    ("<bos> the cat purrs", "S V", False, False),  # never closed
    ("<bos> the cat purrs softly near the dogs .", "S V A P", False, False),  # a structure the grammar never makes
    ("<bos> cat purrs .", "?", False, False),  # no determiner
    ("<bos> a cats purr .", "?", False, False),  # "a" before a plural
    ("<bos> the black small cat purrs .", "?", False, False),  # colour before size
    ("<bos> the cat purrs purrs .", "S V V", False, False),
    ("<bos> the cat the dog purrs .", "S S V", False, False),
    ("<bos> near the dogs purr .", "P V", False, False),  # no subject
    ("<bos> the cat near purrs .", "S ?", False, False),  # a preposition without its noun phrase
    ("the cat purrs .", "?", False, False),  # no <bos>
    ("<bos> the cat . purrs", "S", False, False),  # stops before the verb
])
def test_the_checker_reads_each_text(text, structure, well_formed, agrees):
    verdict = check_sentences([text])[0]
    assert tuple(verdict) == (structure, well_formed, agrees)


def test_the_checker_reads_ids_tensors_and_text_alike():
    text = "<bos> behind the cats a dog barks ."
    ids = encode(text)
    assert check_sentences([text]) == check_sentences([ids]) == check_sentences(ids[None])
    assert rates(check_sentences([text, "<bos> a dog bark ."])) == {"well-formed": 1.0, "agreeing": 0.5}


def test_prompts_stop_before_the_verb_and_positions_are_found():
    texts = make_texts(100, seed=6)
    verbs, subjects = verb_position(texts), subject_position(texts)
    for text, prompt, v, s in zip(texts, prompts_before_the_verb(texts), verbs, subjects, strict=True):
        assert torch.equal(prompt, text[:v])
        assert VOCAB[int(text[v])] in ("purrs", "purr", "barks", "bark", "sits", "sit")
        assert VOCAB[int(text[s])] in ("cat", "cats", "dog", "dogs")
        assert 0 < s < v


@pytest.mark.parametrize(("call", "error", "match"), [
    (lambda: encode("<bos> the cow moos ."), ValueError, r"words \['cow', 'moos'\] are not in the vocabulary"),
    (lambda: make_texts(0), ValueError, "n must be positive"),
    (lambda: make_texts(3, split="test"), ValueError, "split must be 'train' or 'heldout'"),
    (lambda: make_texts(3, structures=["S S V"]), ValueError, "one S and one V"),
])
def test_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()
