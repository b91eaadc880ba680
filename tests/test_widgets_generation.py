"""The explorer of lesson 15: it steps through the shipped model's greedy generation and draws the newest token's
attention over the cache, the package's own numbers."""

import pytest
import torch

from attention_lib.experiments.generation import watch_generation
from attention_lib.training.generation import encode, load_lm
from attention_lib.widgets import generation_explorer, render_generation
from attention_lib.widgets.generation import PROMPTS, STEPS


def drawn(fig) -> torch.Tensor:
    return torch.from_numpy(fig.axes[0].images[0].get_array().data.copy()).double()


def test_render_draws_the_weights_of_the_newest_token():
    prompt = PROMPTS[0]
    steps = watch_generation(load_lm("gqa")[0], encode(prompt), STEPS)
    for step in (0, 3):
        fig = render_generation(step, prompt, "gqa")
        torch.testing.assert_close(drawn(fig), steps[step]["weights"].flatten(0, 1).double())
        labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
        assert len(labels) == len(encode(prompt)) + step
        assert f"{steps[step]['cache_bytes']:,} bytes" in fig.axes[0].get_xlabel()


def test_each_step_reads_one_more_token_and_the_rows_sum_to_one():
    first, later = (drawn(render_generation(s)) for s in (0, 2))
    assert later.shape[1] == first.shape[1] + 2
    torch.testing.assert_close(later.sum(1), torch.ones(later.shape[0], dtype=torch.float64))


def test_the_subject_draws_weight_when_the_verb_is_written():
    """'the cat near the dogs with the dogs' -> 'sits': some head reads 'cat' hardest at the verb step."""
    fig = render_generation(0, PROMPTS[0], "mha")
    assert fig.axes[0].get_title() == "dogs → sits"
    weights = drawn(fig)
    assert int(weights.max(0).values.argmax()) == 2  # position 2: 'cat'


@pytest.mark.parametrize(("arguments", "error", "match"), [
    ({"step": STEPS}, ValueError, rf"step must be an index in 0..{STEPS - 1}"),
    ({"prompt": "<bos> the cow"}, ValueError, r"\['cow'\] are not in the vocabulary"),
    ({"variant": "moe"}, ValueError, "variant must be one of"),
])
def test_bad_arguments_are_explained(arguments, error, match):
    with pytest.raises(error, match=match):
        render_generation(**arguments)
    if "step" not in arguments:
        with pytest.raises(error, match=match):
            generation_explorer(**arguments)


def test_the_explorer_redraws_what_render_draws_for_its_controls():
    box = generation_explorer()
    for control, value in (("step", 3), ("variant", "mqa"), ("prompt", PROMPTS[1])):
        before = box.figure
        box.controls[control].value = value
        assert box.figure is not before
        values = {name: c.value for name, c in box.controls.items()}
        torch.testing.assert_close(drawn(box.figure), drawn(render_generation(**values)))
