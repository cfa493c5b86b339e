"""Training speed on the CPU when the training thread starts after a sampler: one thread (the old leak) vs the process's count.

The local sampler's worker decodes on one CPU thread (`torch.set_num_threads(1)` in that thread). That call also
sets the count every thread starting torch work afterwards begins with, and the local trainer works on its own
thread, started after the first sampler: until the sampler gave the count back, every `train`, `sft` and `mini`
run on the CPU trained on one thread. This script rolls out real window-context datums, then times one
`forward_backward` + `optim_step` of a training client whose thread starts (a) with the count the old sampler left
(1) and (b) with the count the sampler now leaves (the process's), in one run.

    uv run python benchmarks/train_threads.py [--base-model mini-base] [--games 4] [--group-size 8] [--repeats 3]
"""
import threading, time


def main():
    from shared_prefix import window_arguments, window_datums      # the same flags, games and rollout as shared_prefix.py
    args = window_arguments(__doc__).parse_args()
    import torch, pytrio
    svc, _, datums = window_datums(args.base_model, args.games, args.group_size)
    process = torch.get_num_threads()
    print(f"{len(datums)} datums, {sum(len(d.model_input) for d in datums):,} tokens; the process's thread count: {process}")
    results = {}
    for mode, start_count in (("one_thread", 1), ("restored", process)):
        setter = threading.Thread(target=torch.set_num_threads, args=(start_count,))   # what a new thread will begin with
        setter.start(); setter.join()
        tc = svc.create_lora_training_client(args.base_model, rank=32, seed=0)        # its worker thread starts now
        seconds = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            tc.forward_backward(datums, "ppo").result()
            tc.optim_step(pytrio.AdamParams(learning_rate=1e-5)).result()
            seconds.append(time.perf_counter() - t0)
        results[mode] = min(seconds)
        print(f"{mode}: trainer thread starts with {start_count} thread(s); one update {min(seconds):.2f} s (best of {args.repeats})")
    torch.set_num_threads(process)
    print(f"one_thread_s={results['one_thread']:.2f} restored_s={results['restored']:.2f} "
          f"speedup={results['one_thread'] / results['restored']:.2f}")


if __name__ == "__main__":
    main()
