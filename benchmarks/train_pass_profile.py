"""Where the local trainer's forward + backward spends its time, by kind of operation (torch's profiler).

On the datums of a real window-context rollout (`shared_prefix.window_datums`: mini-base, generated games, every
turn trained), one `forward_backward`'s work is run on this thread under `torch.profiler` and each operation's own
time is put in one of: matrix products, attention (the fused kernels, forward and backward), elementwise and
copying (multiplies, adds, `where`, activations, concatenation, copies), and the rest. It prints the shares, the
heaviest operations and how many positions the backbone computed.

    uv run python benchmarks/train_pass_profile.py [--games 4] [--group-size 8] [--rank 64] [--top 12]

The shares say whether the pass is bound by arithmetic (matrix products) or by the memory traffic of the small
operations between them, which no change of prompt length or LoRA rank removes.
"""
import time

from shared_prefix import window_arguments, window_datums
from mini_speed import computed_positions

KINDS = {"matrix products": ("aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm"),
         "attention": ("aten::_scaled_dot_product_flash_attention_for_cpu",
                       "aten::_scaled_dot_product_flash_attention_for_cpu_backward"),
         "elementwise and copying": ("aten::mul", "aten::add", "aten::add_", "aten::where", "aten::silu",
                                     "aten::silu_backward", "aten::cat", "aten::copy_", "aten::div", "aten::pow",
                                     "aten::neg", "aten::fill_", "aten::sum", "aten::rsqrt", "aten::mean",
                                     "aten::exp", "aten::sub", "aten::index", "aten::bitwise_and", "aten::ne")}


def kind_of(name: str) -> str:
    "The kind an operation's name belongs to."
    return next((k for k, names in KINDS.items() if name in names), "rest")


def main():
    ap = window_arguments(__doc__)
    ap.add_argument("--rank", type=int, default=64, help="LoRA rank of the training client")
    ap.add_argument("--top", type=int, default=12, help="heaviest operations to list")
    args = ap.parse_args()
    import torch
    from torch.profiler import profile, ProfilerActivity
    svc, tc, datums = window_datums(args.base_model, args.games, args.group_size, rank=args.rank)
    tc.all_logprobs = False
    tokens = sum(len(d.model_input) for d in datums)
    print(f"{len(datums)} datums, {tokens:,} tokens; the backbone computes "
          f"{computed_positions(datums, tc.microbatch_tokens):,} positions (shared prefixes once, padding included); "
          f"LoRA rank {args.rank}; {torch.get_num_threads()} torch threads")
    run = lambda: tc._run_loss(datums, "ppo", None, False, True)      # forward + backward, on this thread
    run()                                                               # warm up allocations and kernels
    t0 = time.perf_counter(); run(); plain = time.perf_counter() - t0
    with profile(activities=[ProfilerActivity.CPU]) as prof: run()
    events = [e for e in prof.key_averages() if e.self_cpu_time_total > 0]
    total = sum(e.self_cpu_time_total for e in events)
    shares = {}
    for e in events:
        kind = kind_of(e.key)
        shares[kind] = shares.get(kind, 0) + e.self_cpu_time_total
    print(f"forward + backward: {plain:.2f} s without the profiler")
    print("| kind | share of the pass |\n|---|---|")
    for k in (*KINDS, "rest"): print(f"| {k} | {100 * shares.get(k, 0) / total:.0f}% |")
    print("| operation | share | calls | mean ms |\n|---|---|---|---|")
    for e in sorted(events, key=lambda e: -e.self_cpu_time_total)[:args.top]:
        print(f"| {e.key} | {100 * e.self_cpu_time_total / total:.1f}% | {e.count} | {e.self_cpu_time_total / e.count / 1e3:.2f} |")


if __name__ == "__main__":
    main()
