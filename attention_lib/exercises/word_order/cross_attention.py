"""The second exercise of ``notebooks/11_word_order.ipynb``: cross-attention from a question to a padded batch of
sentences.

The lesson calls cross-attention on one sentence without padding; the exercise asks for a batch whose sentences
have different lengths, so the learner must say which sequence gives the keys and values *and* hide that
sequence's padding (lesson 08's padding mask, ``True`` = may attend). ``calculate_attention`` and
``padding_mask`` are the tools of the exercise, not shortcuts: the answer is which tensor goes where, and the mask.
"""

from __future__ import annotations

import torch

from ...attention import blend, calculate_attention, matchmaker, percentages, scaler
from ...masks import causal_mask, padding_mask
from .._again import loud
from .._allowed import PLAIN, PLAIN_SAID, PRODUCTS, SOFTMAX, Allowed
from .._checker import CheckResult, also_checked, check_function
from .._hints import HINTS
from .._running import run_learner

#: (N, L, S, E) and the sentences' lengths per trial: N >= 2 and N != L (so that a mask without its query dimension
#: cannot broadcast by accident), L != S (so that swapped roles show in the shapes), one full-length sentence and at
#: least one short one; in the last, a sentence of length 0 (nothing to look at: its output must be zeros). The first,
#: which also runs in float64, has E = 6, whose square root is not a float32 number (a root taken in float32 shows).
_TRIALS = (((3, 2, 5, 6), (5, 3, 1)), ((2, 4, 6, 6), (2, 6)), ((3, 5, 4, 8), (2, 4, 3)), ((3, 2, 4, 4), (0, 4, 2)))

#: The tools of the exercise: calculate_attention, the padding mask and the steps (SDPA too), and plain PyTorch.
ALLOWED = Allowed(PLAIN | PRODUCTS | SOFTMAX | {"scaled_dot_product_attention"}, said=PLAIN_SAID + ", "
                  "al.calculate_attention and al.padding_mask",
                  functions=frozenset({calculate_attention, padding_mask, causal_mask, percentages, matchmaker, scaler,
                                       blend}),
                  library_hint="use al.calculate_attention, al.padding_mask or plain PyTorch operations; your "
                               "function called {call}, which this exercise does not use.", own_helpers=False)

#: A hand-written masked softmax gives NaN for a sentence of length 0: its keys are all -inf.
EMPTY_SENTENCE = HINTS["fully_masked_nan"].replace("a query whose keys", "a question word whose keys (a sentence of "
                                                   "length 0)") + " (al.calculate_attention does this for you.)"


def _question_and_sentences(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A question ``(N, L, E)``, padded sentences ``(N, S, E)`` and their lengths ``(N,)``, from a fixed seed.

    The padding holds large random vectors, not zeros, so that attention paid to it changes the output a lot.
    """
    (N, L, S, E), lengths = _TRIALS[seed % len(_TRIALS)]
    g = torch.Generator().manual_seed(120 + seed)
    question, sentences = torch.randn(N, L, E, generator=g), torch.randn(N, S, E, generator=g)
    lengths = torch.tensor(lengths)
    padding = torch.arange(S)[None, :] >= lengths[:, None]  # (N, S): True on the padding
    sentences = torch.where(padding[..., None], 3.0 * torch.randn(N, S, E, generator=g), sentences)
    return question, sentences, lengths


def _reference(question, sentences, lengths):
    return calculate_attention(question, sentences, sentences, attn_mask=padding_mask(lengths, sentences.shape[-2]))


def _by_hand(question, keys, values, mask=None, *, divisor=None, dim=-1, after=False):
    scores = question @ keys.transpose(-2, -1)  # (N, L, E) @ (N, E, S) -> (N, L, S)
    scores = scores / (divisor if divisor is not None else question.shape[-1] ** 0.5)
    if mask is not None and not after:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=dim)
    if mask is not None and after:
        weights = weights.masked_fill(~mask, 0.0)
    return weights @ values, weights  # (N, L, S) @ (N, S, E) -> (N, L, E)


def _pad(lengths, S, extra=0):
    return (torch.arange(S)[None, :] < lengths[:, None] + extra)[:, None, :]  # (N, 1, S)


def _padding_zeroed(question, sentences, lengths):
    """The padding vectors set to zero instead of masked: they score 0, and still get weight e^0."""
    kept = sentences * padding_mask(lengths, sentences.shape[-2]).transpose(-2, -1)  # (N, S, 1): 1 for a word
    return calculate_attention(question, kept, kept)


CROSS_MISTAKES = [
    (_padding_zeroed, "the padding vectors were set to zero, not masked: a zero key still scores 0 against every "
                      "question word and gets a weight e^0 in the softmax (and a sentence of length 0 gets a uniform "
                      "average of zeros). Leave the sentences as they are and block the padding with attn_mask="
                      "al.padding_mask(lengths, S), True = may attend."),
    (lambda q, s, n: calculate_attention(q, s, s),
     "the sentences' padding got weight: hide the keys past each sentence's length with a padding mask (N, 1, S), "
     "True = may attend (lesson 08): al.padding_mask(lengths, S), or positions[None, :] < lengths[:, None] with a "
     "query dimension added."),
    (lambda q, s, n: calculate_attention(q, s, s, attn_mask=~_pad(n, s.shape[-2])),
     "True and False are swapped: in calculate_attention's (and SDPA's) convention True means 'may attend', so the "
     "real words are True and the padding False. (nn.MultiheadAttention's key_padding_mask means the opposite.)"),
    (lambda q, s, n: calculate_attention(q, s, s, attn_mask=_pad(n, s.shape[-2], extra=1)),
     "one padding key too many: position j of sentence n is a real word when j < lengths[n] (positions count from "
     "0), not j <= lengths[n]."),
    (lambda q, s, n: _by_hand(q, s, s, _pad(n, s.shape[-2]), after=True),
     "mask *before* the softmax: zeroing the padding's weights afterwards leaves rows that no longer add up to 1."),
    (lambda q, s, n: calculate_attention(q, q, q),
     "that is self-attention on the question: its keys and values must come from the *other* sequence, the "
     "sentences (with their padding hidden)."),
    (lambda q, s, n: _by_hand(q, s, s, _pad(n, s.shape[-2]), divisor=1.0),
     "divide the scores by sqrt(E) before the softmax (or let calculate_attention do it)."),
    (lambda q, s, n: _by_hand(q, s, s, _pad(n, s.shape[-2]), divisor=s.shape[-2] ** 0.5),
     "divide the scores by sqrt(E), the size of each word's vector (question.size(-1)), not by sqrt(S), the number "
     "of sentence words (sentences.size(-2)): the scaling undoes the growth of a dot product of E numbers."),
    (lambda q, s, n: _by_hand(q, s, s, _pad(n, s.shape[-2]), divisor=q.shape[-2] ** 0.5),
     "divide the scores by sqrt(E), the size of each word's vector (question.size(-1)), not by sqrt(L), the number "
     "of question words (question.size(-2))."),
    (lambda q, s, n: calculate_attention(q, s, s, attn_mask=torch.zeros(_pad(n, s.shape[-2]).shape, dtype=q.dtype)
                                         .masked_fill(~_pad(n, s.shape[-2]), -1e9)),
     "the sentence of length 0 got a uniform average over its padding, 1/S on every key it must not see: that is "
     "what a large negative fill such as -1e9 gives (lesson 08), since -1e9 - (-1e9) = 0. Pass the bool mask itself, "
     "True = may attend (al.padding_mask(lengths, S)): a query with no key to see then gets exact zeros."),
    (lambda q, s, n: _by_hand(q, s, s, _pad(n, s.shape[-2])), EMPTY_SENTENCE),
    (lambda q, s, n: _by_hand(q, s, s, _pad(n, s.shape[-2]), dim=-2),
     "the softmax runs over the keys, the sentence's words (dim=-1), so each question word's weights add up to 1."),
]

#: Hints for the errors an answer of this exercise typically raises, by what the error or the failing call shows.
MASK_WITHOUT_QUERY_DIM = ("the mask needs a dimension for the queries: lengths give an (N, S) table, and the weights "
                          "are (N, L, S), so give it the shape (N, 1, S) (mask[:, None, :]; al.padding_mask already "
                          "returns that), which broadcasts over the question's L words.")
MASK_OVER_THE_QUESTION = ("the mask has one column per key, and the keys are the sentences' words: its last size is "
                          "S = sentences.size(-2), not the question's L. It hides the sentences' padding.")
VALUES_FROM_THE_QUESTION = ("the values come from the sentences too: every key needs exactly one value, so the "
                            "keys and the values are the same sequence, calculate_attention(question, sentences, "
                            "sentences, attn_mask=...).")
NOT_CAUSAL = ("cross-attention has no causal mask: the question comes after the sentences are written, so each "
              "question word may look at every real word of its sentence, past or future. Drop is_causal=True and "
              "keep only the padding mask.")
BLEND_WITH_THE_QUESTION = ("blend the sentences' values: output = weights @ sentences. The weights (N, L, S) have one "
                           "column per sentence word, and the sentences (N, S, E) one row per word; the question only "
                           "asks, so its vectors are not in the blend.")


def _explain_error(fn, message: str) -> str:
    """The error's message, with the hint replaced where the failing call shows a slip of this exercise."""
    question, sentences, lengths = _question_and_sentences(0)
    run = run_learner(fn, (question, sentences, lengths))
    if run.error is None:
        return message
    (N, L, E), S = question.shape, sentences.shape[-2]
    said, hint = str(run.error), None
    if "not both" in said and "is_causal" in said:
        hint = NOT_CAUSAL
    elif "attn_mask" in said and f"attn_mask.shape=({N}, {S})" in said:
        hint = MASK_WITHOUT_QUERY_DIM
    elif ("attn_mask" in said and f"attn_mask.shape=({N}, 1, {L})" in said) or f"padded length S={L}" in said:
        hint = MASK_OVER_THE_QUESTION
    elif "key and value must have the same number of positions" in said:
        hint = VALUES_FROM_THE_QUESTION
    elif run.failed_op is not None and run.failed_op[0] in ("matmul", "__matmul__", "bmm"):
        shapes = [tuple(a.shape) for a in run.failed_op[1] if isinstance(a, torch.Tensor)]
        if shapes == [(N, L, S), (N, L, E)]:
            hint = BLEND_WITH_THE_QUESTION
    if hint is None:
        return message
    return "\n".join(f"Hint: {hint}" if line.startswith("Hint:") else line for line in message.split("\n"))


def _describe(x) -> str:
    if isinstance(x, torch.Tensor):
        return f"a tensor of shape {tuple(x.shape)}"
    if isinstance(x, tuple | list):
        return f"a {type(x).__name__} of {len(x)}: ({', '.join(_describe(item) for item in x)})"
    return f"a {type(x).__name__}"


def check_cross_attention(fn) -> CheckResult:
    """Check ``fn(question, sentences, lengths)``: cross-attention from a question to a padded batch of sentences.

    Built step by step in ``notebooks/11_word_order.ipynb``. ``question (N, L, E)`` asks; ``sentences (N, S, E)``,
    padded after ``lengths[n]`` words, give the keys and the values; the padding must get no weight. It returns
    ``(output (N, L, E), weights (N, L, S))`` like :func:`attention_lib.calculate_attention` with the padding mask
    of :func:`attention_lib.padding_mask`; it is tried on four fixed batches with ``L != S`` and padding filled
    with large random vectors (in the last, a sentence of length 0), then in float64 and backward.

    Args:
        fn: ``(question (N, L, E), sentences (N, S, E), lengths (N,)) -> (output, weights)``.

    Returns:
        A :class:`~attention_lib.exercises.CheckResult` with a hint for typical mistakes (no mask, the mask
        inverted, one padding key too many, masking after the softmax, a mask without its query dimension or over
        the question, values or a blend from the question, self-attention, the scaling, the softmax dimension,
        returning one tensor).

    Example:
        >>> from attention_lib import calculate_attention, padding_mask
        >>> def solution(question, sentences, lengths):
        ...     mask = padding_mask(lengths, sentences.size(-2))  # (N, 1, S), True = a real word
        ...     return calculate_attention(question, sentences, sentences, attn_mask=mask)
        >>> check_cross_attention(solution).status
        'passed'
        >>> print(check_cross_attention(lambda q, s, n: calculate_attention(q, s, s)))
        ❌ cross-attention: not quite. Hint: the sentences' padding got weight: ...
    """
    name = "cross-attention"
    result = check_function(fn, _reference, _question_and_sentences, name=name, mistakes=CROSS_MISTAKES,
                            trials=len(_TRIALS), allowed=ALLOWED, float64=True, backward=True, keep_inputs=True,
                            awkward=[loud(_question_and_sentences(0), factor, 0, hint=HINTS["naive_exp"])
                                     for factor in (100.0, -100.0)])
    if result.passed:
        return CheckResult("passed", f"✅ {name}: correct on four fixed padded batches (L != S, sentences of "
                                     f"different lengths, one of length 0){also_checked(True, True)}. Well done!")
    if result.status == "error":
        return CheckResult("error", _explain_error(fn, result.message))
    if result.status != "failed" or "not quite" in result.message:
        return result
    question, sentences, lengths = _question_and_sentences(0)
    try:
        got = fn(question, sentences, lengths)  # it already ran on these inputs in check_function
    except Exception:  # noqa: BLE001 - a function that fails only now keeps the verdict it has
        return result
    if not (isinstance(got, tuple | list) and len(got) == 2 and all(isinstance(t, torch.Tensor) for t in got)):
        return CheckResult("failed", f"❌ {name}: return two tensors, (output, weights), as "
                           f"calculate_attention does; you returned {_describe(got)}.")
    (N, L, E), S = question.shape, sentences.shape[1]
    roles = {(N, S, L): "queries and keys/values are swapped: the question asks (query = question) and the sentences "
                        "answer (key = value = sentences). The weights must be (N, L, S), one row per question word.",
             (N, S, S): "that is self-attention on the sentences: the queries must come from the question."}
    if tuple(got[0].shape) == (N, S, E) and tuple(got[1].shape) in roles:
        return CheckResult("failed", f"❌ {name}: not quite. Hint: {roles[tuple(got[1].shape)]}")
    expected = {"output": (N, L, E), "weights": (N, L, S)}
    for what, tensor in zip(expected, got, strict=True):
        if tuple(tensor.shape) != expected[what]:
            return CheckResult("failed", f"❌ {name}: the {what} should be (N, L, {'E' if what == 'output' else 'S'})"
                               f" = {expected[what]} for a question of {L} words and sentences of {S}, but it "
                               f"is {tuple(tensor.shape)}. Hint: one row per question word (query); one column "
                               f"per sentence word (key).")
    return result
