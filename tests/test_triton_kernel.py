"""The Triton attention kernel against SDPA, run in Triton's interpreter on the CPU (compiled on a GPU)."""

from __future__ import annotations

import builtins
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attention_lib import memory_efficient_attention
from attention_lib.memory_efficient import triton_kernel
from attention_lib.memory_efficient.triton_kernel import import_triton, triton_attention, triton_attention_forward

try:  # not pytest.importorskip("triton"): the first import must come after TRITON_INTERPRET=1 (no GPU)
    import_triton()
except ImportError:
    pytest.skip("triton is not installed (Linux only)", allow_module_level=True)
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def reference(q, k, v, is_causal, scale=None):
    """SDPA's output and the log-sum-exp of the scaled (causal-masked) scores, in float32."""
    q, k, v = q.float(), k.float(), v.float()
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ k.transpose(-2, -1) * scale  # (N, H, L, E) @ (N, H, E, S) -> (N, H, L, S)
    if is_causal:
        allowed = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~allowed, float("-inf"))
    return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale), torch.logsumexp(scores, -1)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(L=st.integers(1, 40), S=st.integers(1, 40), E=st.sampled_from([16, 32]), Ev=st.sampled_from([16, 32]),
       heads=st.integers(1, 2), is_causal=st.booleans(), block_l=st.sampled_from([16, 32]),
       block_s=st.sampled_from([16, 32]), seed=st.integers(0, 2**16))
def test_kernel_agrees_with_sdpa(L, S, E, Ev, heads, is_causal, block_l, block_s, seed):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, heads, n, d, generator=g).to(DEVICE) for n, d in ((L, E), (S, E), (S, Ev)))
    output, lse = triton_attention_forward(q, k, v, is_causal=is_causal, block_sizes=(block_l, block_s))
    expected, expected_lse = reference(q, k, v, is_causal)
    torch.testing.assert_close(output, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(lse, expected_lse, atol=1e-5, rtol=1e-5)


def test_scale_and_the_package_agree():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, n, 32, generator=g).to(DEVICE) for n in (70, 50, 50))
    output, lse = triton_attention_forward(q, k, v, scale=0.3, block_sizes=(32, 16))
    expected, expected_lse = reference(q, k, v, False, scale=0.3)
    torch.testing.assert_close(output, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(lse, expected_lse, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(output, memory_efficient_attention(q, k, v, scale=0.3), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_returns_its_dtype_close_to_float32(dtype):
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 2, n, 16, generator=g).to(DEVICE, dtype) for n in (20, 33, 33))
    output = triton_attention(q, k, v, is_causal=True, block_sizes=(16, 16))
    assert output.dtype == dtype
    torch.testing.assert_close(output.float(), reference(q, k, v, True)[0], atol=2e-2, rtol=2e-2)


def test_gradients_match_sdpa_and_finite_differences():
    g = torch.Generator().manual_seed(2)
    inputs = [torch.randn(1, 2, n, 16, generator=g).to(DEVICE).requires_grad_() for n in (20, 20, 20)]
    grad_output = torch.randn(1, 2, 20, 16, generator=g).to(DEVICE)
    ours = torch.autograd.grad(triton_attention(*inputs, is_causal=True, block_sizes=(16, 16)), inputs, grad_output)
    theirs = torch.autograd.grad(F.scaled_dot_product_attention(*inputs, is_causal=True), inputs, grad_output)
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
    # gradcheck's idea, in float32: the gradient predicts the change of the loss along a random direction
    direction = [torch.randn(t.shape, generator=g).to(DEVICE) for t in inputs]
    eps = 1e-2

    def loss(shift):
        moved = [(t + shift * d).detach() for t, d in zip(inputs, direction, strict=True)]
        return (triton_attention(*moved, is_causal=True, block_sizes=(16, 16)).double() * grad_output).sum().item()

    numeric = (loss(eps) - loss(-eps)) / (2 * eps)
    analytic = sum((a.double() * d).sum().item() for a, d in zip(ours, direction, strict=True))
    assert abs(numeric - analytic) <= 1e-3 * max(1.0, abs(analytic))


@pytest.mark.parametrize(("shapes", "kwargs", "error", "match"), [
    (((2, 8, 16), (2, 8, 16), (2, 8, 16)), {}, ValueError, "takes 4-D"),
    (((1, 2, 8, 16), (1, 1, 8, 16), (1, 1, 8, 16)), {}, ValueError, "same N and H"),
    (((1, 1, 8, 48), (1, 1, 8, 48), (1, 1, 8, 16)), {}, ValueError, "pad it with zeros up to 64"),
    (((1, 1, 8, 16), (1, 1, 8, 16), (1, 1, 8, 8)), {}, ValueError, "power of two from 16 to 256"),
    (((1, 1, 8, 16), (1, 1, 8, 32), (1, 1, 8, 16)), {}, ValueError, "share the last dimension"),
    (((1, 1, 8, 16), (1, 1, 8, 16), (1, 1, 8, 16)), {"block_sizes": (8, 16)}, ValueError, "powers of two"),
    (((1, 1, 8, 16), (1, 1, 8, 16), (1, 1, 8, 16)), {"block_sizes": (16, 16, 16)}, ValueError, "two powers of two"),
    (((1, 1, 0, 16), (1, 1, 8, 16), (1, 1, 8, 16)), {}, ValueError, "at least one query"),
    (((1, 1, 8, 16), (1, 1, 8, 16), (1, 1, 8, 16)), {"scale": "big"}, TypeError, "scale must be a number"),
])
def test_bad_input_gets_a_clear_error(shapes, kwargs, error, match):
    q, k, v = (torch.randn(*s) for s in shapes)
    with pytest.raises(error, match=match):
        triton_attention(q, k, v, **kwargs)


def test_float64_is_refused_with_a_way_out():
    q = torch.randn(1, 1, 8, 16, dtype=torch.float64)
    with pytest.raises(TypeError, match="float32, float16 or bfloat16"):
        triton_attention_forward(q, q, q)


def test_missing_triton_says_how_to_get_it(monkeypatch):
    real_import = builtins.__import__

    def no_triton(name, *args, **kwargs):
        if name == "triton" or name.startswith("triton."):
            raise ModuleNotFoundError("No module named 'triton'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_triton)
    q = torch.randn(1, 1, 8, 16)
    with pytest.raises(ImportError, match="Google Colab"):
        triton_kernel.import_triton()
    with pytest.raises(ImportError, match="pip install triton"):
        triton_attention(q, q, q)


def test_the_module_imports_without_triton():
    import subprocess
    import sys

    code = ("import sys; sys.modules['triton'] = None\n"
            "import attention_lib.memory_efficient.triton_kernel as m, attention_lib.exercises\n"
            "print(m.DEFAULT_BLOCK_SIZES)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert "(64, 64)" in result.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the kernel is compiled, not interpreted")
def test_without_a_gpu_kernels_run_in_the_interpreter():
    import os

    assert os.environ.get("TRITON_INTERPRET") == "1"
    assert triton_kernel.kernel_device(triton_kernel._forward_kernel()) == torch.device("cpu")


def test_gpu_check_runs_the_kernel_check(capsys):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    import gpu_check

    assert gpu_check.triton_check("cpu", cases=(((20, 17, 16), True),), sizes=(16,), batch=(1, 1))
    printed = capsys.readouterr().out
    assert "triton float16" in printed
    assert "causal=True" in printed
    assert "triton/SDPA" in printed
