"""The absorbed form's fast path for one decoding sequence on a CPU (its keys cut into chunks that threads share,
merged by log-sum-exp) against the plain recipe, in float64, and where it must step aside (gradients included: the
fused kernel's backward pass ignores its log-sum-exp)."""

from contextlib import contextmanager

import pytest
import torch

from attention_lib import LatentCache, MultiHeadLatentAttention, calculate_attention
from attention_lib.latent import _split
from attention_lib.latent._split import CHUNK, split_keys_applies, split_keys_attention


@contextmanager
def threads(n):
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("S", [2 * CHUNK, 2 * CHUNK + 1, 3 * CHUNK - 1, 5 * CHUNK + 7])
@pytest.mark.parametrize(("N", "R"), [(1, 1), (1, 16), (3, 5)])
def test_chunks_merged_by_log_sum_exp_are_the_recipe(S, N, R):
    g = torch.Generator().manual_seed(S + R)
    q, k, v = (torch.randn(N, 1, n, 12, generator=g, dtype=torch.float64) for n in (R, S, S))
    got = split_keys_attention(q, k, v, 0.3)
    recipe, _ = calculate_attention(q, k, v, scale=0.3)
    torch.testing.assert_close(got, recipe, atol=1e-12, rtol=1e-12)


def test_an_absorbed_decoding_step_takes_the_fast_path_and_equals_the_expanded_form(monkeypatch):
    torch.manual_seed(0)
    layer = MultiHeadLatentAttention(64, 4, kv_rank=16, rope_dim=8, nope_dim=16, v_dim=16).double().eval()
    x = torch.randn(1, 2 * CHUNK + 11, 64, dtype=torch.float64)
    taken = []
    monkeypatch.setattr("attention_lib.latent.attention.split_keys_applies",
                        lambda *a: taken.append(split_keys_applies(*a)) or taken[-1])
    outputs = []
    with threads(2), torch.no_grad():
        for absorbed in (False, True):
            layer.absorbed = absorbed
            cache = LatentCache(1, x.shape[1])
            layer(x[:, :-1], cache)  # the prefill (several queries: a mask, so never the fast path)
            outputs.append(layer(x[:, -1:], cache))  # one step: one query over 2·CHUNK + 11 latents
    assert taken == [False, True]
    torch.testing.assert_close(outputs[1], outputs[0], atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("case", ["one thread", "mask", "nan", "short", "two heads", "batch as large as threads",
                                  "float16", "gradient"])
def test_the_fast_path_steps_aside_where_it_could_differ_or_gain_nothing(case):
    q, k = torch.randn(1, 1, 4, 8), torch.randn(1, 1, 2 * CHUNK, 8)
    mask, n = None, 2
    if case == "one thread":
        n = 1
    elif case == "mask":
        mask = torch.ones(4, 2 * CHUNK, dtype=torch.bool)
    elif case == "nan":
        q[0, 0, 1, 2] = float("nan")  # SDPA's path gives it NaN, as the recipe does; the kernel alone gives zeros
    elif case == "short":
        k = k[..., :2 * CHUNK - 1, :]
    elif case == "two heads":
        q, k = q.expand(1, 2, 4, 8), k.expand(1, 2, -1, 8)
    elif case == "batch as large as threads":
        q, k = q.expand(2, 1, 4, 8), k.expand(2, 1, -1, 8)
    elif case == "float16":
        q, k = q.half(), k.half()
    else:  # the kernel's backward pass takes no gradient of the log-sum-exp that the merge uses
        q.requires_grad_()
    with threads(n):
        assert not split_keys_applies(q, k, k, mask)
    with threads(2):
        assert split_keys_applies(torch.randn(1, 1, 4, 8), torch.randn(1, 1, 2 * CHUNK, 8),
                                  torch.randn(1, 1, 2 * CHUNK, 8), None)


def test_the_chunk_size_is_what_the_docstring_measured():
    assert _split.CHUNK == 512
