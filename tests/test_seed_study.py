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
