"""Lesson 17's experiments: the cache bill of published models, the memory that caches reserve and leave unused, and
the bug gallery of latent and paged caches, each bug measured.

Built step by step in ``notebooks/17_latent_and_paged.ipynb``. The three bugs run without an error:

- ``"latent rotated, not the rotary key"``: RoPE applied to the cached latent instead of the decoupled key;
- ``"block table off by one block"``: position ``p`` read from block ``table[p // B - 1]``;
- ``"copy-on-write forgotten"``: a forked sequence writes into the block it shares with its sibling.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch

from ..bench.serving import MLA_SHAPE, time_mla
from ..generation import generate
from ..latent import LatentCache, MultiHeadLatentAttention
from ..paged import BlockPool, PagedCache, PagedModel, read_blocks
from ..positions import RotaryPositions
from ..training.generation import VOCAB, encode, load_lm, make_texts, prompts_before_the_verb, verb_agreement

#: This lesson's experiments, and what it uses of others' (lesson 15's model and grammar, the benchmark's timing).
__all__ = ["CONFIGS", "MLA_SHAPE", "NoCopyOnWrite", "OffByOneBlock", "VOCAB", "cache_error", "continue_alone",
           "continue_forks", "encode", "latent_bug", "load_lm", "make_texts", "numbers_per_token", "paged_bugs",
           "prompts_before_the_verb", "time_mla", "verb_agreement", "wasted_memory", "with_rope_bug",
           "with_rotated_latent"]

#: Published attention shapes, with where they are published: heads ``H``, key/value heads ``Hkv``, head size
#: ``Dh`` (MLA: the latent ``r`` and the rotary key ``Dr``), layers. "as ..." rows are DeepSeek-V3's heads
#: (key 128 + 64, value 128) with another attention, for comparison.
CONFIGS = [
    {"model": "Llama 2 7B", "kind": "MHA", "H": 32, "Hkv": 32, "Dk": 128, "Dv": 128, "layers": 32,
     "source": "meta-llama/Llama-2-7b-hf config.json (Hugging Face)"},
    {"model": "Llama 2 70B", "kind": "GQA", "H": 64, "Hkv": 8, "Dk": 128, "Dv": 128, "layers": 80,
     "source": "meta-llama/Llama-2-70b-hf config.json (Hugging Face); its 8 key/value heads: Touvron et al. "
               "2023, Llama 2, Appendix A.2.1"},
    {"model": "Llama 3 8B", "kind": "GQA", "H": 32, "Hkv": 8, "Dk": 128, "Dv": 128, "layers": 32,
     "source": "meta-llama/Meta-Llama-3-8B config.json (Hugging Face)"},
    {"model": "Llama 3 70B", "kind": "GQA", "H": 64, "Hkv": 8, "Dk": 128, "Dv": 128, "layers": 80,
     "source": "meta-llama/Meta-Llama-3-70B config.json (Hugging Face)"},
    {"model": "Falcon 7B", "kind": "MQA", "H": 71, "Hkv": 1, "Dk": 64, "Dv": 64, "layers": 32,
     "source": "tiiuae/falcon-7b config.json (Hugging Face; multi_query)"},
    {"model": "DeepSeek-V2", "kind": "MLA", "H": 128, "r": 512, "Dr": 64, "layers": 60,
     "source": "deepseek-ai/DeepSeek-V2 config.json (Hugging Face); DeepSeek-AI 2024, arXiv:2405.04434"},
    {"model": "DeepSeek-V3", "kind": "MLA", "H": 128, "r": 512, "Dr": 64, "layers": 61,
     "source": "deepseek-ai/DeepSeek-V3 config.json (Hugging Face); DeepSeek-AI 2024, arXiv:2412.19437"},
    {"model": "DeepSeek-V3 as MHA", "kind": "MHA", "H": 128, "Hkv": 128, "Dk": 192, "Dv": 128, "layers": 61,
     "source": "V3's heads (qk_nope 128 + qk_rope 64, v 128), every head's 192-wide key and value "
               "cached; DeepSeek-V2's Table 1 counts MHA as 2·H·Dh, 2 · 128 · 128 = 32,768"},
    {"model": "DeepSeek-V3 as GQA-8", "kind": "GQA", "H": 128, "Hkv": 8, "Dk": 192, "Dv": 128, "layers": 61,
     "source": "V3's heads, 8 key/value heads"},
    {"model": "DeepSeek-V3 as MQA", "kind": "MQA", "H": 128, "Hkv": 1, "Dk": 192, "Dv": 128, "layers": 61,
     "source": "V3's heads, 1 key/value head"},
]


def numbers_per_token(config: dict) -> int:
    """Numbers cached per token per layer: ``Hkv · (Dk + Dv)``, or ``r + Dr`` for MLA.

    Built step by step in ``notebooks/17_latent_and_paged.ipynb``.

    Example:
        >>> numbers_per_token(CONFIGS[0]), numbers_per_token(CONFIGS[6]), numbers_per_token(CONFIGS[7])
        (8192, 576, 40960)
    """
    if config["kind"] == "MLA":
        return config["r"] + config["Dr"]
    return config["Hkv"] * (config["Dk"] + config["Dv"])


def wasted_memory(lengths: Sequence[int], reserve: int, block_sizes: Sequence[int] = (4, 16, 64)
                  ) -> list[dict]:
    """Positions reserved and left unused by requests of ``lengths``: contiguous caches of ``reserve`` positions
    each, then paged caches in blocks of each size, counted on a real :class:`~attention_lib.BlockPool`.

    Built step by step in ``notebooks/17_latent_and_paged.ipynb``. Each request writes its tokens into its own
    :class:`~attention_lib.PagedCache`; the blocks taken from the pool are what it reserves.

    Returns:
        ``[{"cache": name, "reserved": positions, "used": positions, "unused": share}]``.

    Example:
        >>> [(row["cache"], row["reserved"]) for row in wasted_memory([5, 9], reserve=16, block_sizes=(4,))]
        [('contiguous, 16 each', 32), ('blocks of 4', 20)]
    """
    used = sum(lengths)
    rows = [{"cache": f"contiguous, {reserve} each", "reserved": reserve * len(lengths), "used": used}]
    for B in block_sizes:
        pool = BlockPool(B * -(-reserve // B) * len(lengths), B)
        for n in lengths:
            PagedCache(pool, num_layers=1).update(torch.zeros(1, 1, n, 1), torch.zeros(1, 1, n, 1), 0)
        rows.append({"cache": f"blocks of {B}", "reserved": (pool.num_blocks - pool.num_free) * B, "used": used})
    return [row | {"unused": 1 - row["used"] / row["reserved"]} for row in rows]


class _RopeBug(MultiHeadLatentAttention):
    """The bug: RoPE turns the latent (keys and values are made from it) if ``turn_latent``, and the decoupled
    rotary key only if ``turn_key``."""

    turn_latent, turn_key = True, False

    def compress(self, x, offset=0):
        latent, k_rope = self.kv_a_proj_with_mqa(x).split([self.kv_rank, self.rope_dim], dim=-1)
        latent, k_rope = self.kv_a_layernorm(latent)[:, None], k_rope[:, None]
        if self.turn_latent:
            latent = RotaryPositions(self.kv_rank, self.rotary.base)(latent, offset)
        return latent, self.rotary(k_rope, offset) if self.turn_key else k_rope


def with_rope_bug(model, *, turn_latent: bool, turn_key: bool):
    """A copy of a :class:`~attention_lib.TinyLatentLM` whose layers turn the latent (``turn_latent``) and the
    rotary key (``turn_key``) by position; the right model is ``turn_latent=False, turn_key=True``.

    Built step by step in ``notebooks/17_latent_and_paged.ipynb``, where each half of the gallery's bug is
    measured alone.

    Example:
        >>> from attention_lib import TinyLatentLM
        >>> m = TinyLatentLM(vocab_size=10, embed_dim=16, num_heads=2, num_layers=1, kv_rank=8, rope_dim=4,
        ...                  nope_dim=8, v_dim=8)
        >>> ids = torch.tensor([[1, 2, 3]])
        >>> right = with_rope_bug(m, turn_latent=False, turn_key=True)
        >>> torch.allclose(right(ids).logits, m(ids).logits)
        True
    """
    broken = copy.deepcopy(model)
    for block in broken.layers:
        block.self_attn.__class__ = _RopeBug
        block.self_attn.turn_latent, block.self_attn.turn_key = turn_latent, turn_key
    return broken


def with_rotated_latent(model):
    """The gallery's bug, :func:`with_rope_bug` with the latent turned and the rotary key not: a model bug (its
    cache reads right, :func:`cache_error`), so its logits are not DeepSeek's after position 0."""
    return with_rope_bug(model, turn_latent=True, turn_key=False)


@torch.no_grad()
def cache_error(model, ids: torch.Tensor) -> float:
    """Largest logit difference between reading ``ids (N, T)`` token by token through a
    :class:`~attention_lib.LatentCache` and one whole causal pass of the same model: what a cache test checks."""
    cache = LatentCache(len(model.layers), ids.shape[1])
    steps = torch.cat([model(ids[:, t:t + 1], cache).logits for t in range(ids.shape[1])], dim=1)  # (N, T, vocab)
    return (steps - model(ids).logits).abs().max().item()


class OffByOneBlock(PagedCache):
    """The bug: the keys of block ``j`` are read from the table's entry ``j - 1`` (the first from the last)."""

    def gather(self, layer_idx):
        S, table = self._seen[layer_idx], self._table(self.pool.keys[layer_idx].device).roll(1, dims=1)
        return read_blocks(self.pool.keys[layer_idx], table, S), read_blocks(self.pool.values[layer_idx], table, S)


class NoCopyOnWrite(PagedCache):
    """The bug: a shared, part-full block is written in place, over what its sibling wrote there."""

    def _make_room(self, start, end):
        for t in self.tables:
            while len(t) * self.pool.block_size < end:
                t.append(self.pool.allocate())
                self._tables_tensor = None

    def fork(self, index=0):
        child = super().fork(index)
        child.__class__ = NoCopyOnWrite
        return child


@torch.no_grad()
def continue_forks(model, prompt: torch.Tensor, max_new_tokens: int, *, block_size: int = 4,
                   cache_class: type = PagedCache) -> list[torch.Tensor]:
    """Read ``prompt (1, P)`` once, fork it, and write two greedy continuations, taking turns, as a server does:
    one from the best first token, one from the second best. Returns the two texts ``(1, P + max_new_tokens)``."""
    pool = BlockPool(64 * block_size, block_size)
    parent = cache_class(pool, len(model.layers))
    logits = model(prompt, parent).logits[:, -1]
    caches, texts = [parent, parent.fork()], []
    firsts = logits.topk(2, dim=-1).indices.T[:, :, None]  # (2, 1, 1): the best and the second best
    texts = [torch.cat([prompt, first], dim=1) for first in firsts]
    for _ in range(max_new_tokens - 1):
        for i, cache in enumerate(caches):  # turns: the parent writes, then its sibling
            step = model(texts[i][:, -1:], cache).logits[:, -1]
            texts[i] = torch.cat([texts[i], step.argmax(-1, keepdim=True)], dim=1)
    return texts


@torch.no_grad()
def _read_right(model, texts: Sequence[torch.Tensor], P: int, caches: Sequence) -> list[bool]:
    """Feed each text after its prompt (already in ``caches[i]``) one token at a time, taking turns; is every
    step's logits row the one a whole causal pass gives (within 1e-4)?"""
    right, whole = [True] * len(texts), [model(text).logits for text in texts]  # (1, T, vocab) each
    for t in range(P, texts[0].shape[1]):
        for i, (text, cache) in enumerate(zip(texts, caches, strict=True)):
            step = model(text[:, t:t + 1], cache).logits[:, -1]
            right[i] &= bool(torch.allclose(step, whole[i][:, t], atol=1e-4))
    return right


@torch.no_grad()
def continue_alone(model, prompt: torch.Tensor, first: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
    """The reference for :func:`continue_forks`: ``prompt`` and its first token, continued greedily on its own."""
    return generate(model, torch.cat([prompt, first], dim=1), max_new_tokens - 1)


@torch.no_grad()
def paged_bugs(model, prompts: Sequence[torch.Tensor], max_new_tokens: int = 6, *, block_size: int = 4
               ) -> dict[str, dict[str, float]]:
    """What each paged cache does: ``{name: {"right logits": share, "same words": share}}``.

    Built step by step in ``notebooks/17_latent_and_paged.ipynb``. ``"paged"`` and ``"block table off by one
    block"`` continue every prompt greedily on a pool; ``"forked"`` and ``"copy-on-write forgotten"`` read each
    prompt once and continue it twice, taking turns (:func:`continue_forks`). "same words": the share of
    continuations equal to the contiguous cache's (for a fork: to the same continuation written alone); "reads
    right logits": the share of continuations that read their cache right: fed the text token by token, their
    logits are those of one whole causal pass at every step (within 1e-4), as a test of a cache should check.
    """
    counts = {name: {"right logits": 0.0, "same words": 0.0} for name in
              ("paged", "block table off by one block", "forked", "copy-on-write forgotten")}
    for prompt in prompts:
        prompt, P = prompt[None], len(prompt)
        expected = generate(model, prompt, max_new_tokens)
        for name, cache_class in (("paged", PagedCache), ("block table off by one block", OffByOneBlock)):
            paged = PagedModel(model, BlockPool(64 * block_size, block_size), cache_class)
            counts[name]["same words"] += torch.equal(generate(paged, prompt, max_new_tokens), expected)
            cache = cache_class(BlockPool(64 * block_size, block_size), len(model.layers))
            model(prompt, cache)
            counts[name]["right logits"] += _read_right(model, [expected], P, [cache])[0]
        firsts = model(prompt).logits[:, -1].topk(2, dim=-1).indices.T[:, :, None]  # the best, the second best
        truth = [continue_alone(model, prompt, first, max_new_tokens) for first in firsts]
        for name, cache_class in (("forked", PagedCache), ("copy-on-write forgotten", NoCopyOnWrite)):
            texts = continue_forks(model, prompt, max_new_tokens, block_size=block_size, cache_class=cache_class)
            counts[name]["same words"] += sum(map(torch.equal, texts, truth)) / 2
            parent = cache_class(BlockPool(64 * block_size, block_size), len(model.layers))
            model(prompt, parent)
            counts[name]["right logits"] += sum(_read_right(model, truth, P, [parent, parent.fork()])) / 2
    return {name: {k: v / len(prompts) for k, v in c.items()} for name, c in counts.items()}


@torch.no_grad()
def latent_bug(ours, theirs, prompts: torch.Tensor, max_new_tokens: int = 6) -> dict[str, dict[str, float]]:
    """Our copy of a DeepSeek-V3 model, right and with :func:`with_rotated_latent`, against ``theirs``
    (transformers'): ``{name: {"right logits": share of prompts with its logits (within 1e-4), "same words": share
    with its greedy tokens}}``. ``prompts`` is ``(N, P)``. The rotated latent is a bug of the model, not of its
    cache (that reads right, :func:`cache_error`): right logits here are transformers', not the model's own.

    Built step by step in ``notebooks/17_latent_and_paged.ipynb``.
    """
    reference = theirs(prompts).logits
    words = theirs.generate(prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=max_new_tokens,
                            do_sample=False, pad_token_id=0)
    out = {}
    for name, model in (("latent model", ours), ("latent rotated, not the rotary key", with_rotated_latent(ours))):
        logits = model(prompts).logits
        right = [bool((a - b).abs().max() < 1e-4) for a, b in zip(logits, reference, strict=True)]
        same = [torch.equal(a, b) for a, b in zip(generate(model, prompts, max_new_tokens), words, strict=True)]
        out[name] = {"right logits": sum(right) / len(right), "same words": sum(same) / len(same)}
    return out
