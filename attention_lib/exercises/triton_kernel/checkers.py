"""The checkers of ``notebooks/14_triton_kernel.ipynb``: the attention kernel, then its causal version.

Each runs the learner's ``triton.jit`` kernel (in Triton's interpreter without a GPU) on the cases of
:mod:`~attention_lib.exercises.triton_kernel.cases` in order, compares the output and the log-sum-exp with SDPA's,
and at the first wrong case names the slip: by comparing the answer with what each typical slip gives on the same
inputs (no final division, a mask one key short, every head reading head 0's keys, the causal loop counted in
``BLOCK_S``, a log-sum-exp in base 2), else by what the case was built to catch.
"""

from __future__ import annotations

import math
import traceback
from pathlib import Path

import torch

from ...memory_efficient.triton_kernel import import_triton
from .._checker import CheckResult
from . import cases as _cases
from .cases import CASES, CAUSAL_CASES, Case, allowed, attention, case_inputs, expected_output, run_case
from .hints import HINTS

_NAME = "attention kernel"
def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.allclose(a.float(), b.float(), atol=1e-5, rtol=1e-4)


def _slip_in_output(case: Case, query, key, value, output: torch.Tensor) -> str | None:
    """The typical slip whose output ``output`` is, on these inputs, or ``None``."""
    scale, seen = case.E ** -0.5, allowed(case)
    expected, _ = attention(query, key, value, seen, scale)
    scores = (query.double() @ key.double().transpose(-2, -1) * scale).masked_fill(~seen, float("-inf"))
    row_sums = torch.exp(scores - scores.amax(dim=-1, keepdim=True)).sum(dim=-1, keepdim=True)  # (B, L, 1)
    if _close(output, expected * row_sums):
        return "no division"
    if _close(output, attention(query, key, value, seen & (torch.arange(case.S) < case.S - 1), scale)[0]):
        return "edge"
    if case.B > 1:
        first_k, first_v = key[:1].expand_as(key), value[:1].expand_as(value)
        for k, v, which in ((first_k, first_v, "keys and values"), (first_k, value, "keys"), (key, first_v, "values")):
            if _close(output, attention(query, k, v, seen, scale)[0]):
                return f"heads share keys: {which}"
    if case.is_causal:
        last_key = (torch.arange(case.L) // case.blocks[0] + 1) * case.blocks[1] - 1  # key_end counted in BLOCK_S
        if _close(output, attention(query, key, value, allowed(case, last_key), scale)[0]):
            return "key_end in BLOCK_S"
        BL, BS = case.blocks
        loops = {"full_end off a tile": [lambda b: b * BL, lambda b: b * BS], "key_end short": [None]}
        for slip, full_ends in loops.items():
            for full_end in full_ends:
                key_end = (lambda b: min(case.S, b * BL + 1)) if slip == "key_end short" else None
                if _close(output, _two_loops(case, query, key, value, full_end, key_end)):
                    return slip
    return None


def _two_loops(case: Case, query, key, value, full_end=None, key_end=None) -> torch.Tensor:
    """What the causal kernel's two loops give with another ``full_end(block)`` or ``key_end(block)``: each key
    counted once per visit (twice where the loops overlap), unmasked before ``full_end``, masked from it."""
    BL, BS = case.blocks
    count = torch.zeros(case.L, case.S, dtype=torch.float64)
    for block, (right_full, right_key) in enumerate(_cases._key_ends(case)):
        rows = torch.arange(block * BL, min(case.L, (block + 1) * BL))
        full = min(full_end(block), case.S // BS * BS) if full_end else right_full
        end = key_end(block) if key_end else right_key
        for start in range(0, full, BS):
            count[rows, start:min(start + BS, case.S)] += 1
        for start in range(full, end, BS):
            cols = torch.arange(start, min(start + BS, case.S))
            count[rows[:, None], cols[None, :]] += (cols[None, :] <= rows[:, None]).double()
    scores = query.double() @ key.double().transpose(-2, -1) * case.E ** -0.5
    scores = scores.masked_fill(count == 0, float("-inf"))
    weights = torch.exp(scores - scores.amax(dim=-1, keepdim=True)) * count
    used = (count > 0).any(dim=0)[:, None]
    return (weights @ value.double().masked_fill(~used, 0.0)) / weights.sum(dim=-1, keepdim=True)


def _diagnose(case: Case, ran, expected: torch.Tensor) -> str:
    """The hint for a wrong output on ``case``: the slip it shows, else what the case was built to catch."""
    nans = ran.output.isnan()
    if nans.all() and not case.is_causal and case.S % case.blocks[1] == 0:
        return HINTS["inverted mask"]  # no key is past S, none is masked: -inf came from a mask upside down
    if nans.any():
        if case.is_causal:
            return HINTS["future tiles visited" if _cases.never_visited(case) < case.S else "own key lost"]
        return HINTS["read past the end" if case.S % case.blocks[1] else case.slip]
    slip = _slip_in_output(case, *case_inputs(case), ran.output)
    if slip is not None and slip.startswith("heads share keys"):
        return HINTS["heads share keys"].format(which=slip.split(": ")[1])
    if slip is None and (ran.output - expected).abs().max().item() < 1e-2:
        return HINTS["precision"]
    return HINTS[slip or case.slip]


def _outside_hint(case: Case, which: str) -> str:
    """The hint for a read outside ``which`` (query, key or value) on ``case``."""
    if case.packed:
        return HINTS["row strides"]
    if which == "value" and case.E != case.Ev:
        return HINTS["value dim"]
    if case.is_causal and case.L > case.S:
        return HINTS["full_end past S"]
    if case.slip == "heads":  # the earlier cases, one head each, passed: a head's offset runs outside
        return HINTS["heads"]
    if which in ("key", "value") and case.S % case.blocks[1]:
        return HINTS["read past the end"]
    return HINTS["read outside"].format(which=f"the end of {which}")


def _check(kernel, cases: tuple[Case, ...], passed: str, count_masks: bool) -> CheckResult:
    triton = import_triton()
    if not isinstance(kernel, triton.runtime.KernelInterface):
        return CheckResult("failed", f"❌ {_NAME}: expected a Triton kernel, but got {type(kernel).__name__}. Hint: "
                           f"put @triton.jit on the line above `def`, so that Triton turns it into a kernel.")
    runs = []
    for case in cases:
        try:
            ran = run_case(kernel, case)
        except Exception as error:  # noqa: BLE001 - every error becomes a message with a hint
            return _crashed(error, case)
        expected, expected_lse = expected_output(case, *case_inputs(case))
        if not ran.untouched:
            if ran.between_rows:  # in the gaps between the output's rows: rows assumed VALUE_DIM apart
                hint = HINTS["out row stride"]
            elif not ran.only_past_the_end:  # far outside: another tensor's strides
                hint = HINTS["wrote outside"]
            elif case.E != case.Ev:  # Ev = E: the stores run over
                hint = HINTS["value dim"]
            else:
                hint = HINTS["wrote past"]
            return CheckResult("failed", f"❌ {_NAME}: on {case.name}, your kernel stored numbers outside the "
                               f"{ran.wrote_outside} tensor. Hint: {hint}")
        if ran.read_outside is not None:
            right = "right output, but" if _close(ran.output, expected) else "wrong output:"
            return CheckResult("failed", f"❌ {_NAME}: on {case.name}, {right} your kernel read outside the "
                               f"{ran.read_outside} tensor. Hint: {_outside_hint(case, ran.read_outside)}")
        if not _close(ran.output, expected):
            nans = int(ran.output.isnan().sum())
            what = f"{nans} NaN in the output" if nans else \
                f"largest difference {(ran.output - expected).abs().max().item():.3g}"
            return CheckResult("failed", f"❌ {_NAME}: wrong on {case.name} ({what}). Hint: "
                               f"{_diagnose(case, ran, expected)}")
        if not _close(ran.lse, expected_lse):
            base_2 = _close(ran.lse, expected_lse / math.log(2))
            shared = case.B > 1 and bool((ran.lse[1:] == _cases.FILL).all())  # every head wrote head 0's place
            return CheckResult("failed", f"❌ {_NAME}: right output but wrong log-sum-exp on {case.name}. Hint: "
                               f"{HINTS['lse in base 2' if base_2 else 'lse heads' if shared else 'lse']}")
        runs.append((case, ran))
    for case, ran in runs:  # in the interpreter: which tiles it loaded
        if not (count_masks and ran.key_loads is not None):
            continue
        if ran.tiles_past_s:
            return CheckResult("failed", f"❌ {_NAME}: right on {case.name}, but your kernel loaded {ran.tiles_past_s} "
                               f"tiles of keys wholly past the last key (S = {case.S}), every key masked. Hint: "
                               f"{HINTS['tiles past S']}")
        if ran.key_loads > _cases.visited_tiles(case):
            return CheckResult("failed", f"❌ {_NAME}: right on {case.name}, but your kernel loaded {ran.key_loads} "
                               f"tiles of keys where {_cases.visited_tiles(case)} are needed. Hint: "
                               f"{HINTS['future tiles visited']}")
        if ran.masked_key_loads > _cases.edge_tiles(case):
            hint = HINTS["full tiles masked"].format(masked=ran.masked_key_loads, loads=ran.key_loads,
                                                     needed=_cases.edge_tiles(case))
            return CheckResult("failed", f"❌ {_NAME}: on {case.name}, {hint}")
        if ran.selected_tiles:
            hint = HINTS["full tiles selected"].format(selected=ran.selected_tiles, loads=ran.key_loads)
            return CheckResult("failed", f"❌ {_NAME}: on {case.name}, {hint}")
    return CheckResult("passed", f"✅ {_NAME}: {passed} Well done!")


def check_attention_kernel(kernel) -> CheckResult:
    """Check a ``triton.jit`` attention kernel with the arguments of ``attention_forward_kernel`` (no causal mask).

    The first exercise of ``notebooks/14_triton_kernel.ipynb``. Runs the kernel (in Triton's interpreter without a
    GPU) on :data:`~.cases.CASES`: one tile, several tiles, ragged lengths, 2 sentences x 3 heads, ``Ev != E``,
    ``BLOCK_L != BLOCK_S``, packed rows and scores that fall after the first tile, and stops at the first case it
    gets wrong, with a hint that names the slip.

    Returns:
        A :class:`~attention_lib.exercises._checker.CheckResult` (shows "✅ ..." when correct).

    Example:
        >>> from attention_lib.memory_efficient.triton_kernel import attention_forward_kernel
        >>> check_attention_kernel(import_triton().jit(attention_forward_kernel)).status
        'passed'
    """
    return _check(kernel, CASES, f"right output and log-sum-exp on {len(CASES)} cases (one tile, several tiles, "
                  f"ragged, 2 x 3 heads, E != Ev, BLOCK_L != BLOCK_S, packed rows with gaps, falling scores)."
                  f"{_PRECISION_SAID}",
                  count_masks=False)


def check_causal_kernel(kernel) -> CheckResult:
    """Check the causal kernel: :data:`~.cases.CASES`, then :data:`~.cases.CAUSAL_CASES`, masks only where needed.

    The second exercise of ``notebooks/14_triton_kernel.ipynb``, FlashAttention's way: with ``IS_CAUSAL`` the tiles
    entirely in the future are never visited, the tiles on the diagonal are masked, and the tiles before it are
    loaded and used without any mask (in the interpreter, the checker counts the tiles of keys loaded with one).

    Returns:
        A :class:`~attention_lib.exercises._checker.CheckResult`.

    Example:
        >>> from attention_lib.memory_efficient.triton_kernel import attention_forward_kernel
        >>> check_causal_kernel(import_triton().jit(attention_forward_kernel)).status
        'passed'
    """
    return _check(kernel, CASES + CAUSAL_CASES, f"right on {len(CASES) + len(CAUSAL_CASES)} cases, causal with "
                  f"L < S, L > S and BLOCK_L != BLOCK_S included; in every case the future tiles skipped and only "
                  f"the edge tiles loaded with a mask.{_PRECISION_SAID}", count_masks=True)


#: What the interpreter cannot check: it computes every tl.dot in float32, whatever input_precision says.
_PRECISION_SAID = (" (Triton's interpreter computes every tl.dot in full float32, so input_precision=PRECISION, which "
                   "keeps TF32 out of a float32 dot, is checked only when the kernel runs compiled on a GPU.)")


def _crashed(error: BaseException, case: Case) -> CheckResult:
    chain = [error]
    while chain[-1].__cause__ is not None:
        chain.append(chain[-1].__cause__)
    if any(isinstance(e, NotImplementedError) or "NotImplementedError" in str(e) for e in chain):
        return CheckResult("not attempted", f"📝 {_NAME}: not attempted yet. Replace `raise NotImplementedError` with "
                           f"your code and run this cell again.")
    library = tuple(str(Path(m.__file__).parent) for m in (torch, import_triton())) + (str(Path(__file__).parents[2]),)
    frames = [f for e in chain for f in traceback.extract_tb(e.__traceback__) if not f.filename.startswith(library)]
    line = f" at `{frames[-1].line}`" if frames and frames[-1].line else ""
    said = str(chain[-1]).strip().splitlines()[0][:200] if str(chain[-1]).strip() else type(chain[-1]).__name__
    hint = (HINTS["value dim"] if case.E != case.Ev else "inside a kernel every block has a fixed shape: q (BLOCK_L, "
            "HEAD_DIM), k (BLOCK_S, HEAD_DIM), v (BLOCK_S, VALUE_DIM), scores (BLOCK_L, BLOCK_S); tl.dot(a, b) needs "
            "a (M, K) and b (K, N), and the running numbers are (BLOCK_L,).")
    return CheckResult("error", f"💥 {_NAME}: your kernel raised {type(chain[-1]).__name__}{line} on {case.name}.\n"
                       f"Hint: {hint}\nThe error says: {said}")
