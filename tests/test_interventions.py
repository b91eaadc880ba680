"""Interventions (lesson 12, used by lesson 13): one head's weights replaced, checked against a computation by hand."""

import math

import pytest
import torch

import attention_lib as al
from attention_lib.interventions import edit_head, force_onto, remove_keys, remove_weight, zero_rows
from attention_lib.patching import from_donors, patch_head, pick_donors, record_head


def small_module(seed=0, E=6, H=3):
    torch.manual_seed(seed)
    return al.MultiHeadAttention(E, H).eval()


def by_hand(mha, x, head, new_weights, mask=None):
    """The module's output with head ``head``'s weights replaced by ``new_weights (N, L, S)``, written out."""
    H, Dh = mha.num_heads, mha.head_dim
    outputs = []
    for h in range(H):
        cols = slice(h * Dh, (h + 1) * Dh)
        q = x @ mha.q_proj.weight[cols].T + mha.q_proj.bias[cols]  # (N, L, Dh)
        k = x @ mha.k_proj.weight[cols].T + mha.k_proj.bias[cols]
        v = x @ mha.v_proj.weight[cols].T + mha.v_proj.bias[cols]
        scores = q @ k.transpose(1, 2) / math.sqrt(Dh)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        w = new_weights if h == head else torch.softmax(scores, -1)
        outputs.append(w @ v)  # (N, L, Dh)
    return torch.cat(outputs, -1) @ mha.out_proj.weight.T + mha.out_proj.bias


@pytest.mark.parametrize("masked", [False, True])
def test_forcing_a_row_equals_the_computation_by_hand(masked):
    mha = small_module()
    x = torch.randn(2, 4, 6)
    mask = al.causal_mask(4) if masked else None
    rows, keys = torch.tensor([3, 2]), torch.tensor([0, 1])
    with torch.no_grad():
        _, weights = mha(x, x, x, attn_mask=mask)
        forced = weights[:, 1].clone()
        forced[0, 3], forced[1, 2] = torch.tensor([1.0, 0, 0, 0]), torch.tensor([0, 1.0, 0, 0])
        with edit_head(mha, 1, lambda w: force_onto(w, rows=rows, keys=keys)):
            out, edited = mha(x, x, x, attn_mask=mask)
        torch.testing.assert_close(out, by_hand(mha, x, 1, forced, mask))
        torch.testing.assert_close(edited[:, 1], forced)
        torch.testing.assert_close(edited[:, [0, 2]], weights[:, [0, 2]])  # the other heads untouched


def test_an_identity_edit_changes_nothing_and_the_hook_goes_away():
    mha = small_module()
    x = torch.randn(2, 5, 6)
    with torch.no_grad():
        before = mha(x, x, x, is_causal=True)
        with edit_head(mha, [0, 2], lambda w: w):
            during = mha(x, x, x, is_causal=True)
        torch.testing.assert_close(during[0], before[0])
        torch.testing.assert_close(during[1], before[1])
    assert not mha._forward_hooks
    with pytest.raises(RuntimeError, match="boom"), edit_head(mha, 0, zero_rows):
        raise RuntimeError("boom")
    assert not mha._forward_hooks  # removed after an error too


def test_removing_keys_renormalises_by_hand():
    w = torch.tensor([[[0.5, 0.3, 0.2], [0.1, 0.1, 0.8]]])
    out = remove_keys(w, rows=1, keys=torch.tensor([[False, False, True]]))
    torch.testing.assert_close(out, torch.tensor([[[0.5, 0.3, 0.2], [0.5, 0.5, 0.0]]]))
    everything = remove_keys(w, rows=None, keys=torch.tensor([True, True, True]))
    assert torch.equal(everything, torch.zeros_like(w))  # nothing left to share: zeros, not NaN


def test_zeroing_rows_and_the_whole_head():
    w = torch.full((2, 3, 3), 1 / 3)
    assert torch.equal(zero_rows(w), torch.zeros_like(w))
    some = zero_rows(w, rows=torch.tensor([0, 2]))
    expected = w.clone()
    expected[0, 0], expected[1, 2] = 0.0, 0.0  # sentence 0 loses row 0, sentence 1 row 2
    assert torch.equal(some, expected)


def test_zeroing_a_head_equals_zeroing_its_columns_of_the_output_projection():
    mha = small_module(1)
    x = torch.randn(3, 4, 6)
    with torch.no_grad():
        with edit_head(mha, 2, zero_rows):
            ablated = mha(x, x, x)[0]
        mha.out_proj.weight[:, 4:] = 0.0  # head 2's 2 features
        torch.testing.assert_close(ablated, mha(x, x, x)[0])


def test_works_inside_a_model_and_on_the_fast_path():
    torch.manual_seed(0)
    model = al.TinyTransformer(vocab_size=10, num_answers=10, max_len=8, num_layers=2).eval()
    x = torch.randint(0, 10, (4, 8))
    with torch.no_grad(), edit_head(model.blocks[1].attention, 0, lambda w: force_onto(w, rows=None, keys=3)):
        out = model(x)
    assert torch.equal(out.attention[1][:, 0].argmax(-1), torch.full((4, 8), 3))
    assert not torch.allclose(out.logits, model(x).logits)
    induction = al.AttentionOnlyTransformer(vocab_size=8, max_len=8).eval()
    tokens = torch.randint(0, 8, (2, 8))
    with torch.no_grad(), edit_head(induction.layers[0], 1, zero_rows):
        slow, fast = induction(tokens).logits, induction(tokens, need_weights=False)
    torch.testing.assert_close(slow, fast.logits)
    assert fast.attention == (None, None)


def test_errors():
    mha = small_module()
    with pytest.raises(TypeError, match="edits a MultiHeadAttention, but got Linear"):
        with edit_head(torch.nn.Linear(2, 2), 0, zero_rows):
            pass
    with pytest.raises(TypeError, match="edit must be a function"):
        with edit_head(mha, 0, "zero"):
            pass
    with pytest.raises(ValueError, match=r"head must be an index in 0..2"):
        with edit_head(mha, 3, zero_rows):
            pass
    with edit_head(mha, 0, zero_rows), pytest.raises(ValueError, match="already being edited"):
        with edit_head(mha, 1, zero_rows):
            pass
    with pytest.raises(ValueError, match="call model.eval"):
        with edit_head(al.MultiHeadAttention(6, 3, dropout=0.1), 0, zero_rows):
            pass
    x = torch.randn(1, 3, 6)
    with pytest.raises(ValueError, match=r"edit must return one head's weights of shape \(1, 3, 3\)"):
        with torch.no_grad(), edit_head(mha, 0, lambda w: w[:, :2]):
            mha(x, x, x)
    w = torch.full((2, 3, 4), 0.25)
    with pytest.raises(ValueError, match=r"rows must be None \(every row\) or one query position in 0..2"):
        zero_rows(w, rows=3)
    with pytest.raises(ValueError, match=r"keys must be one key position in 0..3"):
        force_onto(w, rows=0, keys=torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match=r"keys must be a bool tensor of shape \(2, 4\) or \(4,\)"):
        remove_keys(w, rows=0, keys=torch.tensor([0, 1]))
    with pytest.raises(ValueError, match=r"an edit gets one head's weights \(N, L, S\)"):
        zero_rows(torch.zeros(1, 2, 3, 3))


# -- lesson 12's measurements by intervention -----------------------------------------------------------------------
def test_lesson_12s_measurements_agree_with_a_computation_by_hand():
    from attention_lib.training.learning_to_attend import (
        AGREEMENT,
        by_attractor_position,
        intervene_by_attractors,
        load_trained,
    )
    from attention_lib.training.learning_to_attend.causes import _sentences

    model = load_trained("agreement").model
    rows = intervene_by_attractors(model, ["P S P V", "S P V"], layer=1, head=0, n=30, seed=3)
    assert [(r.attractors, r.n) for r in rows] == [(0, 60), (1, 60), (2, 30)]
    x, y = _sentences(AGREEMENT, ["P S P V", "S P V"], 60, 3, "1", attractors=1)
    parse = AGREEMENT.parse(x)
    answer = y[torch.arange(60), parse.verb]
    right, forced = [], []
    for i in range(60):  # one sentence at a time, its verb row written by hand
        ids, v, s = x[i:i + 1], int(parse.verb[i]), int(parse.subject[i])

        def onto_subject(w, v=v, s=s):
            w = w.clone()
            w[0, v] = 0.0
            w[0, v, s] = 1.0
            return w

        with torch.no_grad():
            right.append(int(model(ids).logits[0, v].argmax()) == int(answer[i]))
            with edit_head(model.blocks[1].attention, 0, onto_subject):
                forced.append(int(model(ids).logits[0, v].argmax()) == int(answer[i]))
    assert rows[1].accuracy == pytest.approx(sum(right) / 60)
    assert rows[1].forced == pytest.approx(sum(forced) / 60)
    assert rows[1].wrong == 60 - sum(right)
    cells = by_attractor_position(model, "P S P V", n=200, seed=5)
    assert sum(count for _, count in cells.values()) == 200
    assert set(cells) == {(0, 0, 0), (0, 1, 0), (1, 0, 0), (1, 1, 0)}  # each P before the subject or between


def by_hand_outputs(mha, x):
    """Each head's output ``(N, L, Dh)``, ``softmax(q k^T / sqrt(Dh)) @ v``, written out."""
    Dh = mha.head_dim
    outputs = []
    for h in range(mha.num_heads):
        cols = slice(h * Dh, (h + 1) * Dh)
        q, k, v = (x @ p.weight[cols].T + p.bias[cols] for p in (mha.q_proj, mha.k_proj, mha.v_proj))
        outputs.append(torch.softmax(q @ k.transpose(1, 2) / math.sqrt(Dh), -1) @ v)
    return outputs


def test_record_head_gives_the_heads_output_by_hand():
    mha = small_module()
    x = torch.randn(2, 4, 6)
    with torch.no_grad(), record_head(mha, 1) as recorded:
        mha(x, x, x)
    torch.testing.assert_close(recorded[0], by_hand_outputs(mha, x)[1].detach())


def test_patching_a_heads_output_equals_the_computation_by_hand():
    mha = small_module()
    x, clean = torch.randn(2, 4, 6), torch.randn(2, 4, 6)
    rows = torch.tensor([3, 1])
    with torch.no_grad(), record_head(mha, 2) as recorded:
        mha(clean, clean, clean)
    with torch.no_grad(), patch_head(mha, 2, recorded[0], rows=rows):
        out, _ = mha(x, x, x)
    with torch.no_grad():
        outputs = by_hand_outputs(mha, x)
        clean_head = by_hand_outputs(mha, clean)[2]
        for i, row in enumerate(rows.tolist()):
            outputs[2][i, row] = clean_head[i, row]  # only the chosen row of each sentence comes from the clean input
        expected = torch.cat(outputs, -1) @ mha.out_proj.weight.T + mha.out_proj.bias
    torch.testing.assert_close(out, expected)
    assert not torch.allclose(out, mha(x, x, x)[0].detach())  # the patch changed something


def test_patch_head_checks_the_output_shape_and_type():
    mha = small_module()
    x = torch.randn(2, 4, 6)
    with pytest.raises(ValueError, match=r"output must have the head's output shape \(N, L, Dh\) = \(2, 4, 2\)"):
        with torch.no_grad(), patch_head(mha, 0, torch.zeros(2, 4, 3)):
            mha(x, x, x)
    with pytest.raises(TypeError, match="output"):
        with patch_head(mha, 0, [[0.0]]):
            pass
    with pytest.raises(TypeError, match="edits a MultiHeadAttention, but got Linear"):
        with patch_head(torch.nn.Linear(2, 2), 0, torch.zeros(1)):
            pass


def test_patching_a_row_with_zeros_equals_zeroing_its_weights():
    torch.manual_seed(1)
    mha = al.MultiHeadAttention(6, 3).eval()
    x, rows = torch.randn(2, 4, 6), torch.tensor([2, 0])
    with torch.no_grad():
        with patch_head(mha, 1, torch.zeros(2, 4, 2), rows=rows):
            patched, _ = mha(x, x, x)
        with edit_head(mha, 1, lambda w: zero_rows(w, rows=rows)):
            zeroed, _ = mha(x, x, x)
    torch.testing.assert_close(patched, zeroed)


def test_lesson_12s_controls_agree_with_a_computation_by_hand():
    from attention_lib.training.learning_to_attend import (
        AGREEMENT,
        agreeing_counterpart,
        attractor_keys,
        by_attractor_slot,
        load_trained,
        patch_by_attractors,
    )
    from attention_lib.training.learning_to_attend.causes import _sentences

    model = load_trained("agreement").model
    x, y = _sentences(AGREEMENT, ["P S P V", "P P S V"], 40, 3, "2", attractors=2)
    clean, nouns, phrases = agreeing_counterpart(AGREEMENT, x)
    parse, parse_clean = AGREEMENT.parse(x), AGREEMENT.parse(clean)
    assert torch.equal(nouns, attractor_keys(AGREEMENT, x, parse.subject))
    assert nouns.sum(1).eq(2).all()
    assert not attractor_keys(AGREEMENT, clean, parse_clean.subject).any()  # every attractor now agrees
    assert parse.structure == parse_clean.structure
    assert torch.equal(parse.subject, parse_clean.subject)
    changed = clean != x
    assert (changed & ~phrases).sum() == 0
    assert (nouns & ~changed).sum() == 0
    the = AGREEMENT.vocab.index("the")
    assert (clean[changed & ~nouns] == the).all()  # and there, only "a" turned "the"
    rows = patch_by_attractors(model, ["P S P V", "P P S V"], layer=1, head=0, n=20, seed=3)
    assert [r.attractors for r in rows] == [1, 2]
    answer = y[torch.arange(40), parse.verb]
    right, agreeing, patched_weights = [], [], []
    for i in range(40):  # one sentence at a time
        v = int(parse.verb[i])
        with torch.no_grad():
            out, out_clean = model(x[i:i + 1]), model(clean[i:i + 1])
            clean_row = out_clean.attention[1][0, 0, v]

            def clean_weights(w, v=v, clean_row=clean_row):
                w = w.clone()
                w[0, v] = clean_row
                return w

            with edit_head(model.blocks[1].attention, 0, clean_weights):
                patched_weights.append(int(model(x[i:i + 1]).logits[0, v].argmax()) == int(answer[i]))
        right.append(int(out.logits[0, v].argmax()) == int(answer[i]))
        agreeing.append(float(clean_row[nouns[i]].sum()))
    assert rows[1].accuracy == pytest.approx(sum(right) / 40)
    assert rows[1].weight_agreeing == pytest.approx(sum(agreeing) / 40, abs=1e-5)
    assert rows[1].patched_weights == pytest.approx(sum(patched_weights) / 40)
    cells = by_attractor_slot(model, "P P S V", n=200, seed=5)
    assert sum(count for _, count in cells.values()) == 200
    assert set(cells) == {"P P S V", "P* P S V", "P P* S V", "P* P* S V"}


def test_head_by_head_zeroes_each_head_as_by_hand():
    from attention_lib.training.learning_to_attend import AGREEMENT, head_by_head, load_trained
    from attention_lib.training.learning_to_attend.causes import _sentences

    model = load_trained("agreement").model
    accuracy, heads = head_by_head(model, "P S P V", n=30, seed=4)
    x, y = _sentences(AGREEMENT, ["P S P V"], 30, 4, "heads")
    parse = AGREEMENT.parse(x)
    for (layer, head), (on_subject, zeroed) in heads.items():
        right = []
        for i in range(30):
            v = int(parse.verb[i])
            with torch.no_grad(), edit_head(model.blocks[layer].attention, head, lambda w, v=v: zero_rows(w, rows=v)):
                right.append(int(model(x[i:i + 1]).logits[0, v].argmax()) == int(y[i, v]))
            assert 0.0 <= on_subject <= 1.0
        assert zeroed == pytest.approx(sum(right) / 30)


# The controls: a placebo removal, donors for patching (resampling), and patching run the other way (noising).


def test_a_placebo_removal_equals_the_computation_by_hand():
    mha = small_module()
    x = torch.randn(2, 4, 6)
    keys, amount, rows = torch.tensor([False, True, True, False]), torch.tensor([0.1, 0.2]), torch.tensor([3, 0])
    with torch.no_grad():
        _, weights = mha(x, x, x)
        expected = weights[:, 0].clone()
        for i, row in enumerate(rows.tolist()):  # the amount leaves keys 1 and 2 in proportion, then renormalise
            w = expected[i, row].clone()
            held = w[1] + w[2]
            w[1:3] *= 1 - amount[i] / held
            expected[i, row] = w / w.sum()
        with edit_head(mha, 0, lambda w: remove_weight(w, rows=rows, keys=keys, amount=amount)):
            out, edited = mha(x, x, x)
    torch.testing.assert_close(edited[:, 0], expected)
    torch.testing.assert_close(out, by_hand(mha, x, 0, expected))
    torch.testing.assert_close(edited[:, 0].sum(-1), torch.ones(2, 4))


def test_a_placebo_that_takes_all_the_keys_hold_is_the_removal_itself():
    w = torch.softmax(torch.randn(3, 5, 5), -1)
    keys = torch.tensor([True, False, True, False, False])
    torch.testing.assert_close(remove_weight(w, None, keys, amount=0.999), remove_keys(w, None, keys), atol=1e-6,
                               rtol=0)  # every row holds less than 0.999 on two keys here or loses it all
    assert torch.equal(remove_weight(w, 2, keys, amount=0.0), w)
    everything = torch.tensor([[[0.0, 1.0, 0.0]]])
    assert remove_weight(everything, 0, torch.tensor([False, True, False]), amount=0.5).tolist() == [[[0, 1, 0]]]


def test_remove_weight_refuses_an_amount_it_cannot_take():
    w = torch.full((2, 1, 2), 0.5)
    with pytest.raises(ValueError, match=r"amount must be a number or \(2,\) numbers in \[0, 1\), but got"):
        remove_weight(w, 0, torch.tensor([True, False]), amount=1.5)
    with pytest.raises(ValueError, match="amount must be"):
        remove_weight(w, 0, torch.tensor([True, False]), amount=torch.tensor([0.1, 0.1, 0.1]))
    with pytest.raises(ValueError, match="keys must be a bool tensor"):
        remove_weight(w, 0, torch.tensor([1, 0]), amount=0.1)


def test_donors_have_the_label_asked_for_and_are_never_the_input_itself():
    labels = torch.tensor([0, 1, 1, 0, 1, 0, 0])
    for same in (True, False):
        donors = pick_donors(labels, same=same, seed=3)
        assert donors.shape == (7,)
        assert not bool((donors == torch.arange(7)).any())
        assert bool(((labels[donors] == labels) == same).all())
        assert torch.equal(donors, pick_donors(labels, same=same, seed=3)), "seeded"
    assert pick_donors(torch.tensor([5, 5]), same=True).tolist() == [1, 0]
    draws = {tuple(pick_donors(labels, seed=s).tolist()) for s in range(10)}
    assert len(draws) > 1, "the seed changes the draw"


def test_pick_donors_says_what_is_missing():
    with pytest.raises(ValueError, match=r"input 2 \(label 1\) has no other input with the same label"):
        pick_donors(torch.tensor([0, 0, 1]), same=True)
    with pytest.raises(ValueError, match="has no other input with another label"):
        pick_donors(torch.tensor([1, 1]), same=False)
    with pytest.raises(ValueError, match=r"labels must be \(N,\) integers"):
        pick_donors(torch.tensor([0.0, 1.0]))
    with pytest.raises(TypeError, match="labels"):
        pick_donors([0, 1])


def test_from_donors_moves_each_donors_row_to_where_the_recipients_stands():
    recorded = torch.randn(3, 5, 2)
    donors, rows = torch.tensor([2, 0, 1]), torch.tensor([4, 1, 0])
    expected = recorded.clone()
    expected[0, 4] = recorded[2, 0]  # input 0's row 4 from input 2's row (its row 0)
    expected[1, 1] = recorded[0, 4]
    expected[2, 0] = recorded[1, 1]
    assert torch.equal(from_donors(recorded, donors, rows), expected)
    with pytest.raises(ValueError, match=r"donors must be integers in 0..2"):
        from_donors(recorded, torch.tensor([3, 0, 1]), rows)
    with pytest.raises(ValueError, match=r"recorded must be \(N, L, Dh\) and donors, rows \(N,\)"):
        from_donors(recorded, donors[:2], rows)


def test_patching_from_a_donor_equals_the_computation_by_hand():
    mha = small_module()
    x = torch.randn(4, 5, 6)
    rows, donors = torch.tensor([4, 2, 3, 1]), torch.tensor([1, 3, 0, 2])
    with torch.no_grad():
        with record_head(mha, 1) as recorded:
            mha(x, x, x)
        with patch_head(mha, 1, from_donors(recorded[0], donors, rows), rows=rows):
            out, _ = mha(x, x, x)
        outputs = by_hand_outputs(mha, x)
        head = outputs[1].clone()
        for i in range(4):
            outputs[1][i, rows[i]] = head[donors[i], rows[donors[i]]]  # the donor's row, moved to the recipient's
        expected = torch.cat(outputs, -1) @ mha.out_proj.weight.T + mha.out_proj.bias
    torch.testing.assert_close(out, expected)


def test_noising_runs_the_clean_input_with_the_corrupt_inputs_head_output():
    """The reverse test: the clean input run with one head's output from the corrupt input, by hand."""
    mha = small_module(seed=2)
    clean, corrupt = torch.randn(2, 4, 6), torch.randn(2, 4, 6)
    rows = torch.tensor([3, 3])
    with torch.no_grad():
        with record_head(mha, 0) as recorded:
            mha(corrupt, corrupt, corrupt)
        with patch_head(mha, 0, recorded[0], rows=rows):
            noised, _ = mha(clean, clean, clean)
        outputs = by_hand_outputs(mha, clean)
        outputs[0][:, 3] = by_hand_outputs(mha, corrupt)[0][:, 3]
        expected = torch.cat(outputs, -1) @ mha.out_proj.weight.T + mha.out_proj.bias
    torch.testing.assert_close(noised, expected)
    torch.testing.assert_close(noised[:, :3], mha(clean, clean, clean)[0][:, :3].detach())  # other rows untouched
