"""Every mask of the package as a function of positions: ``mask_mod(b, h, q_idx, kv_idx) -> bool``.

PyTorch's FlexAttention (``torch.nn.attention.flex_attention``) asks for a mask as a rule, not as a tensor: given
a batch index ``b``, a head ``h``, a query position ``q_idx`` and a key position ``kv_idx`` (each an integer
tensor), return ``True`` where the query **may attend** to the key (SDPA's convention, and the package's;
``nn.MultiheadAttention`` means the opposite). The arguments arrive as tensors, so a rule is written with tensor
operations (``&``, ``|``, comparisons, indexing a tensor): Python's ``and``, ``or`` and ``if`` would ask for one
bool and fail. ``create_mask(mask_mod, B, H, L, S)`` turns a rule into the ``(B, H, L, S)`` tensor, and
``and_masks`` / ``or_masks`` combine rules as ``&`` and ``|`` combine tensors.

Each rule here says in one line what its tensor of :mod:`attention_lib.masks` builds; ``tests/test_flex_attention.py``
checks that the two agree on square shapes, ``L < S`` and ``L > S``. Built step by step in
``notebooks/20_flex_attention.ipynb``.
"""

from __future__ import annotations

import torch

from ..masks import ALIGNMENTS
from ..validation import check_int, check_is_tensor, is_int

#: The signature of a mask rule: ``(b, h, q_idx, kv_idx) -> bool tensor``.
MASK_MOD_ARGS = ("b", "h", "q_idx", "kv_idx")


def causal_mod(b: torch.Tensor, h: torch.Tensor, q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
    """The causal mask as a rule: query ``q_idx`` may attend to keys ``0..q_idx`` (top-left, SDPA's ``is_causal``).

    Built step by step in ``notebooks/20_flex_attention.ipynb``. ``True`` = **may attend**; the rule of
    :func:`~attention_lib.causal_mask`, on every shape (``L > S``: the last queries see every key).

    Example:
        >>> causal_mod(0, 0, torch.tensor(2), torch.tensor([1, 2, 3]))
        tensor([ True,  True, False])
    """
    return q_idx >= kv_idx


def causal_lower_right_mod(L: int, S: int):
    """The causal mask aligned to the end of the keys as a rule: query ``i`` sits at position ``S - L + i``.

    Built step by step in ``notebooks/20_flex_attention.ipynb``. ``True`` = **may attend**; the rule of
    :func:`~attention_lib.causal_mask_lower_right` (``L`` new tokens after ``S - L`` cached ones).

    Args:
        L: the number of queries (the newest tokens); S: the number of keys (every token so far).

    Returns:
        A mask_mod ``(b, h, q_idx, kv_idx) -> bool``.

    Raises:
        TypeError, ValueError: if ``L`` or ``S`` is not a non-negative int.

    Example:
        >>> mod = causal_lower_right_mod(2, 4)
        >>> mod(0, 0, torch.tensor([[0], [1]]), torch.arange(4)).int()
        tensor([[1, 1, 1, 0],
                [1, 1, 1, 1]], dtype=torch.int32)
    """
    shift = _shift(L, S)

    def causal_lower_right(b, h, q_idx, kv_idx):
        return q_idx + shift >= kv_idx  # query i is token S - L + i

    return causal_lower_right


def sliding_window_mod(window: int, *, align: str = "upper_left", L: int | None = None, S: int | None = None):
    """A sliding window as a rule: each query sees its own key and the ``window - 1`` keys before it.

    Built step by step in ``notebooks/20_flex_attention.ipynb``. ``True`` = **may attend**; the rule of
    :func:`~attention_lib.sliding_window_mask`: query ``i`` sits at position ``p`` (``p = i`` for
    ``align="upper_left"``, ``p = S - L + i`` for ``"lower_right"``, which needs ``L`` and ``S``) and may attend to
    keys ``p - window + 1 .. p``.

    Args:
        window: how many keys each query sees at most, its own included (a positive int).
        align: ``"upper_left"`` (``is_causal``'s alignment) or ``"lower_right"`` (decoding).
        L, S: the numbers of queries and keys; needed for ``"lower_right"`` only.

    Returns:
        A mask_mod ``(b, h, q_idx, kv_idx) -> bool``.

    Raises:
        TypeError: if ``window``, ``L`` or ``S`` is not an int, or ``align`` not a string.
        ValueError: if ``window < 1``, ``align`` is unknown, or ``"lower_right"`` is asked without ``L`` and ``S``.

    Example:
        >>> sliding_window_mod(2)(0, 0, torch.tensor([[0], [1], [2]]), torch.arange(3)).int()
        tensor([[1, 0, 0],
                [1, 1, 0],
                [0, 1, 1]], dtype=torch.int32)
    """
    window = check_int(window, "window", minimum=1, fix="pass how many keys a query may see, its own included.")
    if not isinstance(align, str):
        raise TypeError(f"align must be a string, 'upper_left' or 'lower_right', but got {type(align).__name__}.")
    if align not in ALIGNMENTS:
        raise ValueError(f"align must be one of {list(ALIGNMENTS)}, but align={align!r}; 'upper_left' ends query i's "
                         f"window at key i, 'lower_right' at key S - L + i (decoding).")
    if align == "lower_right" and (L is None or S is None):
        raise ValueError("align='lower_right' places query i at position S - L + i: pass L (queries) and S (keys), "
                         "e.g. sliding_window_mod(window, align='lower_right', L=q.size(-2), S=k.size(-2)).")
    shift = _shift(L, S) if align == "lower_right" else 0

    def sliding_window(b, h, q_idx, kv_idx):
        distance = q_idx + shift - kv_idx  # how far back the key is from the query's position
        return (distance >= 0) & (distance < window)

    return sliding_window


def decoding_mod(L: int, S: int, window: int | None = None):
    """The mask of the newest ``L`` queries over ``S`` keys as a rule, as :func:`~attention_lib.masks.decoding_mask`.

    Built step by step in ``notebooks/20_flex_attention.ipynb``. ``True`` = **may attend**: causal aligned to the
    end of the keys, within a ``window`` when one is given. (``decoding_mask`` returns ``None`` where the mask would
    allow everything; a rule is always a rule.)

    Raises:
        TypeError, ValueError: as :func:`causal_lower_right_mod` and :func:`sliding_window_mod`.

    Example:
        >>> decoding_mod(1, 4, window=2)(0, 0, torch.tensor(0), torch.arange(4)).int()
        tensor([0, 0, 1, 1], dtype=torch.int32)
    """
    if window is None:
        return causal_lower_right_mod(L, S)
    return sliding_window_mod(window, align="lower_right", L=L, S=S)


def padding_mod(lengths):
    """A padding mask as a rule: in sentence ``b``, only keys ``0..lengths[b] - 1`` are real.

    Built step by step in ``notebooks/20_flex_attention.ipynb``. ``True`` = **may attend** (a real token), as
    :func:`~attention_lib.padding_mask` (the **opposite** of ``nn.MultiheadAttention``'s ``key_padding_mask``).

    Args:
        lengths: ``(B,)``, the number of real tokens of each sentence: a 1-D integer tensor or a list of ints.

    Returns:
        A mask_mod ``(b, h, q_idx, kv_idx) -> bool`` that reads ``lengths[b]``.

    Raises:
        TypeError: if ``lengths`` is not a list of ints or an integer tensor.
        ValueError: if ``lengths`` is not 1-D or has a negative entry.

    Example:
        >>> padding_mod([3, 1])(torch.tensor([[0], [1]]), 0, 0, torch.arange(4)).int()
        tensor([[1, 1, 1, 0],
                [1, 0, 0, 0]], dtype=torch.int32)
    """
    lengths = _integers(lengths, "lengths", "the number of real tokens of each sentence, e.g. [3, 1]")

    def padding(b, h, q_idx, kv_idx):
        return kv_idx < lengths[b]

    return padding


def document_mod(document_ids):
    """Documents packed in one sequence, as a rule: a query may attend only to keys of its own document.

    Built step by step in ``notebooks/20_flex_attention.ipynb``. ``True`` = **may attend**. Several short texts are
    often packed end to end into one long row, so that no position is wasted on padding; ``document_ids[j]`` says
    which text position ``j`` belongs to. Combine it with :func:`causal_mod` (``and_masks``) for a language model.

    Args:
        document_ids: ``(S,)``, an integer tensor (or list of ints) with one document number per position.

    Returns:
        A mask_mod ``(b, h, q_idx, kv_idx) -> bool`` for self-attention over those ``S`` positions.

    Raises:
        TypeError: if ``document_ids`` is not a list of ints or an integer tensor.
        ValueError: if it is not 1-D or has a negative entry.

    Example:
        >>> document_mod([0, 0, 1])(0, 0, torch.tensor([[0], [1], [2]]), torch.arange(3)).int()
        tensor([[1, 1, 0],
                [1, 1, 0],
                [0, 0, 1]], dtype=torch.int32)
    """
    document_ids = _integers(document_ids, "document_ids", "one document number per position, e.g. [0, 0, 1, 1, 1]")

    def same_document(b, h, q_idx, kv_idx):
        return document_ids[q_idx] == document_ids[kv_idx]

    return same_document


def prefix_lm_mod(prefix_length):
    """Prefix-LM as a rule: every query sees the whole prefix (the prompt, read both ways) and is causal after it.

    Built step by step in ``notebooks/20_flex_attention.ipynb``. ``True`` = **may attend**: ``kv_idx <= q_idx`` or
    ``kv_idx < prefix_length`` (the causal rule ``or`` the prefix): the prefix language model compared in the T5 paper
    (Raffel et al., 2020), and how PaliGemma reads its image and prompt.

    Args:
        prefix_length: the length of the prefix, a non-negative int, or one per sentence as a list or an
            integer tensor ``(B,)``.

    Returns:
        A mask_mod ``(b, h, q_idx, kv_idx) -> bool``.

    Raises:
        TypeError: if ``prefix_length`` is not an int, a list of ints or an integer tensor.
        ValueError: if a length is negative, or the lengths are not 1-D.

    Example:
        >>> prefix_lm_mod(2)(0, 0, torch.tensor([[0], [1], [2]]), torch.arange(3)).int()
        tensor([[1, 1, 0],
                [1, 1, 0],
                [1, 1, 1]], dtype=torch.int32)
    """
    if is_int(prefix_length):
        prefix = check_int(prefix_length, "prefix_length", minimum=0, fix="pass how many tokens the prefix holds.")

        def prefix_lm(b, h, q_idx, kv_idx):
            return (kv_idx <= q_idx) | (kv_idx < prefix)

        return prefix_lm
    lengths = _integers(prefix_length, "prefix_length", "an int, or one prefix length per sentence, e.g. [3, 2]")

    def prefix_lm_per_sentence(b, h, q_idx, kv_idx):
        return (kv_idx <= q_idx) | (kv_idx < lengths[b])

    return prefix_lm_per_sentence


def _shift(L, S) -> int:
    fix = "pass the numbers of queries and keys, e.g. q.size(-2) and k.size(-2)."
    return check_int(S, "S", minimum=0, fix=fix) - check_int(L, "L", minimum=0, fix=fix)


def _integers(values, name: str, said: str) -> torch.Tensor:
    """``values`` as a 1-D integer tensor with no negative entry, or a clear error."""
    if isinstance(values, list | tuple):
        if not all(is_int(x) for x in values):
            raise TypeError(f"{name} must be a list of ints ({said}), but got {values!r}.")
        values = torch.tensor(values, dtype=torch.long)
    check_is_tensor(values, name)
    if values.dtype == torch.bool or values.is_floating_point() or values.is_complex():
        raise TypeError(f"{name} must hold integers ({said}), but {name}.dtype={values.dtype}; convert it with "
                        f".long().")
    if values.dim() != 1:
        raise ValueError(f"{name} must be 1-D ({said}), but {name}.shape={tuple(values.shape)}.")
    if values.numel() and int(values.min()) < 0:
        raise ValueError(f"{name} must be non-negative ({said}), but {name}={values.tolist()}.")
    return values
