"""The benchmark's linear-attention part: it runs alone with --part linear (a smoke test: no assertion on times),
each timed step computes what the package's whole-sequence forms compute, and its targets say met, missed or not
measured."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attention_lib import calculate_attention, chunk_linear_attention, recurrent_gated_delta_rule
from attention_lib.bench.linear_attention import (
    WAYS,
    decoding_step,
    linear_targets,
    print_linear_decoding,
    time_linear_decoding,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_linear_part_alone_prints_its_table_and_targets():
    result = subprocess.run([sys.executable, "-m", "attention_lib.bench", "--part", "linear", "--quick", "--threads",
                             "1"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout
    for heading in ("== environment", "== linear attention (CPU): one decoding step after S tokens",
                    "== linear-attention targets", "linear: a decoding step at S=8,192 <= 1.2x its step at S=128",
                    "gated delta: a decoding step at S=8,192 <= 1.2x its step at S=128"):
        assert heading in out
    assert "== ceiling" not in out
    assert "not measured" not in out


def test_each_step_is_the_last_token_of_the_whole_sequence():
    """The timed step, from its state or cache, gives what one pass over all S tokens gives at the last token."""
    S = 10
    g = torch.Generator().manual_seed(0)  # decoding_step's own draws, in its order
    past = [torch.randn(1, 16, S - 1, 64, generator=g) for _ in range(3)]
    new = [torch.randn(1, 16, 1, 64, generator=g) for _ in range(3)]
    gates = (-torch.rand(1, 16, S, generator=g) * 0.1, torch.rand(1, 16, S, generator=g))
    q, k, v = (torch.cat([p, n], dim=-2) for p, n in zip(past, new, strict=True))
    whole = {"linear": chunk_linear_attention(q, k, v)[0],
             "gated delta": recurrent_gated_delta_rule(q, k, v, *gates, use_qk_l2norm=True)[0],
             "softmax + cache": calculate_attention(q, k, v, is_causal=True)[0]}
    for way in WAYS:
        step = decoding_step(way, S)
        first = step()
        torch.testing.assert_close(first, whole[way][..., -1:, :], atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(step(), first)  # the state or the cropped cache is left as it was


def test_targets_are_judged_and_unmeasured_lengths_say_so(capsys):
    seconds = {(way, S): 1e-3 for way in WAYS for S in (128, 8192)}
    result = {"seconds": seconds, "growth": {"linear": 1.05, "gated delta": 1.3, "softmax + cache": 20.0}}
    targets = print_linear_decoding(result, (128, 8192), repeats=1)
    assert [t[1] for t in targets] == [1.05, 1.3]
    out = capsys.readouterr().out
    assert "met          linear: a decoding step at S=8,192 <= 1.2x its step at S=128: 1.05" in out
    assert "MISSED       gated delta: a decoding step at S=8,192 <= 1.2x its step at S=128: 1.30" in out
    assert [t[1] for t in linear_targets(result, (128, 1024))] == [None, None]
    assert sorted(time_linear_decoding((4, 8), repeats=1)["growth"]) == sorted(WAYS)
    with pytest.raises(ValueError, match=r"way must be one of \['linear', 'gated delta', 'softmax \+ cache'\]"):
        decoding_step("mamba", 8)
