"""The percentages explorer (lesson 05): temperature weights, the render function and the widget."""

import matplotlib
import pytest
import torch

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from attention_lib import calculate_attention  # noqa: E402
from attention_lib.lessons.data import toy_sentence  # noqa: E402
from attention_lib.widgets.percentages import (  # noqa: E402
    percentages_explorer,
    render_percentages,
    temperature_weights,
)


def weight_bars(fig):
    return [bar.get_height() for bar in fig.axes[1].patches]


def test_temperature_one_is_plain_attention():
    s = toy_sentence()
    torch.testing.assert_close(temperature_weights(1.0), calculate_attention(s.query, s.key, s.value)[1])


@pytest.mark.parametrize("temperature", [0.05, 0.5, 2.0, 50.0])
def test_rows_sum_to_one(temperature):
    torch.testing.assert_close(temperature_weights(temperature).sum(-1), torch.ones(4))


def test_low_temperature_sharpens_and_high_temperature_flattens():
    cold, warm, hot = (temperature_weights(t).amax(-1) for t in (0.1, 1.0, 10.0))
    assert bool((cold > warm).all())
    assert bool((warm > hot).all())
    assert bool((cold > 0.99).all())
    assert bool((hot < 0.3).all())


def test_render_draws_the_chosen_word():
    fig = render_percentages(1.0, "purred")
    assert isinstance(fig, matplotlib.figure.Figure)
    assert weight_bars(fig) == pytest.approx(temperature_weights(1.0)[2].tolist())
    assert [t.get_text() for t in fig.axes[1].get_xticklabels()] == ["the", "cat", "purred", "softly"]
    assert '"purred"' in fig.texts[0].get_text()
    plt.close(fig)


@pytest.mark.parametrize(("first", "second"), [((1.0, "purred"), (0.2, "purred")),
                                               ((1.0, "purred"), (1.0, "the"))])
def test_render_changes_with_its_parameters(first, second):
    a, b = render_percentages(*first), render_percentages(*second)
    assert weight_bars(a) != pytest.approx(weight_bars(b))
    plt.close(a)
    plt.close(b)


@pytest.mark.parametrize("temperature", [0.0, -1.0, float("nan"), "hot", True])
def test_bad_temperature_is_explained(temperature):
    with pytest.raises(ValueError, match="temperature must be a positive number"):
        temperature_weights(temperature)


def test_unknown_word_is_explained():
    with pytest.raises(ValueError, match="word must be one of the sentence's tokens"):
        render_percentages(1.0, "dog")


def test_explorer_builds_and_redraws_on_change():
    box = percentages_explorer()
    first = box.figure
    box.controls["temperature"].value = 0.3
    assert box.figure is not first
    assert weight_bars(box.figure) == pytest.approx(temperature_weights(0.3)[2].tolist())
    box.controls["word"].value = "cat"
    assert '"cat"' in box.figure.texts[0].get_text()
    plt.close("all")
