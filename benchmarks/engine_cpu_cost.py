"""CPU seconds per env step and per cold reset: TextWorld (`BranchEnv`, with the project's worker caches) vs the fast engine.

Both play the same random admissible actions in this one process; CPU time (`time.process_time`) is measured
instead of wall time so that the ratio holds on a busy machine.

    uv run python benchmarks/engine_cpu_cost.py [--data-root DIR] [--games 4] [--steps 30]

Without --data-root, the games of benchmarks/env_throughput.py are used (generated once into the user cache).
"""
import argparse, random, time

from alfworld_rl.env import fast_engine
from alfworld_rl.env.branches import BranchEnv, FastBranchEnv, cache_pddl_translation, cache_textgen_parsing


def measure(cls, files, steps):
    "(steps per CPU second, mean CPU seconds of a cold load + reset) of one engine on `files`."
    rng, n, step_cpu, reset_cpu = random.Random(0), 0, 0.0, 0.0
    for f in files:
        fast_engine._cache.clear()
        env = cls()
        t = time.process_time(); _, shown, _ = env.reset(f, 10**6); reset_cpu += time.process_time() - t
        for _ in range(steps):
            t = time.process_time(); r = env.step(rng.choice(shown)); step_cpu += time.process_time() - t
            shown, n = r[4], n + 1
    return n / step_cpu, reset_cpu / len(files)


if __name__ == "__main__":
    import sys
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from env_throughput import bench_games
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-root", default=None)
    ap.add_argument("--games", type=int, default=4)
    ap.add_argument("--steps", type=int, default=30, help="steps per game")
    a = ap.parse_args()
    files = [g.game_file for g in bench_games(a.data_root, a.games + 1)]
    warm, files = files[-1], files[:-1]                               # a game outside the measured ones
    cache_textgen_parsing(); cache_pddl_translation()                 # as in the project's env workers
    FastBranchEnv().reset(warm, 5); BranchEnv().reset(warm, 5)        # warm imports and parsers
    fast, tw = measure(FastBranchEnv, files, a.steps), measure(BranchEnv, files, a.steps)
    print(f"fast_steps_per_cpu_s={fast[0]:.0f} textworld_steps_per_cpu_s={tw[0]:.1f} cpu_speedup={fast[0] / tw[0]:.0f} "
          f"fast_reset_cpu_s={fast[1]:.3f} textworld_reset_cpu_s={tw[1]:.3f} reset_speedup={tw[1] / fast[1]:.0f}")
