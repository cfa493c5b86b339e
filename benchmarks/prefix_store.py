"""The sampler's prefix store: the store operations of one rollout of the mini's PPO batch, replayed against the
store matched entry by entry (the previous path, rebuilt here) and against `PrefixStore`'s one-table comparison
(the default), in one run.

At the mini's batch (16 games x 8 branches, window context, 12 steps) the store holds several hundred finished
sequences, and every admitted prompt is compared with them. The script runs one real rollout with a store that
records every `put` and `take`, prints the rollout's time, then replays the recorded operations on both stores
(keys and values replaced by empty tensors of the same size, so eviction is the same), checks that both pick the
same entry for every prompt, and prints each store's seconds and their share of the rollout. Timing the store
alone is deliberate: whole rollouts on a shared 2-core machine vary by more than the difference.

    uv run python benchmarks/prefix_store.py [--games 16] [--group-size 8] [--repeats 3] [--threads 1]
"""
import argparse, time

import torch


def scan_store(budget: int):
    "A `PrefixStore` that finds its match the previous way: each entry compared in turn, the byte total summed anew per store."
    from alfworld_rl.backends.kv_cache import PREFIX_MIN_SHARED, PrefixStore, _cache_nbytes

    class ScanStore(PrefixStore):
        def __init__(self, budget):
            super().__init__(budget)
            self.key_ids = {}                  # stored sequence -> its ids as a tensor, made once (as before)

        def put(self, tokens, layers):
            if self.budget <= 0 or len(tokens) < 2: return
            key = tuple(tokens)
            self.entries.pop(key, None)
            self.entries[key] = (None, layers)
            total = sum(_cache_nbytes(l) for _, l in self.entries.values())
            while self.entries and total > self.budget:
                oldest = next(iter(self.entries))
                total -= _cache_nbytes(self.entries.pop(oldest)[1]); self.key_ids.pop(oldest, None)
            self.nbytes = total

        def take(self, tokens):
            if not self.entries or len(tokens) < 2: return None, 0
            want, best, n = torch.tensor(tokens[:-1]), None, 0
            for key in self.entries:
                if min(len(key), len(want)) < n: continue
                m = min(len(key), len(want))
                ids = self.key_ids.get(key)
                if ids is None: ids = self.key_ids[key] = torch.tensor(key)
                differ = (ids[:m] != want[:m]).nonzero()
                shared = int(differ[0, 0]) if len(differ) else m
                whole = shared == len(key)
                if not whole and shared < PREFIX_MIN_SHARED: continue
                if shared > n or (shared == n and whole): best, n = key, shared
            if best is None: return None, 0
            if n == len(best): self.key_ids.pop(best, None); return self.entries.pop(best)[1], n
            return [(k[:, :, :n], v[:, :, :n]) for k, v in self.entries[best][1]], n

    return ScanStore(budget)


def recording_store(budget: int, ops: list):
    "A `PrefixStore` that appends ('put', tokens, bytes per token) and ('take', tokens) to `ops`."
    from alfworld_rl.backends.kv_cache import PrefixStore, _cache_nbytes

    class RecordingStore(PrefixStore):
        def put(self, tokens, layers):
            ops.append(("put", list(tokens), _cache_nbytes(layers) // max(1, len(tokens))))
            super().put(tokens, layers)

        def take(self, tokens):
            ops.append(("take", list(tokens)))
            return super().take(tokens)

    return RecordingStore(budget)


def replay(store, ops) -> tuple[float, list]:
    "Seconds `store` spends on `ops` and what each take returned (the chosen length, and the entry's first value)."
    picks, seconds = [], 0.0
    for i, op in enumerate(ops):
        if op[0] == "put":
            tokens, per_token = op[1], op[2]
            shape = (1, 1, len(tokens), per_token // 8)                                 # keys + values: per_token bytes
            layers = [(torch.full(shape, float(i)), torch.empty(shape))]                # keys say which put this was
            t0 = time.perf_counter(); store.put(tokens, layers); seconds += time.perf_counter() - t0
        else:
            t0 = time.perf_counter(); layers, n = store.take(op[1]); seconds += time.perf_counter() - t0
            picks.append((n, None if layers is None else float(layers[0][0][0, 0, 0, 0])))
    return seconds, picks


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base-model", default="mini-base-4layers")
    ap.add_argument("--games", type=int, default=16)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (the mini's seed workers use 1 on 2 cores)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from alfworld_rl.backends.kv_cache import PrefixStore
    from alfworld_rl.backends.service import make_service_client
    from alfworld_rl.core import user_cache_dir
    from alfworld_rl.env.data import discover_games
    from alfworld_rl.env.generate import SMALL_ROOM, generate_dataset
    from alfworld_rl.rl.rollout import RolloutConfig, run_rollout
    root = user_cache_dir() / f"bench_prefix_store_games-{args.games}"
    generate_dataset(root, train=args.games, seed=21, progress=False, **SMALL_ROOM)
    games = discover_games(root, "train")[:args.games]
    svc = make_service_client("local", device="cpu")
    tc = svc.create_lora_training_client(args.base_model, rank=64, seed=0)
    sampler = tc.save_weights_and_get_sampling_client()
    engine, ops = sampler._engine, []
    engine.prefix_cache = recording_store(engine.prefix_cache_bytes, ops)
    cfg = RolloutConfig(group_size=args.group_size, max_episode_steps=12, max_assistant_tokens=48,
                        max_trajectory_tokens=6000, temperature=1.0, seed=0, context="window", engine="fast")
    t0 = time.perf_counter()
    run_rollout(sampler, tc.get_tokenizer(), games, cfg)
    rollout_s = time.perf_counter() - t0
    n = args.games * args.group_size
    takes = sum(op[0] == "take" for op in ops)
    print(f"rollout: {n} episodes in {rollout_s:.1f} s ({n / rollout_s:.2f} episodes/s), {threads_note(args.threads)}; "
          f"{takes} prompts matched against the store, {len(ops) - takes} sequences stored")
    best, picks = {}, {}
    for _ in range(args.repeats):
        for path, make in (("scan", scan_store), ("table", PrefixStore)):
            seconds, picks[path] = replay(make(engine.prefix_cache_bytes), ops)
            best[path] = min(best.get(path, float("inf")), seconds)
    for path in ("scan", "table"):
        print(f"store[{path}]: {best[path]:.2f} s for the rollout's operations (best of {args.repeats}), "
              f"{100 * best[path] / rollout_s:.1f}% of the rollout's time")
    same = picks["scan"] == picks["table"]
    print(f"same entry chosen for every prompt: {same}; store speedup {best['scan'] / best['table']:.1f}x; "
          f"rollout time saved about {100 * (best['scan'] - best['table']) / rollout_s:.1f}%")
    if not same: raise SystemExit("the two stores chose different entries")


def threads_note(threads: int) -> str:
    return f"{threads} torch thread{'s' if threads > 1 else ''}"


if __name__ == "__main__":
    main()
