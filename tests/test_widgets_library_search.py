"""Lesson 02's explorer: the render function draws the soft and hard lookups, and the explorer redraws."""

import pytest
import torch
from figures import bar_heights

from attention_lib import calculate_attention
from attention_lib.lessons.data import toy_sentence
from attention_lib.widgets import library_search_explorer, render_library_search


def test_weights_and_answers_match_the_lookups():
    fig = render_library_search(animal=0.0, action=1.0, gentle=1.0, grammar=0.0, sharpness=2.0)
    s = toy_sentence()
    query = torch.tensor([[0.0, 1.0, 1.0, 0.0]])
    soft, weights = calculate_attention(query, s.key, s.value, scale=2.0)
    torch.testing.assert_close(bar_heights(fig.axes[0]), weights[0].double())
    answers = bar_heights(fig.axes[1])  # 4 soft bars, then 4 hard bars
    torch.testing.assert_close(answers[:4], soft[0].double())
    torch.testing.assert_close(answers[4:], s.value[2].double())  # "purred" matches best
    assert "'purred'" in fig.axes[0].get_title()


def test_an_animal_query_finds_the_cat():
    fig = render_library_search(animal=1.0, sharpness=10.0)
    heights = bar_heights(fig.axes[0])
    assert int(heights.argmax()) == 1
    assert "'cat'" in fig.axes[0].get_title()


def test_changing_the_query_changes_the_weights():
    animal = bar_heights(render_library_search(animal=1.0).axes[0])
    grammar = bar_heights(render_library_search(animal=0.0, grammar=1.0).axes[0])
    assert not torch.allclose(animal, grammar)


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"sharpness": -0.5}, ValueError, "sharpness must be a finite number >= 0"),
    ({"gentle": float("inf")}, ValueError, "gentle must be a finite number"),
    ({"animal": "yes"}, TypeError, "animal must be a number"),
    ({"grammar": True}, TypeError, "grammar must be a number"),
])
def test_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        render_library_search(**kwargs)
    with pytest.raises(error, match=match):
        library_search_explorer(**kwargs)


def test_explorer_redraws_when_a_control_changes():
    box = library_search_explorer(animal=1.0)
    assert list(box.controls) == ["animal", "action", "gentle", "grammar", "sharpness"]
    first = box.figure
    box.controls["grammar"].value = 2.0
    assert box.figure is not first
    assert not torch.allclose(bar_heights(box.figure.axes[0]), bar_heights(first.axes[0]))
    second = box.figure
    box.controls["sharpness"].value = 0.0
    torch.testing.assert_close(bar_heights(box.figure.axes[0]), torch.full((4,), 0.25, dtype=torch.float64))
    assert box.figure is not second
