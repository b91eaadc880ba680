"""Position information: the sinusoidal encoding equals the paper's formula, learned positions add a trainable
table, both break attention's indifference to word order, and bad input gets an error that says what to do."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attention_lib import LearnedPositions, calculate_attention, sinusoidal_encoding
from attention_lib.plotting import plot_position_encoding

# --- sinusoidal_encoding --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("length", "dim", "base"), [(1, 2, 10000.0), (7, 4, 10000.0), (30, 10, 10000.0),
                                                     (5, 6, 100.0), (12, 8, 2)])
def test_sinusoidal_matches_the_papers_formula_entry_by_entry(length, dim, base):
    expected = torch.tensor([[(math.sin if j % 2 == 0 else math.cos)(pos / base ** ((j - j % 2) / dim))
                              for j in range(dim)] for pos in range(length)], dtype=torch.float64)
    got = sinusoidal_encoding(length, dim, base, dtype=torch.float64)
    torch.testing.assert_close(got, expected, atol=1e-12, rtol=0)
    torch.testing.assert_close(sinusoidal_encoding(length, dim, base), expected.float())


def test_sinusoidal_first_row_and_dtype_and_device():
    enc = sinusoidal_encoding(4, 6, dtype=torch.float16, device="cpu")
    assert enc.shape == (4, 6)
    assert enc.dtype == torch.float16
    assert enc[0].tolist() == [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]


@given(length=st.integers(2, 40), dim=st.integers(1, 16).map(lambda h: 2 * h))
def test_sinusoidal_similarity_depends_only_on_the_distance(length, dim):
    """P[a] . P[b] = sum_i cos(w_i (a - b)): the same for every pair at the same distance."""
    enc = sinusoidal_encoding(length, dim, dtype=torch.float64)
    assert enc.abs().max() <= 1.0
    similarity = enc @ enc.T  # (L, E) @ (E, L) -> (L, L)
    for offset in range(length):
        diagonal = torch.diagonal(similarity, offset)
        torch.testing.assert_close(diagonal, diagonal[:1].expand_as(diagonal), atol=1e-9, rtol=0)
    torch.testing.assert_close(torch.diagonal(similarity), torch.full((length,), dim / 2, dtype=torch.float64))


@pytest.mark.parametrize("offset", [1, 3, 10])
def test_sinusoidal_shift_is_a_rotation(offset):
    """The paper's reason (section 3.5): PE[pos + k] is a fixed linear function (a rotation) of PE[pos]."""
    dim, length = 8, 30
    enc = sinusoidal_encoding(length + offset, dim, dtype=torch.float64)
    rotation = torch.zeros(dim, dim, dtype=torch.float64)
    for i in range(dim // 2):
        angle = offset / 10000.0 ** (2 * i / dim)
        c, s = math.cos(angle), math.sin(angle)
        # (sin a, cos a) -> (sin(a + t), cos(a + t)) = (sin a cos t + cos a sin t, cos a cos t - sin a sin t)
        rotation[2 * i: 2 * i + 2, 2 * i: 2 * i + 2] = torch.tensor([[c, -s], [s, c]], dtype=torch.float64)
    torch.testing.assert_close(enc[:length] @ rotation, enc[offset:], atol=1e-10, rtol=0)


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"length": 0, "dim": 4}, ValueError, "length must be positive"),
    ({"length": -2, "dim": 4}, ValueError, "length must be positive"),
    ({"length": 2.0, "dim": 4}, TypeError, "length must be an int"),
    ({"length": True, "dim": 4}, TypeError, "length must be an int"),
    ({"length": 3, "dim": 5}, ValueError, "dim must be even"),
    ({"length": 3, "dim": 0}, ValueError, "dim must be positive"),
    ({"length": 3, "dim": torch.tensor(4)}, TypeError, "dim must be an int"),
    ({"length": 3, "dim": 4, "base": 0.0}, ValueError, "base must be positive"),
    ({"length": 3, "dim": 4, "base": float("nan")}, ValueError, "base must be a finite number"),
    ({"length": 3, "dim": 4, "base": "10000"}, TypeError, "base must be a number"),
    ({"length": 3, "dim": 4, "dtype": torch.int64}, TypeError, "floating-point torch.dtype"),
])
def test_sinusoidal_rejects_bad_input(kwargs, error, match):
    with pytest.raises(error, match=match):
        sinusoidal_encoding(**kwargs)


# --- LearnedPositions -----------------------------------------------------------------------------------------


def test_learned_positions_add_one_row_per_position_to_every_sequence():
    torch.manual_seed(0)
    positions = LearnedPositions(max_length=6, dim=4)
    assert positions.weight.shape == (6, 4)
    assert isinstance(positions.weight, torch.nn.Parameter)
    x = torch.randn(2, 3, 5, 4)  # (N, H, L, E): any batch dimensions
    torch.testing.assert_close(positions(x), x + positions.weight[:5])
    torch.testing.assert_close(positions(x[0, 0]), x[0, 0] + positions.weight[:5])  # (L, E)
    assert "max_length=6, dim=4" in repr(positions)


def test_learned_positions_are_learned_only_where_used():
    torch.manual_seed(0)
    positions = LearnedPositions(max_length=5, dim=3)
    positions(torch.randn(2, 3, 3)).sum().backward()
    grad = positions.weight.grad
    torch.testing.assert_close(grad[:3], torch.full((3, 3), 2.0))  # two sequences use positions 0..2
    torch.testing.assert_close(grad[3:], torch.zeros(2, 3))  # positions 3 and 4 were not used


@pytest.mark.parametrize(("x", "error", "match"), [
    (torch.zeros(2, 7, 4), ValueError, "holds only max_length=6"),
    (torch.zeros(2, 3, 5), ValueError, "must have 4 features"),
    (torch.zeros(4), ValueError, r"must be \(N, ..., L, E\)"),
    (torch.zeros(2, 3, 4, dtype=torch.long), TypeError, "embed token ids first"),
    (torch.zeros(2, 3, 4, dtype=torch.float64), TypeError, "convert one of them"),
    ([[0.0] * 4], TypeError, "must be a torch.Tensor"),
])
def test_learned_positions_reject_bad_input(x, error, match):
    positions = LearnedPositions(6, 4)
    with pytest.raises(error, match=match):
        positions(x)


@pytest.mark.parametrize(("args", "error", "match"), [
    ((0, 4), ValueError, "max_length must be positive"),
    ((6, -1), ValueError, "dim must be positive"),
    ((6.0, 4), TypeError, "max_length must be an int"),
    ((6, None), TypeError, "dim must be an int"),
])
def test_learned_positions_reject_bad_sizes(args, error, match):
    with pytest.raises(error, match=match):
        LearnedPositions(*args)


# --- positions that start at an offset (one new token after the cached ones) ------------------------------------


@given(offset=st.integers(0, 40), length=st.integers(1, 6))
def test_sinusoidal_offset_gives_the_rows_of_the_later_positions(offset, length):
    torch.testing.assert_close(sinusoidal_encoding(length, 6, offset=offset),
                               sinusoidal_encoding(offset + length, 6)[offset:])


def test_sinusoidal_offset_defaults_to_zero_and_is_checked():
    assert torch.equal(sinusoidal_encoding(3, 4, offset=0), sinusoidal_encoding(3, 4))
    with pytest.raises(ValueError, match="offset must be non-negative"):
        sinusoidal_encoding(3, 4, offset=-1)
    with pytest.raises(TypeError, match="offset must be an int"):
        sinusoidal_encoding(3, 4, offset=1.5)


def test_learned_positions_offset_adds_the_rows_of_the_later_positions():
    torch.manual_seed(0)
    positions = LearnedPositions(8, 4)
    x = torch.randn(2, 5, 4)
    whole = positions(x)
    torch.testing.assert_close(positions(x[:, 3:], offset=3), whole[:, 3:])  # the last two, after 3 cached ones
    torch.testing.assert_close(positions(x[:, 4:5], offset=4), whole[:, 4:5])
    assert not torch.allclose(positions(x[:, 4:5]), whole[:, 4:5])  # the bug: the new word at position 0


@pytest.mark.parametrize(("offset", "error", "match"), [
    (5, ValueError, r"positions 5..6 but the table holds only max_length=6"),
    (-1, ValueError, "offset must be non-negative"),
    (None, TypeError, "offset must be an int"),
])
def test_learned_positions_reject_a_bad_offset(offset, error, match):
    with pytest.raises(error, match=match):
        LearnedPositions(6, 4)(torch.zeros(1, 2, 4), offset=offset)


# --- positions break the symmetry -----------------------------------------------------------------------------


def self_attention(x):
    return calculate_attention(x, x, x)[0]


@given(L=st.integers(2, 8), seed=st.integers(0, 2**16))
def test_attention_without_positions_only_reorders_and_positions_break_that(L, seed):
    g = torch.Generator().manual_seed(seed)
    x = 2 * torch.randn(L, 8, generator=g, dtype=torch.float64)
    order = torch.roll(torch.arange(L), 1)  # every word moves
    torch.testing.assert_close(self_attention(x[order]), self_attention(x)[order])
    torch.manual_seed(seed)
    learned = LearnedPositions(8, 8).double()
    for add in (lambda t: t + sinusoidal_encoding(L, 8, dtype=torch.float64), learned):
        shuffled, original = self_attention(add(x[order])), self_attention(add(x))[order]
        assert (shuffled - original).abs().max() > 1e-3


# --- the picture ------------------------------------------------------------------------------------------------


def test_plot_position_encoding_draws_the_table_and_the_chosen_columns():
    enc = sinusoidal_encoding(20, 8)
    fig = plot_position_encoding(enc, title="sinusoidal")
    left, right = fig.axes[0], fig.axes[1]
    torch.testing.assert_close(torch.tensor(left.images[0].get_array().data), enc.double())
    assert [line.get_label() for line in right.get_lines()] == ["feature 0", "feature 2", "feature 4", "feature 6"]
    torch.testing.assert_close(torch.tensor(right.get_lines()[1].get_ydata()), enc[:, 2].double())
    assert len({line.get_color() for line in right.get_lines()}) == 4
    assert len({line.get_linestyle() for line in right.get_lines()}) == 4
    assert fig._suptitle.get_text() == "sinusoidal"


@pytest.mark.parametrize(("args", "match"), [
    ((torch.zeros(2, 3, 4),), r"draws an \(L, E\) table"),
    ((torch.zeros(3, 4), []), "at least one feature column"),
    ((torch.zeros(3, 4), [0, 4]), r"columns \[4\] are outside"),
])
def test_plot_position_encoding_rejects_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        plot_position_encoding(*args)
