"""The explorer of the induction model (lesson 13): type or generate a sequence, pick a layer and a head."""

import pytest
import torch

from attention_lib.training.induction_heads import encode, load_induction
from attention_lib.widgets import induction_heads_explorer, render_induction_heads
from attention_lib.widgets.induction_heads import random_repeat


@pytest.fixture(scope="module")
def shipped():
    return load_induction(2)[0]


def test_render_shows_the_chosen_head_and_the_predictions(shipped):
    fig = render_induction_heads("abcdefabcdef", layer=1, head=1, model=shipped)
    with torch.no_grad():
        expected = shipped(encode("abcdefabcdef").unsqueeze(0)).attentions[1][0, 1]
    torch.testing.assert_close(torch.from_numpy(fig.axes[0].images[0].get_array().data.copy()).float(), expected)
    rows = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert rows[7] == "b → c"  # inside the copy the model continues the pattern
    with pytest.raises(ValueError, match=r"head must be an index in 0..1, but head=2"):
        render_induction_heads("abcabc", head=2, model=shipped)


def test_the_explorer_redraws_generates_and_explains(shipped):
    box = induction_heads_explorer(shipped)
    first = box.figure
    box.controls["layer"].value = 0
    assert box.figure is not first
    box.generate.click()
    assert box.figure.axes[0].get_title().startswith("layer 0, head 0")
    box.controls["text"].value = "ABC"
    assert "cannot be read" in box.figure.axes[0].texts[0].get_text()


def test_random_repeat_repeats_its_first_k_tokens():
    text = random_repeat(3, k=7, length=20)
    assert text[:7] == text[7:14]
    assert len(text) == 20
