"""Induction heads (lesson 13): the attention-only model, the two head scores, the repeated-sequence task, the
shipped models' measured behaviour on fresh data, and the lesson's pictures and explorer."""

import pickle

import pytest
import torch

import attention_lib as al
from attention_lib.attention_only import (
    AttentionOnlyTransformer,
    all_head_scores,
    induction_score,
    phase_change,
    previous_token_score,
)
from attention_lib.interventions import edit_head, force_onto, zero_rows
from attention_lib.plotting import plot_head_maps, plot_phase_change
from attention_lib.training.induction_heads import (
    build_model,
    decode,
    encode,
    evaluate_induction,
    load_induction,
    lowest_and_last,
    make_repeats,
    repeated_part,
    save_induction,
    train_induction,
)

# What the lesson states about the shipped models (notebooks/13_induction_heads.ipynb, sections 4-8).
STATED = {"accuracy": 0.94, "one-layer accuracy": 0.30, "previous token": 0.47, "induction": (0.73, 0.75),
          "ablated": 0.27}
# Measured over 10 fresh seeds of 2,000 sequences each: the accuracies spread by at most 0.003 (standard
# deviation; 0.001 for the two-layer model), the head scores by at most 0.002. The lesson states them to two
# digits (a rounding error of up to 0.005), so 0.02 is the rounding plus more than 5 standard deviations.
TOL = 0.02


def random_maps(N=3, H=2, L=10, seed=0):
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(N, H, L, L, generator=g).masked_fill(~al.causal_mask(L), float("-inf"))
    return torch.softmax(scores, dim=-1)


# -- the model ------------------------------------------------------------------------------------------------------
def test_the_model_is_built_from_the_package_parts():
    model = build_model(2)
    assert isinstance(model.positions, al.LearnedPositions)
    assert all(isinstance(layer, al.MultiHeadAttention) for layer in model.layers)
    assert not any(isinstance(m, torch.nn.LayerNorm | torch.nn.Sequential) for m in model.modules())  # no MLP


def test_the_model_is_causal():
    model = build_model(2)
    x = make_repeats(2, seed=0).tokens
    changed = x.clone()
    changed[:, 20:] = (changed[:, 20:] + 1) % 32  # change the future of position 19
    with torch.no_grad():
        a, b = model(x), model(changed)
    torch.testing.assert_close(a.logits[:, :20], b.logits[:, :20])
    assert all(bool(w.triu(1).eq(0).all()) for w in a.attentions)


def test_the_fast_path_gives_the_same_logits():
    model = build_model(2)
    x = make_repeats(3, seed=1).tokens
    with torch.no_grad():
        out, fast = model(x), model(x, need_weights=False)
    torch.testing.assert_close(out.logits, fast.logits, atol=1e-5, rtol=1e-5)
    assert fast.attentions == (None, None)


def test_ablation_equals_zeroing_the_heads_columns_of_the_output_projection():
    model = build_model(2)
    x = make_repeats(3, seed=2).tokens
    with torch.no_grad():
        ablated = model(x, ablate=[(0, 1)]).logits
        assert not torch.allclose(ablated, model(x).logits)
        model.layers[0].out_proj.weight[:, 32:] = 0.0  # head 1's 32 features
        torch.testing.assert_close(ablated, model(x).logits)
    assert not model.layers[0].out_proj._forward_pre_hooks  # the hooks are removed again


@pytest.mark.parametrize(("tokens", "kwargs", "error", "match"), [
    (torch.zeros(2, 4), {}, TypeError, r"tokens must be integer token ids, but tokens.dtype=torch.float32"),
    (torch.zeros(4, dtype=torch.long), {}, ValueError, r"ids.unsqueeze\(0\)"),
    (torch.full((1, 4), 32), {}, ValueError, r"token ids must lie in 0..31 .*but found \[32\]"),
    (torch.zeros(1, 33, dtype=torch.long), {}, ValueError, r"the table holds only max_length=32"),
    (torch.zeros(1, 4, dtype=torch.long), {"ablate": [(2, 0)]}, ValueError, r"layer in 0..1 and head in 0..1"),
    (torch.zeros(1, 4, dtype=torch.long), {"ablate": [0]}, TypeError, r"object is not iterable"),
])
def test_model_errors(tokens, kwargs, error, match):
    with pytest.raises(error, match=match):
        build_model(2)(tokens, **kwargs)


def test_model_size_errors():
    with pytest.raises(ValueError, match="num_layers must be positive, but num_layers=0"):
        AttentionOnlyTransformer(32, 32, num_layers=0)
    with pytest.raises(ValueError, match="embed_dim must be divisible by num_heads"):
        AttentionOnlyTransformer(32, 32, embed_dim=64, num_heads=3)


# -- the scores -----------------------------------------------------------------------------------------------------
def test_scores_of_the_ideal_heads_are_one_and_of_uniform_heads_small():
    L, k = 12, 5
    previous = torch.zeros(1, 1, L, L)
    previous[0, 0, torch.arange(1, L), torch.arange(L - 1)] = 1.0
    induction = torch.zeros(1, 1, L, L)
    induction[0, 0, torch.arange(k, 2 * k), torch.arange(1, k + 1)] = 1.0
    assert previous_token_score(previous).item() == 1.0
    assert induction_score(induction, k).item() == 1.0
    assert induction_score(previous, k).item() == 0.0
    uniform = al.causal_mask(L).float() / torch.arange(1, L + 1)[:, None]  # (L, L): each row spread evenly
    assert previous_token_score(uniform.expand(1, 1, L, L)).item() < 0.3


def test_the_induction_score_with_one_length_per_sequence_equals_a_loop():
    maps = random_maps(N=4, L=12)
    lengths = torch.tensor([2, 6, 3, 5])
    rows = [maps[n, :, i, i - k + 1] for n, k in enumerate(lengths.tolist()) for i in range(k, 2 * k)]
    expected = torch.stack(rows).mean(0)  # (H,)
    torch.testing.assert_close(induction_score(maps, lengths), expected)
    torch.testing.assert_close(all_head_scores([maps, maps], lengths)["induction"][1], expected)


@pytest.mark.parametrize(("call", "error", "match"), [
    (lambda: previous_token_score([[0.5]]), TypeError, r"weights must be a torch.Tensor"),
    (lambda: previous_token_score(torch.rand(4, 4)), ValueError, r"\(N, H, L, L\), but weights.shape=\(4, 4\)"),
    (lambda: induction_score(random_maps(L=10), 6), ValueError, r"1 <= k <= L // 2 = 5"),
    (lambda: induction_score(random_maps(L=10), 2.5), ValueError, r"one int or \(N,\) ints"),
    (lambda: induction_score(random_maps(N=3), torch.tensor([2, 3])), ValueError, r"one int or \(N,\) ints"),
    (lambda: induction_score(random_maps(), True), ValueError, r"repeat length k"),
])
def test_score_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


# -- the task -------------------------------------------------------------------------------------------------------
def test_every_sequence_repeats_its_first_k_tokens_and_k_varies():
    batch = make_repeats(500, seed=3)
    for ids, k in zip(batch.tokens, batch.lengths.tolist(), strict=True):
        assert torch.equal(ids[:k], ids[k:2 * k])
    assert set(batch.lengths.tolist()) == set(range(6, 17))
    assert torch.equal(make_repeats(500, seed=3).tokens, batch.tokens)  # seeded
    assert not torch.equal(make_repeats(500, seed=4).tokens, batch.tokens)


def test_the_repeated_part_is_what_is_predictable():
    batch = make_repeats(50, seed=5)
    predictable = repeated_part(batch.lengths, 32)
    copied = batch.tokens[:, 1:] == batch.tokens.gather(1, (torch.arange(31)[None] + 1 - batch.lengths[:, None])
                                                         .clamp(min=0))
    assert bool(copied[predictable].all())


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"n": 0}, r"n must be positive, but n=0"),
    ({"n": 2, "min_repeat": 10, "max_repeat": 8}, r"1 <= min_repeat <= max_repeat <= length // 2"),
    ({"n": 2, "max_repeat": 17}, r"the segment and its copy must fit"),
])
def test_task_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_repeats(**kwargs)


def test_encode_and_decode():
    assert decode(encode("ab c5")) == "abc5"
    with pytest.raises(ValueError, match=r"tokens \[','\] are not in the vocabulary; allowed: a-z and 0-5"):
        encode("a,b")
    with pytest.raises(ValueError, match="reads at most 32 tokens, but got 33: shorten the input"):
        encode("a" * 33)
    with pytest.raises(ValueError, match="the input is empty"):
        encode(" ")
    with pytest.raises(TypeError, match="an input is a string of tokens or a list of them, but got int"):
        encode(3)
    assert encode(["a", "b"]).tolist() == [0, 1]


def test_phase_change_finds_a_sudden_drop_and_rejects_a_flat_curve():
    curve = [3.5] * 150 + [3.5 - 0.1 * i for i in range(30)] + [0.5] * 100
    phase = phase_change(curve)
    assert 150 < phase.begins < phase.step < phase.ends <= 181
    with pytest.raises(ValueError, match="the loss does not fall"):
        phase_change([1.0] * 50)
    with pytest.raises(ValueError, match="at least 2 \\* window = 40 losses"):
        phase_change([1.0] * 10)


def test_training_is_seeded_and_records_both_losses():
    a, b = train_induction(1, steps=4, track_every=2), train_induction(1, steps=4, track_every=2)
    assert a.repeated_losses == b.repeated_losses
    assert len(a.other_losses) == 4
    assert sorted(a.scores) == [0, 2, 4]
    with pytest.raises(ValueError, match="steps must be positive, but steps=0"):
        train_induction(steps=0)


# -- the shipped models, measured on fresh data ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def shipped():
    return load_induction(2)[0]


def test_the_shipped_model_predicts_what_the_lesson_states(shipped):
    scores = evaluate_induction(shipped, seed=31337)
    assert abs(scores["repeated accuracy"] - STATED["accuracy"]) < TOL
    assert scores["other accuracy"] < 0.08  # the random part stays near chance (1 / 32)
    ablated = evaluate_induction(shipped, seed=31337, ablate=[(0, 0)])["repeated accuracy"]
    assert abs(ablated - STATED["ablated"]) < TOL


def test_the_shipped_models_heads_score_what_the_lesson_states(shipped):
    fresh = make_repeats(2000, seed=31337)
    with torch.no_grad():
        heads = all_head_scores(shipped(fresh.tokens).attentions, fresh.lengths)
    assert abs(heads["previous token"][0, 0].item() - STATED["previous token"]) < TOL
    for head, stated in enumerate(STATED["induction"]):
        assert abs(heads["induction"][1, head].item() - stated) < TOL
    others = torch.cat([heads["previous token"][0, 1:], heads["previous token"][1], heads["induction"][0]])
    assert others.max().item() < 0.15  # no other head does either job


def _rows_off(rows):
    """An edit that zeroes one head's weights at the ``(N, L)`` rows chosen and keeps the others."""
    return lambda weights: torch.where(rows[:, :, None], zero_rows(weights), weights)


def test_the_previous_token_head_is_needed_at_the_keys_not_the_queries(shipped):
    """Section 6: the previous-token head switched off at the first segment (the keys) costs what switching it off
    everywhere costs; at the copy (the queries) almost nothing."""
    batch = make_repeats(2000, seed=31337)
    i, k = torch.arange(32)[None], batch.lengths[:, None]
    scored = repeated_part(batch.lengths, 32)
    accuracy = {}
    for where, rows in (("keys", i < k), ("queries", (i >= k) & (i < 2 * k))):
        with torch.no_grad(), edit_head(shipped.layers[0], 0, _rows_off(rows)):
            right = shipped(batch.tokens).logits[:, :-1].argmax(-1) == batch.tokens[:, 1:]
        accuracy[where] = right[scored].float().mean().item()
    assert abs(accuracy["keys"] - STATED["ablated"]) < 2 * TOL
    assert accuracy["queries"] > STATED["accuracy"] - 2 * TOL


def test_the_first_token_habit_runs_through_the_layer_1_heads(shipped):
    """Section 8: at the first segment's queries 4 to 8 the first token is often the top guess; zero the layer-1
    heads' weights there and it is near chance, force them onto key 0 and it always is."""
    batch = make_repeats(2000, seed=31337)
    first, segment = batch.tokens[:, :1], torch.arange(32)[None] < batch.lengths[:, None]
    early = segment & (torch.arange(32)[None] >= 4) & (torch.arange(32)[None] <= 8)

    def top_first(edit=None):
        with torch.no_grad():
            if edit is None:
                logits = shipped(batch.tokens).logits
            else:
                with edit_head(shipped.layers[1], [0, 1], lambda w: torch.where(segment[:, :, None], edit(w), w)):
                    logits = shipped(batch.tokens).logits
        return (logits.argmax(-1) == first)[early].float().mean().item()

    assert top_first() > 0.3
    assert top_first(zero_rows) < 0.08  # chance is 1 / 32
    assert top_first(lambda w: force_onto(w, rows=None, keys=0)) == 1.0


def test_forcing_the_previous_token_head_onto_late_positions_restores_the_copy(shipped):
    """Section 5: after a random prefix, a copy whose source lies at 16 or after fails; forcing the previous-token
    head onto i - 1 at every row makes it work there too."""
    g = torch.Generator().manual_seed(99)
    N = 1000
    tokens = torch.randint(0, 32, (N, 32), generator=g)
    seg, prefix = torch.randint(6, 13, (N,), generator=g), torch.randint(1, 9, (N,), generator=g)
    i = torch.arange(32)[None]
    copy = (i >= (prefix + seg)[:, None]) & (i < (prefix + 2 * seg)[:, None])
    tokens = tokens.gather(1, torch.where(copy, i - seg[:, None], i))
    q = torch.arange(31)[None]
    late = (q >= (prefix + seg)[:, None]) & (q <= (prefix + 2 * seg - 2)[:, None]) & (q - seg[:, None] + 1 >= 16)

    def onto_previous(weights):
        for row in range(1, weights.shape[1]):
            weights = force_onto(weights, rows=row, keys=row - 1)
        return weights

    with torch.no_grad():
        intact = shipped(tokens).logits[:, :-1].argmax(-1) == tokens[:, 1:]
        with edit_head(shipped.layers[0], 0, onto_previous):
            forced = shipped(tokens).logits[:, :-1].argmax(-1) == tokens[:, 1:]
    assert intact[late].float().mean().item() < 0.2
    assert forced[late].float().mean().item() > 0.6


def test_lowest_and_last_reads_a_curve_that_falls_then_rises():
    lowest, last = lowest_and_last([3.6] * 40 + [3.5] * 40 + [3.7] * 40)
    assert lowest == pytest.approx(3.5)
    assert last == pytest.approx(3.7)


def test_the_shipped_one_layer_model_has_no_induction_head():
    one = load_induction(1)[0]
    assert abs(evaluate_induction(one, seed=31337)["repeated accuracy"] - STATED["one-layer accuracy"]) < TOL
    fresh = make_repeats(1000, seed=31337)
    with torch.no_grad():
        assert induction_score(one(fresh.tokens).attentions[0], fresh.lengths).max().item() < 0.3


def test_load_errors(tmp_path):
    with pytest.raises(ValueError, match="the shipped induction models have 1 or 2 layers, but num_layers=3"):
        load_induction(3)
    with pytest.raises(FileNotFoundError, match="is missing"):
        load_induction(path=tmp_path / "none.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a weights file")
    with pytest.raises(ValueError, match="is not a readable weights file"):
        load_induction(path=tmp_path / "junk.pt")
    (tmp_path / "evil.pt").write_bytes(pickle.dumps(ValueError("an arbitrary object"), protocol=2))
    with pytest.raises(ValueError, match="is not a readable weights file"):
        load_induction(path=tmp_path / "evil.pt")
    torch.save({"format": "something else"}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="is not an induction model of attention_lib"):
        load_induction(path=tmp_path / "other.pt")


def test_save_then_load_round_trips(tmp_path, shipped):
    save_induction(shipped, tmp_path / "mine.pt", {"repeated accuracy": 0.5})
    model, measured = load_induction(path=tmp_path / "mine.pt")
    assert measured == {"repeated accuracy": 0.5}
    x = make_repeats(2, seed=0).tokens
    with torch.no_grad():
        torch.testing.assert_close(model(x).logits, shipped(x).logits)


# -- pictures -------------------------------------------------------------------------------------------------------
def test_the_phase_change_figure_marks_the_step():
    curve = [3.0] * 60 + [0.5] * 60
    phase = phase_change(curve)
    fig = plot_phase_change({"repeated": curve, "rest": [3.4] * 120}, phase, scores={"s": ([0, 60, 120], [0, 1, 1])})
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert f"phase change (step {phase.step})" in labels
    assert len(fig.axes) == 2
    with pytest.raises(ValueError, match="needs at least one loss curve"):
        plot_phase_change({}, phase)


def test_the_head_maps_outline_the_predicted_cells():
    fig = plot_head_maps([torch.eye(3), torch.eye(3)], "abc", titles=["a", "b"], targets=[[(1, 0)], []])
    assert len(fig.axes[0].patches) == 1
    assert not fig.axes[2].patches
    with pytest.raises(ValueError, match="one title and one target list per map"):
        plot_head_maps([torch.eye(3)], "abc", titles=[])
    with pytest.raises(ValueError, match=r"each map must be \(4, 4\)"):
        plot_head_maps([torch.eye(3)], "abcd", titles=["a"])


def test_a_head_resampled_from_its_own_input_changes_nothing_and_zeroed_is_the_models_ablation(shipped):
    """The study's interventions against hand computations: a head given what it writes on the very same sequences
    (one head, or a whole layer) leaves the accuracy as it is; zeroed, it is the model's own zero ablation."""
    from attention_lib.training.induction_heads.study import accuracy_with

    batch = make_repeats(300, seed=31337)
    intact = accuracy_with(shipped, batch)
    for layer, heads in ((0, [0]), (1, [1]), (0, [0, 1])):
        assert accuracy_with(shipped, batch, layer=layer, heads=heads, donor=batch.tokens) == intact
    zeroed = accuracy_with(shipped, batch, layer=0, heads=[0], edit=zero_rows)
    assert zeroed == evaluate_induction(shipped, n=300, seed=31337, ablate=[(0, 0)])["repeated accuracy"]
    donor = make_repeats(300, seed=4242).tokens
    assert accuracy_with(shipped, batch, layer=1, heads=[0, 1], donor=donor) < 0.1  # no induction head: chance
