"""Where one decoding step of the sampler's running batch goes, on the mini's base: framework or attention.

For B rows that each hold L cached positions (the sampler's roomy cache layers, as in a rollout), one decoding step
of the backbone is timed two ways, on the same cache contents: `transformers`' own forward (what the sampler runs)
and a forward written out by hand that calls the same modules and kernels in the same order (no mask building, no
decorators, no output objects). Their outputs are compared bit for bit, so the difference between the two is the
framework's own overhead per step. The attention call alone (the same function on the same shapes, once per layer)
gives its share of the step, and the bytes of cached keys and values it reads per step give its rate. Last, one
layer's attention as the sampler runs it (every row reads its own copy of the `--prefix` positions that all rows
share, the system prompt) against the same attention written with torch operations so that the shared positions are
read once for the whole batch (a softmax over both parts; equal up to float32 rounding, not bit for bit).

    uv run python benchmarks/decode_step.py [--base-model mini-base] [--rows 8 32 64 128] [--positions 650]
"""
import argparse, time


def make_cache(config, rows: int, positions: int, seed: int = 0):
    "A running-batch cache of `rows` x `positions` random keys and values in the sampler's roomy layers."
    import torch
    from transformers import DynamicCache
    from alfworld_rl.backends import kv_cache as K
    g = torch.Generator().manual_seed(seed)
    cache = DynamicCache(config=config)
    shape = (rows, config.num_key_value_heads, positions, config.head_dim)
    for li in range(config.num_hidden_layers):
        k, v = K._roomy(torch.zeros(1), shape), K._roomy(torch.zeros(1), shape)
        k.copy_(torch.randn(shape, generator=g)); v.copy_(torch.randn(shape, generator=g))
        cache.update(k[:, :, :1].contiguous(), v[:, :, :1].contiguous(), li)
        cache.layers[li].keys, cache.layers[li].values = k, v
    for layer in cache.layers: layer.__class__ = K._append_layer()
    return cache


def library_step(backbone, ids, cache, mask, pos):
    "One decoding step through `transformers`' forward (what the sampler runs, the cache under this version's name)."
    from alfworld_rl.backends.kv_cache import _cache_arg
    return backbone(input_ids=ids, **{_cache_arg(backbone): cache}, attention_mask=mask, position_ids=pos,
                    use_cache=True).last_hidden_state


def plain_step(backbone, ids, cache, mask, pos):
    "The same step with the same modules and kernels, written out: embeddings, each layer's attention and MLP, final norm."
    from transformers.models.qwen3.modeling_qwen3 import apply_rotary_pos_emb
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    h = backbone.embed_tokens(ids)
    cos, sin = backbone.rotary_emb(h, pos)
    allowed = mask.bool()[:, None, None, :]
    for li, layer in enumerate(backbone.layers):
        a = layer.self_attn
        residual, x = h, layer.input_layernorm(h)
        shape = (*x.shape[:-1], -1, a.head_dim)
        q = a.q_norm(a.q_proj(x).view(shape)).transpose(1, 2)
        k = a.k_norm(a.k_proj(x).view(shape)).transpose(1, 2)
        v = a.v_proj(x).view(shape).transpose(1, 2)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        keys, values = cache.layers[li].update(k, v)
        out = sdpa_attention_forward(a, q, keys, values, allowed, scaling=a.scaling)[0]
        h = residual + a.o_proj(out.reshape(*x.shape[:-1], -1).contiguous())
        h = h + layer.mlp(layer.post_attention_layernorm(h))
    return backbone.norm(h)


def prefix_once(q, shared_k, shared_v, own_k, own_v, own_mask, scale):
    """Attention of one query per row `q` [B, kv heads, group, dim] over keys and values that every row shares
    (`shared_k`, `shared_v` [kv heads, P, dim], read once for the batch) followed by each row's own ([B, kv heads, R, dim],
    `own_mask` [B, 1, 1, R] True where a row has a position)."""
    import torch
    B, kv, group, dim = q.shape
    P = shared_k.shape[1]
    flat = q.permute(1, 0, 2, 3).reshape(kv, B * group, dim)
    s_shared = (flat @ shared_k.transpose(1, 2) * scale).view(kv, B, group, P).permute(1, 0, 2, 3)
    s_own = (q @ own_k.transpose(-1, -2) * scale).masked_fill(~own_mask, float("-inf"))
    top = torch.maximum(s_shared.amax(-1, keepdim=True), s_own.amax(-1, keepdim=True))
    p_shared, p_own = (s_shared - top).exp(), (s_own - top).exp()
    total = p_shared.sum(-1, keepdim=True) + p_own.sum(-1, keepdim=True)
    mixed = (p_shared.permute(1, 0, 2, 3).reshape(kv, B * group, P) @ shared_v).view(kv, B, group, dim).permute(1, 0, 2, 3)
    return (mixed + p_own @ own_v) / total


def median_ms(fn, repeats, setup=lambda r: None):
    "Median milliseconds of `fn(setup(r))` over `repeats` rounds r (`setup`, e.g. a fresh cache, is not timed)."
    times = []
    for r in range(repeats):
        arg = setup(r)
        t = time.perf_counter(); fn(arg); times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2] * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base-model", default="mini-base")
    ap.add_argument("--rows", type=int, nargs="+", default=[8, 32, 64, 128])
    ap.add_argument("--positions", type=int, default=650, help="cached positions per row (a window-context turn: ~650)")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--prefix", type=int, default=465, help="positions every row shares (the system prompt: 465 tokens)")
    args = ap.parse_args()
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from alfworld_rl.backends.local_models import load_causal_lm
    torch.set_num_threads(1)                                  # the sampler's worker thread runs single-threaded on the CPU
    model = load_causal_lm(args.base_model, torch.device("cpu"), torch.float32).eval()
    backbone, config, L = model.model, model.config, args.positions
    print(f"{args.base_model}: {config.num_hidden_layers} layers, width {config.hidden_size}, {config.num_key_value_heads} "
          f"key/value heads of {config.head_dim}; {L} cached positions per row, one thread")
    print("| rows | transformers' forward, ms | written out, ms | same output bits | attention's share (all layers) | cached keys and values read, GB/s |")
    print("|---|---|---|---|---|---|")
    for B in args.rows:
        ids, pos = torch.randint(0, config.vocab_size, (B, 1)), torch.full((B, 1), L)
        mask = torch.ones(B, L + 1, dtype=torch.long); mask[: B // 2, :40] = 0          # half the rows left-padded
        with torch.inference_mode():
            same = torch.equal(library_step(backbone, ids, make_cache(config, B, L), mask, pos),
                               plain_step(backbone, ids, make_cache(config, B, L), mask, pos))
            fresh = lambda r: make_cache(config, B, L, r)
            lib = median_ms(lambda c: library_step(backbone, ids, c, mask, pos), args.repeats, fresh)
            plain = median_ms(lambda c: plain_step(backbone, ids, c, mask, pos), args.repeats, fresh)
            a, q = backbone.layers[0].self_attn, torch.randn(B, config.num_attention_heads, 1, config.head_dim)
            def attend(c):
                for layer in c.layers: sdpa_attention_forward(a, q, layer.keys, layer.values, mask.bool()[:, None, None, :L], scaling=a.scaling)
            attn = median_ms(attend, args.repeats, fresh)
        read = 2 * config.num_hidden_layers * B * config.num_key_value_heads * L * config.head_dim * 4
        print(f"| {B} | {lib:.2f} | {plain:.2f} | {same} | {attn / plain:.0%} | {read / attn * 1e3 / 1e9:.1f} |")
    print(f"\nOne layer's attention, {L} positions per row of which the first {args.prefix} are the same in every row:")
    print("| rows | each row reads its own copy (sdpa), ms | the shared part read once, ms | largest difference |")
    print("|---|---|---|---|")
    kv, group, dim, P = config.num_key_value_heads, config.num_attention_heads // config.num_key_value_heads, config.head_dim, args.prefix
    for B in args.rows:
        q = torch.randn(B, kv, group, dim)
        keys, values = torch.randn(B, kv, L, dim), torch.randn(B, kv, L, dim)
        keys[:, :, :P], values[:, :, :P] = keys[:1, :, :P], values[:1, :, :P]          # the shared part, in every row
        shared_k, shared_v = keys[0, :, :P].contiguous(), values[0, :, :P].contiguous()
        everywhere, own = torch.ones(B, 1, 1, L, dtype=torch.bool), torch.ones(B, 1, 1, L - P, dtype=torch.bool)
        scale = dim ** -0.5
        def per_row(_=None): return torch.nn.functional.scaled_dot_product_attention(q, keys, values, attn_mask=everywhere, scale=scale)
        def once(_=None): return prefix_once(q, shared_k, shared_v, keys[:, :, P:], values[:, :, P:], own, scale)
        with torch.inference_mode():
            diff = (per_row() - once()).abs().max().item()
            a, b = median_ms(per_row, args.repeats), median_ms(once, args.repeats)
        print(f"| {B} | {a:.2f} | {b:.2f} | {diff:.1e} |")


if __name__ == "__main__":
    main()
