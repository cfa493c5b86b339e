"""One decode step's token choice at a Qwen-sized vocabulary: the old full sort against `choose_tokens`.

    uv run python benchmarks/token_choice.py                    # batch 64, vocabulary 151,936, on the CPU
    uv run python benchmarks/token_choice.py --device cuda

The old path sorted the whole vocabulary of every row at every step. The new one samples the softmax directly at
top-p 1 and selects a partial nucleus (`topk`) otherwise. Logits are random normal times `--spread`: at the default
spread a top-p 0.9 nucleus holds a few dozen tokens, as for a trained model's next-token distribution.
One line per setting: `top_p=<p> sort_ms=<x> new_ms=<y> speedup=<x/y>`.
"""
import argparse, statistics, time

import torch

from alfworld_rl.backends.token_choice import choose_tokens


def full_sort_choose(logits, temperature, top_k, top_p, u):
    "The pre-change `choose_tokens`: a full descending sort of every row."
    logits = logits.float()
    greedy = logits.argmax(-1)
    scaled = logits / temperature.clamp_min(1e-6)[:, None]
    sorted_logits, order = scaled.sort(-1, descending=True)
    probs = sorted_logits.softmax(-1)
    V = logits.shape[-1]
    k = torch.where(top_k > 0, top_k, torch.full_like(top_k, V))
    keep = torch.arange(V, device=logits.device)[None, :] < k[:, None]
    keep &= (probs.cumsum(-1) - probs) < top_p[:, None]
    keep[:, 0] = True
    cdf = (probs * keep).cumsum(-1)
    idx = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True).clamp(max=V - 1)
    return torch.where(temperature == 0, greedy, order.gather(1, idx).squeeze(1))


def time_ms(fn, device, repeats) -> float:
    "Median milliseconds of `fn()` over `repeats` runs after one warm-up."
    fn()
    times = []
    for _ in range(repeats):
        if device.type == "cuda": torch.cuda.synchronize()
        t = time.perf_counter(); fn()
        if device.type == "cuda": torch.cuda.synchronize()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=151_936)
    ap.add_argument("--spread", type=float, default=5.0)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    dev = torch.device(a.device)
    g = torch.Generator(device=dev).manual_seed(0)
    logits = torch.randn(a.batch, a.vocab, generator=g, device=dev) * a.spread
    temp, top_k = torch.ones(a.batch, device=dev), torch.zeros(a.batch, dtype=torch.long, device=dev)
    u = torch.rand(a.batch, generator=g, device=dev)
    for p in (1.0, 0.95, 0.9):
        top_p = torch.full((a.batch,), p, device=dev)
        sort_ms = time_ms(lambda: full_sort_choose(logits, temp, top_k, top_p, u), dev, a.repeats)
        new_ms = time_ms(lambda: choose_tokens(logits, temp, top_k, top_p, u), dev, a.repeats)
        print(f"top_p={p} sort_ms={sort_ms:.2f} new_ms={new_ms:.2f} speedup={sort_ms / new_ms:.1f}", flush=True)


if __name__ == "__main__":
    main()
