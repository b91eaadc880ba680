"""FlexAttention the course's way: every mask of the package as a rule, the recipe with two hooks, the block mask.

- each rule (``attention_lib.flex.mask_mods``) gives the package's mask tensor (``attention_lib.masks``) under
  PyTorch's ``create_mask``, on square shapes, ``L < S`` and ``L > S``: the one place each rule is written is checked
  against the one place its tensor is built;
- ``flex_reference`` equals PyTorch's ``flex_attention`` (eager always; compiled where a C++ compiler is found), with
  and without score_mods, in float32 and float64, and ``calculate_attention`` with the rule's tensor;
- a block mask's tiles equal the tiles counted from the dense mask;
- every error is raised with its message.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import and_masks, create_block_mask, create_mask, flex_attention, or_masks

from attention_lib import calculate_attention, causal_mask, causal_mask_lower_right, padding_mask, sliding_window_mask
from attention_lib.flex import (
    alibi_mod,
    alibi_slopes,
    causal_lower_right_mod,
    causal_mod,
    decoding_mod,
    dense_mask,
    document_mod,
    find_compiler,
    flex_reference,
    index_grid,
    padding_mod,
    prefix_lm_mod,
    sliding_window_mod,
    soft_cap_mod,
    tiles_of_block_mask,
    tiles_of_mask,
)
from attention_lib.masks import decoding_mask

#: (L, S): square, fewer queries than keys, more, and the edges (one query, one key).
SHAPES = [(5, 5), (3, 7), (7, 3), (1, 6), (6, 1), (4, 4)]


def rule_tensor(mask_mod, B, H, L, S) -> torch.Tensor:
    """The rule under PyTorch's own ``create_mask`` (``torch.vmap`` over every position)."""
    return create_mask(mask_mod, B, H, L, S, device="cpu")


def course_masks(L: int, S: int):
    """``(name, rule, the package's tensor broadcast to (1, 1, L, S))`` for every mask of the course at ``L, S``."""
    full = (1, 1, L, S)
    yield "causal", causal_mod, causal_mask(L, S).expand(full)
    yield "lower right", causal_lower_right_mod(L, S), causal_mask_lower_right(L, S).expand(full)
    for window in (1, 2, 3, max(L, S) + 1):
        for align in ("upper_left", "lower_right"):
            yield (f"window {window} {align}", sliding_window_mod(window, align=align, L=L, S=S),
                   sliding_window_mask(L, S, window=window, align=align).expand(full))
    for window in (None, 2):
        tensor = decoding_mask(L, S, window=window)
        yield (f"decoding window={window}", decoding_mod(L, S, window=window),
               torch.ones(full, dtype=torch.bool) if tensor is None else tensor.expand(full))


@pytest.mark.parametrize(("L", "S"), SHAPES)
def test_every_course_mask_is_its_rule(L, S):
    for name, rule, tensor in course_masks(L, S):
        assert torch.equal(rule_tensor(rule, 1, 1, L, S), tensor), name
        assert torch.equal(dense_mask(rule, 1, 1, L, S), tensor), name


@pytest.mark.parametrize(("L", "S"), SHAPES)
def test_padding_is_its_rule_in_every_sentence(L, S):
    lengths = [S, S // 2, 0]
    expected = padding_mask(lengths, S).unsqueeze(1).expand(3, 2, L, S)  # (N, 1, S) -> (N, H, L, S)
    assert torch.equal(rule_tensor(padding_mod(lengths), 3, 2, L, S), expected)
    both = and_masks(causal_mod, padding_mod(torch.tensor(lengths)))
    assert torch.equal(rule_tensor(both, 3, 2, L, S), causal_mask(L, S) & expected)


def test_documents_and_prefix_lm_are_their_rules():
    ids = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2])
    same = ids[:, None] == ids[None, :]  # (S, S): the definition, by hand
    assert torch.equal(rule_tensor(document_mod(ids), 1, 1, 8, 8)[0, 0], same)
    causal_documents = and_masks(causal_mod, document_mod(ids.tolist()))
    assert torch.equal(rule_tensor(causal_documents, 1, 1, 8, 8)[0, 0], same & causal_mask(8))
    for L, S in SHAPES:
        prefix = torch.arange(S)[None, :] < 2  # (1, S): the first two keys, seen by every query
        expected = causal_mask(L, S) | prefix
        assert torch.equal(rule_tensor(prefix_lm_mod(2), 1, 1, L, S)[0, 0], expected)
        assert torch.equal(rule_tensor(or_masks(causal_mod, lambda b, h, q, kv: kv < 2), 1, 1, L, S)[0, 0], expected)
    per_sentence = rule_tensor(prefix_lm_mod([0, 3]), 2, 1, 5, 5)[:, 0]
    assert torch.equal(per_sentence[0], causal_mask(5))
    assert torch.equal(per_sentence[1], causal_mask(5) | (torch.arange(5) < 3))


def qkv(B, H, L, S, E, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(B, H, n, E, generator=g, dtype=dtype) for n in (L, S, S))


def eager_flex(*args, **kwargs):
    with warnings.catch_warnings():  # "flex_attention called without torch.compile()": on purpose here
        warnings.simplefilter("ignore", UserWarning)
        return flex_attention(*args, **kwargs)


MODS = {
    "none": (None, None),
    "causal": (None, causal_mod),
    "window": (None, sliding_window_mod(3)),
    "alibi, causal": (alibi_mod(2), causal_mod),
    "soft cap": (soft_cap_mod(1.5), None),
    "soft cap, documents": (soft_cap_mod(1.5), document_mod([0, 0, 0, 1, 1, 1, 1, 2])),
    "padding, row without key": (None, and_masks(padding_mod([8, 3]), lambda b, h, q, kv: q < 6)),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("mods", MODS.values(), ids=MODS.keys())
def test_the_reference_is_flex_attention(mods, dtype):
    score_mod, mask_mod = mods
    q, k, v = qkv(2, 2, 8, 8, 16, dtype)
    ours, weights = flex_reference(q, k, v, score_mod=score_mod, mask_mod=mask_mod)
    block_mask = None if mask_mod is None else create_block_mask(mask_mod, 2, 2, 8, 8, device="cpu")
    tolerance = {"atol": 1e-6, "rtol": 1e-5} if dtype == torch.float32 else {"atol": 1e-12, "rtol": 1e-10}
    torch.testing.assert_close(ours, eager_flex(q, k, v, score_mod=score_mod, block_mask=block_mask), **tolerance)
    torch.testing.assert_close(ours, weights @ v)
    if score_mod is None:  # without a bias, it is the course's attention with the rule's tensor
        mask = None if mask_mod is None else dense_mask(mask_mod, 2, 2, 8, 8)
        torch.testing.assert_close(ours, calculate_attention(q, k, v, attn_mask=mask)[0], **tolerance)


def test_the_reference_takes_other_lengths_and_a_scale():
    q, k, v = qkv(1, 2, 3, 7, 8, torch.float32)
    out, _ = flex_reference(q, k, v, mask_mod=causal_lower_right_mod(3, 7), scale=0.3)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask_lower_right(3, 7), scale=0.3)
    torch.testing.assert_close(out, expected)


def test_score_mods_add_what_they_say():
    q, k, v = qkv(1, 4, 5, 5, 8, torch.float64)
    _, plain = flex_reference(q, k, v)
    _, alibi = flex_reference(q, k, v, score_mod=alibi_mod(4))
    _, h, q_idx, kv_idx = index_grid(1, 4, 5, 5)
    bias = alibi_slopes(4).double()[h] * (kv_idx - q_idx)  # (1, 4, 5, 5)
    scores = q @ k.mT / 8**0.5
    torch.testing.assert_close(alibi, torch.softmax(scores + bias, dim=-1))
    torch.testing.assert_close(plain, torch.softmax(scores, dim=-1))
    assert torch.allclose(alibi_slopes(8), 2.0 ** -torch.arange(1.0, 9.0))  # 1/2 ... 1/256, as in the paper
    capped = soft_cap_mod(2.0)(torch.tensor([-100.0, 0.0, 100.0]), 0, 0, 0, 0)
    assert capped.abs().max() <= 2.0
    assert capped[1] == 0


BLOCKS = {
    "causal": (causal_mod, 16, 16, 4),
    "causal, ragged": (causal_mod, 10, 10, 4),
    "window": (sliding_window_mod(5), 24, 24, 4),
    "documents, causal": (and_masks(causal_mod, document_mod([0] * 7 + [1] * 5 + [2] * 4)), 16, 16, 4),
    "prefix-LM": (prefix_lm_mod(6), 16, 16, 4),
    "lower right, L < S": (causal_lower_right_mod(8, 16), 8, 16, 4),
}


@pytest.mark.parametrize("case", BLOCKS.values(), ids=BLOCKS.keys())
def test_a_block_mask_keeps_the_tiles_counted_from_the_dense_mask(case):
    rule, L, S, size = case
    block_mask = create_block_mask(rule, 1, 1, L, S, device="cpu", BLOCK_SIZE=size)
    counted = tiles_of_mask(dense_mask(rule, 1, 1, L, S)[0, 0], size)
    assert torch.equal(tiles_of_block_mask(block_mask), counted)
    computed = int((counted < 2).sum())
    assert int(block_mask.kv_num_blocks.sum() + block_mask.full_kv_num_blocks.sum()) == computed


def test_tiles_of_a_causal_mask_are_lesson_10s():
    from attention_lib.plotting.memory_efficient.tiles import causal_tile_kinds

    assert torch.equal(tiles_of_mask(causal_mask(1024), 256), causal_tile_kinds(1024, 256))
    # where n is no multiple of the block, FlexAttention masks the last row of tiles too (positions past the end)
    assert tiles_of_mask(causal_mask(1000), 256)[-1].tolist() == [1, 1, 1, 1]


def test_find_compiler_says_why_not():
    from torch._inductor import config

    if not hasattr(config, "cpp") or not hasattr(config.cpp, "cxx"):
        pytest.skip("this torch names its C++ compiler elsewhere")
    with config.patch({"cpp.cxx": (None, "/no/such/compiler-g++")}):  # restored after (a monkeypatch deletes it)
        reason = find_compiler()
    assert reason is not None
    assert reason.startswith("no working C++ compiler")


@pytest.mark.slow
@pytest.mark.skipif(find_compiler() is not None, reason=f"flex_attention is not compiled here: {find_compiler()}")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_reference_is_compiled_flex_attention(dtype):
    compiled = torch.compile(flex_attention)
    q, k, v = qkv(1, 2, 256, 256, 16, dtype)
    rule = and_masks(causal_mod, sliding_window_mod(100))
    block_mask = create_block_mask(rule, None, None, 256, 256, device="cpu")
    ours, _ = flex_reference(q, k, v, score_mod=soft_cap_mod(2.0), mask_mod=rule)
    tolerance = {"atol": 2e-6, "rtol": 1e-5} if dtype == torch.float32 else {"atol": 1e-12, "rtol": 1e-10}
    torch.testing.assert_close(compiled(q, k, v, score_mod=soft_cap_mod(2.0), block_mask=block_mask), ours,
                               **tolerance)
    with pytest.raises(NotImplementedError, match="does not support backward on CPU"):  # compiled or not
        compiled(q.clone().requires_grad_(), k, v, block_mask=block_mask)


def test_flex_attention_has_no_backward_on_the_cpu():
    q, k, v = qkv(1, 1, 4, 4, 8, torch.float32)
    with pytest.raises(NotImplementedError, match="does not support backward on CPU"):
        eager_flex(q.requires_grad_(), k, v).sum().backward()


ERRORS = [
    (TypeError, "mask_mod must be a function", lambda: flex_reference(*qkv(1, 1, 2, 2, 4, torch.float32),
                                                                        mask_mod=causal_mask(2))),
    (TypeError, "score_mod must be a function", lambda: flex_reference(*qkv(1, 1, 2, 2, 4, torch.float32),
                                                                         score_mod=3.0)),
    (TypeError, "mask_mod must return a bool tensor", lambda: dense_mask(lambda b, h, q, kv: q - kv, 1, 1, 2, 2)),
    (TypeError, "score_mod must return the new scores", lambda: flex_reference(
        *qkv(1, 1, 2, 2, 4, torch.float32), score_mod=lambda s, b, h, q, kv: s > 0)),
    (ValueError, "does not broadcast to the scores", lambda: dense_mask(
        lambda b, h, q, kv: torch.ones(3, dtype=torch.bool), 1, 1, 2, 2)),
    (ValueError, r"\(B, H, positions, features\)", lambda: flex_reference(*(torch.randn(2, 4) for _ in range(3)))),
    (ValueError, "key and value must have the same number", lambda: flex_reference(
        torch.randn(1, 1, 2, 4), torch.randn(1, 1, 3, 4), torch.randn(1, 1, 2, 4))),
    (ValueError, "window must be positive", lambda: sliding_window_mod(0)),
    (TypeError, "window must be an int", lambda: sliding_window_mod(2.0)),
    (ValueError, "align must be one of", lambda: sliding_window_mod(2, align="top_left")),
    (TypeError, "align must be a string", lambda: sliding_window_mod(2, align=1)),
    (ValueError, "pass L \\(queries\\) and S \\(keys\\)", lambda: sliding_window_mod(2, align="lower_right")),
    (ValueError, "S must be non-negative", lambda: causal_lower_right_mod(2, -1)),
    (TypeError, "lengths must be a list of ints", lambda: padding_mod([2.5, 1])),
    (TypeError, "lengths must hold integers", lambda: padding_mod(torch.tensor([2.0]))),
    (ValueError, "lengths must be 1-D", lambda: padding_mod(torch.tensor([[2]]))),
    (ValueError, "lengths must be non-negative", lambda: padding_mod([2, -1])),
    (TypeError, "document_ids must be a torch.Tensor", lambda: document_mod("0011")),
    (ValueError, "prefix_length must be non-negative", lambda: prefix_lm_mod(-1)),
    (TypeError, "prefix_length must be a list of ints", lambda: prefix_lm_mod([1.5])),
    (TypeError, "heads must be an int", lambda: alibi_mod(2.0)),
    (ValueError, "cap must be positive", lambda: soft_cap_mod(0.0)),
    (ValueError, "B must be non-negative", lambda: index_grid(-1, 1, 1, 1)),
    (TypeError, "mask must be a bool tensor", lambda: tiles_of_mask(torch.ones(2, 2), 1)),
    (ValueError, "mask must be 2-D", lambda: tiles_of_mask(torch.ones(1, 2, 2, dtype=torch.bool), 1)),
    (ValueError, "block_size must be positive", lambda: tiles_of_mask(torch.ones(2, 2, dtype=torch.bool), 0)),
    (TypeError, "block_mask must be a BlockMask", lambda: tiles_of_block_mask(causal_mask(4))),
]


@pytest.mark.parametrize(("error", "match", "call"), ERRORS, ids=[m for _, m, _ in ERRORS])
def test_every_error_says_what_to_do(error, match, call):
    with pytest.raises(error, match=match):
        call()


def test_the_benchmark_part_says_why_it_times_nothing_without_a_compiler(monkeypatch, capsys):
    from attention_lib.bench import flex_attention as part
    from attention_lib.bench.run import main

    monkeypatch.setattr(part, "find_compiler", lambda: "no C++ compiler found ('g++' is not on the PATH)")
    result = main(["--part", "flex", "--quick", "--device", "cpu"])
    assert result["flex"] == {"skipped": "no C++ compiler found ('g++' is not on the PATH)"}
    assert "skipped: no C++ compiler found" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.skipif(find_compiler() is not None, reason=f"flex_attention is not compiled here: {find_compiler()}")
def test_the_benchmark_part_times_both_rules(capsys):
    from attention_lib.bench.flex_attention import print_flex, time_flex

    result = time_flex(sizes=(256,), head_dim=16, repeats=1)
    assert [(row["rule"], row["n"]) for row in result["rows"]] == [("causal", 256), ("window 128", 256)]
    assert all(row["flex ms"] > 0 and row["sdpa ms"] > 0 for row in result["rows"])
    print_flex(result, 16, 1)
    assert "flex/SDPA" in capsys.readouterr().out


@pytest.mark.slow
def test_the_lesson_runs_to_its_end_without_a_compiler():
    """The compiled cells say why they are skipped, and every compared output stays as stored (strict nbval)."""
    import subprocess
    import sys
    from pathlib import Path

    from tools.project import NBVAL_ARGS, run_env

    root = Path(__file__).resolve().parents[1]
    env = {**run_env(), "CXX": "/no/such/compiler-g++"}  # PyTorch's compiler lookup fails, as on a bare laptop
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *NBVAL_ARGS,
                           "notebooks/20_flex_attention.ipynb"], cwd=root, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:]


@pytest.mark.slow
@pytest.mark.skipif(find_compiler() is not None, reason=f"flex_attention is not compiled here: {find_compiler()}")
def test_a_new_number_in_a_rule_compiles_again_and_a_new_tensor_does_not():
    """What lesson 20 says of the recompile limit: a Python number a rule closes over is guarded, a tensor is not."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()  # as a fresh kernel is: no window number seen by an earlier test's compile
    compiled = torch.compile(flex_attention)
    q, k, v = qkv(1, 1, 256, 256, 16, torch.float32)

    def graphs_after(rule) -> int:
        before = counters["stats"]["unique_graphs"]
        compiled(q, k, v, block_mask=create_block_mask(rule, None, None, 256, 256, device="cpu"))
        return counters["stats"]["unique_graphs"] - before

    assert graphs_after(document_mod(torch.arange(256) // 100)) == 1  # a new rule: compiled
    assert graphs_after(document_mod(torch.arange(256) // 30)) == 0  # the same rule, another tensor: reused
    assert graphs_after(sliding_window_mod(128)) == 1
    assert graphs_after(sliding_window_mod(64)) == 1  # the same code, another number: compiled again
    assert graphs_after(sliding_window_mod(32)) == 0  # ... once: from then on the number is a variable
