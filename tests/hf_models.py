"""The tiny random ``transformers`` models that the tests compare the package against (made from a config, no
download), with weights larger than transformers' default, so that greedy tokens are far from ties."""

import torch


def far_from_ties(model):
    """Draw every matrix from N(0, 0.1) and every vector (norms) from U(0.5, 1.5), in place; returns ``model``."""
    with torch.no_grad():
        for p in model.parameters():  # larger than the default 0.02, so that tokens are far from ties
            p.normal_(0.0, 0.1) if p.dim() == 2 else p.uniform_(0.5, 1.5)
    return model


def hf_llama(seed=0, vocab_size=50, **overrides):
    """A tiny random LlamaForCausalLM: hidden 64, 4 heads, 2 key/value heads, 2 layers, weights of std 0.1."""
    import transformers

    settings = {"vocab_size": vocab_size, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
                "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64,
                "bos_token_id": None, "eos_token_id": None, "pad_token_id": None} | overrides
    torch.manual_seed(seed)
    return far_from_ties(transformers.LlamaForCausalLM(transformers.LlamaConfig(**settings)).eval())
