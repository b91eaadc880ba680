"""Checkers for ``notebooks/12_learning_to_attend.ipynb``: write the reversal target, and predict where the
trained reversal model looks before looking.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ._again import KEPT_ANY, LAST_CALL, MEMORISED, SECOND_CALL, TRANSPOSED, VIEW_SLIP, Awkward
from ._allowed import CREATION, ELEMENTWISE, LAYOUT, METADATA, REDUCTIONS, Allowed
from ._checker import CheckResult, check_function
from ._compare import whole_number
from ._crashes import explain_crash
from ._removal import REMOVAL_ALLOWED, removal_mistakes
from ._running import run_learner

#: Tensor operations that move, compare and pick digits; a detour through Python lists or NumPy is refused.
ALLOWED = Allowed(METADATA | LAYOUT | CREATION | ELEMENTWISE | REDUCTIONS, said="tensor operations (flip, indexing, "
                  "arange, gather, ...)", instead={"copy": (
                      "your function called {call}, which writes into `digits` in place: the batch's inputs are then "
                      "reversed too, and the model would learn to copy. Return a new tensor, digits.flip(-1), and "
                      "leave `digits` as it is.")}, own_helpers=False)

#: Why ``digits[:, ::-1]`` fails, and what to write instead.
NEGATIVE_STEP_HINT = ("negative steps such as ::-1 are not supported by torch tensors (unlike Python lists and "
                      "NumPy arrays): reverse a dimension with .flip, e.g. digits.flip(-1).")
#: Why a hard-coded ``7 - i`` fails.
FIXED_LENGTH_HINT = ("your function is right for 8 digits but not for {L}: a hard-coded 7 - i (or range(8)) "
                     "assumes every input has 8 digits. The inputs here have any length L: use "
                     "L = digits.shape[-1] and L - 1 - i, or simply digits.flip(-1).")


def _digits(seed: int) -> tuple[torch.Tensor]:
    g = torch.Generator().manual_seed(1200 + seed)
    N, L = int(torch.randint(1, 5, (1,), generator=g)), int(torch.randint(3, 9, (1,), generator=g))
    return (torch.randint(0, 10, (N, L), generator=g),)


def check_reversal_target(fn: Callable[[torch.Tensor], torch.Tensor]) -> CheckResult:
    """Check ``fn(digits)``, which should turn ``digits (N, L)`` into their reversal ``(N, L)``: each row backwards.

    Built step by step in ``notebooks/12_learning_to_attend.ipynb`` (it is what
    :func:`~attention_lib.training.learning_to_attend.make_batch` writes as the reversal target).

    Example:
        >>> check_reversal_target(lambda d: d.flip(-1)).status
        'passed'
        >>> check_reversal_target(lambda d: d.flip(0)).message[:40]
        '❌ the reversal target: not quite. Hint: '
        >>> message = check_reversal_target(lambda d: d[:, ::-1]).message
        >>> print(message.split("\\n")[-2][:60])
        Hint: negative steps such as ::-1 are not supported by torch
    """
    name = "the reversal target"
    g = torch.Generator().manual_seed(1299)
    eight, five = torch.randint(0, 10, (2, 8), generator=g), torch.randint(0, 10, (2, 5), generator=g)
    run = run_learner(fn, (eight,), ALLOWED)
    if isinstance(run.error, ValueError) and "step must be greater than zero" in str(run.error):
        message = explain_crash(name, run.error, (eight,), params=("digits",), failed_op=run.failed_op)
        head, _, rest = message.partition("\nHint: ")
        return CheckResult("error", f"{head}\nHint: {NEGATIVE_STEP_HINT}\n{rest.split(chr(10), 1)[-1]}")
    if run.error is None and isinstance(run.result, torch.Tensor) and torch.equal(run.result, eight.flip(-1)):
        shorter = run_learner(fn, (five,))
        if isinstance(shorter.result, torch.Tensor) and shorter.result.shape == run.result.shape and torch.equal(
                shorter.result, run.result):
            return CheckResult("failed", f"❌ {name}: for 5 digits your function returned its result for 8 digits. "
                               f"Hint: {KEPT_ANY[0].upper()}{KEPT_ANY[1:]}")
        if shorter.error is not None or not (isinstance(shorter.result, torch.Tensor)
                                             and torch.equal(shorter.result, five.flip(-1))):
            return CheckResult("failed", f"❌ {name}: not quite. Hint: {FIXED_LENGTH_HINT.format(L='L = 5')}")
    result = check_function(
        fn, lambda d: d.flip(-1), _digits, name=name,
        mistakes=[
            (lambda d: d.clone(), "that is the input itself: the answer at position i is the digit at position "
                                  "L - 1 - i. Try .flip(...) on the right dimension."),
            (lambda d: d.flip(0), "that reverses the order of the examples (dimension 0, the batch), not the "
                                  "digits inside each one: flip the last dimension, .flip(-1)."),
            (lambda d: d.sort(dim=-1, descending=True).values, "that sorts the digits; reversing keeps them as "
                                                               "they are, read from the end."),
            (lambda d: d.flip(0, 1), "that reverses the examples too (dimension 0, the batch): flip only the last "
                                     "dimension, the digits inside each example, .flip(-1)."),
            (lambda d: d.roll(1, -1), "that rolls the digits by one place (the last comes first, the others move "
                                      "right): reversing reads the row from its end, position i takes digit "
                                      "L - 1 - i: .flip(-1)."),
            (lambda d: d[:, (d.shape[1] - torch.arange(d.shape[1])) % d.shape[1]],
             "position i took the digit L - i (digit 0 stays first, the others reversed): one off. Position i takes "
             "digit L - 1 - i: .flip(-1)."),
            (lambda d: d.T.flip(-1), "that transposes the batch (examples become positions): keep the shape (N, L) "
                                     "and flip only the last dimension, .flip(-1)."),
        ],
        shape_hint="keep the shape (N, L): one reversed row per example.", allowed=ALLOWED,
    )
    if result.passed:
        result = _reversal_slips(fn, name, eight)
    if result.passed:  # the inputs are fixed, not random: say which
        return CheckResult("passed", f"✅ {name}: correct on fixed batches of 8, 5, 4 and 3 digits. Well done!")
    return result


def _reversal_slips(fn: Callable, name: str, digits: torch.Tensor) -> CheckResult:
    """A right reversal that changes its input or returns another dtype than the digits' int64 fails here."""
    given = digits.clone()
    run = run_learner(fn, (given,), ALLOWED, copy=False)
    if not torch.equal(given, digits):
        return CheckResult("failed", f"❌ {name}: right digits, but your function overwrote its input (in place, "
                           f"e.g. digits.copy_(...) or digits[:] = ...): the batch's inputs are then reversed too, "
                           f"and the model would learn to copy. Return a new tensor, digits.flip(-1), and leave "
                           f"`digits` as it is.")
    if isinstance(run.result, torch.Tensor) and run.result.dtype != digits.dtype:
        return CheckResult("failed", f"❌ {name}: right digits, but as {str(run.result.dtype).removeprefix('torch.')}"
                           f": a target is a class index per position, int64 like the digits (cross-entropy takes "
                           f"no float targets of this shape). Leave out .float(): digits.flip(-1) keeps the dtype.")
    return CheckResult("passed", "")


def _learned_rows(trained=None) -> list[int]:
    """Where each query of the trained reversal model looks most, averaged over heads and held-out inputs."""
    from ..training.learning_to_attend import load_trained, make_batch

    trained = load_trained("reversal") if trained is None else trained
    inputs, _ = make_batch("reversal", 200, seed=12, split="heldout")
    with torch.no_grad():
        weights = trained.model(inputs).attentions[0]  # (N, H, L, L)
    return weights.mean(dim=(0, 1)).argmax(-1).tolist()  # (L, L) -> (L,)


def check_where_it_looks(prediction, trained=None) -> CheckResult:
    """Check a prediction, made before looking, of where the trained reversal model's queries look.

    Built step by step in ``notebooks/12_learning_to_attend.ipynb``. ``prediction[i]`` is the position
    (0 to 7) that position ``i`` attends to most; it is compared with the shipped model's attention,
    averaged over its heads and 200 held-out inputs.

    Args:
        prediction: 8 ints (a list or a tensor), one key position per query position.
        trained: the trained model to compare with (default: the shipped one).

    Example:
        >>> check_where_it_looks([7, 6, 5, 4, 3, 2, 1, 0]).status
        'passed'
        >>> check_where_it_looks(list(range(8))).message[:50]
        '❌ where it looks: that is the diagonal, every posi'
    """
    name = "where it looks"
    if prediction is None or prediction is Ellipsis:
        return CheckResult("not attempted", f"📝 {name}: not attempted yet. Replace `...` with 8 positions.")
    if isinstance(prediction, dict | str):
        return CheckResult("failed", f"❌ {name}: give 8 whole numbers in order, one position per query, as a list "
                           f"(position 0's first), not a {type(prediction).__name__}.")
    try:
        items = list(prediction.tolist() if isinstance(prediction, torch.Tensor) else prediction)
    except TypeError:
        return CheckResult("failed", f"❌ {name}: give 8 whole numbers, one position per query, e.g. a list.")
    odd = next((i for i, p in enumerate(items) if whole_number(p) is None), None)
    if odd is not None:
        odd = items[odd]
        return CheckResult("failed", f"❌ {name}: positions are whole numbers, but got {odd!r}. Hint: each query "
                           f"looks hardest at one key, and keys sit at positions 0, 1, ..., 7: there is no position "
                           f"{odd!r}. Give one whole position per query.")
    guess = [whole_number(p) for p in items]
    learned = _learned_rows(trained)
    L = len(learned)
    if len(guess) != L:
        return CheckResult("failed", f"❌ {name}: give {L} positions (one per digit), but got {len(guess)}.")
    if guess == learned:
        return CheckResult("passed", f"✅ {name}: right, the trained model looks at {learned}: position i reads "
                           f"position {L - 1} - i, the anti-diagonal. Well done!")
    if guess == list(range(L)):
        return CheckResult("failed", f"❌ {name}: that is the diagonal, every position looking at itself. Which "
                           f"digit does position 0 have to write?")
    if guess == [L - i for i in range(L)]:
        return CheckResult("failed", f"❌ {name}: off by one: positions run from 0 to {L - 1}, so the last one is "
                           f"{L - 1}, not {L}.")
    outside = next((p for p in guess if not 0 <= p < L), None)
    if outside is not None:
        return CheckResult("failed", f"❌ {name}: positions run from 0 to {L - 1}, but got {outside}. Hint: give the "
                           f"position itself, counted from the start"
                           + (f" ({outside} counts from the end in Python indexing: it is position {L + outside})."
                              if -L <= outside < 0 else "."))
    wrong = [i for i in range(L) if guess[i] != learned[i]]
    return CheckResult("failed", f"❌ {name}: position {wrong[0]} looks elsewhere. Hint: which digit does position "
                       f"{wrong[0]} have to write, and at which position of the input does that digit sit?")


def check_remove_attractors(fn: Callable, prediction) -> CheckResult:
    """Check ``fn(weights, verb, attractors)``, an intervention, and a prediction of what it does, made first.

    Built step by step in ``notebooks/12_learning_to_attend.ipynb``. ``weights (N, L, S)`` are one head's attention
    weights, ``verb (N,)`` each sentence's verb position and ``attractors (N, S)`` bool, ``True`` on the attractors;
    ``fn`` must return new weights whose verb row has no weight on the attractors and the rest renormalised to sum
    1, every other row as it was (what :func:`attention_lib.interventions.remove_keys` does). Once it is right, the
    checker runs it inside the shipped one-block agreement model's verb-to-subject head, on 600 sentences of the
    held-out structures with three attractors each, and compares the accuracy with ``prediction`` (a share in 0..1,
    right within 0.1).

    Example:
        >>> from attention_lib.interventions import remove_keys
        >>> check_remove_attractors(lambda w, v, a: remove_keys(w, rows=v, keys=a), 0.99).status
        'failed'
        >>> check_remove_attractors(lambda w, v, a: w, ...).status
        'not attempted'
    """
    from ..interventions import edit_head, remove_keys
    from ..training.learning_to_attend import AGREEMENT, HELDOUT_THREE, attractor_keys, load_trained, subject_head
    from ..validation import is_number

    name = "removing the attractors"
    if prediction is None or prediction is Ellipsis:
        return CheckResult("not attempted", f"📝 {name}: predict first. Write your prediction, a share between 0 and "
                           f"1, in `my_prediction`, then run this cell: the checker runs your intervention only then.")
    if isinstance(prediction, torch.Tensor) and prediction.numel() == 1:
        prediction = prediction.item()
    if not is_number(prediction) or not 0 <= prediction <= 1:
        said = (" Hint: a share, not a percentage: 0.5 for 50 %." if is_number(prediction) and 1 < prediction <= 100
                else "")
        return CheckResult("failed", f"❌ {name}: the prediction is a share between 0 and 1, but got "
                           f"{prediction!r}.{said}")

    def inputs(trial: int):
        g = torch.Generator().manual_seed(1230 + trial)
        n, length = ((2, 5), (3, 7), (4, 6), (2, 5), (4, 6), (2, 5))[trial]  # sentences, words
        # Multiples of 1/1024, each at least 1/1024, every row summing to exactly 1 in float32 and float64 alike
        # (an answer may renormalise every row, a no-op on weights): the float64 trial converts these.
        counts = 1 + (torch.randn(n, length, length, generator=g).softmax(-1) * 900).floor()
        counts[..., 0] += 1024 - counts.sum(-1)
        weights = counts / 1024
        verb = torch.randint(1, length, (n,), generator=g)
        attractors = torch.rand(n, length, generator=g) < 0.4
        attractors[:, 0] = False  # every row keeps a key to share its weight out to
        return weights, verb, attractors

    def reference(weights, verb, attractors):
        return remove_keys(weights, rows=verb, keys=attractors)

    # The later calls are the exercise's own: the course's automatic ones scale their inputs, and the weights must
    # stay weights (each row summing to 1), which an answer may rely on.

    result = check_function(fn, reference, inputs, name=name,
                            mistakes=removal_mistakes(remove_keys), allowed=REMOVAL_ALLOWED,
                            shape_hint="return one head's weights, the shape you were given: (N, L, S).",
                            keep_inputs=True, float64=True, again=False, awkward=[
                                Awkward(SECOND_CALL.replace("new values", "new weights"), inputs(3), MEMORISED),
                                Awkward(TRANSPOSED, tuple(t.mT.contiguous().mT if t.dim() > 1 else t
                                                          for t in inputs(4)), VIEW_SLIP),
                                Awkward(LAST_CALL.replace("new values", "new weights"), inputs(5), MEMORISED)])
    if "changed its input `weights`" in result.message or "wrote into a tensor" in result.message:
        return CheckResult("failed", f"❌ {name}: right numbers, but your function changed the weights it was "
                           f"given (in place). Hint: inside a model they are the head's own weights; work on a copy "
                           f"(weights.clone()) or build a new tensor, e.g. with torch.where.")
    if not result.passed:
        return result
    trained = load_trained("agreement", num_layers=1)
    layer, head = subject_head(trained.model)
    x, y = AGREEMENT.sentences(list(HELDOUT_THREE), 600, torch.Generator().manual_seed(1212), attractors=3)
    parse = AGREEMENT.parse(x)
    rows = torch.arange(len(x))
    keys = attractor_keys(AGREEMENT, x, parse.subject)
    with torch.no_grad():
        before = float((trained.model(x).logits[rows, parse.verb].argmax(-1) == y[rows, parse.verb]).float().mean())
        with edit_head(trained.model.blocks[layer].attention, head, lambda w: fn(w, parse.verb, keys)):
            after = float((trained.model(x).logits[rows, parse.verb].argmax(-1) == y[rows, parse.verb]).float().mean())
    why = (f"untouched, the model is right in {before:.0%} of these sentences; with its head's verb row stripped of "
           f"the attractors, in {after:.0%}. A removal also hands that weight to the other keys, the subject among "
           f"them: section 8 reads it beside a placebo and a matched removal before calling the weight a cause.")
    if abs(float(prediction) - after) <= 0.1:
        return CheckResult("passed", f"✅ {name}: correct on 3 fixed test inputs (the first again in float64), and "
                           f"you predicted {prediction:.2f}: {why} Well reasoned!")
    # The function is the exercise; the prediction was made honestly, before looking: it is graded on its own.
    return CheckResult("passed", f"✅ {name}: your function is correct on 3 fixed test inputs (the first again in "
                       f"float64). 🔮 Your prediction was off: you predicted {prediction:.2f}, and {why}")
