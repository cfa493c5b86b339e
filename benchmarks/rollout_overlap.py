"""How well the rollout engine overlaps trajectories: 8 games x 8 branches on real generated games, a sampler with
lognormal per-call latency (mean 0.5 s, heavy tail) and episodes of varied length.

Reports the wall time, the critical path (the longest trajectory's own reset + sample latencies + env step
times) and what a round-synchronous schedule (each round waits for the slowest live trajectory) would take on
the same recorded latencies. efficiency = critical_path / wall (1.0 = nothing waited on anything else).
Env times are measured around each `step_branch_async`, so they include waiting for a free worker of the pool.

With `--engine both` the same rollout runs once on each engine (the fast engine in-process, TextWorld through
the env worker pool) and a last line compares them: `fast_wall_s=... textworld_wall_s=... rollout_speedup=...`
(a small `--mean-latency` shows the environment-bound case).

    uv run python benchmarks/rollout_overlap.py [--games 8] [--group-size 8] [--mean-latency 0.5] [--sigma 1.0]
                                                [--engine textworld|fast|both]
"""
import argparse, math, random, time
from pathlib import Path


def lognormal_latency(mean: float, sigma: float):
    "A latency function drawing lognormal seconds with the given mean (heavy right tail for sigma ~1)."
    mu = math.log(mean) - sigma ** 2 / 2
    return lambda rng: rng.lognormvariate(mu, sigma)


def data_root(n_games: int) -> Path:
    "Generated train games for the benchmark (cached under the user cache dir)."
    from alfworld_rl.core import user_cache_dir
    from alfworld_rl.env.generate import generate_dataset
    root = user_cache_dir() / f"bench-rollout-overlap-{n_games}"
    return generate_dataset(root, train=n_games, seed=7, min_receptacles=4, max_receptacles=6, distractors=3,
                            max_plan_steps=30, progress=True)


def lockstep_seconds(trajectories) -> float:
    "Round-synchronous time on the recorded latencies: per round, the slowest live trajectory's turn."
    total = max(t.reset_seconds for t in trajectories)
    rounds = max(len(t.steps) for t in trajectories)
    for r in range(rounds):
        total += max(t.steps[r].sample_seconds + t.steps[r].env_seconds for t in trajectories if len(t.steps) > r)
    return total


def critical_path_seconds(trajectories) -> float:
    "The longest single trajectory's own time: its group's reset, its sample latencies and its env steps."
    return max(t.reset_seconds + sum(s.sample_seconds + s.env_seconds for s in t.steps) for t in trajectories)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--games", type=int, default=8)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--mean-latency", type=float, default=0.5)
    ap.add_argument("--sigma", type=float, default=1.0)
    ap.add_argument("--malformed-rate", type=float, default=0.3, help="share of turns answered malformed (varies lengths)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engine", choices=("textworld", "fast", "both"), default="textworld")
    a = ap.parse_args(argv)
    if not a.mean_latency > 0: ap.error("--mean-latency must be > 0")
    from transformers import AutoTokenizer
    from alfworld_rl.env.data import discover_games
    from alfworld_rl.rl.policies import ExpertPolicy, MalformedPolicy
    from alfworld_rl.backends.tiny_model import tiny_qwen3_path

    games = discover_games(data_root(a.games), "train")[: a.games]
    tok = AutoTokenizer.from_pretrained(tiny_qwen3_path())
    latency = lognormal_latency(a.mean_latency, a.sigma)

    class NoisyExpert(ExpertPolicy):
        "The walkthrough, with a malformed reply (which does not move the env) on a share of turns."
        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            self.bad = MalformedPolicy(tok)
        def reply(self, prompt_text, context, rng):
            if rng.random() < a.malformed_rate: return self.bad.reply(prompt_text, context, rng)
            return super().reply(prompt_text, context, rng)

    walls = {}
    for engine in (("fast", "textworld") if a.engine == "both" else (a.engine,)):
        walls[engine] = run_once(a, games, tok, NoisyExpert(tok, latency=latency), engine)
    if len(walls) == 2:
        print(f"fast_wall_s={walls['fast']:.2f} textworld_wall_s={walls['textworld']:.2f} "
              f"rollout_speedup={walls['textworld'] / walls['fast']:.2f}")
    return 0


def run_once(a, games, tok, policy, engine: str) -> float:
    "One rollout of `games` on `engine`; prints its lines and returns its wall-clock seconds."
    from alfworld_rl.rl.rollout import RolloutConfig, run_rollout
    cfg = RolloutConfig(group_size=a.group_size, max_episode_steps=30, max_trajectory_tokens=12000,
                        max_assistant_tokens=256, seed=a.seed, max_requests_in_flight=a.games * a.group_size,
                        engine=engine)
    from tqdm.auto import tqdm
    bar = tqdm(total=len(games) * a.group_size, desc="trajectories")
    t0 = time.perf_counter()
    batch = run_rollout(policy, tok, games, cfg, progress=lambda done, total: bar.update(1))
    wall = time.perf_counter() - t0
    bar.close()
    trajs = batch.trajectories
    crit, lock = critical_path_seconds(trajs), lockstep_seconds(trajs)
    lengths = sorted(len(t.steps) for t in trajs)
    print(f"episode lengths: min {lengths[0]} median {lengths[len(lengths) // 2]} max {lengths[-1]}; "
          f"won {sum(t.won for t in trajs)}/{len(trajs)}; requests {len(policy.requests)}; "
          f"env step time total {sum(s.env_seconds for t in trajs for s in t.steps):.1f}s; "
          f"max reset {max(t.reset_seconds for t in trajs):.1f}s")
    print(f"engine={engine} trajectories={len(trajs)} wall_s={wall:.2f} critical_path_s={crit:.2f} lockstep_s={lock:.2f} "
          f"efficiency={crit / wall:.3f}")
    return wall


if __name__ == "__main__":
    raise SystemExit(main())
