"""Exercise checkers, one module per concept; each checker returns a friendly :class:`CheckResult`.

Each lesson states an exercise, gives a stub, and calls its checker here; the runnable solutions live in
``notebooks/solutions/``.
"""

from ._checker import CheckResult, check_function
from ._crashes import explain_crash
from .blend import check_calculate_attention
from .cocktail_party import check_tune_in
from .detective_team import check_merge_heads, check_split_heads
from .flex_attention import check_document_window
from .generation import check_bug_predictions, check_decoding_step
from .induction_heads import check_induction_score, check_previous_token_score, check_where_induction_looks
from .learning_to_attend import check_reversal_target, check_where_it_looks
from .library_search import check_soft_lookup
from .masking import check_masked_softmax, check_window_mask
from .matchmaker import check_matchmaker
from .memory_efficient import check_online_softmax_update
from .no_loops import check_weights_no_loops
from .percentages import check_log_softmax
from .predictions import check_prediction
from .scaler import check_scaled_scores
from .triton_kernel import check_attention_kernel, check_causal_kernel
from .welcome import check_scores_shape
from .word_order import check_cross_attention, check_sinusoidal_encoding
from .word_order.shuffles import check_shuffle_predictions

__all__ = [
    "CheckResult",
    "check_attention_kernel",
    "check_bug_predictions",
    "check_causal_kernel",
    "check_calculate_attention",
    "check_cross_attention",
    "check_decoding_step",
    "check_document_window",
    "check_function",
    "check_induction_score",
    "check_log_softmax",
    "check_masked_softmax",
    "check_matchmaker",
    "check_merge_heads",
    "check_online_softmax_update",
    "check_prediction",
    "check_previous_token_score",
    "check_reversal_target",
    "check_scaled_scores",
    "check_scores_shape",
    "check_shuffle_predictions",
    "check_sinusoidal_encoding",
    "check_soft_lookup",
    "check_split_heads",
    "check_tune_in",
    "check_weights_no_loops",
    "check_where_induction_looks",
    "check_where_it_looks",
    "check_window_mask",
    "explain_crash",
]
