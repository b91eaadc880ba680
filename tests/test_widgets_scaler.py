"""The scaler explorer (lesson 04): its data, its render function and the widget around it."""

import math

import matplotlib
import pytest
import torch

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from attention_lib.lessons.experiments import scaler_weights  # noqa: E402
from attention_lib.widgets.scaler import render_scaler, scaler_explorer  # noqa: E402


def bar_heights(fig):
    return [bar.get_height() for bar in fig.axes[0].patches]


def test_weights_are_rows_that_sum_to_one_and_are_reproducible():
    w = scaler_weights(32, queries=10, keys=6)
    assert w.shape == (10, 6)
    torch.testing.assert_close(w.sum(-1), torch.ones(10))
    torch.testing.assert_close(w, scaler_weights(32, queries=10, keys=6))


@pytest.mark.parametrize("d_k", [4, 64, 1024])
def test_scaling_keeps_the_softmax_from_saturating(d_k):
    scaled = scaler_weights(d_k, scaled=True).amax(-1).mean().item()
    raw = scaler_weights(d_k, scaled=False).amax(-1).mean().item()
    assert scaled < raw
    assert 0.2 < scaled < 0.5  # about the same for every d_k


def test_without_scaling_the_top_weight_grows_with_d_k():
    tops = [scaler_weights(d_k, scaled=False).amax(-1).mean().item() for d_k in (4, 64, 1024)]
    assert tops == sorted(tops)
    assert tops[-1] > 0.95


def test_render_returns_a_figure_with_weights_and_a_histogram():
    fig = render_scaler(d_k=16, scaled=True)
    assert isinstance(fig, matplotlib.figure.Figure)
    assert len(fig.axes) == 2
    assert math.isclose(sum(bar_heights(fig)), 1.0, rel_tol=1e-5)
    assert "d_k = 16" in fig.texts[0].get_text()
    plt.close(fig)


@pytest.mark.parametrize(("first", "second"), [({"d_k": 16}, {"d_k": 512}),
                                               ({"scaled": True}, {"scaled": False})])
def test_render_changes_with_its_parameters(first, second):
    a, b = render_scaler(**first), render_scaler(**second)
    assert bar_heights(a) != pytest.approx(bar_heights(b))
    plt.close(a)
    plt.close(b)


@pytest.mark.parametrize("d_k", [0, -4, 2.5, True])
def test_bad_d_k_is_explained(d_k):
    with pytest.raises(ValueError, match="d_k must be a positive integer"):
        scaler_weights(d_k)


def test_explorer_builds_and_redraws_on_change():
    box = scaler_explorer()
    first = box.figure
    assert bar_heights(first) == pytest.approx(bar_heights(render_scaler(64, True)))
    box.controls["scaled"].value = False
    assert box.figure is not first
    assert bar_heights(box.figure) == pytest.approx(bar_heights(render_scaler(64, False)))
    box.controls["d_k"].value = 8
    assert "d_k = 8" in box.figure.texts[0].get_text()
    plt.close("all")
