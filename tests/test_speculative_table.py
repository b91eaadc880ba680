"""The table draft (a bigram model distilled from the target): rows that are the mean of the target's next-token
distributions after each token, the target's own greedy text whatever it proposes, and its errors."""

import pytest
import torch

from attention_lib import generate, speculative_generate
from attention_lib.speculative import speculative_rounds
from attention_lib.training.speculative_decoding import TableDraft, load_lm, make_texts, table_draft


@pytest.fixture(scope="module")
def target():
    return load_lm("mha", 0)[0]


def test_each_row_is_the_mean_of_the_targets_distributions_after_that_token(target):
    table = table_draft(target, texts=3, seed=5)
    sums, counts = torch.zeros(23, 23), torch.zeros(23)
    for text in make_texts(3, seed=5, split="train"):  # by hand: the target's own texts, read whole
        written = generate(target, text[None, :3], 30)[0]
        written = written[:int((written[3:] == 2).nonzero()[0, 0]) + 4]  # up to the full stop (id 2)
        sums.index_add_(0, written, torch.softmax(target(written[None]).logits[0], -1))
        counts += torch.bincount(written, minlength=23)
    seen = counts > 0
    torch.testing.assert_close(table.embed_tokens.weight.exp()[seen], (sums / counts[:, None].clamp(min=1))[seen])
    assert table.embed_tokens.weight.exp()[~seen].argmax(-1).eq(2).all()  # never written: propose the full stop


def test_a_table_draft_gives_the_targets_own_greedy_text(target):
    table = table_draft(target, texts=20)
    for prompt in make_texts(6, seed=1234)[:, :3]:
        for k in (1, 5):
            assert torch.equal(speculative_generate(target, table, prompt[None], 10, num_draft_tokens=k),
                               generate(target, prompt[None], 10))
    rounds = list(speculative_rounds(target, table, make_texts(1, seed=3)[:, :3], 10, num_draft_tokens=5))
    assert any(r.accepted > 0 for r in rounds)  # the table's proposals are kept at times
    assert rounds[-1].draft_cache.get_seq_length() <= rounds[-1].tokens.shape[1]  # cropped with the text


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match=r"scores must be \(vocab, vocab\)"):
        TableDraft(torch.zeros(3, 4))
    with pytest.raises(TypeError, match="scores"):
        TableDraft(torch.zeros(3, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="texts"):
        table_draft(load_lm("mha", 0)[0], texts=0)
