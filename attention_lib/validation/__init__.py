"""Argument checks, in one place (this package), with errors a learner can act on.

Every public function of the attention core checks its arguments with these helpers, so the same mistake
gives the same error everywhere. Each message says what was expected, what was found (the value, shape,
dtype or device) and how to fix it. The rule:

- a wrong Python type, or a tensor dtype that cannot work (an integer tensor where numbers are averaged),
  raises ``TypeError``;
- a wrong shape or value (a negative size, a mask that does not broadcast, a probability of 1.5) raises
  ``ValueError``;
- tensors whose dtypes disagree raise :class:`DtypeMismatchError`, both a ``ValueError`` and a ``TypeError``,
  so that either ``except`` clause catches it.

The helpers for plain arguments return the checked value, so a call reads ``L = check_int(L, "L")``:

- :func:`check_int`: an integer (not a bool), at least ``minimum``; :func:`check_index`: an index ``0 .. size - 1``;
- :func:`check_number`: a real number (not a bool), finite, optionally positive or at least ``minimum``;
- :func:`is_int`, :func:`is_number`: the same tests as a bool, for checkers that answer with a message;
- :func:`check_probability`: a number in ``[0, 1)`` (dropout);
- :func:`check_bool`: ``True`` or ``False``;
- :func:`check_is_tensor`, :func:`check_tensor`: a tensor; a floating-point tensor with enough dimensions;
- :mod:`~attention_lib.validation.tensors`: query, key, value, masks and SDPA's options together;
  :mod:`~attention_lib.validation.modules`: the inputs of whole modules (``MultiHeadAttention``, token ids).

Example:
    >>> check_int(3, "num_heads", minimum=1)
    3
    >>> check_int(2.0, "num_heads")
    Traceback (most recent call last):
    ...
    TypeError: num_heads must be an int, but got float (2.0).
"""

from .modules import check_multihead_inputs, check_rotary, check_token_ids
from .tensors import (
    check_batch_broadcasts,
    check_is_tensor,
    check_mask,
    check_options,
    check_qkv,
    check_query_key,
    check_same_device_and_dtype,
    check_tensor,
    check_weights_value,
    scores_shape,
)
from .values import (
    DtypeMismatchError,
    check_bool,
    check_index,
    check_int,
    check_number,
    check_probability,
    is_int,
    is_number,
)

__all__ = ["DtypeMismatchError", "check_batch_broadcasts", "check_bool", "check_index", "check_int", "check_is_tensor",
           "check_mask", "check_multihead_inputs", "check_number", "check_options", "check_probability", "check_qkv",
           "check_query_key", "check_rotary", "check_same_device_and_dtype", "check_tensor", "check_token_ids",
           "check_weights_value", "is_int", "is_number", "scores_shape"]
