"""A draft of no layers: a table of the next token's scores after each token (a bigram model), distilled from the
target's own greedy texts.

Built in ``notebooks/18_speculative_decoding.ipynb``. With models this small a decoding step costs Python's work per
layer, so a one-block draft's step costs about half a two-block target's; a table's step is one row lookup. Its rows
count what the target itself writes after each token, which is what greedy verification compares with.
"""

from __future__ import annotations

import torch

from ...generation import generation_steps
from ...llama import LlamaOutput
from ...validation import check_int, check_tensor
from ..generation.texts import END, MAX_LEN, make_texts


class _Length:
    """A table draft's cache: it reads one token to score the next, so it keeps only how many it has read."""

    def __init__(self):
        self.length = 0

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.length

    def crop(self, max_length: int) -> None:
        self.length = min(self.length, max_length)


class TableDraft(torch.nn.Module):
    """A draft with no layers: row ``a`` of ``embed_tokens`` holds the scores of the token after token ``a``.

    It has what :func:`~attention_lib.speculative_generate` asks of a draft: ``embed_tokens`` (the vocabulary),
    ``new_cache`` (which counts the tokens read, and crops) and ``forward(input_ids, cache)`` returning ``.logits``.

    Raises:
        TypeError: if ``scores`` is not a floating-point tensor.
        ValueError: if it is not square, ``(vocab, vocab)``.

    Example:
        >>> draft = TableDraft(torch.eye(3))  # after token a, token a scores best
        >>> draft(torch.tensor([[2, 0]])).logits.argmax(-1)
        tensor([[2, 0]])
    """

    def __init__(self, scores: torch.Tensor):
        super().__init__()
        check_tensor(scores, "scores", min_dim=2)
        if scores.dim() != 2 or scores.shape[0] != scores.shape[1]:
            raise ValueError(f"scores must be (vocab, vocab), a row of next-token scores after each token, but "
                             f"scores.shape={tuple(scores.shape)}; build it with table_draft(target).")
        self.embed_tokens = torch.nn.Embedding.from_pretrained(scores)  # (vocab, vocab)

    def new_cache(self, max_cache_len: int) -> _Length:
        return _Length()

    def forward(self, input_ids: torch.Tensor, cache: _Length | None = None) -> LlamaOutput:
        if cache is not None:
            cache.length += input_ids.shape[1]
        return LlamaOutput(self.embed_tokens(input_ids), cache, None)  # (N, L, vocab)


@torch.no_grad()
def table_draft(target, texts: int = 100, seed: int = 0) -> TableDraft:
    """A bigram table distilled from ``target``: after each token, how often the target writes each token next in
    its own greedy texts from ``texts`` training prompts (``seed``), each written to its full stop.

    Greedy verification keeps a drafted token when it is the target's own choice, so each row's best token is the
    target's most frequent choice after that token. (For speculative sampling, the mean of the target's next-token
    distributions would be the table closest to it in KL divergence; its best token need not be the most frequent
    choice.)

    Built in ``notebooks/18_speculative_decoding.ipynb``.

    Args:
        target: the model to imitate (lesson 15's shipped model).
        texts: how many training prompts (each cut after its first two words) the target writes from.
        seed: the seed of those texts.

    Returns:
        A :class:`TableDraft` in eval mode, its scores the logarithms of the shares (a token never followed by a
        written one proposes the full stop): ``speculative_generate(target, table_draft(target), ...)`` runs as
        with any draft.

    Raises:
        TypeError, ValueError: if ``texts`` is not a positive int or ``seed`` not an int.

    Example:
        >>> from attention_lib.training.generation import load_lm
        >>> table_draft(load_lm("mha", 0)[0], texts=2).embed_tokens.weight.shape
        torch.Size([23, 23])
    """
    texts = check_int(texts, "texts", minimum=1, fix="pass how many prompts the target writes from.")
    seed = check_int(seed, "seed", minimum=0)
    vocab = target.embed_tokens.num_embeddings
    counts = torch.zeros(vocab, vocab)  # counts[a, b]: how often the target wrote b right after a
    for text in make_texts(texts, seed=seed, split="train"):
        for step in generation_steps(target, text[None, :3], MAX_LEN - 3):  # lazy: it stops at the full stop
            if step.new.item() == END:
                break
        written = step.tokens[0]  # the prompt and what the target wrote, up to its full stop
        counts.index_put_((written[2:-1], written[3:]), torch.ones(len(written) - 3), accumulate=True)
    seen = counts.sum(-1, keepdim=True) > 0
    shares = torch.where(seen, counts / counts.sum(-1, keepdim=True).clamp(min=1), torch.eye(vocab)[END])
    return TableDraft(shares.clamp(min=1e-9).log()).eval()
