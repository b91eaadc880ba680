"""The Triton attention kernel against SDPA, run in Triton's interpreter on the CPU (compiled on a GPU).

The GPU path on fake CUDA tensors is in ``test_triton_gpu.py``; the kernel compiled for real GPUs in
``test_triton_targets.py``.
"""

from __future__ import annotations

import builtins
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attention_lib import memory_efficient_attention
from attention_lib.memory_efficient import triton_kernel, triton_launch
from attention_lib.memory_efficient.triton_kernel import triton_attention, triton_attention_forward

pytest.importorskip("triton", reason="triton is not installed (Linux only)")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
ROOT = Path(__file__).resolve().parents[1]


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
    (((1, 1, 8, 48), (1, 1, 8, 48), (1, 1, 8, 16)), {}, ValueError,
     r"query.shape\[-1\]=48; pad query and key with zeros up to 64 .*keep scale=1/sqrt\(48\)"),
    (((1, 1, 8, 16), (1, 1, 8, 16), (1, 1, 8, 8)), {}, ValueError,
     r"power of two from 16 to 256, but value.shape\[-1\]=8; pad value with zeros up to 16 and keep the first 8"),
    (((1, 1, 8, 16), (1, 1, 8, 32), (1, 1, 8, 16)), {}, ValueError, "share the last dimension"),
    (((1, 1, 8, 16), (1, 1, 8, 16), (1, 1, 8, 16)), {"block_sizes": (8, 16)}, ValueError, "powers of two"),
    (((1, 1, 8, 16), (1, 1, 8, 16), (1, 1, 8, 16)), {"block_sizes": (24, 16)}, ValueError, "powers of two"),
    (((1, 1, 8, 16), (1, 1, 8, 16), (1, 1, 8, 16)), {"block_sizes": (16, 16, 16)}, ValueError, "has 3"),
    (((1, 1, 8, 16), (1, 1, 8, 16), (1, 1, 8, 16)), {"block_sizes": 16}, TypeError, r"a pair of ints .* \(16\)"),
    (((1, 1, 8, 16), (1, 1, 8, 16), (1, 1, 8, 16)), {"block_sizes": (16, 16.0)}, TypeError, "must be an int"),
    (((1, 1, 8, 16), (1, 1, 8, 16), (1, 1, 8, 16)), {"block_sizes": (True, 16)}, TypeError, "must be an int"),
    (((1, 1, 8, 16), (1, 1, 8, 16), (1, 1, 8, 16)), {"is_causal": 1}, TypeError, "is_causal must be True or False"),
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


def _python(code: str, **env) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh Python (triton not yet imported), with ``env`` added to the environment."""
    import os

    environment = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | env
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=ROOT,
                          env=environment, timeout=300)


def test_the_module_imports_without_triton():
    code = ("import sys; sys.modules['triton'] = None\n"
            "import attention_lib.memory_efficient.triton_kernel as m, attention_lib.exercises\n"
            "print(m.triton_launch.INTERPRETER_CONFIG)")
    result = _python(code)
    assert result.returncode == 0, result.stderr
    assert "blocks 64 x 64" in result.stdout


def test_importing_the_package_changes_no_environment_variable():
    code = "import os; e = dict(os.environ); import attention_lib; assert dict(os.environ) == e; print('same')"
    result = _python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["same"]


#: Runs the kernel on CPU tensors and prints its largest difference from SDPA; {first} comes before everything.
_RUN_ON_THE_CPU = """{first}
import os, torch
import torch.nn.functional as F
from attention_lib.memory_efficient.triton_kernel import triton_attention
q, k, v = (torch.randn(1, 2, 40, 16, generator=torch.Generator().manual_seed(i)) for i in range(3))
out = triton_attention(q, k, v, is_causal=True, block_sizes=(16, 16))
difference = (out - F.scaled_dot_product_attention(q, k, v, is_causal=True)).abs().max().item()
print(os.environ.get("TRITON_INTERPRET"), difference)
"""


@pytest.mark.parametrize(("first", "env", "interpret"), [
    ("", {}, "None"),  # nothing imported triton before
    ("import torch.nn.attention.bias", {}, "None"),  # it imports triton, not for interpreting
    ("import triton", {"TRITON_INTERPRET": "1"}, "1"),  # triton imported for interpreting
])
def test_on_the_cpu_the_kernel_runs_however_triton_was_imported(first, env, interpret):
    result = _python(_RUN_ON_THE_CPU.format(first=first), **env)
    assert result.returncode == 0, result.stderr[-2000:]
    seen, difference = result.stdout.split()
    assert seen == interpret  # untouched
    assert float(difference) < 1e-5


def test_interpreted_runs_a_kernel_launched_by_hand(tmp_path):
    """``interpreted(kernel)[grid](...)``: a learner's own ``triton.jit`` kernel on CPU tensors, without
    TRITON_INTERPRET (Triton reads a kernel's source from its file, hence the module)."""
    import importlib.util

    import triton

    (tmp_path / "twice.py").write_text(
        "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
        "def twice(X, Out, n, BLOCK: tl.constexpr):\n"
        "    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    x = tl.load(X + offsets, mask=offsets < n, other=0.0)\n"
        "    tl.store(Out + offsets, 2 * x + tl.max(x, axis=0) * 0, mask=offsets < n)\n")
    spec = importlib.util.spec_from_file_location("twice", tmp_path / "twice.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x, out = torch.arange(10.0), torch.zeros(10)
    triton_launch.interpreted(module.twice)[(triton.cdiv(10, 4),)](x, out, 10, BLOCK=4)
    assert torch.equal(out, 2 * x)


def test_only_the_edge_tiles_are_masked(monkeypatch):
    """Causal, 100 x 100 in tiles of 32: each program folds its full tiles unmasked and its diagonal tile masked,
    10 tiles in all, as lesson 14's picture shows; the tiles in the future are never visited."""
    calls = []
    real = triton_launch._interpreted_function

    def spy(fn):
        if fn is triton_kernel.fold_tile.fn:
            return lambda *args: calls.append((args[5], args[12])) or real(fn)(*args)  # (start, MASKED)
        return real(fn)

    monkeypatch.setattr(triton_launch, "_interpreted_function", spy)
    q, k, v = (torch.randn(1, 1, 100, 16, generator=torch.Generator().manual_seed(i)) for i in range(3))
    triton_attention_forward(q, k, v, is_causal=True, block_sizes=(32, 32))
    unmasked = sorted(int(start) for start, masked in calls if not masked)
    masked = sorted(int(start) for start, masked in calls if masked)
    assert unmasked == [0, 0, 0, 32, 32, 64]  # programs 1, 2, 3: the tiles left of their diagonal
    assert masked == [0, 32, 64, 96]  # each program's diagonal tile (the last one ragged too)
    calls.clear()
    triton_attention_forward(q, k[..., :77, :], v[..., :77, :], block_sizes=(32, 32))
    assert sorted(int(start) for start, masked in calls if masked) == [64] * 4  # only the ragged last tile


def test_the_backward_pass_reuses_the_log_sum_exp(monkeypatch):
    """No second forward pass: the gradients come from the saved log-sum-exp, and match SDPA's."""
    from attention_lib.memory_efficient import forward

    forwards = []
    real = triton_kernel.triton_attention_forward
    monkeypatch.setattr(triton_kernel, "triton_attention_forward", lambda *a, **k: forwards.append(1) or real(*a, **k))
    monkeypatch.setattr(forward, "_blockwise_forward", lambda *a, **k: pytest.fail("the forward pass ran again"))
    inputs = [torch.randn(2, 2, 37, 16, generator=torch.Generator().manual_seed(i)).requires_grad_() for i in range(3)]
    grad_output = torch.randn(2, 2, 37, 16, generator=torch.Generator().manual_seed(9))
    ours = torch.autograd.grad(triton_attention(*inputs, block_sizes=(16, 16)), inputs, grad_output)
    theirs = torch.autograd.grad(F.scaled_dot_product_attention(*inputs), inputs, grad_output)
    assert forwards == [1]
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_a_launch_the_gpu_refuses_is_retried_smaller():
    """OutOfResources (too much shared memory) from the first config: the launcher halves until one fits, and
    says so when the caller chose the blocks."""
    from triton.runtime.errors import OutOfResources

    tried = []

    class Picky:  # a kernel that accepts only blocks of 16
        def __getitem__(self, grid):
            def run(*args, BLOCK_L, BLOCK_S, num_stages, **kwargs):
                tried.append((BLOCK_L, BLOCK_S, num_stages))
                if BLOCK_L > 16:
                    raise OutOfResources(100_000, 65_536, "shared memory")

            return run

    q = torch.zeros(1, 40, 16)
    buffers = (q, q, q, torch.zeros(1, 40, 16), torch.zeros(1, 40))
    config = triton_launch.launch(*buffers, is_causal=False, scale=None, kernel=Picky())
    assert tried == [(64, 64, 1), (32, 32, 1), (16, 16, 1)]
    assert (config.block_l, config.block_s) == (16, 16)
    with pytest.raises(ValueError, match=r"cannot run the kernel with blocks 32 x 32.*block_sizes=None"):
        triton_launch.launch(*buffers, is_causal=False, scale=None, block_sizes=(32, 32), kernel=Picky())


def test_gpu_check_runs_the_kernel_check(capsys):
    sys.path.insert(0, str(ROOT / "tools"))
    import gpu_check

    assert gpu_check.triton_check("cpu", cases=(((20, 17, 16), True),))
    assert gpu_check.triton_timings("cpu", sizes=(16,), batch=(1, 1))
    assert gpu_check.launch_choices("cpu")
    printed = capsys.readouterr().out
    assert "triton float16" in printed
    assert "causal=True" in printed
    assert "triton/SDPA" in printed
    assert "float32   E = Ev = 128  blocks 64 x 64" in printed  # the interpreter's config: no GPU here
