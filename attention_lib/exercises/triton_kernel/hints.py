"""The hints of lesson 14's kernel checkers (:mod:`~attention_lib.exercises.triton_kernel.checkers`), by the slip
each names, and the catalogues of typical mistakes the tests check are all reached.
"""

from __future__ import annotations

#: Every hint the checkers give for a wrong answer, by the slip it names.
HINTS = {
    "update": "the update is lesson 10's, in base 2: scores = tl.dot(q, tl.trans(k)) * scale * 1.4426950408889634 "
              "(times log2(e)); new_max = tl.maximum(running_max, tl.max(scores, axis=1)); correction = "
              "tl.exp2(running_max - new_max); weights = tl.exp2(scores - new_max[:, None]); then the sum and the "
              "output.",
    "no rescale": "with several tiles of keys the maximum grows: multiply running_sum and running_output by "
                  "correction = tl.exp2(running_max - new_max) before adding this tile's weights, and set "
                  "running_max = new_max for the next tile.",
    "running max": "the new maximum is the larger of the running one and this tile's: new_max = "
                   "tl.maximum(running_max, tl.max(scores, axis=1)). This tile's maximum alone is right while "
                   "scores only grow, but after a tile that scored far higher, tl.exp2(running_max - new_max) "
                   "overflows to inf.",
    "ragged tile unmasked": "the last tile of keys runs past S: load k and v with mask=cols[:, None] < S, other=0.0, "
                            "and give those keys the score -inf with tl.where(cols[None, :] < S, scores, "
                            "float('-inf')) (a score of 0 would still get a weight).",
    "read past the end": "your kernel read past the end of key or value (NaN there): load k and v with "
                         "mask=cols[:, None] < S, other=0.0, and give those keys the score -inf.",
    "inverted mask": "every number of the output is NaN, on a case whose keys are all real and fill whole tiles: "
                     "NaN comes from 0 / 0, inf * 0 or -inf - (-inf). Look at three places: the mask "
                     "(tl.where(cols[None, :] < S, scores, float('-inf')) keeps the scores where the key exists; "
                     "upside down it gives every score -inf); the correction, old minus new, tl.exp2(running_max - "
                     "new_max), which is 0 on the first tile where running_max is -inf (new minus old is inf there, "
                     "and inf * 0 is NaN); and the loop, range(0, S, BLOCK_S), which visits every tile, the last one "
                     "included (a loop that visits none leaves running_sum 0).",
    "edge": "your kernel leaves out the last key, S - 1: key j exists when j < S, so the mask is cols < S (not "
            "cols < S - 1), and the loop over key tiles is range(0, S, BLOCK_S) (not S - 1), whose last tile may "
            "hold one key.",
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
    "wrote outside": "every store must land inside its own tensor, at that tensor's offset and strides: Out + bh * "
                     "out_stride_bh + rows[:, None] * out_stride_l + value_dims[None, :] and Lse + bh * L + rows (not "
                     "another tensor's strides, such as q_stride_l), with mask=rows < L.",
    "lse heads": "your log-sum-exp of every head lands in the same place: store it at this head's offset, Lse + "
                 "bh * L + rows, with mask=rows < L.",
    "precision": "your output is close, but not within float32's tolerance: a step loses precision, such as weights "
                 "cast to float16 or bfloat16 before tl.dot (weights.to(tl.float16)), or a dot in lower precision. "
                 "Keep the weights, the running numbers and the dots in float32 (input_precision=PRECISION).",
    "full_end off a tile": "your two loops visit some keys twice (or skip some): the unmasked loop ends at full_end "
                           "and the masked one starts there, so full_end must be where a tile starts, and no later "
                           "than the tile holding the block's first query: full_end = block * BLOCK_L // BLOCK_S * "
                           "BLOCK_S (counted in queries, BLOCK_L, then rounded down to a tile of BLOCK_S).",
    "key_end short": "the masked loop must reach the block's last query, (block + 1) * BLOCK_L - 1: stop at key_end = "
                     "tl.minimum(S, (block + 1) * BLOCK_L), not at the block's first query.",
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
    "row strides": "the rows of q, k and v are not HEAD_DIM (or VALUE_DIM) apart here, and each has its own "
                   "distance: they are views into packed buffers, whose rows are 48, 40 and 24 numbers apart. Step "
                   "from row to row with each tensor's own stride: rows[:, None] * q_stride_l, cols[:, None] * "
                   "k_stride_s, cols[:, None] * v_stride_s, rows[:, None] * out_stride_l.",
    "out row stride": "the rows of the output are not VALUE_DIM apart here: Out is a view whose rows are 24 numbers "
                      "apart (16 values, then 8 more), as a slice of a wider tensor is. Store row i at its own "
                      "distance, rows[:, None] * out_stride_l, never rows[:, None] * VALUE_DIM.",
    "read outside": "your kernel read past {which} (into the padding after it, which holds NaN here): every load "
                    "must stay inside the tensor, at its own offset and strides, with mask=cols[:, None] < S (keys "
                    "and values) or rows[:, None] < L (queries) on the tiles that run past the end.",
    "full_end past S": "with IS_CAUSAL and more queries than keys (L > S), a block's first query can lie past the last "
                       "key, and full_end = block * BLOCK_L // BLOCK_S * BLOCK_S then runs past S: take the smaller "
                       "of the two, full_end = tl.minimum(S // BLOCK_S * BLOCK_S, block * BLOCK_L // BLOCK_S * "
                       "BLOCK_S), so that the unmasked loop never passes S's last full tile.",
    "tiles past S": "with IS_CAUSAL and more queries than keys (L > S), (block + 1) * BLOCK_L runs past S in the last "
                    "blocks, and the loop visits tiles where no key exists: stop it at the smaller of the two, "
                    "key_end = tl.minimum(S, (block + 1) * BLOCK_L), so that it ends with the last key.",
    "full tiles masked": "right, but your kernel loads {masked} of its {loads} tiles of keys with a mask where "
                         "{needed} need one: the full tiles (every key exists and, with IS_CAUSAL, comes before every "
                         "query of the block) need none. Loop over them first without masks, start in range(0, "
                         "full_end, BLOCK_S), then over the edge tiles from full_end to key_end with masks; full_end "
                         "is where the tile holding the block's first query starts (and never past S's last full "
                         "tile).",
    "full tiles selected": "right, but your kernel masks the scores (tl.where) in {selected} of its {loads} tiles of "
                           "keys that need no mask: the full tiles before the diagonal, where every key exists and "
                           "comes before every query of the block. The mask changes no number there and costs time "
                           "on every tile: apply the causal tl.where only in the edge tiles (inside `if MASKED:`).",
}


def _mistakes(*slips: str) -> list[tuple[str, str]]:
    """``(slip, the fixed part of its hint)`` for each slip."""
    return [(slip, HINTS[slip].format(which="keys and values") if slip == "heads share keys" else
             HINTS[slip].split("{needed} need one: ")[-1].split("{which} ")[-1].split("{loads} tiles of ")[-1])
            for slip in slips]


#: The hints :func:`check_attention_kernel` gives for wrong answers (a crash on ``Ev != E`` names VALUE_DIM too).
MISTAKES = _mistakes("update", "no rescale", "running max", "ragged tile unmasked", "read past the end",
                     "inverted mask", "edge", "no division", "heads", "heads share keys", "blocks", "row strides",
                     "out row stride", "read outside", "wrote past", "lse", "lse in base 2", "lse heads", "precision")
#: The hints :func:`check_causal_kernel` adds.
CAUSAL_MISTAKES = _mistakes("no causal mask", "own key lost", "future tiles visited", "key_end in BLOCK_S",
                            "full_end past S", "full tiles masked", "full_end off a tile", "key_end short",
                            "full tiles selected", "tiles past S")
