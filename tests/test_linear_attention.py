"""Linear attention and the gated delta rule against each other and against their references: the parallel,
recurrent and chunked forms equal in float64 (several lengths, lengths not a multiple of the chunk, an initial state,
decoding token by token); the gated delta rule equal to transformers' Qwen3-Next reference code (both forms) on
random inputs of several shapes, gates and betas, with and without its L2 norm; the delta rule's overwrite and the
gate's forgetting on inputs whose answer is known; gradients; nothing downloaded; and every error."""

import inspect
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from attention_lib import (
    LinearAttentionState,
    chunk_gated_delta_rule,
    chunk_linear_attention,
    elu_feature_map,
    l2_normalize,
    linear_attention,
    recurrent_gated_delta_rule,
    recurrent_linear_attention,
)

transformers = pytest.importorskip("transformers", reason="transformers is a test dependency: pip install -e .[test]")
from transformers.models.qwen3_next import modeling_qwen3_next as qwen3_next  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
F64 = torch.float64
#: transformers' reference functions without the wrapper that would pick FLA's GPU kernels where FLA is installed.
REFERENCES = {"recurrent": inspect.unwrap(qwen3_next.torch_recurrent_gated_delta_rule),
              "chunk": inspect.unwrap(qwen3_next.torch_chunk_gated_delta_rule)}


def qkv(N=2, H=3, L=11, Dk=4, Dv=5, S=None, dtype=F64, seed=0, key_scale=1.0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(N, H, L, Dk, generator=g, dtype=dtype)
    k = torch.randn(N, H, L if S is None else S, Dk, generator=g, dtype=dtype) * key_scale
    v = torch.randn(N, H, L if S is None else S, Dv, generator=g, dtype=dtype)
    return q, k, v


def gates(N=2, H=3, L=11, dtype=F64, seed=1, decay="random", write="random"):
    g = torch.Generator().manual_seed(seed)
    log_decay = {"none": torch.zeros(N, H, L, dtype=dtype),
                 "strong": -3 * torch.rand(N, H, L, generator=g, dtype=dtype),
                 "random": -torch.rand(N, H, L, generator=g, dtype=dtype) * 0.5}[decay]
    beta = {"zero": torch.zeros(N, H, L, dtype=dtype), "one": torch.ones(N, H, L, dtype=dtype),
            "random": torch.rand(N, H, L, generator=g, dtype=dtype)}[write]
    return log_decay, beta


# -- linear attention: its three forms ---------------------------------------------------------------------------

def test_the_feature_map_is_elu_plus_one_and_positive():
    x = torch.linspace(-30, 5, 101, dtype=F64)
    torch.testing.assert_close(elu_feature_map(x), torch.where(x > 0, x + 1, x.exp()))
    assert (elu_feature_map(x) > 0).all()


@pytest.mark.parametrize(("L", "S"), [(5, 5), (3, 8), (9, 2)])
def test_unmasked_linear_attention_is_the_blend_of_normalised_feature_scores(L, S):
    q, k, v = qkv(L=L, S=S)
    scores = elu_feature_map(q) @ elu_feature_map(k).transpose(-2, -1)     # the regrouping undone: (L, S) written out
    weights = scores / scores.sum(-1, keepdim=True)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, L, dtype=F64))
    torch.testing.assert_close(linear_attention(q, k, v), weights @ v)


@pytest.mark.parametrize("L", [1, 2, 7, 16, 37])
def test_causal_parallel_equals_recurrent_equals_chunked(L):
    q, k, v = qkv(L=L)
    parallel = linear_attention(q, k, v, is_causal=True)
    recurrent, state = recurrent_linear_attention(q, k, v)
    torch.testing.assert_close(parallel, recurrent, rtol=0, atol=1e-12)
    for chunk_size in (1, 3, 8, 64):
        chunked, chunk_state = chunk_linear_attention(q, k, v, chunk_size=chunk_size)
        torch.testing.assert_close(chunked, recurrent, rtol=0, atol=1e-12)
        torch.testing.assert_close(chunk_state.kv, state.kv, rtol=0, atol=1e-12)
        torch.testing.assert_close(chunk_state.k_sum, state.k_sum, rtol=0, atol=1e-12)
    phi_k = elu_feature_map(k)                   # the state is the sums it says it is
    torch.testing.assert_close(state.kv, phi_k.transpose(-2, -1) @ v)
    torch.testing.assert_close(state.k_sum, phi_k.sum(-2))


@pytest.mark.parametrize("split", [1, 4, 9])
@pytest.mark.parametrize("form", ["recurrent", "chunk"])
def test_linear_attention_continues_from_an_initial_state(form, split):
    q, k, v = qkv(L=13)
    whole, whole_state = recurrent_linear_attention(q, k, v)
    run = {"recurrent": recurrent_linear_attention,
           "chunk": lambda *a, **kw: chunk_linear_attention(*a, chunk_size=4, **kw)}[form]
    _, state = run(q[..., :split, :], k[..., :split, :], v[..., :split, :])
    rest, end = run(q[..., split:, :], k[..., split:, :], v[..., split:, :], initial_state=state)
    torch.testing.assert_close(rest, whole[..., split:, :], rtol=0, atol=1e-12)
    torch.testing.assert_close(end.kv, whole_state.kv, rtol=0, atol=1e-12)


def test_decoding_token_by_token_keeps_a_state_of_one_size():
    q, k, v = qkv(L=9)
    whole, _ = recurrent_linear_attention(q, k, v)
    state, shapes = None, set()
    for t in range(9):
        out, state = recurrent_linear_attention(q[..., t:t + 1, :], k[..., t:t + 1, :], v[..., t:t + 1, :],
                                                initial_state=state)
        torch.testing.assert_close(out, whole[..., t:t + 1, :], rtol=0, atol=1e-12)
        shapes.add((tuple(state.kv.shape), tuple(state.k_sum.shape)))
    assert shapes == {((2, 3, 4, 5), (2, 3, 4))}
    assert isinstance(state, LinearAttentionState)


def test_an_empty_sequence_returns_an_empty_output_and_the_initial_state():
    q, k, v = qkv(L=4)
    _, state = recurrent_linear_attention(q, k, v)
    for run in (recurrent_linear_attention, chunk_linear_attention):
        out, same = run(q[..., :0, :], k[..., :0, :], v[..., :0, :], initial_state=state)
        assert out.shape == (2, 3, 0, 5)
        torch.testing.assert_close(same.kv, state.kv)


def test_linear_attention_gradients():
    q, k, v = (x.requires_grad_() for x in qkv(N=1, H=1, L=5, Dk=3, Dv=2))
    assert torch.autograd.gradcheck(lambda q, k, v: linear_attention(q, k, v, is_causal=True), (q, k, v))
    assert torch.autograd.gradcheck(lambda q, k, v: chunk_linear_attention(q, k, v, chunk_size=2)[0], (q, k, v))


# -- the gated delta rule: recurrent == chunked, and what it does --------------------------------------------------

@pytest.mark.parametrize(("L", "chunk_size"), [(1, 4), (8, 8), (13, 4), (37, 16), (40, 64)])
@pytest.mark.parametrize("use_qk_l2norm", [False, True])
def test_chunked_gated_delta_rule_equals_the_recurrent_loop(L, chunk_size, use_qk_l2norm):
    q, k, v = qkv(L=L, key_scale=0.4)
    g, beta = gates(L=L)
    state0 = torch.randn(2, 3, 4, 5, dtype=F64)
    for initial_state in (None, state0):
        out, state = recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=initial_state,
                                                use_qk_l2norm=use_qk_l2norm)
        chunked, chunk_state = chunk_gated_delta_rule(q, k, v, g, beta, chunk_size=chunk_size,
                                                      initial_state=initial_state, use_qk_l2norm=use_qk_l2norm)
        torch.testing.assert_close(chunked, out, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(chunk_state, state, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("split", [3, 10])
def test_gated_delta_rule_continues_from_an_initial_state(split):
    q, k, v = qkv(L=17, key_scale=0.4)
    g, beta = gates(L=17)
    whole, whole_state = recurrent_gated_delta_rule(q, k, v, g, beta)
    _, state = chunk_gated_delta_rule(*(x[..., :split, :] for x in (q, k, v)), g[..., :split], beta[..., :split],
                                      chunk_size=4)
    rest, end = recurrent_gated_delta_rule(*(x[..., split:, :] for x in (q, k, v)), g[..., split:],
                                           beta[..., split:], initial_state=state)
    torch.testing.assert_close(rest, whole[..., split:, :], rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(end, whole_state, rtol=1e-10, atol=1e-10)


def test_the_delta_rule_overwrites_what_a_unit_key_stored():
    key = torch.tensor([0.6, 0.8], dtype=F64)                 # a unit key, written twice with beta = 1, no decay
    k = torch.stack([key, key]).view(1, 1, 2, 2)
    v = torch.tensor([[1.0, 2.0, 3.0], [-4.0, 5.0, 0.5]], dtype=F64).view(1, 1, 2, 3)
    g, beta = torch.zeros(1, 1, 2, dtype=F64), torch.ones(1, 1, 2, dtype=F64)
    out, state = recurrent_gated_delta_rule(k, k, v, g, beta, scale=1.0)
    torch.testing.assert_close(out[0, 0], v[0, 0])                       # each read returns the latest value
    torch.testing.assert_close(key @ state[0, 0], v[0, 0, 1])            # the first value is gone
    torch.testing.assert_close(state[0, 0], torch.outer(key, v[0, 0, 1]))


def test_beta_zero_writes_nothing_and_the_gate_only_forgets():
    q, k, v = qkv(L=6)
    g, beta = gates(L=6, write="zero")
    state0 = torch.randn(2, 3, 4, 5, dtype=F64)
    out, state = recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=state0, scale=1.0)
    kept = g.cumsum(-1).exp()                                             # the product of the decays so far
    torch.testing.assert_close(state, kept[..., -1, None, None] * state0)
    torch.testing.assert_close(out, kept.unsqueeze(-1) * (q @ state0))


def test_gated_delta_rule_gradients():
    q, k, v = qkv(N=1, H=1, L=5, Dk=3, Dv=2, key_scale=0.5)
    g, beta = gates(N=1, H=1, L=5)
    inputs = tuple(x.clone().requires_grad_() for x in (q, k, v, g, beta))
    assert torch.autograd.gradcheck(lambda *a: chunk_gated_delta_rule(*a, chunk_size=2, use_qk_l2norm=True)[0],
                                    inputs)


# -- the gated delta rule against transformers' Qwen3-Next reference ------------------------------------------------

def theirs(name, q, k, v, g, beta, *, initial_state=None, l2=False, chunk_size=None):
    """transformers' reference on our tensors: (N, H, L, E) -> (B, L, H, E) and back."""
    t = lambda x: x.transpose(1, 2)  # noqa: E731
    options = {} if chunk_size is None else {"chunk_size": chunk_size}
    out, state = REFERENCES[name](t(q), t(k), t(v), t(g), t(beta), initial_state=initial_state,
                                  output_final_state=True, use_qk_l2norm_in_kernel=l2, **options)
    return t(out), state


CASES = [  # (N, H, L, Dk, Dv, decay, write)
    (1, 1, 1, 4, 4, "random", "random"),
    (2, 3, 11, 8, 5, "random", "random"),
    (1, 2, 33, 16, 16, "strong", "one"),
    (3, 1, 20, 4, 6, "none", "random"),
    (1, 4, 70, 8, 8, "random", "zero"),
]


@pytest.mark.parametrize(("N", "H", "L", "Dk", "Dv", "decay", "write"), CASES)
@pytest.mark.parametrize("l2", [False, True])
@pytest.mark.parametrize("name", ["recurrent", "chunk"])
def test_gated_delta_rule_equals_transformers_qwen3_next(name, l2, N, H, L, Dk, Dv, decay, write):
    q, k, v = qkv(N, H, L, Dk, Dv, dtype=torch.float32, seed=L, key_scale=1.0 if l2 else Dk ** -0.5)
    g, beta = gates(N, H, L, dtype=torch.float32, seed=L + 1, decay=decay, write=write)
    state0 = torch.randn(N, H, Dk, Dv, generator=torch.Generator().manual_seed(L + 2))
    chunk_size = 16
    for initial_state in (None, state0):
        ref_out, ref_state = theirs(name, q, k, v, g, beta, initial_state=initial_state, l2=l2,
                                    chunk_size=chunk_size if name == "chunk" else None)
        ours = (recurrent_gated_delta_rule if name == "recurrent" else
                lambda *a, **kw: chunk_gated_delta_rule(*a, chunk_size=chunk_size, **kw))
        out, state = ours(q, k, v, g, beta, initial_state=initial_state, use_qk_l2norm=l2)
        torch.testing.assert_close(out, ref_out, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(state, ref_state, rtol=1e-4, atol=1e-5)


def test_l2_normalize_equals_transformers_l2norm():
    x = torch.randn(3, 5, 7)
    torch.testing.assert_close(l2_normalize(x), qwen3_next.l2norm(x, dim=-1, eps=1e-6))
    torch.testing.assert_close(l2_normalize(torch.zeros(2, 3)), torch.zeros(2, 3))


def test_nothing_is_downloaded():
    """transformers' reference and ours, run with the network cut: no connection is attempted and both agree."""
    program = textwrap.dedent("""
        import os, socket
        os.environ["HF_HUB_OFFLINE"] = "1"
        attempts = []
        def refuse(*args, **kwargs):
            attempts.append(args)
            raise OSError("network access attempted")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        import torch
        from transformers.models.qwen3_next.modeling_qwen3_next import torch_chunk_gated_delta_rule as ref
        import attention_lib as al
        q, k, v = torch.randn(1, 9, 2, 4), torch.randn(1, 9, 2, 4), torch.randn(1, 9, 2, 3)
        g, beta = -torch.rand(1, 9, 2), torch.rand(1, 9, 2)
        theirs, _ = ref(q, k, v, g, beta, chunk_size=4, use_qk_l2norm_in_kernel=True)
        t = lambda x: x.transpose(1, 2)
        ours, _ = al.chunk_gated_delta_rule(t(q), t(k), t(v), t(g), t(beta), chunk_size=4, use_qk_l2norm=True)
        print(len(attempts), torch.allclose(t(ours), theirs, atol=1e-5))
    """)
    run = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "HOME": str(ROOT)})
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["0", "True"], run.stdout + run.stderr


# -- errors ------------------------------------------------------------------------------------------------------

def test_errors_of_linear_attention():
    q, k, v = qkv(L=4)
    with pytest.raises(TypeError, match="x must be a floating-point tensor, but got list"):
        elu_feature_map([1.0])
    with pytest.raises(TypeError, match="must be a floating-point tensor"):
        elu_feature_map(torch.tensor([1, 2]))
    with pytest.raises(TypeError, match="is_causal must be"):
        linear_attention(q, k, v, is_causal=1)
    with pytest.raises(ValueError, match="one key per query"):
        linear_attention(q, k[..., :3, :], v[..., :3, :], is_causal=True)
    with pytest.raises(ValueError, match="one key per query"):
        recurrent_linear_attention(q, k[..., :3, :], v[..., :3, :])
    with pytest.raises(ValueError, match="same leading sizes"):
        linear_attention(q, k[:1], v[:1])
    with pytest.raises(ValueError, match="share the last dimension"):
        linear_attention(q, k[..., :3], v)
    with pytest.raises(TypeError, match="share one dtype"):
        recurrent_linear_attention(q, k.float(), v)
    with pytest.raises(TypeError, match="initial_state must be a LinearAttentionState"):
        recurrent_linear_attention(q, k, v, initial_state=torch.zeros(2, 3, 4, 5, dtype=F64))
    _, state = recurrent_linear_attention(q, k, v)
    with pytest.raises(ValueError, match=r"initial_state.kv must have shape \(2, 3, 4, 5\)"):
        recurrent_linear_attention(q, k, v, initial_state=LinearAttentionState(state.kv[..., :2], state.k_sum))
    with pytest.raises(ValueError, match=r"initial_state.k_sum must have shape \(2, 3, 4\)"):
        chunk_linear_attention(q, k, v, initial_state=LinearAttentionState(state.kv, state.k_sum[0]))
    with pytest.raises(TypeError, match="share one dtype"):
        chunk_linear_attention(q, k, v, initial_state=LinearAttentionState(state.kv.float(), state.k_sum))
    with pytest.raises(ValueError, match="chunk_size must be positive"):
        chunk_linear_attention(q, k, v, chunk_size=0)
    with pytest.raises(TypeError, match="chunk_size must be an int"):
        chunk_linear_attention(q, k, v, chunk_size=2.0)


def test_errors_of_the_gated_delta_rule():
    q, k, v = qkv(L=4)
    g, beta = gates(L=4)
    with pytest.raises(ValueError, match="g is the log of the decay and must be <= 0"):
        recurrent_gated_delta_rule(q, k, v, g.exp(), beta)
    with pytest.raises(ValueError, match=r"beta must have one number per head and position, shape \(2, 3, 4\)"):
        recurrent_gated_delta_rule(q, k, v, g, beta.transpose(1, 2))
    with pytest.raises(ValueError, match=r"g must have one number per head and position"):
        chunk_gated_delta_rule(q, k, v, g[..., :3], beta)
    with pytest.raises(TypeError, match="g must be a floating-point tensor"):
        recurrent_gated_delta_rule(q, k, v, g.long(), beta)
    with pytest.raises(TypeError, match="share one dtype"):
        recurrent_gated_delta_rule(q, k, v, g, beta.float())
    with pytest.raises(ValueError, match=r"initial_state must have shape \(2, 3, 4, 5\)"):
        recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=torch.zeros(2, 3, 5, 4, dtype=F64))
    with pytest.raises(TypeError, match="initial_state must be a torch.Tensor"):
        chunk_gated_delta_rule(q, k, v, g, beta, initial_state=[0.0])
    with pytest.raises(TypeError, match="use_qk_l2norm must be"):
        recurrent_gated_delta_rule(q, k, v, g, beta, use_qk_l2norm="yes")
    with pytest.raises(ValueError, match="scale must be positive"):
        recurrent_gated_delta_rule(q, k, v, g, beta, scale=0.0)
    with pytest.raises(ValueError, match="chunk_size must be positive"):
        chunk_gated_delta_rule(q, k, v, g, beta, chunk_size=-1)
    with pytest.raises(ValueError, match="one key per query"):
        chunk_gated_delta_rule(q, k[..., :2, :], v[..., :2, :], g, beta)
    with pytest.raises(TypeError, match="eps must be a number"):
        l2_normalize(q, eps="small")
    with pytest.raises(TypeError, match="x must be a floating-point tensor"):
        l2_normalize(torch.tensor([3, 4]))
