"""Lesson 17's trained latent models: each ships small and loads as described, what was stored with it is what it
does, what the lesson says of them against lesson 15's models at the same cache holds, and training one is seeded
and refused when asked two ways at once."""

import pytest
import torch
from test_generation_models import assert_quality_repeats

from attention_lib import TinyLatentLM
from attention_lib.training.generation import (
    KV_HEADS,
    load_lm,
    make_texts,
    subject_position,
    train_lm,
    verb_agreement,
    verb_position,
)
from attention_lib.training.latent_and_paged import (
    CACHE_NUMBERS,
    HELDOUT_SEED,
    LATENT,
    SEEDS,
    build_latent_lm,
    fresh_text_loss,
    load_latent_lm,
    subject_far_back,
    train_latent_lm,
    unseen_texts,
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
    """The stored counts, except for items that rest on a near tie (see ``test_generation_models.NEAR_TIE``)."""
    model, measured = load_latent_lm(numbers, seed)
    assert_quality_repeats(model, measured)


def _compared():
    """Lesson 17's table: per cache size, ``(loss gaps, far-verb gaps, far shares, the wider spread of a model's
    losses over its seeds)``, the gaps of the latent model minus its lesson 15 partner, seed by seed."""
    far = subject_far_back(8)
    table = {}
    for variant, numbers in CACHE_NUMBERS.items():
        ours = [load_latent_lm(numbers, seed)[0] for seed in SEEDS]
        theirs = [load_lm(variant, seed)[0] for seed in SEEDS]
        mine, yours = [fresh_text_loss(a, s) for a, s in zip(ours, SEEDS, strict=True)], [
            fresh_text_loss(b, s) for b, s in zip(theirs, SEEDS, strict=True)]
        loss = [a - b for a, b in zip(mine, yours, strict=True)]
        share = {m: verb_agreement(m, far).float().mean().item() for m in ours + theirs}
        spread = max(max(mine) - min(mine), max(yours) - min(yours))
        table[numbers] = (loss, [share[a] - share[b] for a, b in zip(ours, theirs, strict=True)],
                          list(share.values()), spread)
    return table


def test_what_lesson_17_says_of_the_latent_models_at_equal_cache():
    """Gaps of a few thousandths of a nat, none larger than the wider model's spread over its seeds: on the first
    draw of texts the latent higher on all three seeds at C = 64, mixed at 32 and 16; the one far-verb gap to see by
    eye is one seed of the r = 28 latent, every other model gets all but a few of the far verbs right."""
    table = _compared()
    assert all(abs(gap) < 0.01 for loss, *_ in table.values() for gap in loss)
    assert all(max(map(abs, loss)) <= spread for loss, _, _, spread in table.values())
    assert [sum(gap > 0 for gap in table[c][0]) for c in (64, 32, 16)] == [3, 2, 1]
    shares = [share for _, _, all_shares, _ in table.values() for share in all_shares]
    assert sum(share < 0.99 for share in shares) == 1
    assert min(shares) == min(table[32][2][:3])  # the r = 28 latent's
    assert min(shares) > 0.97


def test_at_c_64_the_sign_of_seed_0s_gap_changes_with_the_draw_of_texts():
    """What lesson 17 says of two more draws of 2,000 unseen texts at C = 64: seed 0's gap, under a thousandth,
    changes sign with the draw, seeds 1 and 2 stay higher on every draw, and one model's loss moves between draws by
    about as much as most gaps (more than a thousandth, under a hundredth)."""
    gaps, moved = {}, 0.0
    for seed in SEEDS:
        mha, latent = load_lm("mha", seed)[0], load_latent_lm(64, seed)[0]
        losses = [(fresh_text_loss(mha, seed, seed=draw), fresh_text_loss(latent, seed, seed=draw))
                  for draw in (HELDOUT_SEED, HELDOUT_SEED + 1, HELDOUT_SEED + 2)]
        gaps[seed] = [b - a for a, b in losses]
        moved = max(moved, *(max(ls) - min(ls) for ls in zip(*losses, strict=True)))
    assert all(abs(gap) < 0.001 for gap in gaps[0])
    assert min(gaps[0]) < 0 < max(gaps[0])
    assert all(gap > 0 for seed in (1, 2) for gap in gaps[seed])
    assert 0.001 < moved < 0.01


def test_unseen_texts_leave_out_every_training_text():
    trained = {tuple(t.tolist()) for t in make_texts(600 * 64, seed=1, split="train")}
    fresh = unseen_texts(1, n=500)
    assert len(fresh) == 500
    assert not any(tuple(t.tolist()) in trained for t in fresh)
    assert torch.equal(unseen_texts(1, n=500), fresh)  # seeded
    far = subject_far_back(8, n=400)
    assert bool((verb_position(far) - subject_position(far) >= 8).all())


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
