"""attention_lib.bench.measure: medians, warm-up, GPU synchronisation around the clock, and its error messages."""

import pytest
import torch

from attention_lib.bench import measure
from attention_lib.bench.measure import median_time, synchronize, time_over_sizes


class FakeClock:
    """A clock that only moves when the timed function says so: the durations are known exactly."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(measure.time, "perf_counter", fake)
    return fake


@pytest.mark.parametrize(("durations", "median"), [([3.0, 1.0, 2.0], 2.0), ([5.0, 1.0, 100.0, 2.0, 3.0], 3.0),
                                                   ([4.0, 1.0], 2.5)])
def test_median_time_returns_the_median_of_the_timed_runs(clock, durations, median):
    steps = iter([99.0, *durations])  # the first call is the warm-up: it must not count

    def fn():
        clock.now += next(steps)

    assert median_time(fn, repeats=len(durations), warmup=1) == pytest.approx(median)


def test_median_time_runs_warmup_then_repeats_and_passes_arguments():
    calls = []
    median_time(lambda *args, **kwargs: calls.append((args, kwargs)), 1, 2, repeats=4, warmup=3, scale=0.5)
    assert calls == [((1, 2), {"scale": 0.5})] * 7


def test_median_time_synchronizes_before_starting_and_before_stopping_the_clock(monkeypatch):
    events = []
    monkeypatch.setattr(measure, "synchronize", lambda device: events.append(("sync", str(device))))
    median_time(lambda: events.append("fn"), repeats=2, warmup=1, device="cuda")
    assert events == ["fn", ("sync", "cuda"), "fn", ("sync", "cuda"), ("sync", "cuda"), "fn", ("sync", "cuda")]


def test_median_time_infers_the_device_from_its_tensor_arguments(monkeypatch):
    seen = []
    monkeypatch.setattr(measure, "synchronize", seen.append)
    on_meta = torch.empty(2, 2, device="meta")  # a non-CPU device that exists everywhere
    median_time(lambda a, b: None, torch.zeros(2), on_meta, repeats=1, warmup=0)
    assert seen == [torch.device("meta")] * 2
    seen.clear()
    median_time(lambda a: None, torch.zeros(2), repeats=1, warmup=0)
    assert seen == [torch.device("cpu")] * 2  # synchronize does nothing on the CPU


def test_synchronize_on_cpu_or_none_does_nothing():
    assert synchronize(None) is None
    assert synchronize("cpu") is None
    assert synchronize(torch.device("cpu")) is None


def test_median_time_measures_real_work():
    x = torch.randn(128, 128)
    fast = median_time(torch.add, x, x, repeats=3)
    assert 0.0 < fast < 1.0


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"repeats": 0}, ValueError, "repeats must be positive, but repeats=0"),
    ({"warmup": -1}, ValueError, "warmup must be non-negative, but warmup=-1"),
    ({"repeats": 2.5}, TypeError, "repeats must be an int, but got float"),
    ({"warmup": True}, TypeError, "warmup must be an int, but got bool"),
])
def test_median_time_rejects_bad_counts(kwargs, error, match):
    with pytest.raises(error, match=match):
        median_time(lambda: None, **kwargs)


def test_median_time_rejects_a_result_instead_of_a_function():
    with pytest.raises(TypeError, match="fn must be callable .* but got Tensor"):
        median_time(torch.zeros(2))


def test_time_over_sizes_gives_every_candidate_the_same_inputs_in_order():
    made, seen = [], []

    def make_inputs(size):
        made.append(size)
        return (torch.full((size,), float(size)),)

    candidates = {"first": lambda x: seen.append(("first", x.numel())),
                  "second": lambda x: seen.append(("second", x.numel()))}
    table = time_over_sizes(candidates, make_inputs, [3, 5], repeats=2, warmup=0)
    assert list(table) == ["first", "second"]
    assert all(len(times) == 2 and all(t >= 0.0 for t in times) for times in table.values())
    assert made == [3, 5]
    assert seen == [("first", 3)] * 2 + [("second", 3)] * 2 + [("first", 5)] * 2 + [("second", 5)] * 2


def test_time_over_sizes_reports_the_medians(clock):
    def slow(n):
        clock.now += n

    table = time_over_sizes({"slow": slow}, lambda n: (n,), [1, 4], repeats=3, warmup=1)
    assert table == {"slow": [pytest.approx(1.0), pytest.approx(4.0)]}


@pytest.mark.parametrize(("candidates", "sizes"), [({}, [1]), ({"f": abs}, [])])
def test_time_over_sizes_needs_candidates_and_sizes(candidates, sizes):
    with pytest.raises(ValueError, match="needs at least one candidate and one size"):
        time_over_sizes(candidates, lambda n: (n,), sizes)
