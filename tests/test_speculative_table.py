"""The table draft (a bigram model distilled from the target): rows that count what the target writes after each
token in its own greedy texts, the target's own greedy text whatever it proposes, and its errors."""

import pytest
import torch

from attention_lib import generate, speculative_generate
from attention_lib.speculative import speculative_rounds
from attention_lib.training.speculative_decoding import TableDraft, load_lm, make_texts, table_draft


@pytest.fixture(scope="module")
def target():
    return load_lm("mha", 0)[0]


def test_each_row_counts_what_the_target_writes_after_that_token(target):
    table = table_draft(target, texts=3, seed=5)
    counts = torch.zeros(23, 23)
    for text in make_texts(3, seed=5, split="train"):  # by hand: the target's own texts, up to the full stop (id 2)
        written = generate(target, text[None, :3], 30)[0].tolist()
        written = written[:written.index(2, 3) + 1]
        for a, b in zip(written[2:-1], written[3:], strict=True):  # each written token, after the one before it
            counts[a, b] += 1
    seen = counts.sum(-1) > 0
    shares = table.embed_tokens.weight.exp()
    torch.testing.assert_close(shares[seen], (counts / counts.sum(-1, keepdim=True).clamp(min=1))[seen])
    assert shares[~seen].argmax(-1).eq(2).all()  # never followed by a written token: propose the full stop
    assert seen.sum() >= 5


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
