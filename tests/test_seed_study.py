"""The seed study: figures per seed, what holds on how many seeds, bands checked on seeds they were not fitted on."""

import json

import pytest

from attention_lib.training.seed_study import SeedStudy, load_study, run_study, write_study


def _recipe(seed):
    return {"accuracy": [0.95, 0.97, 0.80, 0.99, 0.96][seed], "solved": seed != 2}


def test_a_study_collects_each_seed_and_its_span():
    study = run_study(_recipe, range(5))
    assert study.seeds == [0, 1, 2, 3, 4]
    assert study.values("solved") == {0: 1.0, 1: 1.0, 2: 0.0, 3: 1.0, 4: 1.0}
    assert study.span("accuracy") == (0.80, 0.99)


def test_holds_counts_the_seeds_and_names_those_it_fails_on():
    study = run_study(_recipe, range(5))
    assert study.holds("accuracy", lambda v: v >= 0.9) == (4, 5)
    assert study.holds_text("accuracy", lambda v: v >= 0.9) == "on 4 of 5 seeds (not on seed 2)"
    assert study.holds_text("accuracy", lambda v: v > 0.5) == "on 5 of 5 seeds"
    assert study.span_text("accuracy", "{:.0%}") == "from 80% to 99% across seeds 0-4"
    assert study.subset([0, 4]).span_text("solved", "{:.0f}") == "1 on every one of seeds 0, 4"


def test_the_table_has_a_row_per_seed_and_the_min_max():
    lines = run_study(_recipe, range(5)).table(fmt={"accuracy": "{:.2f}"}).splitlines()
    assert len(lines) == 7
    assert lines[0].split() == ["seed", "accuracy", "solved"]
    assert lines[3].split() == ["2", "0.80", "0"]
    assert lines[-1].split() == ["min-max", "0.80-0.99", "0-1"]


def test_a_band_fitted_on_some_seeds_is_checked_on_the_others():
    study = run_study(_recipe, range(5))
    tight = study.held_out("accuracy", fit=[0, 1], margin=0.0)
    assert (tight.low, tight.high, tight.held) == (0.95, 0.97, (2, 3, 4))
    assert tight.misses == {2: 0.80, 3: 0.99}
    assert not tight.ok
    assert "2 of 3 OUTSIDE" in str(tight)
    wide = study.held_out("accuracy", fit=[0, 1, 3], margin=0.2)
    assert wide.ok
    assert "all 2 inside" in str(wide)


def test_a_stored_study_reads_back_as_it_was_written(tmp_path):
    study = run_study(_recipe, range(5))
    for name in ("study.py", "study.json"):
        write_study(study, tmp_path / name, "The toy recipe, seeds 0-4.")
        again = load_study(tmp_path / name)
        assert again.to_dict() == {s: {k: float(v) for k, v in f.items()} for s, f in study.runs.items()}
    assert json.loads((tmp_path / "study.json").read_text())["note"] == "The toy recipe, seeds 0-4."
    assert "The toy recipe" in (tmp_path / "study.py").read_text()


def test_bad_studies_are_refused_with_what_to_do(tmp_path):
    with pytest.raises(ValueError, match="at least one seed"):
        SeedStudy({})
    with pytest.raises(ValueError, match="same figures"):
        SeedStudy({0: {"a": 1.0}, 1: {"b": 1.0}})
    study = run_study(_recipe, range(3))
    with pytest.raises(ValueError, match="no figure 'loss'"):
        study.values("loss")
    with pytest.raises(ValueError, match="hold out the rest"):
        study.held_out("accuracy", fit=[0, 1, 2])
    with pytest.raises(ValueError, match=r"seeds \[7\] are not in the study"):
        study.subset([7])
    (tmp_path / "empty.py").write_text("X = 1\n")
    with pytest.raises(ValueError, match="holds no `STUDY"):
        load_study(tmp_path / "empty.py")


# -- the lessons' studies: bands checked on seeds they were not fitted on, and a part of each study rerun ----------
def _headroom(study, figure):
    """The headroom a rerun gets beyond the study's span: half the span across seeds, or 5 % of the figure's size
    (0.02 at least): another CPU trains like another seed, so a rerun is compared with what the seeds span."""
    low, high = study.span(figure)
    return max((high - low) / 2, 0.05 * max(abs(low), abs(high)), 0.02)


def _within_the_seeds(study, rerun):
    outside = {}
    for figure, value in rerun.items():
        low, high = study.span(figure)
        room = _headroom(study, figure)
        if not low - room <= value <= high + room:
            outside[figure] = (value, low, high)
    return outside


@pytest.mark.parametrize("lesson", [13, 15])
def test_each_band_holds_on_the_seeds_it_was_not_fitted_on(lesson):
    import importlib

    from attention_lib.training.bands import held_out, lessons

    module = importlib.import_module(lessons()[lesson])
    assert not set(module.HELD_OUT) & (set(module.SEEDS) | set(module.MARGIN_SEEDS)), "held out means unused"
    assert held_out(lesson) == {}


@pytest.mark.parametrize("lesson", ["induction_heads", "generation"])
def test_a_lessons_stored_study_holds_its_seeds_and_figures(lesson):
    import importlib

    study_module = importlib.import_module(f"attention_lib.training.{lesson}.study")
    study = study_module.load()
    assert study.seeds == list(study_module.STUDY_SEEDS)
    assert len(study.figures) > 10


@pytest.mark.slow
@pytest.mark.parametrize(("lesson", "seed"), [("induction_heads", 3), ("generation", 4)])
def test_a_rerun_seed_lies_within_what_the_studys_seeds_span(lesson, seed):
    """Part of the stored study, trained again here: on another CPU a run is another draw of the recipe, so it is
    compared with the span of every seed of the study, with headroom, not with the stored run of that seed."""
    import importlib

    study_module = importlib.import_module(f"attention_lib.training.{lesson}.study")
    assert _within_the_seeds(study_module.load(), study_module.seed_figures(seed)) == {}


def test_the_rerun_check_finds_a_figure_outside_the_seeds():
    study = run_study(_recipe, range(5))
    assert _within_the_seeds(study, {"accuracy": 0.97, "solved": 1.0}) == {}
    assert _within_the_seeds(study, {"accuracy": 0.5, "solved": 1.0}) == {"accuracy": (0.5, 0.8, 0.99)}
