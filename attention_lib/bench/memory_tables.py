"""The benchmark's peak-memory tables: one forward pass, and a forward with its backward pass (training).

Used by ``python -m attention_lib.bench``; the measurement itself is :func:`attention_lib.bench.measure.peak_memory`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from .measure import MiB, growth_exponent, peak_memory


def inputs(bh: tuple[int, ...], n: int, d: int, device, dtype, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Three random ``(*bh, n, d)`` tensors (query, key, value), the same on every machine for a seed."""
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(*bh, n, d, generator=g).to(device, dtype) for _ in range(3))


def with_gradients(fn: Callable[..., object], grad_output: torch.Tensor) -> Callable[..., tuple]:
    """``fn(q, k, v)`` followed by its backward pass: returns the gradients of query, key and value.

    Example:
        >>> q = torch.ones(2, 3, requires_grad=True)
        >>> [g.shape for g in with_gradients(lambda q, k, v: q * k * v, torch.ones(2, 3))(q, q, q)]
        [torch.Size([2, 3]), torch.Size([2, 3]), torch.Size([2, 3])]
    """
    def run(q, k, v):
        output = fn(q, k, v)
        output = output[0] if isinstance(output, tuple) else output  # (output, weights) -> output
        return torch.autograd.grad(output, (q, k, v), grad_output)

    return run


def memory_tables(methods: dict[str, Callable[..., object]], trained: Sequence[str], sizes: Sequence[int], d: int,
                  device: torch.device, dtype: torch.dtype) -> dict[tuple[str, int], int]:
    """Print the peak-memory tables and return ``{(method, n): bytes}`` (``"<method> fwd+bwd"`` for training).

    Every method is measured in one forward pass at 2x4 heads, ``n`` in ``sizes`` (two lengths), and the
    ``trained`` ones also in a forward and a backward pass.
    """
    if device.type not in ("cpu", "cuda"):
        print(f"\n== peak memory: not measured on {device.type}")
        return {}
    nbytes = torch.empty((), dtype=dtype).element_size()
    memory: dict[tuple[str, int], int] = {}
    for training in (False, True):
        what = ("forward + backward (the 3 input gradients included, the gradient of the output not)" if training
                else "one forward pass (output included, inputs not)")
        print(f"\n== peak extra memory, 2x4 heads, d={d}, {what}")
        names = trained if training else list(methods)
        for n in sizes:
            out, square = 8 * n * d * nbytes, 8 * n * n * nbytes
            grads = 3 * out if training else 0
            print(f"  n={n}: output {out / MiB:.1f} MiB, one n x n buffer {square / MiB:.1f} MiB"
                  + (f", input gradients {grads / MiB:.1f} MiB" if training else ""))
            q, k, v = inputs((2, 4), n, d, device, dtype)
            for m in names:
                key = (m + " fwd+bwd", n) if training else (m, n)
                if training:
                    grad_output = inputs((2, 4), n, d, device, dtype, seed=1)[0]
                    trainable = tuple(t.detach().requires_grad_() for t in (q, k, v))
                    memory[key] = peak_memory(with_gradients(methods[m], grad_output), *trainable)
                    print(f"    {m:<20} {memory[key] / MiB:>9.1f} MiB = input gradients + "
                          f"{(memory[key] - grads) / MiB:.1f} MiB")
                else:
                    memory[key] = peak_memory(methods[m], q, k, v)
                    print(f"    {m:<20} {memory[key] / MiB:>9.1f} MiB = output + {(memory[key] - out) / MiB:.1f} MiB")
        n1, n2 = sizes
        print(f"  growth exponent between n={n1} and n={n2} (1 = linear, 2 = quadratic):")
        for m in names:
            m = m + " fwd+bwd" if training else m
            print(f"    {m:<28} {growth_exponent(n1, memory[m, n1], n2, memory[m, n2]):.2f}")
    return memory
