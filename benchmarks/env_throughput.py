"""Env steps/second and peak memory: the fast engine, the project's `EnvPool` (TextWorld) and TextWorld's batch env.

8 games x 8 branches each take up to 20 random admissible actions (the same actions in both runs).
Ours: `EnvGroup`s on one bounded `EnvPool`, every branch stepping on its own with `step_branch_async`.
Fast: the same `EnvGroup`s with `engine="fast"` (in this process, no workers), same actions.
Resets: one branch of each game loaded and reset from cold in this process, per engine (mean seconds).
CPU time: both runs of ours also count the CPU seconds their stepping took (this process plus the `EnvPool`
workers), so the fast/TextWorld ratio per CPU second, printed on the line before the last, holds on a busy machine;
resets are timed in CPU seconds too.
Baseline: ALFWorld's way, `textworld.gym.register_games(..., asynchronous=True)` with ALFWorld's wrappers,
one process per branch, all 64 stepped together per call. Peak RSS is summed over this process and all
its children, sampled every 50 ms; PSS (shared pages split between processes) is printed too, since RSS
counts the pages a forked child shares with its parent once per process.

    uv run python benchmarks/env_throughput.py [--data-root DIR] [--games 8] [--branches 8] [--steps 20] [--workers N] [--skip-batch-env]

Without --data-root, 8 train games with ALFWorld-sized rooms are generated once into the user cache.
"""
import argparse, asyncio, random, threading, time
from pathlib import Path

import psutil

from alfworld_rl.core import user_cache_dir
from alfworld_rl.env.data import discover_games
from alfworld_rl.env.branches import (BranchEnv, EnvGroup, EnvPool, FastBranchEnv, _import_alfworld, cache_pddl_translation,
                             cache_textgen_parsing, default_num_workers, visible_commands)


class TreeMemory:
    "Peak RSS (MB) of this process plus all its descendants, sampled in a background thread."
    def __init__(self, every: float = 0.05):
        self.every, self.peak, self._stop = every, 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> float:
        me = psutil.Process()
        total = 0
        for p in [me] + me.children(recursive=True):
            try: total += p.memory_info().rss
            except psutil.Error: pass
        return total / 2**20

    def pss(self) -> float:
        "PSS (MB) of the tree right now (slower: reads smaps)."
        me, total = psutil.Process(), 0
        for p in [me] + me.children(recursive=True):
            try: total += p.memory_full_info().pss
            except psutil.Error: pass
        return total / 2**20

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self.sample()); self._stop.wait(self.every)

    def __enter__(self): self._thread.start(); return self
    def __exit__(self, *exc): self._stop.set(); self._thread.join(); self.peak = max(self.peak, self.sample())


def bench_games(data_root, n, cache: str = "bench_env_games", seed: int = 0):
    "n train games: from --data-root, or generated once (ALFWorld-sized rooms, generator `seed`) into the user cache."
    if data_root is None:
        from alfworld_rl.env.generate import generate_dataset
        data_root = user_cache_dir() / f"{cache}-{n}"
        if not (data_root / "json_2.1.1").is_dir() or len(discover_games(data_root, "train")) < n:
            print(f"generating {n} games with ALFWorld-sized rooms into {data_root} ...", flush=True)
            generate_dataset(data_root, train=n, seed=seed, progress=True)
    games = discover_games(data_root, "train")
    if len(games) < n: raise SystemExit(f"need {n} train games in {data_root}, found {len(games)}")
    return games[:n]


def rng_for(g: int, b: int) -> random.Random:
    "The action generator of branch b of game g (the same in both runs)."
    return random.Random(1000 * g + b)


def cpu_seconds() -> float:
    "CPU seconds (user + system) used so far by this process and its live children (the `EnvPool` workers)."
    me, total = psutil.Process(), time.process_time()
    for p in me.children(recursive=True):
        try: total += sum(p.cpu_times()[:2])
        except psutil.Error: pass
    return total


def run_ours(games, branches, steps, workers, engine="textworld"):
    "Step every branch independently (EnvPool, or in-process for the fast engine); (steps, seconds, setup seconds, pss MB, CPU seconds)."
    t0 = time.perf_counter()
    pool = EnvPool(num_workers=workers) if engine == "textworld" else None
    if pool is not None: pool.info()                     # wait until the workers are up
    groups = [EnvGroup(g, branches, steps, pool=pool, engine=engine) for g in games]

    async def play(gi, grp, start):
        async def branch(b):
            rng, shown, n = rng_for(gi, b), start[b].admissible_commands, 0
            while not grp.done(b):
                r = await grp.step_branch_async(b, rng.choice(shown))
                assert r.error is None, r.error
                shown, n = r.admissible_commands, n + 1
            return n
        return sum(await asyncio.gather(*(branch(b) for b in range(branches))))

    async def main():
        starts = await asyncio.gather(*(grp.reset_async() for grp in groups))
        t1, c1 = time.perf_counter(), cpu_seconds()
        counts = await asyncio.gather(*(play(gi, grp, st) for gi, (grp, st) in enumerate(zip(groups, starts))))
        return t1, sum(counts), time.perf_counter(), cpu_seconds() - c1
    t1, n, t2, cpu = asyncio.run(main())
    pss = TreeMemory().pss()
    for grp in groups: grp.close()
    if pool is not None: pool.close()
    return n, t2 - t1, t1 - t0, pss, cpu


def reset_seconds(games, engine):
    "Mean (seconds, CPU seconds) to load and reset one branch of a game from cold, in this process."
    from alfworld_rl.env import fast_engine
    cache_textgen_parsing(); cache_pddl_translation()    # as in the project's workers
    total = cpu = 0.0
    for g in games:
        fast_engine._cache.clear()
        env = FastBranchEnv() if engine == "fast" else BranchEnv()
        t, c = time.perf_counter(), time.process_time()
        env.reset(g.game_file, 10)
        total += time.perf_counter() - t; cpu += time.process_time() - c
    return total / len(games), cpu / len(games)


def run_baseline(games, branches, steps):
    "Step TextWorld's AsyncBatchEnv (one process per branch) with the same actions."
    import textworld, textworld.gym
    tw = _import_alfworld("alfworld.agents.environment.alfred_tw_env")
    t0 = time.perf_counter()
    infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
    files = [g.game_file for g in games for _ in range(branches)]
    env_id = textworld.gym.register_games(files, infos, batch_size=len(files), asynchronous=True,
                                          max_episode_steps=steps,
                                          wrappers=[tw.AlfredDemangler(shuffle=False), tw.AlfredInfos])
    env = textworld.gym.make(env_id)
    obs, infos = env.reset()
    # The batch env shuffles the game order: give slot i the actions of (its game, its copy number).
    index = {g.game_file: gi for gi, g in enumerate(games)}
    seen, rngs = {}, []
    for f in infos["extra.gamefile"]:
        b = seen[f] = seen.get(f, -1) + 1
        rngs.append(rng_for(index[f], b))
    shown = [visible_commands(c) for c in infos["admissible_commands"]]
    done, n = [False] * len(files), 0
    t1 = time.perf_counter()
    while not all(done):
        cmds = [rng.choice(s) if not d else "look" for rng, s, d in zip(rngs, shown, done)]
        n += sum(not d for d in done)
        obs, scores, dones, infos = env.step(cmds)
        shown = [visible_commands(c) for c in infos["admissible_commands"]]
        done = [d or nd for d, nd in zip(done, dones)]
    t2 = time.perf_counter()
    pss = TreeMemory().pss()
    env.close()
    return n, t2 - t1, t1 - t0, pss


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-root", default=None)
    ap.add_argument("--games", type=int, default=8)
    ap.add_argument("--branches", type=int, default=8)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--workers", type=int, default=None, help="EnvPool workers (default: as the shared pool)")
    ap.add_argument("--skip-batch-env", action="store_true", help="leave out TextWorld's own batch env (slow, GBs of memory)")
    a = ap.parse_args()
    games = bench_games(a.data_root, a.games)
    workers = a.workers or default_num_workers()
    print(f"{a.games} games x {a.branches} branches x up to {a.steps} random admissible steps; "
          f"{psutil.cpu_count()} CPUs; EnvPool workers={workers}", flush=True)
    with TreeMemory() as mem_ours:
        n, secs, setup, pss, cpu = run_ours(games, a.branches, a.steps, workers)
    ours = n / secs
    print(f"EnvPool   : {n} steps in {secs:.1f} s = {ours:.1f} steps/s (setup {setup:.1f} s); "
          f"peak RSS {mem_ours.peak:.0f} MB, PSS while stepping {pss:.0f} MB", flush=True)
    with TreeMemory() as mem_fast:
        fn, fsecs, fsetup, fpss, fcpu = run_ours(games, a.branches, a.steps, workers, engine="fast")
    fast = fn / fsecs
    print(f"Fast      : {fn} steps in {fsecs:.2f} s = {fast:.1f} steps/s (setup {fsetup:.1f} s); "
          f"peak RSS {mem_fast.peak:.0f} MB", flush=True)
    (fast_reset, fast_reset_cpu), (tw_reset, tw_reset_cpu) = reset_seconds(games, "fast"), reset_seconds(games, "textworld")
    print(f"Reset (cold, one branch): fast {fast_reset:.3f} s, TextWorld {tw_reset:.3f} s", flush=True)
    fast_cpu, tw_cpu = fn / fcpu, n / cpu
    print(f"CPU: fast {fn} steps in {fcpu:.2f} CPU-s = {fast_cpu:.0f} steps/CPU-s; EnvPool {n} steps in {cpu:.1f} CPU-s "
          f"(this process + workers) = {tw_cpu:.1f} steps/CPU-s; resets {fast_reset_cpu:.3f} vs {tw_reset_cpu:.3f} CPU-s", flush=True)
    base, mem_base_peak = float("nan"), float("nan")
    if not a.skip_batch_env:
        with TreeMemory() as mem_base:
            bn, bsecs, bsetup, bpss = run_baseline(games, a.branches, a.steps)
        base, mem_base_peak = bn / bsecs, mem_base.peak
        print(f"TextWorld : {bn} steps in {bsecs:.1f} s = {base:.1f} steps/s (setup {bsetup:.1f} s); "
              f"peak RSS {mem_base.peak:.0f} MB, PSS while stepping {bpss:.0f} MB", flush=True)
    print(f"env_steps_per_s={ours:.2f} baseline_steps_per_s={base:.2f} "
          f"peak_rss_mb={mem_ours.peak:.0f} baseline_peak_rss_mb={mem_base_peak:.0f}")
    print(f"fast_steps_per_cpu_s={fast_cpu:.0f} textworld_steps_per_cpu_s={tw_cpu:.1f} cpu_speedup={fast_cpu / tw_cpu:.1f} "
          f"fast_reset_cpu_s={fast_reset_cpu:.4f} textworld_reset_cpu_s={tw_reset_cpu:.3f} reset_cpu_speedup={tw_reset_cpu / fast_reset_cpu:.0f}")
    print(f"fast_steps_per_s={fast:.1f} textworld_steps_per_s={ours:.2f} speedup={fast / ours:.1f} "
          f"fast_reset_s={fast_reset:.3f} textworld_reset_s={tw_reset:.3f}")
