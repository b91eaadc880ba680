"""The same answers on every device: run on the CPU always, and on CUDA/MPS where present (gpu-check).

`python course.py gpu-check` runs this file on a CUDA machine; on the CPU-only CI the CPU cases run.
"""

import pytest
import torch
import torch.nn.functional as F

import attention_lib as al
from attention_lib.toy_data import random_qkv

DEVICES = ["cpu"]
if torch.cuda.is_available():
    DEVICES.append("cuda")
if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
    DEVICES.append("mps")


def _mask(L, S, device):
    g = torch.Generator().manual_seed(5)
    allowed = torch.rand(L, S, generator=g) > 0.5
    allowed[:, 0] = True
    allowed[1] = False  # one fully masked row
    return allowed.to(device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("masking", ["none", "causal", "bool"])
def test_same_answer_on_device(device, need_weights, masking):
    q, k, v = random_qkv(2, 3, L=6, S=7, E=16, Ev=8, seed=1)
    kwargs = {"is_causal": True} if masking == "causal" else {}
    if masking == "bool":
        kwargs["attn_mask"] = _mask(6, 7, "cpu")
    cpu_out, _ = al.calculate_attention(q, k, v, need_weights=need_weights, **kwargs)
    dev_kwargs = {key: (val.to(device) if isinstance(val, torch.Tensor) else val) for key, val in kwargs.items()}
    out, weights = al.calculate_attention(q.to(device), k.to(device), v.to(device), need_weights=need_weights,
                                          **dev_kwargs)
    assert out.device.type == device
    torch.testing.assert_close(out.cpu(), cpu_out, atol=1e-4, rtol=1e-4)
    if masking == "bool":
        assert torch.equal(out[..., 1, :].cpu(), torch.zeros(2, 3, 8))
        if need_weights:
            assert torch.equal(weights[..., 1, :].cpu(), torch.zeros(2, 3, 7))
    if masking != "bool":  # SDPA's own result for a fully masked row differs between kernels and versions
        ref = F.scaled_dot_product_attention(q.to(device), k.to(device), v.to(device), **dev_kwargs)
        torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_finite_on_device(device):
    q, k, v = (t.to(device).requires_grad_() for t in random_qkv(2, L=5, S=6, E=8, seed=2))
    out, _ = al.calculate_attention(q, k, v, attn_mask=_mask(5, 6, device))
    out.square().sum().backward()
    for t in (q, k, v):
        assert bool(torch.isfinite(t.grad).all())


@pytest.mark.parametrize("device", DEVICES)
def test_other_attention_functions_on_device(device):
    q, k, v = (t.to(device) for t in random_qkv(2, L=9, S=9, E=8, seed=3))
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    out = al.memory_efficient_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4)
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True).to(device)
    ours = al.MultiHeadAttention.from_torch(mha).to(device)
    expected, _ = mha(q, q, q, need_weights=False)
    got, _ = ours(q, q, q, need_weights=False)
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a CUDA machine gpu-check runs the real checks")
def test_gpu_check_without_cuda_says_so_and_succeeds():
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "tools" / "gpu_check.py"
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0
    assert result.stdout.startswith("No CUDA GPU here")
    assert "nothing was run" in result.stdout
    for name in ("device tests", "backward", "triton launch", "triton kernel", "triton timing", "bench", "lesson 14"):
        assert f"  - {name}: " in result.stdout


def test_gpu_check_timing_table_runs(capsys):
    """The timing part of gpu-check, on the CPU and tiny, so that its code is exercised without a GPU."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    import gpu_check

    assert gpu_check.timings("cpu", sizes=(8, 16))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:2] == ["n", "loop"]
    assert [line.split()[0] for line in lines[1:]] == ["8", "16"]


def test_gpu_check_reports_every_case_and_fails_if_one_failed(monkeypatch, tmp_path, capsys):
    """On a GPU (faked here), a case that raises is reported and the next one still runs; one report, exit 1."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    import gpu_check

    def broken():
        raise RuntimeError("the GPU fell over")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "a fake GPU")
    monkeypatch.setattr(gpu_check, "cases", lambda: [gpu_check.Case("first", "raises", broken),
                                                     gpu_check.Case("second", "prints", lambda: print("ran") or True),
                                                     gpu_check.Case("third", "returns False", lambda: False)])
    report = tmp_path / "report.txt"
    assert gpu_check.main(["--report", str(report)]) == 1
    text = report.read_text()
    assert text.startswith("GPU check: a fake GPU")
    assert "FAILED  first" in text
    assert "passed  second" in text
    assert "FAILED  third" in text
    assert "1 of 3 cases passed; FAILED: first, third" in text
    assert "RuntimeError: the GPU fell over" in text
    assert "== second: prints\nran" in text
    assert gpu_check.main(["--report", str(report), "--only", "second"]) == 0
    assert "1 of 1 cases passed" in report.read_text()


@pytest.mark.parametrize(("cuda", "mps", "expected"), [(True, True, "cuda"), (False, True, "mps"),
                                                       (False, False, "cpu")])
def test_get_device_prefers_cuda_then_mps(monkeypatch, cuda, mps, expected):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)
    assert al.get_device() == torch.device(expected)
