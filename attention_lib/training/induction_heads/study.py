"""What lesson 13's recipe gives on many seeds: each claim of ``notebooks/13_induction_heads.ipynb`` about a trained
model, measured on a model of each seed, beside its controls.

The lesson reads the shipped model (seed 0); what it says of *the* model is a claim about the recipe, so it quotes
these figures over seeds 0-9, read from :mod:`.study_measured` (written by ``python3 course.py remake study-13``,
about 8 minutes on one core: one two-layer, one one-layer and one shortcut training per seed).

Each intervention stands beside a control: a head zeroed (zero ablation) beside the same head's output taken from
other sequences (resampling ablation, :func:`~attention_lib.interventions.patch_head`); the named previous-token
head beside the other layer-0 head and both together; forcing onto key 0 beside zeroing.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ...attention_only import all_head_scores
from ...interventions import edit_head, force_onto, zero_rows
from ...patching import patch_head, record_head
from ..seed_study import SeedStudy, load_study, study_main
from .band_figures import measure
from .recipe import HELDOUT_SEED, evaluate_induction, train_induction
from .repeats import encode, make_repeats, repeated_part

#: The seeds of the study (the bands are fitted on 0-4, on three CPU paths, and their margins set by 5-9).
STUDY_SEEDS = tuple(range(10))
STORED = Path(__file__).with_name("study_measured.py")
DONOR_SEED = 4242  # the sequences whose head outputs replace a head's own (resampling ablation)


def accuracy_with(model, batch, *, layer=None, heads=(), edit=None, donor=None) -> float:
    """Accuracy on the repeated part of ``batch``, with ``heads`` of ``layer`` changed by ``edit`` (e.g. zeroed),
    or writing what they wrote on the ``donor`` sequences (resampling ablation)."""
    with torch.no_grad():
        if donor is not None:
            logits = _resampled(model, batch.tokens, layer, list(heads), donor)
        elif edit is not None:
            with edit_head(model.layers[layer], list(heads), edit):
                logits = model(batch.tokens).logits
        else:
            logits = model(batch.tokens).logits
    right = logits[:, :-1].argmax(-1) == batch.tokens[:, 1:]
    return float(right[repeated_part(batch.lengths, 32)].float().mean())


def _resampled(model, tokens, layer, heads, donor):
    """Logits of ``tokens`` with ``heads`` of ``layer`` writing their outputs on ``donor``: one head through
    :func:`~attention_lib.interventions.patch_head`; every head of the layer by replacing the layer's output."""
    attention = model.layers[layer]
    if len(heads) == 1:
        with record_head(attention, heads[0]) as kept:
            model(donor)
        with patch_head(attention, heads[0], kept[0]):
            return model(tokens).logits
    kept = []
    handle = attention.register_forward_hook(lambda m, a, out: kept.append(out[0]))
    try:
        model(donor)
    finally:
        handle.remove()
    handle = attention.register_forward_hook(lambda m, a, out: (kept[0], out[1]))
    try:
        return model(tokens).logits
    finally:
        handle.remove()


def claims(model, one_layer) -> dict[str, float]:
    """Every figure the lesson says of a trained two-layer ``model`` (and ``one_layer``), for one seed."""
    found = {}
    fresh = make_repeats(2000, seed=2024)
    with torch.no_grad():
        maps = model(fresh.tokens).attentions
    scores = all_head_scores(maps, fresh.lengths)
    previous = int(scores["previous token"][0].argmax())
    other = 1 - previous
    found["previous-token score, previous-token head"] = float(scores["previous token"][0, previous])
    found["previous-token score, other layer-0 head"] = float(scores["previous token"][0, other])
    found["induction score, lower layer-1 head"] = float(scores["induction"][1].min())
    found["induction score, higher layer-1 head"] = float(scores["induction"][1].max())
    found["largest score of any other head"] = float(torch.cat([
        scores["previous token"][1], scores["induction"][0]]).max())
    k, i = fresh.lengths[:, None], torch.arange(32)[None]
    on_next = maps[1].gather(-1, (i - k + 1).clamp(min=0)[:, None, :, None].expand(-1, 2, -1, 1)).squeeze(-1)
    for name, queries in (("scored queries", (i >= k) & (i <= 2 * k - 2)), ("last query", i == 2 * k - 1)):
        share = (on_next * queries[:, None]).sum(dim=(0, 2)) / queries.sum()
        found[f"induction weight, {name}, lower layer-1 head"] = float(share.min())
        found[f"induction weight, {name}, higher layer-1 head"] = float(share.max())
    back = maps[0][:, previous].diagonal(offset=-1, dim1=-2, dim2=-1).mean(0)
    found["previous-token head on i - 1, queries 1-15"] = float(back[:15].mean())
    found["previous-token head on i - 1, queries 16-31"] = float(back[15:].mean())
    found |= _prefix_probe(model, previous)
    found |= _ablations(model, previous)
    found |= _habit(model)
    found |= _thecatsat(model)
    found["one layer: accuracy on the repeated part"] = evaluate_induction(one_layer)["repeated accuracy"]
    with torch.no_grad():
        one = all_head_scores(one_layer(fresh.tokens).attentions, fresh.lengths)
    found["one layer: best induction score"] = float(one["induction"].max())
    return found


def _prefix_probe(model, previous) -> dict[str, float]:
    """Section 5: repeats after a random prefix, the copy's source before or after position 15, with the
    previous-token head intact or forced onto ``i - 1``."""
    g = torch.Generator().manual_seed(5)
    N = 2000
    tokens = torch.randint(0, 32, (N, 32), generator=g)
    seg, prefix = torch.randint(6, 13, (N,), generator=g), torch.randint(1, 9, (N,), generator=g)
    i = torch.arange(32)[None]
    in_copy = (i >= (prefix + seg)[:, None]) & (i < (prefix + 2 * seg)[:, None])
    tokens = tokens.gather(1, torch.where(in_copy, i - seg[:, None], i))
    q = torch.arange(31)[None]
    predictable = (q >= (prefix + seg)[:, None]) & (q <= (prefix + 2 * seg - 2)[:, None])
    key = q - seg[:, None] + 1
    early, late = predictable & (key <= 15), predictable & (key >= 16)

    def onto_previous(weights):
        for row in range(1, weights.shape[1]):
            weights = force_onto(weights, rows=row, keys=row - 1)
        return weights

    with torch.no_grad():
        intact = model(tokens).logits[:, :-1].argmax(-1) == tokens[:, 1:]
        with edit_head(model.layers[0], previous, onto_previous):
            forced = model(tokens).logits[:, :-1].argmax(-1) == tokens[:, 1:]
    return {"after a prefix: source at 15 or before": float(intact[early].float().mean()),
            "after a prefix: source at 16 or after": float(intact[late].float().mean()),
            "after a prefix, previous-token head forced onto i - 1: source at 16 or after":
                float(forced[late].float().mean())}


def _ablations(model, previous) -> dict[str, float]:
    """Section 6: heads zeroed, or given their outputs on other sequences; the previous-token head off at the keys
    or at the queries."""
    scored = make_repeats(2000, seed=HELDOUT_SEED)
    donor = make_repeats(2000, seed=DONOR_SEED).tokens
    other = 1 - previous
    found = {"accuracy, intact": accuracy_with(model, scored)}
    for name, layer, heads in (("previous-token head", 0, [previous]), ("other layer-0 head", 0, [other]),
                               ("both layer-0 heads", 0, [0, 1]), ("both layer-1 heads", 1, [0, 1])):
        found[f"accuracy, {name} zeroed"] = accuracy_with(model, scored, layer=layer, heads=heads, edit=zero_rows)
        found[f"accuracy, {name} resampled"] = accuracy_with(model, scored, layer=layer, heads=heads, donor=donor)
    i, k = torch.arange(32)[None], scored.lengths[:, None]
    for where, rows in (("keys", i < k), ("queries", (i >= k) & (i < 2 * k))):
        found[f"accuracy, previous-token head zeroed at the {where}"] = accuracy_with(
            model, scored, layer=0, heads=[previous],
            edit=lambda w, rows=rows: torch.where(rows[:, :, None], zero_rows(w), w))
    return found


def _habit(model) -> dict[str, float]:
    """Section 8: how often the first token is the top guess at the first segment's queries 4 to 8, intact, with
    the layer-1 heads zeroed there, or forced onto key 0 there."""
    batch = make_repeats(2000, seed=2024)
    first, q = batch.tokens[:, :1], torch.arange(32)[None]
    segment = q < batch.lengths[:, None]
    early = segment & (q >= 4) & (q <= 8)
    found = {}
    for name, edit in (("intact", None), ("layer-1 heads zeroed", zero_rows),
                       ("layer-1 heads onto key 0", lambda w: force_onto(w, rows=None, keys=0))):
        with torch.no_grad():
            if edit is None:
                logits = model(batch.tokens).logits
            else:
                with edit_head(model.layers[1], [0, 1], lambda w, e=edit: torch.where(segment[:, :, None], e(w), w)):
                    logits = model(batch.tokens).logits
        found[f"first token the top guess at queries 4-8, {name}"] = float((logits.argmax(-1) == first)[early]
                                                                         .float().mean())
    return found


def _thecatsat(model) -> dict[str, float]:
    """Section 9: on ``thecatsatthecatsat``, the prediction at row 14 (the copy's second ``t``) and how many of the
    other rows 9-16 are right."""
    text = "thecatsatthecatsat"
    with torch.no_grad():
        predicted = model(encode(text)[None]).logits[0].argmax(-1)
    right = [int(predicted[i]) == int(encode(text[i + 1])[0]) for i in range(9, 17)]
    return {"thecatsat: row 14 predicts h": float(int(predicted[14]) == int(encode("h")[0])),
            "thecatsat: rows 9-16 other than 14 right": float(sum(right) - right[14 - 9])}


def seed_figures(seed: int) -> dict[str, float]:
    """The lesson's band figures and every claim of :func:`claims`, for the recipe trained with ``seed``."""
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    found, run, _ = measure(seed)
    return found | claims(run.model, train_induction(1, seed=seed).model)


def load() -> SeedStudy:
    """The stored study, seeds 0-9 (:data:`STORED`)."""
    return load_study(STORED)


# -- what the lesson says of every seed, read against the stored study --------------------------------------------
#: Lesson 13's statements about the recipe: (what it says, the figure, the test a seed's value must pass).
CLAIMS = [
    ("accuracy on the repeated part above 90 %", "accuracy, intact", lambda v: v > 0.9),
    ("one layer-0 head scores above 0.3 as a previous-token head", "previous-token score, previous-token head",
     lambda v: v > 0.3),
    ("the other layer-0 head scores below 0.15", "previous-token score, other layer-0 head", lambda v: v < 0.15),
    ("both layer-1 heads score above 0.5 as induction heads", "induction score, lower layer-1 head", lambda v: v > 0.5),
    ("the previous-token head zeroed: below 50 %", "accuracy, previous-token head zeroed", lambda v: v < 0.5),
    ("the previous-token head resampled: below 50 %", "accuracy, previous-token head resampled", lambda v: v < 0.5),
    ("the other layer-0 head zeroed: above 85 %", "accuracy, other layer-0 head zeroed", lambda v: v > 0.85),
    ("the other layer-0 head resampled: above 85 %", "accuracy, other layer-0 head resampled", lambda v: v > 0.85),
    ("both layer-0 heads zeroed: below 30 %", "accuracy, both layer-0 heads zeroed", lambda v: v < 0.3),
    ("both layer-0 heads resampled: below 30 %", "accuracy, both layer-0 heads resampled", lambda v: v < 0.3),
    ("both induction heads zeroed: below 10 %", "accuracy, both layer-1 heads zeroed", lambda v: v < 0.1),
    ("both induction heads resampled: below 10 %", "accuracy, both layer-1 heads resampled", lambda v: v < 0.1),
    ("previous-token head off at the queries: above 85 %", "accuracy, previous-token head zeroed at the queries",
     lambda v: v > 0.85),
    ("previous-token head on i - 1 at queries 16-31: below 0.2", "previous-token head on i - 1, queries 16-31",
     lambda v: v < 0.2),
    ("after a prefix, source at 16 or after: below 20 %", "after a prefix: source at 16 or after", lambda v: v < 0.2),
    ("the same, previous-token head forced onto i - 1: above 50 %",
     "after a prefix, previous-token head forced onto i - 1: source at 16 or after", lambda v: v > 0.5),
    ("first token the top guess at queries 4-8, layer-1 heads zeroed: below 10 %",
     "first token the top guess at queries 4-8, layer-1 heads zeroed", lambda v: v < 0.1),
    ("one layer: best induction score below 0.3", "one layer: best induction score", lambda v: v < 0.3),
    ("thecatsat: row 14 predicts h", "thecatsat: row 14 predicts h", lambda v: v == 1),
]
#: Two figures of one seed against each other: (what it says, (a figure, the figure it is compared with), the test).
DIFFERENCES = [
    ("previous-token head off at the keys: within 3 points of off everywhere",
     ("accuracy, previous-token head zeroed at the keys", "accuracy, previous-token head zeroed"),
     lambda v: abs(v) < 0.03),
    ("the previous-token head resampled: no more than 1 point above zeroed",
     ("accuracy, previous-token head resampled", "accuracy, previous-token head zeroed"), lambda v: v <= 0.01),
    ("both layer-0 heads resampled: no more than 1 point above zeroed",
     ("accuracy, both layer-0 heads resampled", "accuracy, both layer-0 heads zeroed"), lambda v: v <= 0.01),
]


def claims_report(seeds: SeedStudy) -> str:
    """Each statement of :data:`CLAIMS` and :data:`DIFFERENCES`, the seeds of ``seeds`` it holds on, and the range
    of its figure over them: one line each, as lesson 13 prints them.

    Example:
        >>> print(claims_report(load()).splitlines()[0])  # doctest: +NORMALIZE_WHITESPACE
        accuracy on the repeated part above 90 % on 10 of 10 seeds (0.93 to 0.94)
    """
    differences = SeedStudy({seed: {said: f[a] - f[b] for said, (a, b), _ in DIFFERENCES}
                             for seed, f in seeds.runs.items()})
    lines = []
    for study, rows in ((seeds, CLAIMS), (differences, [(said, said, test) for said, _, test in DIFFERENCES])):
        for said, figure, test in rows:
            low, high = study.span(figure)
            lines.append(f"{said:78s} {study.holds_text(figure, test)}  ({low:.2f} to {high:.2f})")
    return "\n".join(lines)


def main(argv=None) -> None:  # pragma: no cover - run by hand (``python3 course.py remake study-13``), about 10 minutes
    note = (f"Lesson 13's recipe on seeds {STUDY_SEEDS[0]}-{STUDY_SEEDS[-1]}: its band figures and claims, "
            f"one run each on this machine's own CPU path (torch {torch.__version__}, one thread).\n\n"
            f"Written by `python3 course.py remake study-13`.")
    study_main(seed_figures, STUDY_SEEDS, STORED, note, argv)


if __name__ == "__main__":  # pragma: no cover
    main()
