"""Checkers for ``notebooks/19_linear_attention.ipynb``: one step of the gated delta rule, and the prediction of
which task linear attention loses.

The learner writes ``gated_delta_step(state, q, k, v, g, beta)``: decay the state by ``exp(g)``, read what the key
``k`` stores, write the correction ``beta (v - stored)`` along ``k``, and read the new state with the query ``q``
(already scaled). :func:`attention_lib.recurrent_gated_delta_rule` on one token is the reference; the checker
refuses it (and the chunked form) as an answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

from ..delta_rule import chunk_gated_delta_rule, recurrent_gated_delta_rule
from ._allowed import PLAIN, PLAIN_SAID, PRODUCTS, Allowed
from ._checker import CheckResult, check_function
from ._compare import which_part_differs
from ._running import checkers_own, run_learner

#: (N, H, Dk, Dv) per trial: Dk != Dv, so that a state written the wrong way round shows as a shape. The last trial
#: has the edges: a head that overwrites without forgetting (beta = 1, g = 0) and one that writes nothing (beta = 0).
_SIZES = ((1, 2, 4, 3), (2, 3, 3, 5), (1, 1, 2, 6), (1, 2, 3, 4))


def _step_inputs(seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(1900 + seed)
    N, H, Dk, Dv = _SIZES[seed % len(_SIZES)]
    inputs = (torch.randn(N, H, Dk, Dv, generator=g),               # the state after earlier tokens
              torch.randn(N, H, Dk, generator=g) * 0.5,             # q (already scaled)
              torch.randn(N, H, Dk, generator=g) * 0.5,             # k
              torch.randn(N, H, Dv, generator=g),                   # v
              -torch.rand(N, H, generator=g) - 0.2,                 # g = log of the decay: exp(g) in (0.37, 0.82)
              torch.rand(N, H, generator=g) * 0.8 + 0.1)            # beta in (0.1, 0.9)
    if seed % len(_SIZES) == 3:
        inputs[4][:, 0], inputs[5][:, 0], inputs[5][:, 1] = 0.0, 1.0, 0.0  # head 0: overwrite, keep; head 1: no write
    return inputs


def _reference(state, q, k, v, g, beta):
    one = (lambda x: x.unsqueeze(-2), lambda x: x.unsqueeze(-1))   # add the length dimension L = 1
    out, new = recurrent_gated_delta_rule(one[0](q), one[0](k), one[0](v), one[1](g), one[1](beta),
                                          initial_state=state, scale=1.0)
    return out.squeeze(-2), new


def _step(state, q, k, v, g, beta, *, decay="before", forget="exp", subtract=True, use_beta=True, read_key=True,
          read_after=True, sign=1.0, keep_old=False, read_with="q", rescale=False, beta_on_v=False):
    """The step with one slip switched on (used to recognise them)."""
    factor = {"exp": g.exp(), "g": g, "none": torch.ones_like(g), "neg": (-g).exp()}[forget][..., None, None]
    decayed = state * factor if decay in ("before", "write only", "read only") else state
    source = state if decay == "write only" else decayed
    stored = ((k if read_key else q).unsqueeze(-2) @ source).squeeze(-2)          # (N, H, Dv)
    delta = sign * (v - stored) if subtract else v
    delta = beta[..., None] * delta if use_beta else delta
    if beta_on_v:
        delta = beta[..., None] * v - stored
    new = (state if decay == "read only" else decayed) + k.unsqueeze(-1) * delta.unsqueeze(-2)  # (N, H, Dk, Dv)
    if decay == "after":
        new = new * factor
    reader = (q if read_with == "q" else k).unsqueeze(-2) / (q.shape[-1] ** 0.5 if rescale else 1.0)
    out = (reader @ (new if read_after else decayed)).squeeze(-2)
    return out, state if keep_old else new


def _slip(**kw) -> Callable:
    return lambda *args: _step(*args, **kw)


#: The slips of one step, each with the hint that names it.
MISTAKES: list[tuple[Callable, str]] = [
    (_slip(forget="none"), "the state never decays: multiply it by the gate, exp(g), first (g is the log of the "
                           "decay, so exp(g) is between 0 and 1); without it the old associations never fade."),
    (_slip(forget="g"), "the state was multiplied by g itself: g is the log of the decay (<= 0), so the factor is "
                        "exp(g), between 0 and 1; multiplying by g flips the state's sign."),
    (_slip(forget="neg"), "the state grew: exp(-g) is above 1. g is the log of the decay (<= 0), so the factor is "
                          "exp(g), between 0 and 1."),
    (_slip(decay="read only"), "the decayed state was used to read what k stores, but the new state was built on the "
                               "old one: keep the decay, S = exp(g) · S, then add the correction to it."),
    (_slip(beta_on_v=True), "beta multiplied v alone: it scales the whole correction, beta · (v - stored), so that "
                            "beta = 0 writes nothing."),
    (_slip(decay="after"), "the decay came after the write: the new token's correction was faded too. Decay the old "
                           "state first, then read and write."),
    (_slip(decay="write only"), "what k stores was read from the state before its decay: decay first, then read "
                                "stored = kᵀ S from the decayed state, so that the correction fills exactly the gap."),
    (_slip(subtract=False), "you wrote beta · v along k, as plain linear attention adds: the delta rule writes only "
                            "the correction, beta · (v - stored), with stored = what k reads from the state."),
    (_slip(use_beta=False), "the correction was written at full strength: multiply it by beta (how strongly this "
                            "token writes; beta = 1 overwrites, beta = 0 leaves the state alone)."),
    (_slip(sign=-1.0), "the correction has the wrong sign: it is v - stored (what should be there minus what is), "
                       "not stored - v."),
    (_slip(read_key=False), "what is stored was read with the query: the delta rule corrects what the KEY reads, "
                            "stored = kᵀ S; the query only reads the output at the end."),
    (_slip(read_after=False), "the output was read before this token was written: write the correction first, then "
                              "read the new state with q, so that a token sees its own value."),
    (_slip(read_with="k"), "the output was read with the key: read the new state with the query, qᵀ S."),
    (_slip(rescale=True), "the query was scaled again: this step's q comes already scaled (the loop over tokens "
                          "scales it once, by 1 / sqrt(Dk)); read the new state with q as it is."),
    (_slip(keep_old=True), "the output is right, but the state you return is the old one: return the decayed and "
                           "corrected state, or the next token starts from the past."),
]

#: Arithmetic, products and reshapes; the package's gated delta rule is the answer.
_NO_NORM = ("your function called {call}: the step uses k as it comes, without normalising it (the loop over tokens "
            "normalises once, before any step, when use_qk_l2norm=True).")
ALLOWED = Allowed(PLAIN | PRODUCTS, said=PLAIN_SAID.replace(" and the softmax", ""),
                  instead={"norm": _NO_NORM, "linalg_vector_norm": _NO_NORM, "linalg_norm": _NO_NORM,
                           "normalize": _NO_NORM},
                  library_hint="write the step yourself, from products and sums, with the tensors as given (k is "
                               "used as it comes: no normalising); your function called {call}, which this "
                               "exercise does not use.")

#: What each of the two results is, for the messages.
_PARTS = (("output", "(N, H, Dv): what the query reads"), ("state", "(N, H, Dk, Dv): the state after this token"))


def _explain_step(got, expected, args) -> str | None:
    """Say which of ``(output, state)`` is off: a shape error as a shape error, else the largest difference."""
    return which_part_differs(_PARTS, got, expected, lambda part, mine, right: "." + (
        " The state is (Dk, Dv) per head: k along the rows, the correction along the columns, "
        "k.unsqueeze(-1) * delta.unsqueeze(-2)." if mine.shape[-2:] == right.shape[-2:][::-1] else ""))


#: The hint for a right answer that loops over the texts or heads.
_LOOP_HINT = ("your function makes {many} PyTorch calls on the largest input against {few} on the "
              "smallest: it loops over the texts or heads. Do every text and head at once: g.exp()[..., None, None] "
              "scales each head's state, and k.unsqueeze(-1) * delta.unsqueeze(-2) makes every outer product.")


def check_gated_delta_step(fn: Callable) -> CheckResult:
    """Check ``fn(state, q, k, v, g, beta)``: one token of the gated delta rule.

    Built step by step in ``notebooks/19_linear_attention.ipynb``. ``state`` is ``(N, H, Dk, Dv)``; ``q`` and ``k``
    are ``(N, H, Dk)`` (``q`` already scaled), ``v`` is ``(N, H, Dv)``, ``g`` (the log of the decay, ``<= 0``) and
    ``beta`` are ``(N, H)``. ``fn`` must return ``(output (N, H, Dv), new_state (N, H, Dk, Dv))``: the state
    decayed by ``exp(g)``, then ``k (beta (v - kᵀ S))ᵀ`` added, then read with ``q``. Four fixed inputs are tried
    (``Dk != Dv``; in the last, one head overwrites without forgetting, ``beta = 1`` and ``g = 0``, and one writes
    nothing, ``beta = 0``), the first again in float64; the caller's tensors must come back unchanged, and every text
    and head is done at once (no loop over them).

    Example:
        >>> def step(state, q, k, v, g, beta):
        ...     state = state * g.exp()[..., None, None]
        ...     stored = (k.unsqueeze(-2) @ state).squeeze(-2)
        ...     state = state + k.unsqueeze(-1) * (beta[..., None] * (v - stored)).unsqueeze(-2)
        ...     return (q.unsqueeze(-2) @ state).squeeze(-2), state
        >>> check_gated_delta_step(step).status
        'passed'
        >>> check_gated_delta_step(_reference).message[:45]
        '❌ one gated delta step: not allowed here. Hin'
        >>> check_gated_delta_step(MISTAKES[0][0]).message[:58]
        '❌ one gated delta step: not quite. Hint: the state never d'
    """
    name = "one gated delta step"
    own = checkers_own(fn.__code__) if hasattr(fn, "__code__") else None
    if own is not None:
        return CheckResult("failed", f"❌ {name}: not allowed here. Hint: your function is `{own}`, the checker's own "
                           f"reference: write the step yourself, from products and sums.")
    if fn in (recurrent_gated_delta_rule, chunk_gated_delta_rule):
        return CheckResult("failed", f"❌ {name}: not allowed here. Hint: {fn.__name__} is the package's answer: "
                           f"write the step yourself, from products and sums.")
    got = run_learner(fn, _step_inputs(0)).result
    if got is not None and got is not Ellipsis and not (isinstance(got, tuple | list) and len(got) == 2):
        found = f"a tuple of {len(got)}" if isinstance(got, tuple | list) else f"one {type(got).__name__}"
        return CheckResult("failed", f"❌ {name}: return two things, (output, new_state): what the query reads and "
                           f"the state after this token; but got {found}.")
    return check_function(fn, _reference, _step_inputs, name=name, mistakes=MISTAKES, atol=1e-5, rtol=1e-4,
                          trials=len(_SIZES), explain=_explain_step, allowed=ALLOWED, float64=True, keep_inputs=True,
                          no_loops=True, loop_hint=_LOOP_HINT)


#: The tasks of the prediction, and why each comes out as it does (shown once predicted).
TASKS = ("agreement", "copying")
WHY = {"agreement": "agreeing with the subject needs one fact carried (singular or plural) until the verb, and "
                    "every variant keeps it.",
       "copying": "copying a repeated part needs every token of its first occurrence kept, each found again by the "
                  "token before it; a softmax cache keeps each token apart, a fixed state writes them all into the "
                  "same numbers, and at the study's steps it copies far less (trained longer, it copies much more)."}


def check_which_task(prediction, losses: Mapping[str, bool]) -> CheckResult:
    """Check a prediction, made before the measurement, of which task linear attention loses against softmax.

    Built step by step in ``notebooks/19_linear_attention.ipynb``. ``prediction`` is one of :data:`TASKS`,
    ``"both"`` or ``"neither"``; ``losses[task]`` says whether linear attention's band lies below softmax's on that
    task, on every seed reported.

    Example:
        >>> check_which_task("copying", {"agreement": False, "copying": True}).status
        'passed'
        >>> check_which_task(None, {"agreement": False, "copying": True}).status
        'not attempted'
    """
    name = "which task linear attention loses"
    choices = (*TASKS, "both", "neither")
    if prediction is None or prediction is Ellipsis:
        return CheckResult("not attempted", f"📝 {name}: no prediction yet. Set `my_prediction` to one of "
                           f"{list(choices)}, run it, then run this cell again.")
    said = prediction.strip().lower() if isinstance(prediction, str) else prediction
    if said not in choices:
        return CheckResult("failed", f"❌ {name}: a prediction is one of {list(choices)}, but got {prediction!r}.")
    lost = [t for t in TASKS if losses[t]]
    truth = {0: "neither", 1: lost[0] if lost else "", 2: "both"}[len(lost)]
    why = " ".join(f"{t}: {WHY[t]}" for t in TASKS)
    if said == truth:
        return CheckResult("passed", f"✅ {name}: you said {said!r}, and so it measures. Why: {why}")
    return CheckResult("failed", f"❌ {name}: you said {said!r}, the measurement says {truth!r}. Why: {why}")
