"""Answers to lesson 16's hop-loop exercise, right and wrong, for tests/test_ring_hop_loop.py: module-level, so
that the ring's processes import them by name (as they would a notebook's, sent as source)."""

import math

import torch

from attention_lib import online_softmax_update


def _start(query, value):
    return (query.new_full((*query.shape[:-1], 1), -math.inf), query.new_zeros(*query.shape[:-1], 1),
            query.new_zeros(*query.shape[:-1], value.shape[-1]))


def ring(query, key, value, positions, rank, is_causal, pass_on):
    """The answer: fold the chunk held, then pass it on (P - 1 passes)."""
    world, scale = len(positions), 1 / math.sqrt(query.shape[-1])
    state, k, v = _start(query, value), key, value
    for hop in range(world):
        source = (rank - hop) % world
        scores = query @ k.transpose(-2, -1) * scale
        allowed = positions[source][None, :] <= positions[rank][:, None]
        if not is_causal or allowed.any():
            if is_causal:
                scores = scores.masked_fill(~allowed, -math.inf)
            state = online_softmax_update(*state, scores, v)
        if hop < world - 1:
            k, v = pass_on(k, v)
    return state[2] / state[1]


def ring_passing_first(query, key, value, positions, rank, is_causal, pass_on):
    """Also right: receive the next chunk before folding the one held (both held at once, as the package does)."""
    world, scale = len(positions), 1 / math.sqrt(query.shape[-1])
    state, k, v = _start(query, value), key, value
    for hop in range(world):
        incoming = pass_on(k, v) if hop < world - 1 else None
        future = positions[(rank - hop) % world][None, :] > positions[rank][:, None]
        if not (is_causal and bool(future.all())):  # a chunk wholly in the future is not folded
            scores = (query * scale) @ k.mT
            state = online_softmax_update(*state, scores.masked_fill(future, -math.inf) if is_causal else scores, v)
        if incoming is not None:
            k, v = incoming
    return state[2] / state[1]


def folds_the_future(query, key, value, positions, rank, is_causal, pass_on):
    """Right numbers, but a chunk whose every key is in the future is folded too (a row of -inf changes nothing)."""
    world, scale = len(positions), 1 / math.sqrt(query.shape[-1])
    state, k, v = _start(query, value), key, value
    for hop in range(world):
        incoming = pass_on(k, v) if hop < world - 1 else None
        scores = (query * scale) @ k.mT
        if is_causal:
            scores = scores.masked_fill(positions[(rank - hop) % world] > positions[rank][:, None], -math.inf)
        state = online_softmax_update(*state, scores, v)
        if incoming is not None:
            k, v = incoming
    return state[2] / state[1]


def one_pass_too_many(query, key, value, positions, rank, is_causal, pass_on):
    """Right numbers, but a pass after the last fold: world passes, the last chunk sent for nothing."""
    world, scale = len(positions), 1 / math.sqrt(query.shape[-1])
    state, k, v = _start(query, value), key, value
    for hop in range(world):
        scores = query @ k.transpose(-2, -1) * scale
        allowed = positions[(rank - hop) % world][None, :] <= positions[rank][:, None]
        if not is_causal or allowed.any():
            state = online_softmax_update(*state, scores.masked_fill(~allowed, -math.inf) if is_causal else scores, v)
        k, v = pass_on(k, v)
    return state[2] / state[1]


def scaled_by_value_size(query, key, value, positions, rank, is_causal, pass_on):
    world, scale = len(positions), 1 / math.sqrt(value.shape[-1])
    state, k, v = _start(query, value), key, value
    for hop in range(world):
        scores = query @ k.transpose(-2, -1) * scale
        allowed = positions[(rank - hop) % world][None, :] <= positions[rank][:, None]
        if not is_causal or allowed.any():
            state = online_softmax_update(*state, scores.masked_fill(~allowed, -math.inf) if is_causal else scores, v)
        if hop < world - 1:
            k, v = pass_on(k, v)
    return state[2] / state[1]


def views_batch_and_heads(query, key, value, positions, rank, is_causal, pass_on):
    """Merges the batch and the heads with .view: fails once they are not laid out one after the other."""
    N, H, C, E = query.shape
    flat = query.view(N * H, C, E)
    return ring(flat.view(N, H, C, E), key, value, positions, rank, is_causal, pass_on)


def gather_everything(query, key, value, positions, rank, is_causal, pass_on):
    """Right numbers, no ring: every chunk collected first, then one softmax over all of them."""
    world, keys, values, k, v = len(positions), [key], [value], key, value
    for _ in range(world - 1):
        k, v = pass_on(k, v)
        keys.append(k)
        values.append(v)
    sources = torch.cat([positions[(rank - h) % world] for h in range(world)])
    scores = query @ torch.cat(keys, dim=-2).transpose(-2, -1) / math.sqrt(query.shape[-1])
    if is_causal:
        scores = scores.masked_fill(sources[None, :] > positions[rank][:, None], -math.inf)
    return torch.softmax(scores, dim=-1) @ torch.cat(values, dim=-2)


def backwards(query, key, value, positions, rank, is_causal, pass_on):
    world, scale = len(positions), 1 / math.sqrt(query.shape[-1])
    state, k, v = _start(query, value), key, value
    for hop in range(world):
        allowed = positions[(rank + hop) % world][None, :] <= positions[rank][:, None]
        scores = query @ k.transpose(-2, -1) * scale
        if not is_causal or allowed.any():
            state = online_softmax_update(*state, scores.masked_fill(~allowed, -math.inf) if is_causal else scores, v)
        if hop < world - 1:
            k, v = pass_on(k, v)
    return state[2] / state[1]


def skip_stops_passing(query, key, value, positions, rank, is_causal, pass_on):
    """A chunk in the future skipped with `continue` before its pass: the ranks stop passing alike."""
    world, scale = len(positions), 1 / math.sqrt(query.shape[-1])
    state, k, v = _start(query, value), key, value
    for hop in range(world):
        allowed = positions[(rank - hop) % world][None, :] <= positions[rank][:, None]
        if is_causal and not allowed.any():
            continue
        scores = query @ k.transpose(-2, -1) * scale
        state = online_softmax_update(*state, scores.masked_fill(~allowed, -math.inf) if is_causal else scores, v)
        if hop < world - 1:
            k, v = pass_on(k, v)
    return state[2] / state[1]


def _loop(query, key, value, positions, rank, is_causal, pass_on, slip=None):
    """The answer with one slip (the names of attention_lib.exercises.ring_attention.SLIPS, and a few more)."""
    world = len(positions)
    scale = 1.0 if slip == "no scale" else 1 / math.sqrt(query.shape[-1])
    state, k, v = _start(query, value), key, value
    if slip == "blend of E":
        state = (*state[:2], torch.zeros_like(query))
    for hop in range(world):
        source = (rank + hop) % world if slip == "turned backwards" else (rank - hop) % world
        here, there = positions[rank], positions[source]
        if slip == "local positions":
            here, there = torch.arange(len(here)), torch.arange(len(there))
        allowed = there[None, :] <= here[:, None]
        skip = (slip == "the last hop skipped" and hop == world - 1) or (slip == "the own chunk skipped" and hop == 0)
        if not skip and (not is_causal or allowed.any()):
            scores = query @ k.transpose(-2, -1) * scale
            if is_causal:
                scores = scores.masked_fill(~allowed, -math.inf)
            if slip == "no rescale":
                new_max = torch.maximum(state[0], scores.amax(dim=-1, keepdim=True))
                weights = torch.exp(scores - new_max)
                state = (new_max, state[1] + weights.sum(dim=-1, keepdim=True), state[2] + weights @ v)
            elif slip == "no max":
                weights = torch.exp(scores)
                state = (state[0], state[1] + weights.sum(dim=-1, keepdim=True), state[2] + weights @ v)
            else:
                state = online_softmax_update(*state, scores, v)
        if hop < world - 1:
            k, v = pass_on(k, v)
    return state[2] if slip == "no division" else state[2] / state[1]


def backwards_loop(*args):
    return _loop(*args, slip="turned backwards")


def no_rescale(*args):
    return _loop(*args, slip="no rescale")


def last_hop_skipped(*args):
    return _loop(*args, slip="the last hop skipped")


def own_chunk_skipped(*args):
    return _loop(*args, slip="the own chunk skipped")


def local_positions(*args):
    return _loop(*args, slip="local positions")


def no_scale(*args):
    return _loop(*args, slip="no scale")


def no_division(*args):
    return _loop(*args, slip="no division")


def no_max(*args):
    return _loop(*args, slip="no max")


def blend_of_e(*args):
    return _loop(*args, slip="blend of E")


def ignores_the_mask(query, key, value, positions, rank, is_causal, pass_on):
    return ring(query, key, value, positions, rank, False, pass_on)


_SEEN = {}


def cached_by_shape(query, key, value, positions, rank, is_causal, pass_on):
    """Remembers its first result for each shape, and passes anyway (so that the ring stays in step)."""
    result = ring(query, key, value, positions, rank, is_causal, pass_on)
    return _SEEN.setdefault((tuple(query.shape), tuple(value.shape), is_causal), result)


_BUFFERS = {}


def one_buffer(query, key, value, positions, rank, is_causal, pass_on):
    """Writes every result into one buffer per shape and returns it: a later call overwrites an earlier result."""
    result = ring(query, key, value, positions, rank, is_causal, pass_on)
    buffer = _BUFFERS.setdefault((tuple(result.shape), result.dtype), torch.empty_like(result))
    buffer[...] = result
    return buffer


def scales_query_in_place(query, key, value, positions, rank, is_causal, pass_on):
    query.mul_(1 / math.sqrt(query.shape[-1]))  # the caller's queries, scaled where they stand
    return _loop(query, key, value, positions, rank, is_causal, pass_on, slip="no scale")


def views_rows(query, key, value, positions, rank, is_causal, pass_on):
    flat = query.view(-1, query.shape[-1])  # fails on a transposed view
    return ring(flat.view(query.shape), key, value, positions, rank, is_causal, pass_on)


def calls_the_package(query, key, value, positions, rank, is_causal, pass_on):
    from attention_lib.ring_attention import ring_forward

    return ring_forward(query, key, value, is_causal, 1 / math.sqrt(query.shape[-1]), positions, rank)[0]


def calls_sdpa(query, key, value, positions, rank, is_causal, pass_on):
    return torch.nn.functional.scaled_dot_product_attention(query, key, value)


def stub(query, key, value, positions, rank, is_causal, pass_on):
    raise NotImplementedError


def folds_then_passes_too_few(query, key, value, positions, rank, is_causal, pass_on):
    """P - 1 hops, each a fold then a pass: the last chunk received is never folded."""
    world, scale = len(positions), 1 / math.sqrt(query.shape[-1])
    state, k, v = _start(query, value), key, value
    for hop in range(world - 1):
        allowed = positions[(rank - hop) % world][None, :] <= positions[rank][:, None]
        if not is_causal or allowed.any():
            scores = query @ k.transpose(-2, -1) * scale
            state = online_softmax_update(*state, scores.masked_fill(~allowed, -math.inf) if is_causal else scores, v)
        k, v = pass_on(k, v)
    return state[2] / state[1]


def one_hop_short(query, key, value, positions, rank, is_causal, pass_on):
    """Right alone (one fold), one fold short on a ring: max(1, world - 1) hops."""
    world, scale = len(positions), 1 / math.sqrt(query.shape[-1])
    state, k, v = _start(query, value), key, value
    for hop in range(max(1, world - 1)):
        allowed = positions[(rank - hop) % world][None, :] <= positions[rank][:, None]
        if not is_causal or allowed.any():
            scores = query @ k.transpose(-2, -1) * scale
            state = online_softmax_update(*state, scores.masked_fill(~allowed, -math.inf) if is_causal else scores, v)
        if hop < world - 1:
            k, v = pass_on(k, v)
    return state[2] / state[1]


def state_in_float32(query, key, value, positions, rank, is_causal, pass_on):
    """Right to float32's precision: the running state made in float32 whatever the inputs' dtype."""
    return ring(query.float(), key.float(), value.float(), positions, rank, is_causal, pass_on).to(query.dtype)


def strict_mask(query, key, value, positions, rank, is_causal, pass_on):
    """A query may not see its own position (j < i): the first position sees nothing at all."""
    world, scale = len(positions), 1 / math.sqrt(query.shape[-1])
    state, k, v = _start(query, value), key, value
    for hop in range(world):
        allowed = positions[(rank - hop) % world][None, :] < positions[rank][:, None]
        if not is_causal or allowed.any():
            scores = query @ k.transpose(-2, -1) * scale
            state = online_softmax_update(*state, scores.masked_fill(~allowed, -math.inf) if is_causal else scores, v)
        if hop < world - 1:
            k, v = pass_on(k, v)
    return state[2] / state[1]
