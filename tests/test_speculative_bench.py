"""The benchmark's speculative part: identical texts, tokens per target call that grow with k, and a target judged
from the median per-repeat ratio (met, MISSED, or not measured when k = 5 was not run); the table draft beside it."""

import torch

from attention_lib.bench.speculative import (
    TARGET_K,
    print_speculative,
    speculative_targets,
    speedups,
    table_draft,
    time_speculative,
)
from attention_lib.training.shipped import load_shipped


def test_the_speculative_part_checks_its_texts_and_counts_calls(capsys):
    result = time_speculative((1, 4), texts=3, repeats=1)
    assert result["identical"]
    assert set(result["times"]) == {"plain", "k=1", "k=4"}
    assert 1.0 < result["per call"][1] <= 2.0  # a round of one draft writes one or two tokens
    assert result["per call"][4] >= result["per call"][1]
    print_speculative(result, 1)
    out = capsys.readouterr().out
    assert "tokens per target call" in out
    said = " ".join(out.split())
    assert f"not measured speculative: shipped lesson 15 model with its distilled table draft, k={TARGET_K}" in said


def test_the_target_is_the_median_of_the_per_repeat_ratios():
    result = {"times": {"plain": [3.0, 2.0, 4.0], f"table k={TARGET_K}": [2.0, 1.0, 4.0], f"k={TARGET_K}": [1.0] * 3},
              "identical": True}
    assert speedups(result) == {f"table k={TARGET_K}": 1.5, f"k={TARGET_K}": 3.0}
    [(text, value, sign, limit)] = speculative_targets(result)
    assert (value, sign, limit) == (1.5, ">=", 1.3)
    assert speculative_targets({**result, "identical": False})[0][1] is None


def test_the_table_draft_is_a_mean_of_the_targets_distributions_and_keeps_the_text():
    table = table_draft(load_shipped("generation-mha-seed0").model, texts=4)
    rows = table.embed_tokens.weight.exp()  # (vocab, vocab): a distribution after each token
    torch.testing.assert_close(rows.sum(-1), torch.ones(len(rows)), atol=1e-5, rtol=0)
    result = time_speculative((5,), texts=3, repeats=1, table_ks=(5,))  # asserts every text is the target's
    assert set(result["times"]) == {"plain", "k=5", "table k=5"}
    assert result["identical"]
    assert result["per call"]["table k=5"] > 1.0  # the table's drafts are accepted at times
