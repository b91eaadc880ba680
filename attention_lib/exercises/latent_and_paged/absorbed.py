"""The checker of MLA's absorbed scores (``notebooks/17_latent_and_paged.ipynb``): each head's query folded through
``W_uk`` onto the cached latents, plus the rotary part, at the scale of the expanded form."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ...attention import matchmaker, scaler
from .._allowed import PLAIN, PRODUCTS, Allowed
from .._checker import CheckResult, check_function
from .._running import run_learner
from ._trials import first_difference, helper_called, helper_refusal, kept_after_next_call

#: (N, H, L, S, r, Dn, Dr) and how the inputs are laid out, per trial: r, Dn and Dr all differ everywhere, so a
#: transposed W_uk cannot run and the scale of the absorbed key (r + Dr) is not the scale of a score (Dn + Dr).
TRIALS = (((2, 3, 4, 7, 24, 12, 6), "a prefill of 4 queries over 7 tokens"),
          ((2, 3, 4, 7, 24, 12, 6), "the same shapes again, new values"),
          ((1, 4, 1, 9, 20, 8, 4), "one decoding step, latents and rotary keys read as transposed views"),
          ((1, 2, 3, 5, 10, 16, 4), "a latent narrower than the heads' keys (r = 10, Dn = 16)"),
          ((2, 3, 4, 7, 24, 12, 6), "the first shapes a third time, new values"))


def _inputs(trial: int) -> tuple:
    (N, H, L, S, r, Dn, Dr), said = TRIALS[trial]
    g = torch.Generator().manual_seed(1717 + trial)
    q_nope, q_rope = torch.randn(N, H, L, Dn, generator=g), torch.randn(N, H, L, Dr, generator=g)
    if "transposed" in said:  # stored (N, 1, features, S): the same numbers, not contiguous
        latent = torch.randn(N, 1, r, S, generator=g).transpose(-2, -1)
        k_rope = torch.randn(N, 1, Dr, S, generator=g).transpose(-2, -1)
    else:
        latent, k_rope = torch.randn(N, 1, S, r, generator=g), torch.randn(N, 1, S, Dr, generator=g)
    w_uk = torch.randn(H, Dn, r, generator=g) / math.sqrt(r)  # (H, Dn, r), as up_projections() gives it
    return q_nope, q_rope, latent, k_rope, w_uk


def _reference(q_nope, q_rope, latent, k_rope, w_uk):
    folded = q_nope @ w_uk  # (N, H, L, Dn) @ (H, Dn, r) -> (N, H, L, r)
    scores = folded @ latent.transpose(-2, -1) + q_rope @ k_rope.transpose(-2, -1)  # (N, H, L, S)
    return scores / math.sqrt(q_nope.shape[-1] + q_rope.shape[-1])


def _scaled(scale: Callable[[int, int, int], float], rope: bool = True) -> Callable:
    def wrong(q_nope, q_rope, latent, k_rope, w_uk):
        scores = q_nope @ w_uk @ latent.transpose(-2, -1)
        scores = scores + q_rope @ k_rope.transpose(-2, -1) if rope else scores
        return scores * scale(w_uk.shape[-1], q_nope.shape[-1], q_rope.shape[-1])
    return wrong


_RIGHT_SCALE = "the scale of the expanded form, 1 / sqrt(Dn + Dr): the absorbed score is the same number as the " \
               "expanded one, only computed in another order"

#: The slips of the absorbed scores, each with the hint that names it.
MISTAKES: list[tuple[Callable, str]] = [
    (_scaled(lambda r, Dn, Dr: 1 / math.sqrt(Dn + Dr), rope=False),
     "the rotary part is missing: each score is the folded query against the latent PLUS q_rope · k_rope, the "
     "part that carries the positions."),
    (_scaled(lambda r, Dn, Dr: 1 / math.sqrt(r + Dr)),
     f"you scaled by 1 / sqrt(r + Dr), the width of the absorbed key (SDPA's default on it): keep {_RIGHT_SCALE}."),
    (_scaled(lambda r, Dn, Dr: 1 / math.sqrt(r)),
     f"you scaled by 1 / sqrt(r), the latent's size: keep {_RIGHT_SCALE}."),
    (_scaled(lambda r, Dn, Dr: 1 / math.sqrt(Dn)),
     f"you scaled by 1 / sqrt(Dn), leaving out the rotary features: keep {_RIGHT_SCALE}."),
    (_scaled(lambda r, Dn, Dr: 1.0), f"the scores are not scaled: divide by sqrt(Dn + Dr), {_RIGHT_SCALE}."),
    (lambda q_nope, q_rope, latent, k_rope, w_uk: _reference(q_nope, q_rope, latent, k_rope, w_uk.reshape(
        w_uk.shape[0], w_uk.shape[2], w_uk.shape[1]).transpose(-2, -1)),
     "w_uk was reshaped, (H, Dn, r) -> (H, r, Dn), and then used as if transposed: reshape keeps the numbers in "
     "memory order and only cuts them otherwise, so it mixes W_uk's entries. Use w_uk as it is, q_nope @ w_uk "
     "(N, H, L, r), or swap its dimensions with .transpose(-2, -1)."),
]

ALLOWED = Allowed(PLAIN | PRODUCTS, said="products, reshapes and arithmetic (al.matchmaker and al.scaler too)",
                  functions=frozenset({matchmaker, scaler}),
                  library_hint="this exercise asks you to fold W_uk into the query yourself; your function called "
                               "{call}, which computes attention for you: use products and arithmetic.")

_TRANSPOSED = ("W_uk is (H, Dn, r), as mla.up_projections() gives it: it maps a latent (r) to a key (Dn), so the "
               "query (Dn) meets it as q_nope @ w_uk -> (N, H, L, r). You used it transposed (which runs only when "
               "r = Dn, as in a demo of equal sizes).")


def _shapes(trial: int) -> str:
    (N, H, L, S, r, Dn, Dr), said = TRIALS[trial]
    return f"{said} (N={N}, H={H}, L={L}, S={S}, r={r}, Dn={Dn}, Dr={Dr})"


def _trial_of(args: tuple) -> int:
    return next(t for t in range(len(TRIALS)) if torch.equal(_inputs(t)[0], args[0]))


def _explain(got, expected, args) -> str:
    trial = _trial_of(args)
    earlier = [t for t in range(trial) if TRIALS[t][0] == TRIALS[trial][0]]
    if any(got.shape == _reference(*_inputs(t)).shape and torch.allclose(got, _reference(*_inputs(t)), atol=1e-5)
           for t in earlier):
        return (f"on {_shapes(trial)}, your function returned the scores of an earlier input of the same shapes: "
                f"compute them from the arguments of each call, not from a result kept from before.")
    where = first_difference(got, expected, ("n", "h", "l", "s"), 1e-5, 1e-4)
    said = _parts_said(got, args)
    if said is not None:
        return f"not quite (on {_shapes(trial)}). Hint: {said}."
    said = _one_slice_right(got, expected)
    if said is not None:
        return f"not quite (on {_shapes(trial)}, {where}). Hint: {said}"
    ratio = (got / expected).flatten()
    if torch.allclose(ratio, ratio[0].expand_as(ratio), rtol=1e-3):
        return (f"every score is {ratio[0].item():.3f} times the right one on {_shapes(trial)}: check the scale, "
                f"{_RIGHT_SCALE}.")
    return f"the shape is right but the values differ on {_shapes(trial)}, {where}."


def _parts_said(got: torch.Tensor, args: tuple) -> str | None:
    """When ``got`` is ``a`` times the folded part plus ``b`` times the rotary part, which scale each part got
    (named when it is a size's root: 1 / sqrt(Dn), 1 / sqrt(r), ...), else ``None``."""
    q_nope, q_rope, latent, k_rope, w_uk = (a.detach().double() for a in args)
    parts = torch.stack([((q_nope @ w_uk) @ latent.transpose(-2, -1)).flatten(),
                         (q_rope @ k_rope.transpose(-2, -1)).flatten()], dim=1)
    mine = got.detach().double().flatten()
    if not bool(mine.isfinite().all()):
        return None
    a, b = torch.linalg.lstsq(parts, mine[:, None]).solution.flatten().tolist()
    if not torch.allclose(parts @ torch.tensor([a, b], dtype=torch.float64), mine, atol=1e-4, rtol=1e-3):
        return None
    r, Dn, Dr = w_uk.shape[-1], q_nope.shape[-1], q_rope.shape[-1]
    named = {1.0: "1 (no scale)", 0.0: "0 (left out)",
             1 / (Dn + Dr): f"1 / (Dn + Dr) = 1 / {Dn + Dr}, without the root",
             math.sqrt(Dn + Dr): "sqrt(Dn + Dr), multiplied rather than divided"}
    for words, size in (("Dn + Dr", Dn + Dr), ("Dn", Dn), ("Dr", Dr), ("r", r), ("r + Dr", r + Dr)):
        named.setdefault(1 / math.sqrt(size), f"1 / sqrt({words}) = 1 / sqrt({size})")

    def said(x: float) -> str:
        return next((words for value, words in named.items() if abs(x - value) <= 1e-3 * max(abs(value), 1e-3)),
                    f"{x:.4g}")
    return (f"your scores are the folded part (q_nope @ w_uk against the latents) times {said(a)}, plus the rotary "
            f"part (q_rope against k_rope) times {said(b)}. Both parts take the one scale of the expanded form, "
            f"1 / sqrt(Dn + Dr) = 1 / sqrt({Dn + Dr}): the absorbed score is the expanded score, computed in another "
            f"order")


def _one_slice_right(got: torch.Tensor, expected: torch.Tensor) -> str | None:
    """The hint when only the first head, or only the first sequence, is right."""
    right = torch.isclose(got.detach().to(expected.dtype), expected, atol=1e-5, rtol=1e-4).flatten(2).all(-1)  # (N, H)
    if right.shape[1] > 1 and bool(right[:, 0].all()) and not bool(right[:, 1:].any()):
        return ("only head 0 is right: each head folds its query through its own W_uk, w_uk[h]; q_nope @ w_uk, "
                "(N, H, L, Dn) @ (H, Dn, r), pairs every head with its own.")
    if right.shape[0] > 1 and bool(right[0].all()) and not bool(right[1:].any()):
        return ("only the first sequence is right: latent and k_rope are (N, 1, S, ...), one per sequence, shared "
                "by the heads (their dimension 1, of size 1, broadcasts): use them whole, without picking one "
                "sequence.")
    return None


def _rebuilt_keys(fn: Callable, args: tuple) -> bool:
    """Did ``fn`` make a tensor of every head's position-free keys, ``(..., S, Dn)`` or ``(..., Dn, S)``?"""
    S, Dn = args[2].shape[-2], args[0].shape[-1]
    made: list[tuple] = []

    class Shapes(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, a=(), kwargs=None):
            out = func(*a, **(kwargs or {}))
            if isinstance(out, torch.Tensor) and out.dim() >= 2:
                made.append(tuple(out.shape[-2:]))
            return out

    with Shapes():
        try:
            fn(*(x.clone() for x in args))
        except Exception:  # noqa: BLE001 - judged by the ordinary trials
            return False
    return (S, Dn) in made or (Dn, S) in made


def _bfloat16_slip(fn: Callable) -> str | None:
    """What goes wrong when the first input comes in bfloat16, as a model's cache often does, or ``None``."""
    args = tuple(a.bfloat16() for a in _inputs(0))
    run = run_learner(fn, args, ALLOWED)
    got, expected = run.result, _reference(*(a.float() for a in args))
    if run.error is not None or not isinstance(got, torch.Tensor) or got.shape != expected.shape:
        return (f"right in float32 and float64, but on {_shapes(0)} in bfloat16 your function "
                f"{'raised ' + type(run.error).__name__ if run.error is not None else 'returned something else'}: "
                f"keep to products and arithmetic that work in any floating dtype.")
    if got.dtype != torch.bfloat16:
        return (f"for bfloat16 inputs your result is {str(got.dtype).removeprefix('torch.')}: keep the inputs' "
                f"dtype (leave out .float() and dtype=...).")
    if not torch.allclose(got.float(), expected, atol=0.05, rtol=0.02):
        return f"right in float32, but not in bfloat16 on {_shapes(0)}: " + first_difference(
            got.float(), expected, ("n", "h", "l", "s"), 0.05, 0.02) + "."
    return None


def check_absorbed_scores(fn: Callable) -> CheckResult:
    """Check ``fn(q_nope, q_rope, latent, k_rope, w_uk)``: MLA's scores in the absorbed form, ``(N, H, L, S)``.

    Built step by step in ``notebooks/17_latent_and_paged.ipynb``. ``q_nope (N, H, L, Dn)``, ``q_rope (N, H, L,
    Dr)`` (turned), ``latent (N, 1, S, r)``, ``k_rope (N, 1, S, Dr)`` (turned), ``w_uk (H, Dn, r)``; the answer is
    ``(q_nope W_uk) · c_s + q_rope · k_rope_s`` scaled by ``1 / sqrt(Dn + Dr)``, before any mask or softmax. Five
    inputs where ``r``, ``Dn`` and ``Dr`` all differ (:data:`TRIALS`: one shape three times with new values, a
    decoding step on transposed views, a latent narrower than a key), the first again in float64 and in bfloat16;
    the inputs must come back unchanged, and rebuilding every head's keys (the expanded form) is refused.

    Example:
        >>> def scores(q_nope, q_rope, latent, k_rope, w_uk):
        ...     folded = q_nope @ w_uk  # (N, H, L, r)
        ...     both = folded @ latent.transpose(-2, -1) + q_rope @ k_rope.transpose(-2, -1)  # (N, H, L, S)
        ...     return both / (q_nope.shape[-1] + q_rope.shape[-1]) ** 0.5
        >>> check_absorbed_scores(scores).status
        'passed'
        >>> no_rope = lambda q_nope, q_rope, latent, k_rope, w_uk: scores(q_nope, q_rope * 0, latent, k_rope, w_uk)
        >>> check_absorbed_scores(no_rope).message[:68]
        '❌ absorbed scores: not quite. Hint: the rotary part is missing: each'
    """
    name = "absorbed scores"
    helper = helper_called(fn, _inputs(0), frozenset({"_reference"}))
    if helper is not None:
        return CheckResult("failed", helper_refusal(name, helper))
    result = check_function(fn, _reference, _inputs, name=name, mistakes=MISTAKES, trials=len(TRIALS),
                            allowed=ALLOWED, explain=_explain, float64=True, keep_inputs=True,
                            inputs_said=f"{len(TRIALS)} inputs where r, Dn and Dr differ")
    if result.status == "error":  # does it run, and is it right, with W_uk handed over transposed?
        q_nope, q_rope, latent, k_rope, w_uk = args = _inputs(0)
        run = run_learner(fn, (q_nope, q_rope, latent, k_rope, w_uk.transpose(-2, -1)), ALLOWED)
        if isinstance(run.result, torch.Tensor) and run.result.shape == _reference(*args).shape and torch.allclose(
                run.result, _reference(*args), atol=1e-5):
            return CheckResult("failed", f"❌ {name}: your function raised an error on {_shapes(0)}. Hint: "
                                         f"{_TRANSPOSED}")
        return result
    if not result.passed:
        return result
    if _rebuilt_keys(fn, _inputs(0)):
        return CheckResult("failed", f"❌ {name}: right numbers, but your function rebuilt every head's keys from the "
                                     f"latents (a tensor of S x Dn per head): that is the expanded form, which costs "
                                     f"S · r · Dn per head at every step. Fold W_uk into the query instead "
                                     f"(q_nope @ w_uk), then compare it with the latents themselves.")
    slip = _bfloat16_slip(fn)
    if slip is not None:
        return CheckResult("failed", f"❌ {name}: {slip}")
    if not kept_after_next_call(fn, _reference, _inputs, 0, 1):
        return CheckResult("failed", f"❌ {name}: right on each input, but the result for {_shapes(0)} changed "
                                     f"when your function ran again on new values: return a new tensor each call, "
                                     f"not a buffer you reuse or a result remembered from before.")
    return CheckResult("passed", result.message.replace("again in float64", "again in float64 and in bfloat16"))
