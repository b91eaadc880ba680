"""The bug gallery of ``notebooks/17_latent_and_paged.ipynb``: predictions of what each bug of the latent and paged
caches does, made before measuring."""

from __future__ import annotations

from collections.abc import Mapping

from .._checker import CheckResult
from ..predictions import AMOUNTS, grade_amounts

#: Why each bug of lesson 17 does what it does.
WHY = {
    "latent rotated, not the rotary key": "A bug of the model, not of its cache (that reads right): the latent makes "
                                          "the values and the position-free keys, so turning it puts absolute "
                                          "positions into both, while the rotary key stays unturned: no logit after "
                                          "the first position is DeepSeek's (at position 0 RoPE turns by nothing), "
                                          "and moving the text changes them.",
    "block table off by one block": "Every continuation outgrows one block, and then its blocks are read in the "
                                    "wrong order (block 0 from its last block, block j from block j - 1); only the "
                                    "words, sometimes, survive.",
    "copy-on-write forgotten": "Only a part-full shared block is overwritten, and only the sibling that wrote "
                               "first reads the other's key: prompts whose last block is full are read right.",
}


def _bands() -> str:
    """The answers with their shares, from :data:`AMOUNTS`: ``"'all' (90 % or more), ..."``."""
    def band(low, high):
        return f"{low:.0%} or more" if high > 1 else f"under {high:.0%}" if low == 0 else f"{low:.0%}-{high:.0%}"
    return ", ".join(f"{word!r} ({band(*bounds)})" for word, bounds in AMOUNTS.items())


def check_gallery_predictions(predictions: Mapping[str, str] | None, gallery: Mapping[str, Mapping[str, float]]
                              ) -> CheckResult:
    """Check predictions, made before measuring, of how many continuations each bug leaves with the right logits.

    Built step by step in ``notebooks/17_latent_and_paged.ipynb``. ``predictions[bug]`` is ``"all"`` (90 % or
    more), ``"most"`` (50-90 %), ``"some"`` (10-50 %) or ``"none"`` (under 10 %), the bands of :data:`AMOUNTS`;
    ``gallery[bug]["right logits"]`` is the measured share: for a cache bug, continuations that read their cache
    right (the logits of one whole causal pass at every step); for the rotated latent, a model bug, prompts that
    give transformers' logits. The measurements and the reasons are shown once every bug has a prediction.

    Example:
        >>> gallery = {"copy-on-write forgotten": {"right logits": 0.7}}
        >>> check_gallery_predictions({"copy-on-write forgotten": "most"}, gallery).status
        'passed'
    """
    name = "what each bug does"
    return grade_amounts(name, predictions, {bug: measured["right logits"] for bug, measured in gallery.items()}, WHY,
                         f"📝 {name}: no predictions yet. Fill in `my_predictions` with one of {_bands()} for each "
                         f"bug, run it, then run this cell again.")
