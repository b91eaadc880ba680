"""Lesson 17's trained latent models: each ships small and loads as described, what was stored with it is what it
does, it learns the grammar as lesson 15's models do at the same cache, and training one is seeded and refused when
asked two ways at once."""

import pytest
import torch

from attention_lib import TinyLatentLM
from attention_lib.training.generation import KV_HEADS, load_lm, quality, train_lm
from attention_lib.training.latent_and_paged import (
    CACHE_NUMBERS,
    LATENT,
    SEEDS,
    build_latent_lm,
    fresh_text_loss,
    load_latent_lm,
    train_latent_lm,
)
from attention_lib.training.latent_and_paged.shipped import shipped_path

pytestmark = pytest.mark.usefixtures("one_thread")  # see conftest.py

SHIPPED = [(numbers, seed) for numbers in CACHE_NUMBERS.values() for seed in SEEDS]


def test_the_cache_sizes_are_those_of_lesson_15s_models():
    assert CACHE_NUMBERS == {"mha": 64, "gqa": 32, "mqa": 16}
    for variant, numbers in CACHE_NUMBERS.items():
        lesson_15, _ = load_lm(variant)
        cache = lesson_15.new_cache(4)
        lesson_15(torch.tensor([[1, 2, 3]]), cache)
        per_token_per_layer = cache.nbytes() // (3 * len(lesson_15.layers) * 4)  # 3 tokens, float32
        assert per_token_per_layer == numbers == 2 * KV_HEADS[variant] * 8


@pytest.mark.parametrize(("numbers", "seed"), SHIPPED)
def test_every_shipped_latent_model_loads_small_and_as_described(numbers, seed):
    assert shipped_path(numbers, seed).stat().st_size < 80_000
    model, measured = load_latent_lm(numbers, seed)
    assert isinstance(model, TinyLatentLM)
    assert not model.training
    assert model.config["kv_rank"] + model.config["rope_dim"] == numbers
    assert {k: model.config[k] for k in LATENT} == LATENT
    cache = model.new_cache(5)
    model(torch.tensor([[1, 2, 3, 4, 5]]), cache)
    assert cache.numbers_per_token() == numbers
    assert next(model.parameters()).dtype == torch.float32
    assert set(measured) == {"agreement", "agreement held out", "well-formed", "agreeing"}


@pytest.mark.slow
@pytest.mark.parametrize(("numbers", "seed"), SHIPPED)
def test_what_was_stored_is_what_the_latent_model_does(numbers, seed):
    model, measured = load_latent_lm(numbers, seed)
    assert quality(model) == pytest.approx(measured, abs=1e-9)


@pytest.mark.parametrize(("variant", "numbers"), list(CACHE_NUMBERS.items()))
def test_at_the_same_cache_the_latent_models_learn_the_grammar_as_lesson_15s_do(variant, numbers):
    """What lesson 17 says of its table: both families write agreeing text on every seed (at least 97 % of the
    completions), and at each cache size the latent model's losses over the seeds overlap its partner's."""
    ours = [load_latent_lm(numbers, seed) for seed in SEEDS]
    theirs = [load_lm(variant, seed) for seed in SEEDS]
    for _, measured in ours + theirs:
        assert measured["well-formed"] >= 0.99
        assert measured["agreeing"] >= 0.97
    loss_ours, loss_theirs = [fresh_text_loss(m) for m, _ in ours], [fresh_text_loss(m) for m, _ in theirs]
    assert max(loss_ours) >= min(loss_theirs)  # the two ranges overlap
    assert max(loss_theirs) >= min(loss_ours)
    assert all(1.0 < loss < 1.5 for loss in loss_ours + loss_theirs)  # trained: an untrained model is near 3.1


def test_a_fresh_model_caches_what_it_is_built_for_and_is_refused_below_the_rotary_part():
    assert build_latent_lm(16).config["kv_rank"] == 12
    with pytest.raises(ValueError, match="cache_numbers must be at least 5"):
        build_latent_lm(4)
    with pytest.raises(TypeError, match="cache_numbers"):
        build_latent_lm(16.0)
    with pytest.raises(ValueError, match=r"cache_numbers must be one of \[16, 32, 64\]"):
        load_latent_lm(48)
    with pytest.raises(ValueError, match=r"ship for seeds \[0, 1, 2\]"):
        load_latent_lm(16, seed=7)


def test_training_a_latent_model_is_seeded_and_learns():
    first, again = train_latent_lm(16, seed=3, steps=30), train_latent_lm(16, seed=3, steps=30)
    assert first.losses == again.losses
    assert first.losses[-1] < first.losses[0] - 0.5
    assert train_latent_lm(16, seed=4, steps=2).losses != first.losses[:2]


def test_train_lm_takes_a_model_or_its_heads_not_both():
    with pytest.raises(ValueError, match="give either build or num_kv_heads and window"):
        train_lm(2, steps=1, build=lambda: build_latent_lm(16))
    with pytest.raises(ValueError, match="give either build or num_kv_heads and window"):
        train_lm(window=4, steps=1, build=lambda: build_latent_lm(16))
