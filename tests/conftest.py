"""Shared test tools: hypothesis profiles; the inputs, tolerances and strategies that every attention test uses
(import them with ``from conftest import make_qkv, TOL, attention_cases``); and the browser tests' Chromium, provided
before the first test when what pytest collected holds a browser test."""

import contextlib
import os
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import settings
from hypothesis import strategies as st

from tools.chromium import ensure_browser, find_chromium

settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True)
settings.register_profile("dev", max_examples=20, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

#: How close an attention result must be to SDPA's, per dtype.
TOL = {torch.float32: {"atol": 2e-5, "rtol": 2e-5}, torch.float64: {"atol": 1e-10, "rtol": 1e-10}}


def make_qkv(batch, L, S, E, Ev, dtype=torch.float64, seed=0, requires_grad=False):
    """Seeded query ``(*batch, L, E)``, key ``(*batch, S, E)`` and value ``(*batch, S, Ev)`` (float64 unless told)."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*batch, L, E, generator=g, dtype=dtype)
    k = torch.randn(*batch, S, E, generator=g, dtype=dtype)
    v = torch.randn(*batch, S, Ev, generator=g, dtype=dtype)
    return [t.requires_grad_(requires_grad) for t in (q, k, v)]


def random_mask(shape, dtype, seed, keep_rows=True):
    """A bool mask (True = may attend) or the equivalent float mask (0 / -inf) of ``shape``."""
    g = torch.Generator().manual_seed(seed + 1000)
    allowed = torch.rand(shape, generator=g) > 0.4
    if keep_rows:
        allowed[..., 0] = True  # every query keeps at least one key, so SDPA's result is well defined
    return allowed if dtype == torch.bool else float_mask(allowed, dtype)


def float_mask(allowed, dtype):
    """The float mask (0 where ``allowed``, -inf elsewhere) that means the same as a bool mask."""
    return torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, float("-inf"))


@st.composite
def attention_cases(draw, dtypes=(torch.float32, torch.float64)):
    """``(batch, L, S, E, Ev, dtype, mask_kind, mask_shape, scale, seed)``: 0-3 batch dimensions, L != S,
    E != Ev, no mask / bool / float / causal, masks that broadcast over some batch dimensions, custom scales."""
    ndim = draw(st.integers(0, 3))
    batch = tuple(draw(st.lists(st.integers(1, 3), min_size=ndim, max_size=ndim)))
    L, S = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    E, Ev = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    dtype = draw(st.sampled_from(list(dtypes)))
    mask_kind = draw(st.sampled_from(["none", "bool", "float", "causal"]))
    # The mask may drop leading batch dimensions or keep them with size 1 (broadcasting).
    mask_shape = list(batch) + [L, S]
    keep = draw(st.integers(0, len(batch)))
    mask_shape = mask_shape[len(batch) - keep:]
    mask_shape = [1 if i < keep and draw(st.booleans()) else d for i, d in enumerate(mask_shape)]
    scale = draw(st.one_of(st.none(), st.floats(0.05, 2.0)))
    return batch, L, S, E, Ev, dtype, mask_kind, tuple(mask_shape), scale, draw(st.integers(0, 10_000))


def case_kwargs(mask_kind, mask_shape, dtype, scale, seed) -> dict:
    """The keyword arguments (``attn_mask``/``is_causal``, ``scale``) that a drawn case stands for."""
    kwargs = {"scale": scale}
    if mask_kind in ("bool", "float"):
        kwargs["attn_mask"] = random_mask(mask_shape, torch.bool if mask_kind == "bool" else dtype, seed)
    if mask_kind == "causal":
        kwargs["is_causal"] = True
    return kwargs


# -- the browser tests' Chromium --------------------------------------------------------------------------------


def browser_tests(items) -> list:
    """The collected tests that drive a browser: those that use the :func:`chromium` fixture."""
    return [item for item in items if "chromium" in getattr(item, "fixturenames", ())]


def pytest_collection_finish(session):
    """When the tests selected to run (after ``-k``, ``-m``, ``--deselect`` and node ids) include a browser test
    and no Chromium is found, install one now, before the first test: Debian's with apt as root or with
    passwordless sudo, else Playwright's download (``tools/chromium.py``). ``COURSE_SKIP_BROWSER=1`` skips it; if
    none can be had, ``tests/test_browser.py::test_the_browser_is_available`` fails and says why."""
    if os.environ.get("COURSE_SKIP_BROWSER") == "1" or session.config.option.collectonly:
        return
    if not browser_tests(session.items) or find_chromium():
        return
    capture = session.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        ensure_browser(Path(sys.executable))


@pytest.fixture(scope="session")
def chromium() -> str | None:
    """The Chromium that the browser tests drive (its path), or None when none was found or could be installed."""
    return find_chromium()


@pytest.fixture
def one_thread():
    """One thread for the test: for tiny models it is much faster than two on a busy machine (lesson 15 uses one)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
