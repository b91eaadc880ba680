"""Lesson 16's hop-loop checker on a ring of 4 processes: every right answer passes, every slip gets its own hint,
an all-gather is refused by its bytes, and the learner's function travels to the processes as a notebook's would
(its source), or by name."""

import pytest
import ring_answers as answers
import torch

from attention_lib.distributed import ProcessRing
from attention_lib.exercises.ring_attention import SLIPS, check_ring_forward
from attention_lib.exercises.ring_attention.hop_trials import TRIALS
from attention_lib.exercises.ring_attention.shipping import NotShippable, ship, unship

WRONG = [  # (answer, a fragment of its message)
    (answers.backwards_loop, SLIPS["turned backwards"][:60]),
    (answers.backwards, SLIPS["turned backwards"][:60]),
    (answers.no_rescale, SLIPS["no rescale"][:60]),
    (answers.last_hop_skipped, "your loop folded none (0 / 0 is nan)"),
    (answers.folds_then_passes_too_few, "your loop folded none (0 / 0 is nan)"),
    (answers.one_hop_short, SLIPS["the last hop skipped"][:60]),
    (answers.own_chunk_skipped, "your loop folded none (0 / 0 is nan)"),
    (answers.local_positions, SLIPS["local positions"][:60]),
    (answers.ignores_the_mask, SLIPS["no mask"][:60]),
    (answers.no_scale, SLIPS["no scale"][:50]),
    (answers.no_division, SLIPS["no division"][:50]),
    (answers.no_max, "on loud scores exp overflows"),
    (answers.gather_everything, "right numbers, but not a ring: at its peak rank"),
    (answers.skip_stops_passing, "the ranks did not pass alike: calls of pass_on rank 0: 1, rank 1: 2"),
    (answers.cached_by_shape, "returned exactly its result of the trial 'causal', whose inputs differ"),
    (answers.one_buffer, "keeps something between calls"),
    (answers.scales_query_in_place, "right numbers, but on rank 0 your function changed its input `query`"),
    (answers.calls_the_package, "your function called `ring_forward`, which does it for you"),
    (answers.calls_sdpa, "your function called `F.scaled_dot_product_attention`"),
    (answers.folds_the_future, "the exercise asks to skip its fold"),
    (answers.one_pass_too_many, "right numbers, but rank 0 called pass_on 4 times on a ring of 4"),
    (answers.scaled_by_value_size, SLIPS["scaled by Ev"][:60]),
    (answers.state_in_float32, "right to float32's precision, not to float64's"),
    (answers.strict_mask, SLIPS["strict mask"][:60]),
]
CRASHES = [(answers.views_rows, "use .reshape(...)"), (answers.blend_of_e, "values of size 12"),
           (answers.views_batch_and_heads, "use .reshape(...)")]


@pytest.fixture(scope="module")
def ring():
    with ProcessRing(4) as processes:
        yield processes


@pytest.mark.parametrize("answer", [answers.ring, answers.ring_passing_first], ids=lambda f: f.__name__)
def test_right_answers_pass(ring, answer):
    result = check_ring_forward(answer, ring)
    assert result.status == "passed", result.message
    assert "right on every rank of a ring of 4 processes, on 6 trials" in result.message


@pytest.mark.parametrize(("answer", "said"), WRONG, ids=[f.__name__ for f, _ in WRONG])
def test_each_slip_gets_its_hint(ring, answer, said):
    result = check_ring_forward(answer, ring)
    assert result.status == "failed", result.message
    assert said in result.message, result.message


@pytest.mark.parametrize(("answer", "said"), CRASHES, ids=[f.__name__ for f, _ in CRASHES])
def test_a_crash_on_a_rank_is_explained_with_its_rank_and_trial(ring, answer, said):
    result = check_ring_forward(answer, ring)
    assert result.status == "error", result.message
    assert said in result.message, result.message
    assert "(On rank 0, the trial" in result.message, result.message


def test_the_stub_is_not_attempted_without_starting_a_ring():
    assert check_ring_forward(answers.stub, None).status == "not attempted"


def test_every_slip_hint_is_reached():
    reached = {s for _, said in WRONG for s, hint in SLIPS.items() if hint.startswith(said)}
    reached |= {"the own chunk skipped"}  # alone, where it shows, its hint is the skipped last hop's
    assert reached == set(SLIPS)


def test_the_trials_repeat_a_shape_with_fresh_values_and_end_on_the_first():
    shapes = [(t.value_size, t.dtype) for t in TRIALS]
    assert len(shapes) - len(set(shapes)) >= 3
    assert TRIALS[-1].seed == TRIALS[0].seed
    assert any(t.transposed for t in TRIALS)
    assert any(t.dtype == torch.float32 and t.loud > 10 for t in TRIALS)


def test_a_notebooks_function_travels_as_its_source():
    def fold_twice(x):
        return answers.math.sqrt(x) + torch.ones(1) * helper(x)

    def helper(x):
        return x

    with pytest.raises(NotShippable, match="uses names of the function it is defined in"):
        ship(fold_twice)
    with pytest.raises(NotShippable, match="a lambda cannot be sent"):
        ship(lambda x: x)
    original = answers.ring.__module__
    try:
        answers.ring.__module__ = "__main__"  # as a notebook's function is
        shipped = ship(answers.ring)
    finally:
        answers.ring.__module__ = original
    assert shipped[0] == "source"
    assert {"math", "online_softmax_update", "_start"} <= set(shipped[3])
    rebuilt = unship(shipped)
    q = torch.randn(1, 1, 4, 3, dtype=torch.float64)
    from attention_lib._ring_hops import PassOn

    torch.testing.assert_close(rebuilt(q, q, q, [torch.arange(4)], 0, True, PassOn()),
                               answers.ring(q, q, q, [torch.arange(4)], 0, True, PassOn()))
