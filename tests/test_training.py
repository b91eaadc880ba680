"""The training recipe of lesson 12: the shipped models reach their stated accuracy on fresh held-out data,
and the recipe in the package makes models of that quality (training takes seconds)."""

import json
import re
from pathlib import Path

import pytest
import torch

from attention_lib.training.bands import Band, all_kinds, band_text, largest_map_difference, within_band
from attention_lib.training.bands_measured import BANDS
from attention_lib.training.grammar import HELDOUT_STRUCTURES
from attention_lib.training.learning_to_attend import evaluate, load_trained, make_batch, train
from attention_lib.training.learning_to_attend.attraction import (
    SEEDS,
    STUDY_STEPS,
    STUDY_TASKS,
    by_attractors,
    load_study,
    measure,
    spread,
)
from attention_lib.training.learning_to_attend.band_figures import MAPS
from attention_lib.training.learning_to_attend.probes import (
    probe_agreement,
    probe_attraction,
    subject_head,
    subject_shares,
)
from attention_lib.training.learning_to_attend.tasks import get_task

ROOT = Path(__file__).resolve().parents[1]
FRESH_SEED = 20_261_130  # neither the training seed nor the seed of the stored held-out measurements


def mirror_share(model) -> torch.Tensor:
    """Per head, the share of rows whose strongest key is the mirror position (the anti-diagonal)."""
    x, _ = make_batch("reversal", 1000, seed=FRESH_SEED, split="heldout")
    with torch.no_grad():
        weights = model(x).attentions[0]  # (N, H, L, L)
    return (weights.argmax(-1) == torch.arange(7, -1, -1)).float().mean(dim=(0, 2))


MOVED = ["P S V", "P P S V", "P S P V", "P P P S V"]  # the subject is not the first noun


def subject_probes(model, structures=HELDOUT_STRUCTURES):
    """The model's accuracy and its verb-to-subject head on fresh sentences of each structure."""
    layer, head = subject_head(model, seed=FRESH_SEED)
    return probe_agreement(model, structures, layer=layer, head=head, n=500, seed=FRESH_SEED)


@pytest.mark.parametrize(("task", "least"), [("reversal", 0.99), ("agreement", 0.9)])
def test_shipped_model_reaches_its_stated_accuracy_on_fresh_heldout_data(task, least):
    trained = load_trained(task)
    assert trained.heldout_accuracy >= least
    fresh = evaluate(trained.model, task, n=3000, seed=FRESH_SEED)["sequence_accuracy"]
    assert abs(fresh - trained.heldout_accuracy) < 0.02


def test_shipped_models_attend_as_the_lesson_says():
    assert (mirror_share(load_trained("reversal").model) >= 0.95).all()
    probes = subject_probes(load_trained("agreement").model)
    assert sum(p.on_subject for p in probes) / len(probes) >= 0.8, "the verb's head finds the subject"
    moved = [p for p in probes if not p.structure.startswith("S")]
    assert max(p.on_first_noun for p in moved) <= 0.05, "where the subject is not first, not the first noun"


@pytest.fixture(scope="module")
def reversal_run():
    return train("reversal", snapshot_steps=(0, 40, 250))


@pytest.fixture(scope="module")
def agreement_run():
    return train("agreement")


def test_subject_first_data_teaches_a_shortcut():
    """Trained on sentences whose subject is always first, a model fails when the subject moves."""
    model = train("agreement_subject_first").model
    assert evaluate(model, "agreement_subject_first", n=1000, seed=FRESH_SEED)["sequence_accuracy"] >= 0.99
    layer, head = subject_head(model, get_task("agreement_subject_first"))
    moved = probe_agreement(model, MOVED, layer=layer, head=head, n=500, seed=FRESH_SEED)
    assert max(p.accuracy for p in moved) < 0.7
    assert max(p.on_subject for p in moved) < 0.3


def assert_maps_in_band(task, mine):
    """Same recipe and seed: the maps differ from the shipped model's no more than the lesson's band allows, the
    range measured on three CPU paths widened by its stated margin (a retrained model on another CPU is another
    run of the recipe, not a copy of the one stored). The figure is the lesson's own, on the lesson's inputs."""
    x, _ = make_batch(task, 500, seed=99, split="heldout")
    said = within_band(MAPS[task], largest_map_difference(mine, load_trained(task).model, x))
    assert not said.startswith("OUTSIDE"), said


def test_recipe_reproduces_the_reversal_model(reversal_run):
    assert evaluate(reversal_run.model, "reversal", n=3000, seed=FRESH_SEED)["sequence_accuracy"] >= 0.99
    assert (mirror_share(reversal_run.model) >= 0.95).all()
    assert_maps_in_band("reversal", reversal_run.model)


def test_recipe_reproduces_the_agreement_model(agreement_run):
    assert evaluate(agreement_run.model, "agreement", n=3000, seed=FRESH_SEED)["sequence_accuracy"] >= 0.9
    probes = subject_probes(agreement_run.model, MOVED)
    assert min(p.accuracy for p in probes) >= 0.8, "right on at least 4 in 5 sentences of every moved structure"
    assert_maps_in_band("agreement", agreement_run.model)


def test_a_structures_probe_does_not_depend_on_the_other_structures_listed():
    model = load_trained("agreement").model
    alone = probe_agreement(model, ["P S P P V P"], layer=1, head=0, n=200, adjectives=0)[0]
    listed = probe_agreement(model, ["P P P P S V", "P S P P V P"], layer=1, head=0, n=200, adjectives=0)[1]
    assert alone == listed


@pytest.mark.slow
def test_recipe_reproduces_the_subject_first_model():
    assert_maps_in_band("agreement_subject_first", train("agreement_subject_first").model)


@pytest.mark.slow
@pytest.mark.parametrize(("task", "num_layers"), [("agreement", 1)])
def test_recipe_reproduces_the_other_shipped_models(task, num_layers):
    """The shipped one-block model is what the recipe makes (``train(task, num_layers=1)``). No band was measured
    for its maps over CPU paths: this compares with the stored run, which only the same kernels repeat exactly."""
    mine = train(task, num_layers=num_layers).model
    x, _ = make_batch(task, 200, seed=FRESH_SEED, split="heldout")
    with torch.no_grad():
        maps = mine(x).attentions, load_trained(task, num_layers=num_layers).model(x).attentions
    assert max(float((a - b).abs().mean()) for a, b in zip(*maps, strict=True)) < 0.01


def test_the_stored_accuracy_was_measured_on_the_heldout_data_the_task_draws_today():
    """The generator draws the held-out sentences it drew when the shipped models were saved (seed 1234)."""
    for task, num_layers in (("agreement", None), ("agreement", 1), ("agreement_subject_first", None)):
        trained = load_trained(task, num_layers=num_layers)
        assert abs(evaluate(trained.model, task)["sequence_accuracy"] - trained.heldout_accuracy) <= 0.001


def test_attraction_is_measured_on_sentences_with_exactly_that_many_attractors():
    model = load_trained("agreement").model
    rows = probe_attraction(model, ["P P P S V", "S P V"], layer=1, head=0, n=200)
    assert [(r.structure, r.attractors) for r in rows] == [("P P P S V", m) for m in range(4)] + [("S P V", 0),
                                                                                                    ("S P V", 1)]
    assert rows[0].accuracy == 1.0
    assert rows[0].on_attractor == 0.0, "no attractor: no noun of the other number to look at"
    assert rows[3].accuracy < rows[0].accuracy, "three attractors before the subject are harder than none"
    assert rows[3].on_attractor > 0.0, "and the verb then sometimes looks hardest at one of them"
    for r in rows:
        assert 0.0 <= r.on_subject + r.on_attractor <= 1.0
    alone = probe_attraction(model, ["S P V"], layer=1, head=0, n=200)
    assert alone == rows[4:], "a structure's sentences do not depend on the other structures listed"


def test_by_attractors_averages_the_structures_with_that_many():
    model = load_trained("agreement").model
    rows = by_attractors(model, ["P S V", "P P S V"], layer=1, head=0, n=100)
    probes = probe_attraction(model, ["P S V", "P P S V"], layer=1, head=0, n=100)
    assert sorted(rows) == [0, 1, 2]
    assert rows[2] == pytest.approx((probes[-1].accuracy, probes[-1].on_subject)), "only P P S V has two"
    assert rows[0][0] == pytest.approx((probes[0].accuracy + probes[2].accuracy) / 2)
    assert by_attractors(model, ["P S V"], n=100) == by_attractors(model, ["P S V"], layer=1, head=0, n=100), (
        "the default head is the model's verb-to-subject head")


def test_subject_shares_find_the_subject_head():
    model = load_trained("agreement").model
    shares = subject_shares(model)
    assert shares.shape == (2, 2)
    assert subject_head(model) == divmod(int(shares.argmax()), 2)
    assert float(shares[1].min()) > 0.5, "both heads of the last block look hardest at the subject, most often"


#: How far outside the stored seeds' range a model the recipe trains again may fall: the stored study's seeds are
#: five draws of the recipe, and a model retrained on another CPU (another BLAS code path) is another draw.
STUDY_HEADROOM = 0.05


@pytest.mark.slow
def test_the_stored_attraction_study_is_what_the_recipe_gives():
    """Seed 1 of the stored study, trained again, falls in the range the stored seeds span (with headroom).

    Not within a guess of the stored seed 1: on another CPU (an Intel Xeon with AMX against the machine that wrote
    the study) the same seed trains another model, 0.05 away on one figure, still inside the recipe's range."""
    study = load_study()
    assert sorted(study) == [(task, steps) for task in STUDY_TASKS for steps in STUDY_STEPS]
    assert all(sorted(runs) == list(SEEDS) for runs in study.values())
    for task in STUDY_TASKS:
        again = measure(train(task, seed=1).model)
        runs = study[(task, 300)].values()
        accuracies = [run["held-out accuracy"] for run in runs]
        assert min(accuracies) - STUDY_HEADROOM <= again["held-out accuracy"] <= max(accuracies) + STUDY_HEADROOM
        for part in ("held-out", "beyond"):
            for which in (0, 1):  # accuracy, the verb's strongest key on the subject
                for m, (_, low, high) in spread(study, task, 300, part, which).items():
                    value = again[part][m][which]
                    assert low - STUDY_HEADROOM <= value <= high + STUDY_HEADROOM, (task, part, m, which, value, low,
                                                                                     high)


def test_without_positions_reversal_fails():
    run = train("reversal", use_positions=False)
    scores = evaluate(run.model, "reversal", n=1000, seed=FRESH_SEED)
    assert scores["token_accuracy"] < 0.5
    assert scores["sequence_accuracy"] < 0.05
    assert run.losses[-1] > 1.0


def test_losses_and_snapshots(reversal_run):
    assert len(reversal_run.losses) == 250
    assert reversal_run.losses[-1] < 0.05 < 1.0 < reversal_run.losses[0]
    assert sorted(reversal_run.snapshots) == [0, 40, 250]
    first, last = reversal_run.snapshots[0][0], reversal_run.snapshots[250][0]  # (4, H, 8, 8) each
    assert first.shape == (4, 2, 8, 8)
    mirror = torch.arange(7, -1, -1)
    on_mirror = [float(m[:, :, torch.arange(8), mirror].mean()) for m in (first, last)]
    assert on_mirror[0] < 0.3 < 0.9 < on_mirror[1], "the anti-diagonal emerges during training"


def test_training_is_seeded_and_restores_the_thread_count():
    threads = torch.get_num_threads()
    a, b, c = train("reversal", steps=15), train("reversal", steps=15), train("reversal", steps=15, seed=1)
    assert a.losses == b.losses
    assert a.losses != c.losses
    assert torch.get_num_threads() == threads


def test_evaluate_counts_scored_positions_only():
    model = train("agreement", steps=1).model
    scores = evaluate(model, "agreement", n=200)
    assert scores["token_accuracy"] == scores["sequence_accuracy"], "one scored verb per sentence"


def test_evaluate_refuses_a_model_of_another_task():
    with pytest.raises(ValueError, match=r"does not fit the task 'reversal': the task needs vocab_size=10, "
                                         r"num_answers=10 and max_len >= 8, but the model has vocab_size=18, "
                                         r"num_answers=2, max_len=22. Was it trained on another task"):
        evaluate(load_trained("agreement").model, "reversal")
    with pytest.raises(ValueError, match="does not fit the task 'agreement'"):
        evaluate(load_trained("reversal").model, "agreement")
    with pytest.raises(TypeError, match="model must be a TinyTransformer.*but got str"):
        evaluate("reversal", "reversal")
    subject_first = train("agreement_subject_first", steps=1).model  # the same sentences: it can be measured
    assert 0 <= evaluate(subject_first, "agreement", n=50)["sequence_accuracy"] <= 1


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"task": "sorting"}, "unknown task 'sorting'"),
    ({"task": "reversal", "steps": 0}, "steps must be positive, but steps=0"),
])
def test_train_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        train(**kwargs)


# --- the bands of trained figures -----------------------------------------------------------------------------

def test_a_band_is_shown_rounded_outwards_and_holds_what_it_shows():
    band = Band(0.8612, 0.9487)
    assert band.shown() == ("86", "95", " %")
    assert band.holds(0.8601)
    assert band.holds(0.95)
    assert not band.holds(0.951)
    assert Band(151, 181, "step").shown() == ("151", "181", "")
    assert Band(3.5763, 3.6070, "number", 1).shown() == ("3.5", "3.7", "")
    assert Band(0.0, 2.05e-05, "number", 2, "0").shown() == ("0.00", "0.01", "")


def test_within_band_says_what_the_band_supports_or_fails_loudly():
    name = "induction: accuracy on the repeated part"
    low, high, *_ = BANDS[name]
    assert within_band(name, low) == ("within the 92-96 % this recipe gives (seeds 0-4 on 3 CPU paths, 15 runs: "
                                      "measured 93-95 %, plus a margin of 1 point each side; held-out seeds 10-14 "
                                      "lie inside)")
    assert within_band("reversal: held-out sequence accuracy", 1.0).endswith("each side)"), "nothing held out"
    assert within_band(name, high) == within_band(name, low), "the statement does not depend on the last digits"
    assert within_band(name, low - 0.005).startswith("within"), "the margin holds a run just below the measured"
    outside = within_band(name, 0.5)
    assert outside.startswith("OUTSIDE the band: this run gives 0.5, but the runs of this recipe give 92-96 %")
    assert band_text("induction: steps from the loss halfway down to the induction score halfway up") == "-26 to 32"


def test_every_band_claims_a_stated_margin_beyond_what_was_measured():
    for name, measured in BANDS.items():
        band = Band(*measured)
        wide = band.widened(name)
        assert wide.low <= band.low
        assert wide.high >= band.high
        margin = band.margin(name)
        assert margin >= {"share": 0.01, "step": 5}.get(band.kind, 10.0 ** -band.digits)
        said = within_band(name, band.low)
        assert f"{band.runs(name)} runs: measured" in said, said
        assert "plus a margin of" in said, said
    maps = "agreement: largest difference from the shipped model's maps"
    assert within_band(maps, 0.036).startswith("within"), "what an AVX-512 machine measured under default"
    with pytest.raises(ValueError, match="no band was measured for 'nothing'; the figures with a band are"):
        within_band("nothing", 1.0)


BAND_CALL = re.compile(r"""(?:within_band|band_text)\(\s*f?["']([^"'{]+)["']""")


@pytest.mark.parametrize("lesson", ["12_learning_to_attend", "13_induction_heads"])
def test_every_band_a_lesson_quotes_was_measured(lesson):
    code = "\n".join("".join(c["source"]) for c in json.loads((ROOT / "notebooks" / f"{lesson}.ipynb").read_text())[
        "cells"] if c["cell_type"] == "code")
    names = BAND_CALL.findall(code)
    assert names, "the lesson checks its trained figures against bands"
    for name in names:
        assert name in BANDS or any(b.startswith(name) for b in BANDS), name


def test_every_figure_the_measurement_computes_has_its_band():
    assert sorted(BANDS) == sorted(all_kinds())
    for name, (_lesson, kind, digits, seeds) in all_kinds().items():
        low, high, *rest = BANDS[name]
        assert low <= high
        assert tuple(rest) == (kind, digits, seeds), name


# -- the one loader of shipped models ------------------------------------------------------------------------------
def test_the_one_loader_loads_every_shipped_model_by_its_name():
    from attention_lib.training import load_shipped, shipped_models
    from attention_lib.training.induction_heads import load_induction

    names = shipped_models()
    assert {"reversal", "agreement-1block", "induction-2layer", "generation-gqa-seed1"} <= set(names)
    for name in names:
        model, measured = load_shipped(name)
        assert not model.training
        assert measured
    lesson_13, measured = load_induction(2)
    again, measured_again = load_shipped("induction-2layer")
    assert measured == measured_again
    assert all(torch.equal(a, b) for a, b in zip(lesson_13.state_dict().values(), again.state_dict().values(),
                                                  strict=True))
    assert load_shipped("agreement").measured == {"heldout_accuracy": load_trained("agreement").heldout_accuracy}


@pytest.mark.parametrize(("name", "error", "match"), [
    (3, TypeError, "a shipped model is named by a string such as 'reversal', but got int"),
    ("sorting", ValueError, r"no kind of shipped model is called 'sorting'; the shipped models are \['agreement'"),
    ("induction-3layer", ValueError, r"no model called 'induction-3layer' ships with attention_lib"),
])
def test_the_one_loader_refuses_names_it_does_not_ship(name, error, match):
    from attention_lib.training import load_shipped

    with pytest.raises(error, match=match):
        load_shipped(name)


def test_the_one_loader_checks_the_kind_a_name_says(tmp_path):
    from attention_lib.training import load_shipped
    from attention_lib.training.shipped import TRAINED_DIR

    path = tmp_path / "x.pt"
    path.write_bytes((TRAINED_DIR / "induction-2layer.pt").read_bytes())
    assert load_shipped("induction-7layer", path=path).measured == load_shipped("induction-2layer").measured
    with pytest.raises(ValueError, match="is not a trained model of attention_lib"):
        load_shipped("reversal", path=path)
    with pytest.raises(ValueError, match="is not a lesson 15 language model of attention_lib"):
        load_shipped("generation-mha-seed0", path=path)
    with pytest.raises(FileNotFoundError, match="python3 course.py remake weights-13"):
        load_shipped("induction-2layer", path=tmp_path / "none.pt")


def test_the_band_system_finds_each_lessons_figures_and_names_a_missing_one(capsys):
    from attention_lib.training import bands

    assert {12, 13} <= set(bands.lessons())
    with pytest.raises(SystemExit):
        bands.main(["--lesson", "99"])
    assert "lessons [99] have no band figures: write attention_lib/training/<slug>/band_figures.py" in \
        capsys.readouterr().err


#: The figures of lesson 12's seed study a retrained model must land near: shares, in 0..1.
SEED_FIGURES = ("accuracy 3", "forced onto subject 3", "forced onto agreeing noun 2", "patched 3", "donor same 3",
                "donor opposite 3", "removed 3", "placebo 3", "reverse 3")
#: How far outside the twelve stored seeds' range a model trained again (another seed, or another CPU) may fall.
SEED_HEADROOM = 0.1


def test_the_seed_study_holds_twelve_seeds_of_both_recipes():
    from attention_lib.training.learning_to_attend.over_seeds import RECIPES, SEEDS, load_seed_studies

    studies = load_seed_studies()
    assert sorted(studies) == sorted(RECIPES)
    for study in studies.values():
        assert study.seeds == list(SEEDS)
        assert len(SEEDS) >= 10
        for figure in SEED_FIGURES:
            assert all(0 <= value <= 1 for value in study.values(figure).values()), figure


def test_lesson_12s_accuracy_band_holds_the_seeds_it_was_not_fitted_on():
    from attention_lib.training.learning_to_attend.over_seeds import CHECK_SEEDS, accuracy_band, within_seed_band

    band = accuracy_band()
    assert list(band.held) == list(CHECK_SEEDS)
    assert band.ok, str(band)
    assert within_seed_band(load_trained("agreement").heldout_accuracy).startswith("within")
    assert within_seed_band(band.low - 0.01).startswith("OUTSIDE")


@pytest.mark.slow
@pytest.mark.parametrize("recipe", ["two blocks", "one block"])
def test_a_seed_the_study_never_saw_falls_in_its_range(recipe):
    """A seed outside the stored study, trained and measured again: its figures fall in the range the twelve stored
    seeds span, widened by SEED_HEADROOM, and the lesson's claims of what holds on every seed hold on it too."""
    from attention_lib.training.learning_to_attend.over_seeds import load_seed_studies, study_recipe

    stored = load_seed_studies()[recipe]
    new = study_recipe(recipe, seeds=[FRESH_SEED % 1000])
    (run,) = new.to_dict().values()
    for figure in SEED_FIGURES:
        low, high = stored.span(figure)
        assert low - SEED_HEADROOM <= run[figure] <= high + SEED_HEADROOM, (figure, run[figure], low, high)
    # what lesson 12 says holds on every seed (stored: differences of at most 0.08, a donor of the other number
    # leaving at most 0.15, the matched removal above its placebo on all 24 models)
    assert abs(run["forced onto agreeing noun 2"] - run["forced onto subject 2"]) <= 0.1, "forcing: control position"
    assert abs(run["donor same 3"] - run["patched 3"]) <= 0.1, "an unrelated donor of the same number mends as much"
    assert run["donor opposite 3"] <= 0.25, "a donor of the other number turns the answers"
    assert abs(run["placebo 3"] - run["accuracy 3"]) <= 0.05, "the placebo changes little"
    assert run["removed matched 3"] > run["placebo 3"], "the same weight matters more on the attractors"
