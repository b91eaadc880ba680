"""The exercise of ``notebooks/14_triton_kernel.ipynb``: the inner loop of the attention kernel.

The learner writes the loop over the blocks of keys of
:func:`attention_lib.memory_efficient.triton_kernel.attention_forward_kernel` (loads, masked scores and the
online softmax update) in a ``triton.jit`` kernel with the same arguments. The checker runs it on small cases,
each built to catch one slip: the missing rescale of the running sum and output, the ragged last block of keys
(whose rows past ``S`` hold ``NaN`` here, as memory past a tensor holds anything), and the causal skip.
"""

from __future__ import annotations

import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from ..memory_efficient.triton_kernel import import_triton
from ..memory_efficient.triton_launch import interpreted, launch, runs_interpreted
from ._checker import CheckResult

_NAME = "attention kernel"
_BLOCKS = (16, 16)
_E = 16
_FILL = 123.0  # what the output buffer holds past the last query: the kernel must leave it alone


@dataclass(frozen=True)
class Case:
    """One input of the checker: ``L`` queries, ``S`` keys, blocks of 16; ``hint`` is for a wrong answer."""

    name: str
    L: int
    S: int
    is_causal: bool
    hint: str


_MAX_GROWS = ("with several blocks of keys the maximum grows: multiply running_sum and running_output by "
              "correction = tl.exp(running_max - new_max) before adding this block's weights, and set "
              "running_max = new_max for the next block.")
_RAGGED = ("the last block of keys runs past S: load k and v with mask=cols[:, None] < S, other=0.0, and give those "
           "keys the score -inf with tl.where(cols[None, :] < S, scores, float('-inf')) (a score of 0 would "
           "still get a weight).")
_CAUSAL_MASK = ("with IS_CAUSAL, query i sees keys 0..i only: inside the diagonal block mask the others with "
                "tl.where(cols[None, :] <= rows[:, None], scores, float('-inf')).")
_OWN_KEY = ("some query lost every key, even its own (0 / 0 = NaN): with IS_CAUSAL, visit the blocks up to and "
            "including the diagonal one, key_end = tl.minimum(S, (block + 1) * BLOCK_L), and keep "
            "cols <= rows (a query sees itself).")
_SKIP = ("the blocks of keys entirely in the future must be skipped, not computed and masked (their values hold NaN "
         "here, and 0 * NaN is NaN): with IS_CAUSAL stop the loop at key_end = tl.minimum(S, (block + 1) * BLOCK_L).")

#: Every hint the checker gives for a wrong answer, by the slip it points at.
MISTAKES = [("no rescale", _MAX_GROWS), ("ragged block unmasked", _RAGGED), ("no causal mask", _CAUSAL_MASK),
            ("diagonal block skipped", _OWN_KEY), ("future blocks visited", _SKIP)]

CASES = (
    Case("one block of 16 keys", 16, 16, False,
         "the update is lesson 10's: scores = tl.dot(q, tl.trans(k)) * scale; new_max = tl.maximum(running_max, "
         "tl.max(scores, axis=1)); weights = tl.exp(scores - new_max[:, None]); then the sum and the output."),
    Case("16 queries, 64 keys in 4 blocks", 16, 64, False, _MAX_GROWS),
    Case("ragged: 20 queries, 37 keys", 20, 37, False, _RAGGED),
    Case("causal, 48 queries and keys", 48, 48, True, _CAUSAL_MASK),
    Case("causal, 16 queries, 64 keys: 16-63 in the future", 16, 64, True, _SKIP),
)


def case_inputs(case: Case, device="cpu") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``query (1, L, E)``, ``key (1, S, E)``, ``value (1, S, E)`` for ``case``, views into larger buffers.

    The rows past ``S`` of the buffers hold large keys and ``NaN`` values: a kernel that reads past the end of
    a tensor gets them. In the last causal case the keys no query may see hold them too. The keys of block
    ``j`` are scaled by ``j + 1``, so that the maximum grows from block to block.
    """
    g = torch.Generator().manual_seed(1400 + case.L + case.S)
    S, pad = case.S, 16
    query = torch.randn(1, case.L, _E, generator=g)
    key = torch.full((1, S + pad, _E), 4.0)
    value = torch.full((1, S + pad, _E), float("nan"))
    key[:, :S] = torch.randn(1, S, _E, generator=g) * (1 + torch.arange(S) // 16)[:, None]
    value[:, :S] = torch.randn(1, S, _E, generator=g)
    if case.is_causal and S > case.L:  # keys after the last query: no query may see them
        key[:, case.L:S], value[:, case.L:S] = 4.0, float("nan")
    # The whole buffers move, then the views are cut: the padding is there on a GPU too.
    return query.to(device), key.to(device)[:, :S], value.to(device)[:, :S]


def expected_output(case: Case, query, key, value) -> tuple[torch.Tensor, torch.Tensor]:
    """The output and log-sum-exp of ``case``, from SDPA and ``torch.logsumexp`` (only the keys it may see)."""
    if case.is_causal:
        key, value = key[:, :case.L], value[:, :case.L]  # the keys the queries may see: top-left causal
    output = F.scaled_dot_product_attention(query, key, value, is_causal=case.is_causal)
    scores = query @ key.transpose(-2, -1) / _E**0.5  # (1, L, E) @ (1, E, S) -> (1, L, S)
    if case.is_causal:
        scores = scores.masked_fill(~torch.ones(scores.shape[-2:], dtype=torch.bool, device=scores.device).tril(),
                                    float("-inf"))
    return output, torch.logsumexp(scores, dim=-1)


def run_case(kernel, case: Case) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """Run ``kernel`` on ``case``: its output ``(1, L, E)``, log-sum-exp ``(1, L)``, and whether it left the
    memory after the output alone."""
    compiled = torch.cuda.is_available() and not runs_interpreted(torch.device("cuda")) and \
        type(kernel).__name__ == "JITFunction"  # a kernel made with TRITON_INTERPRET=1 runs interpreted
    device = torch.device("cuda" if compiled else "cpu")
    query, key, value = case_inputs(case, device)
    buffer = torch.full((1, case.L + 16, _E), _FILL, device=device)
    lse = torch.full((case.L + 16,), _FILL, device=device)
    with warnings.catch_warnings():  # a wrong kernel makes the interpreter's NumPy warn about 0 / 0: the check says it
        warnings.simplefilter("ignore", RuntimeWarning)
        launch(query, key, value, buffer[:, :case.L], lse[:case.L].view(1, case.L), is_causal=case.is_causal,
               scale=None, block_sizes=_BLOCKS, kernel=kernel if compiled else interpreted(kernel))
    untouched = bool((buffer[:, case.L:] == _FILL).all() and (lse[case.L:] == _FILL).all())
    return buffer[:, :case.L].cpu(), lse[:case.L].view(1, case.L).cpu(), untouched


def check_attention_kernel(kernel) -> CheckResult:
    """Check a ``triton.jit`` attention kernel with the arguments of ``attention_forward_kernel``.

    The exercise of ``notebooks/14_triton_kernel.ipynb``. Runs the kernel (in Triton's interpreter without a
    GPU) on the :data:`CASES` in order, compares the output and the log-sum-exp with SDPA and
    ``torch.logsumexp``, and stops at the first case it gets wrong, with that case's hint.

    Args:
        kernel: the learner's kernel, decorated with ``@triton.jit``.

    Returns:
        A :class:`~attention_lib.exercises._checker.CheckResult` (shows "✅ ..." when correct).

    Example:
        >>> from attention_lib.memory_efficient.triton_kernel import attention_forward_kernel, import_triton
        >>> check_attention_kernel(import_triton().jit(attention_forward_kernel)).status
        'passed'
    """
    triton = import_triton()
    if not isinstance(kernel, triton.runtime.KernelInterface):
        return CheckResult("failed", f"❌ {_NAME}: expected a Triton kernel, but got {type(kernel).__name__}. Hint: "
                           f"put @triton.jit on the line above `def`, so that Triton turns it into a kernel.")
    for case in CASES:
        try:
            output, lse, untouched = run_case(kernel, case)
        except Exception as error:  # noqa: BLE001 - every error becomes a message with a hint
            return _crashed(error)
        expected, expected_lse = expected_output(case, *case_inputs(case))
        if not untouched:
            return CheckResult("failed", f"❌ {_NAME}: on {case.name}, your kernel wrote past the last query. Hint: "
                               f"store with mask=rows[:, None] < L (and rows < L for the log-sum-exp).")
        if torch.allclose(output, expected, atol=1e-5, rtol=1e-4) and torch.allclose(lse, expected_lse, atol=1e-5):
            continue
        nans = int(output.isnan().sum())
        if not torch.allclose(output, expected, atol=1e-5, rtol=1e-4, equal_nan=False):
            hint = _OWN_KEY if nans and case.L == case.S and case.is_causal else case.hint
            if nans and case.hint == _RAGGED:
                hint = "your kernel read past the end of key or value (NaN there): " + hint
            what = f"{nans} NaN in the output" if nans else \
                f"largest difference {(output - expected).abs().max().item():.3g}"
            return CheckResult("failed", f"❌ {_NAME}: wrong on {case.name} ({what}). Hint: {hint}")
        return CheckResult("failed", f"❌ {_NAME}: right output but wrong log-sum-exp on {case.name}. Hint: keep "
                           f"running_max and running_sum for the whole row: lse = running_max + tl.log(running_sum).")
    return CheckResult("passed", f"✅ {_NAME}: right output and log-sum-exp on {len(CASES)} cases (one block, several "
                       f"blocks, ragged, causal, skipped future blocks). Well done!")


def _crashed(error: BaseException) -> CheckResult:
    chain = [error]
    while chain[-1].__cause__ is not None:
        chain.append(chain[-1].__cause__)
    if any(isinstance(e, NotImplementedError) or "NotImplementedError" in str(e) for e in chain):
        return CheckResult("not attempted", f"📝 {_NAME}: not attempted yet. Replace `raise NotImplementedError` with "
                           f"the loop's body and run this cell again.")
    library = tuple(str(Path(m.__file__).parent) for m in (torch, import_triton())) + (str(Path(__file__).parents[1]),)
    frames = [f for e in chain for f in traceback.extract_tb(e.__traceback__) if not f.filename.startswith(library)]
    line = f" at `{frames[-1].line}`" if frames and frames[-1].line else ""
    said = str(chain[-1]).strip().splitlines()[0][:200] if str(chain[-1]).strip() else type(chain[-1]).__name__
    return CheckResult("error", f"💥 {_NAME}: your kernel raised {type(chain[-1]).__name__}{line}.\nHint: inside a "
                       f"kernel every block has a fixed shape: q (BLOCK_L, HEAD_DIM), k (BLOCK_S, HEAD_DIM), "
                       f"v (BLOCK_S, VALUE_DIM), scores (BLOCK_L, BLOCK_S); tl.dot(a, b) needs a (M, K) and b (K, N), "
                       f"and the running numbers are (BLOCK_L,).\nThe error says: {said}")
