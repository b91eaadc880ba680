"""The Triton kernel's GPU path, driven on the CPU: fake CUDA tensors, a CUDA that says it is there, up to the launch.

``FakeTensor`` CUDA tensors carry shapes, dtypes and the device ``cuda:0`` without memory; ``torch.cuda.is_available``
and the GPU's capability are patched, and Triton's ``JITFunction.run`` (what ``kernel[grid](...)`` calls on a GPU)
records each launch instead of running it. So everything the package does on a GPU before the kernel starts runs
here: the device and dtype checks, the choice of launch config, the arguments. What they compile to on real GPUs is
``test_triton_targets.py``'s.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("triton", reason="triton is not installed (Linux only)")
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402
from triton.runtime.errors import OutOfResources  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402

from attention_lib.memory_efficient import triton_kernel, triton_launch  # noqa: E402
from attention_lib.memory_efficient.triton_kernel import triton_attention, triton_attention_forward  # noqa: E402


@pytest.fixture
def fake_gpu(monkeypatch):
    """A CUDA GPU of capability ``capability[0]`` (a T4 unless changed) whose launches are recorded, not run."""
    launches, capability, refuse = [], [(7, 5)], []

    def run(self, *args, grid, warmup, **kwargs):
        if refuse and refuse[0](kwargs):
            raise OutOfResources(200_000, 65_536, "shared memory")
        launches.append({"kernel": self, "grid": grid, "args": args, **kwargs})

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability[0])
    monkeypatch.setattr(JITFunction, "run", run)
    if triton_launch.runs_interpreted(torch.device("cuda")):
        pytest.skip("triton was imported with TRITON_INTERPRET=1: on a GPU its kernels would be interpreted")
    with FakeTensorMode(allow_non_fake_inputs=True):
        yield launches, capability, refuse


def _qkv(L, S, E, Ev, dtype=torch.float32, heads=(2, 3)):
    return tuple(torch.empty(*heads, n, d, device="cuda", dtype=dtype) for n, d in ((L, E), (S, E), (S, Ev)))


def test_cuda_tensors_reach_the_compiled_launch(fake_gpu):
    """gpu-check's (77, 1000, 128) case on a T4: cuda:0 tensors, the compiled kernel, blocks that fit."""
    launches, _, _ = fake_gpu
    q, k, v = _qkv(77, 1000, 128, 128)
    assert q.device == torch.device("cuda:0")  # not torch.device("cuda"): the launcher must not compare them
    output = triton_attention(q, k, v)
    assert (output.shape, output.device, output.dtype) == ((2, 3, 77, 128), q.device, torch.float32)
    (launch,) = launches
    assert isinstance(launch["kernel"], JITFunction)
    assert launch["kernel"].fn is triton_kernel.attention_forward_kernel
    assert launch["grid"] == (3, 6)  # cdiv(77, 32) blocks of queries, 2 x 3 (sentence, head) pairs
    assert [tuple(t.shape) for t in launch["args"][:5]] == [(6, 77, 128), (6, 1000, 128), (6, 1000, 128),
                                                            (6, 77, 128), (6, 77)]
    assert all(t.device == q.device for t in launch["args"][:5])
    assert launch["args"][13:] == (77, 1000, 1 / 128**0.5)
    assert {k: launch[k] for k in ("IS_CAUSAL", "BLOCK_L", "BLOCK_S", "HEAD_DIM", "VALUE_DIM", "PRECISION",
                                   "num_warps", "num_stages")} == {
        "IS_CAUSAL": False, "BLOCK_L": 32, "BLOCK_S": 16, "HEAD_DIM": 128, "VALUE_DIM": 128, "PRECISION": "ieee",
        "num_warps": 8, "num_stages": 2}


@pytest.mark.parametrize(("dtype", "capability", "config"), [
    (torch.float16, (8, 0), (64, 64, 4, 3)),  # tensor cores on an A100
    (torch.bfloat16, (9, 0), (64, 64, 4, 3)),  # and an H100; bfloat16 read as bfloat16, not upcast
    (torch.float16, (7, 5), (32, 32, 8, 2)),  # a T4: no tensor cores for Triton
    (torch.float32, (8, 6), (32, 32, 8, 2)),  # float32 in IEEE: fma everywhere
])
def test_the_launch_config_follows_dtype_and_gpu(fake_gpu, dtype, capability, config):
    launches, gpu, _ = fake_gpu
    gpu[0] = capability
    q, k, v = _qkv(300, 300, 64, 64, dtype)
    output, lse = triton_attention_forward(q, k, v, is_causal=True)
    assert (output.dtype, lse.dtype) == (dtype, torch.float32)
    (launch,) = launches
    assert launch["args"][0].dtype == dtype
    assert (launch["BLOCK_L"], launch["BLOCK_S"], launch["num_warps"], launch["num_stages"]) == config
    assert launch["PRECISION"] == ("ieee" if dtype == torch.float32 else None)
    assert launch["IS_CAUSAL"] is True


def test_block_sizes_given_are_kept_and_a_refusal_says_so(fake_gpu):
    launches, _, refuse = fake_gpu
    q, k, v = _qkv(100, 77, 32, 32)
    triton_attention(q, k, v, block_sizes=(16, 32))
    assert (launches[0]["BLOCK_L"], launches[0]["BLOCK_S"], launches[0]["grid"]) == (16, 32, (7, 6))
    refuse.append(lambda kwargs: kwargs["BLOCK_L"] > 16)
    with pytest.raises(ValueError, match="cannot run the kernel with blocks 32 x 32"):
        triton_attention(q, k, v, block_sizes=(32, 32))
    launches.clear()
    triton_attention(q, k, v)  # the launcher's own choice is retried smaller until it fits
    assert [(x["BLOCK_L"], x["BLOCK_S"], x["num_stages"]) for x in launches] == [(16, 16, 1)]


def test_the_kernel_checker_keeps_its_nan_padding_on_another_device():
    """The checker's keys and values are views into larger buffers whose rows past S hold NaN; moved to another
    device (``meta`` here: shapes without numbers) the whole buffer moves, so a kernel that reads past the end on a
    GPU still meets them."""
    from attention_lib.exercises import triton_kernel as kernel_exercise

    case = next(c for c in kernel_exercise.CASES if c.S % 16)  # the ragged case
    _, key, value = kernel_exercise.case_inputs(case, "meta")
    assert (key.device.type, key.shape[1]) == ("meta", case.S)
    assert value.untyped_storage().nbytes() == (case.S + 16) * value.shape[-1] * value.element_size()
    cpu_value = kernel_exercise.case_inputs(case)[2]
    assert torch.isnan(torch.empty(0).set_(cpu_value.untyped_storage())[-value.shape[-1]:]).all()  # past S: NaN
