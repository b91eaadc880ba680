"""The exercises of ``notebooks/14_triton_kernel.ipynb``: the attention kernel (several heads, ``Ev != E``), then its
causal version, FlashAttention's way (:mod:`~attention_lib.exercises.triton_kernel.checkers`), on the cases of
:mod:`~attention_lib.exercises.triton_kernel.cases`."""

from .cases import CASES, CAUSAL_CASES, case_inputs
from .checkers import check_attention_kernel, check_causal_kernel
from .hints import CAUSAL_MISTAKES, HINTS, MISTAKES

__all__ = ["CASES", "CAUSAL_CASES", "CAUSAL_MISTAKES", "HINTS", "MISTAKES", "case_inputs", "check_attention_kernel",
           "check_causal_kernel"]
