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

_NAME = "attention kernel"

#: Every hint the checkers give for a wrong answer, by the slip it names.
HINTS = {
    "update": "the update is lesson 10's, in base 2: scores = tl.dot(q, tl.trans(k)) * scale * 1.4426950408889634 "
              "(times log2(e)); new_max = tl.maximum(running_max, tl.max(scores, axis=1)); correction = "
              "tl.exp2(running_max - new_max); weights = tl.exp2(scores - new_max[:, None]); then the sum and the "
              "output.",
    "no rescale": "with several tiles of keys the maximum grows: multiply running_sum and running_output by "
                  "correction = tl.exp2(running_max - new_max) before adding this tile's weights, and set "
                  "running_max = new_max for the next tile.",
    "ragged tile unmasked": "the last tile of keys runs past S: load k and v with mask=cols[:, None] < S, other=0.0, "
                            "and give those keys the score -inf with tl.where(cols[None, :] < S, scores, "
                            "float('-inf')) (a score of 0 would still get a weight).",
    "read past the end": "your kernel read past the end of key or value (NaN there): load k and v with "
                         "mask=cols[:, None] < S, other=0.0, and give those keys the score -inf.",
    "inverted mask": "every score of this case is a real key's, so a -inf can only come from a mask that says the "
                     "opposite: tl.where(condition, scores, float('-inf')) keeps the scores where the condition is "
                     "True, so the condition is cols[None, :] < S (the key exists).",
    "edge": "your kernel leaves out the last key, S - 1: key j exists when j < S, so the mask is cols < S (not "
            "cols < S - 1).",
    "no division": "running_output is a sum of weights times values, not yet divided by the sum of the weights: "
                   "after the loop, output = running_output / running_sum[:, None] (one division, at the end).",
    "heads": "each program works on one (sentence, head), bh = tl.program_id(1): every pointer needs that head's "
             "offset, Q + bh * q_stride_bh, K + bh * k_stride_bh, V + bh * v_stride_bh, Out + bh * out_stride_bh "
             "(and Lse + bh * L); use the strides given: there are gaps between the heads here.",
    "heads share keys": "your heads all read head 0's {which}: add the per-head offset to K's and V's pointers, "
                        "K + bh * k_stride_bh and V + bh * v_stride_bh, as Q has bh * q_stride_bh.",
    "value dim": "the values and the output have Ev = VALUE_DIM numbers per position, the queries and keys E = "
                 "HEAD_DIM: load v and store the output with value_dims = tl.arange(0, VALUE_DIM), and make "
                 "running_output (BLOCK_L, VALUE_DIM).",
    "blocks": "queries come in blocks of BLOCK_L, rows = block * BLOCK_L + tl.arange(0, BLOCK_L), and keys in tiles "
              "of BLOCK_S, cols = start + tl.arange(0, BLOCK_S) with start stepping by BLOCK_S: here the two differ.",
    "wrote past": "store with mask=rows[:, None] < L (and rows < L for the log-sum-exp), at this head's offset.",
    "lse": "keep running_max and running_sum for the whole row: lse = (running_max + tl.log2(running_sum)) * "
           "0.6931471805599453, times ln 2 back from base 2.",
    "lse in base 2": "your log-sum-exp is in base 2 (1.44 times too large): the running max and sum count in powers "
                     "of 2, so lse = (running_max + tl.log2(running_sum)) * 0.6931471805599453 (times ln 2).",
    "no causal mask": "with IS_CAUSAL, query i sees keys 0..i only: in the tiles on the diagonal mask the others "
                      "with tl.where(cols[None, :] <= rows[:, None], scores, float('-inf')).",
    "own key lost": "some query lost every key, even its own (0 / 0 = NaN): with IS_CAUSAL, visit the tiles up to "
                    "and including the diagonal one, and keep cols <= rows (a query sees itself).",
    "future tiles visited": "the tiles of keys entirely in the future must be skipped, not computed and masked "
                            "(their values hold NaN here, and 0 * NaN is NaN): with IS_CAUSAL, stop the loop at "
                            "key_end = tl.minimum(S, (block + 1) * BLOCK_L), after the block's last query.",
    "key_end in BLOCK_S": "the loop must reach the block's last query, (block + 1) * BLOCK_L - 1: stop at key_end = "
                          "tl.minimum(S, (block + 1) * BLOCK_L), counted in BLOCK_L (queries per block), not "
                          "BLOCK_S (keys per tile); with BLOCK_L = 32 and BLOCK_S = 16 yours stops half way.",
    "row strides": "the rows of q, k, v and the output are not HEAD_DIM (or VALUE_DIM) apart here: they are views "
                   "into one packed QKV buffer, whose rows are 2 * E + Ev numbers apart. Step from row to row with the "
                   "strides given: rows[:, None] * q_stride_l, cols[:, None] * k_stride_s and v_stride_s, "
                   "rows[:, None] * out_stride_l.",
    "read outside": "your kernel read past {which} (into the padding after it, which holds NaN here): every load "
                    "must stay inside the tensor, at its own offset and strides, with mask=cols[:, None] < S (keys "
                    "and values) or rows[:, None] < L (queries) on the tiles that run past the end.",
    "full_end past S": "with IS_CAUSAL and more queries than keys (L > S), a block's first query can lie past the last "
                       "key, and full_end = block * BLOCK_L // BLOCK_S * BLOCK_S then runs past S: take the smaller "
                       "of the two, full_end = tl.minimum(S // BLOCK_S * BLOCK_S, block * BLOCK_L // BLOCK_S * "
                       "BLOCK_S), so that the unmasked loop never passes S's last full tile.",
    "full tiles masked": "right, but your kernel loads {masked} of its {loads} tiles of keys with a mask where "
                         "{needed} need one: the full tiles (every key exists and, with IS_CAUSAL, comes before every "
                         "query of the block) need none. Loop over them first without masks, start in range(0, "
                         "full_end, BLOCK_S), then over the edge tiles from full_end to key_end with masks; full_end "
                         "is where the tile holding the block's first query starts (and never past S's last full "
                         "tile).",
}


def _mistakes(*slips: str) -> list[tuple[str, str]]:
    """``(slip, the fixed part of its hint)`` for each slip."""
    return [(slip, HINTS[slip].format(which="keys and values") if slip == "heads share keys" else
             HINTS[slip].split("{needed} need one: ")[-1].split("{which} ")[-1]) for slip in slips]


#: The hints :func:`check_attention_kernel` gives for wrong answers (a crash on ``Ev != E`` names VALUE_DIM too).
MISTAKES = _mistakes("update", "no rescale", "ragged tile unmasked", "read past the end", "inverted mask", "edge",
                     "no division", "heads", "heads share keys", "blocks", "row strides", "read outside", "wrote past",
                     "lse", "lse in base 2")
#: The hints :func:`check_causal_kernel` adds.
CAUSAL_MISTAKES = _mistakes("no causal mask", "own key lost", "future tiles visited", "key_end in BLOCK_S",
                            "full_end past S", "full tiles masked")


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
    return None


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
    return HINTS[slip or case.slip]


def _outside_hint(case: Case, which: str) -> str:
    """The hint for a read outside ``which`` (query, key or value) on ``case``."""
    if case.packed:
        return HINTS["row strides"]
    if which == "value" and case.E != case.Ev:
        return HINTS["value dim"]
    if case.is_causal and case.L > case.S:
        return HINTS["full_end past S"]
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
            hint = HINTS["value dim"] if case.E != case.Ev else HINTS["wrote past"]  # Ev = E: the stores run over
            return CheckResult("failed", f"❌ {_NAME}: on {case.name}, your kernel wrote past the last query. Hint: "
                               f"{hint}")
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
            return CheckResult("failed", f"❌ {_NAME}: right output but wrong log-sum-exp on {case.name}. Hint: "
                               f"{HINTS['lse in base 2' if base_2 else 'lse']}")
        runs.append((case, ran))
    for case, ran in runs:  # in the interpreter: which tiles it loaded
        if not (count_masks and ran.key_loads is not None):
            continue
        if ran.key_loads > _cases.visited_tiles(case):
            return CheckResult("failed", f"❌ {_NAME}: right on {case.name}, but your kernel loaded {ran.key_loads} "
                               f"tiles of keys where {_cases.visited_tiles(case)} are needed. Hint: "
                               f"{HINTS['future tiles visited']}")
        if ran.masked_key_loads > _cases.edge_tiles(case):
            hint = HINTS["full tiles masked"].format(masked=ran.masked_key_loads, loads=ran.key_loads,
                                                     needed=_cases.edge_tiles(case))
            return CheckResult("failed", f"❌ {_NAME}: on {case.name}, {hint}")
    return CheckResult("passed", f"✅ {_NAME}: {passed} Well done!")


def check_attention_kernel(kernel) -> CheckResult:
    """Check a ``triton.jit`` attention kernel with the arguments of ``attention_forward_kernel`` (no causal mask).

    The first exercise of ``notebooks/14_triton_kernel.ipynb``. Runs the kernel (in Triton's interpreter without a
    GPU) on :data:`~.cases.CASES`: one tile, several tiles, ragged lengths, 2 sentences x 3 heads, ``Ev != E`` and
    ``BLOCK_L != BLOCK_S``, and stops at the first case it gets wrong, with a hint that names the slip.

    Returns:
        A :class:`~attention_lib.exercises._checker.CheckResult` (shows "✅ ..." when correct).

    Example:
        >>> from attention_lib.memory_efficient.triton_kernel import attention_forward_kernel
        >>> check_attention_kernel(import_triton().jit(attention_forward_kernel)).status
        'passed'
    """
    return _check(kernel, CASES, f"right output and log-sum-exp on {len(CASES)} cases (one tile, several tiles, "
                  f"ragged, 2 x 3 heads, E != Ev, BLOCK_L != BLOCK_S, packed QKV rows with gaps).", count_masks=False)


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
                  f"the edge tiles loaded with a mask.", count_masks=True)


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
