"""What the two prompt contexts cost: tokens a service would bill per trajectory, full vs window.

The same games are played by the same scripted policy in both context modes (`--context full`: one growing
conversation; `--context window`: every turn's prompt rebuilt from the task, the last `--history-length`
steps, the current observation and the admissible actions). The policy's actions do not depend on the
context, so both runs take the same actions and see the same observations; only the prompts differ.

Counted per trajectory:
- prefill: the whole prompt sent at every turn (what a service bills as prefill),
- sampled: the reply tokens,
- trained: the tokens of the trajectory's training datums (full: the whole conversation, one datum;
  window: one datum per turn, its prompt + reply).

    uv run python benchmarks/context_cost.py [--data-root DIR] [--games 4] [--branches 2] [--steps 50]
                                             [--policy random|searching] [--history-length 2]

Without --data-root, train games with ALFWorld-sized rooms (15-40 receptacles) are generated once into the
user cache (slow the first time: a few minutes). Random admissible play rarely wins, so most episodes run
all `--steps` turns; the searching expert wins early and shows the cost of short episodes.
"""
import argparse, sys, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from env_throughput import bench_games      # one helper for the cached benchmark games (own cache name and seed here)


def play(games, tokenizer, context, args):
    "Play every game `--branches` times with the scripted policy in `context`; returns (batch, datums, seconds)."
    from alfworld_rl.rl.policies import RandomAdmissiblePolicy, SearchingExpertPolicy
    from alfworld_rl.rl.ppo import assign_advantages, trajectory_datums
    from alfworld_rl.rl.rollout import RolloutConfig, run_rollout
    policy = RandomAdmissiblePolicy(tokenizer) if args.policy == "random" else SearchingExpertPolicy(tokenizer, 3)
    config = RolloutConfig(group_size=args.branches, max_episode_steps=args.steps, max_trajectory_tokens=1_000_000,
                           max_assistant_tokens=128, temperature=1.0, seed=args.seed, context=context,
                           history_length=args.history_length)
    t0 = time.perf_counter()
    batch = run_rollout(policy, tokenizer, games, config)
    seconds = time.perf_counter() - t0
    for t in batch.trajectories: t.advantage, t.step_advantages = 1.0, None    # count every datum
    datums = [trajectory_datums(t) for t in batch.trajectories]
    return batch, datums, seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-root", default=None)
    ap.add_argument("--games", type=int, default=4)
    ap.add_argument("--branches", type=int, default=2)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--policy", choices=("random", "searching"), default="random")
    ap.add_argument("--history-length", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    from alfworld_rl.backends.local_models import load_tokenizer
    from alfworld_rl.backends.tiny_model import tiny_qwen3_path
    tokenizer = load_tokenizer(str(tiny_qwen3_path()))
    games = bench_games(args.data_root, args.games, cache="bench_context_games", seed=11)
    rows = {}
    for context in ("full", "window"):
        batch, datums, seconds = play(games, tokenizer, context, args)
        n = len(batch.trajectories)
        actions = [[s.action for s in t.steps] for t in batch.trajectories]
        rows[context] = dict(trajs=n, turns=sum(len(t.steps) for t in batch.trajectories) / n,
                             prefill=batch.prefill_tokens / n, sampled=batch.sampled_tokens / n,
                             trained=sum(len(d.model_input) for ds in datums for d in ds) / n,
                             datums=sum(len(ds) for ds in datums) / n,
                             last_prompt=max(max(v) for v in batch.prompt_lengths_by_turn.values()),
                             seconds=seconds, actions=actions)
    if rows["full"]["actions"] != rows["window"]["actions"]:
        raise SystemExit("the two runs took different actions; the comparison would not be fair")
    print(f"{len(games)} games x {args.branches} branches, {args.policy} policy, up to {args.steps} steps, "
          f"history {args.history_length}")
    print("| context | turns / traj | prefill / traj | sampled / traj | trained / traj | datums / traj | longest prompt |")
    print("|---|---|---|---|---|---|---|")
    for context, r in rows.items():
        print(f"| {context} | {r['turns']:.1f} | {r['prefill']:,.0f} | {r['sampled']:,.0f} | {r['trained']:,.0f} | "
              f"{r['datums']:.1f} | {r['last_prompt']:,} |")
    f, w = rows["full"], rows["window"]
    print(f"full_prefill_per_traj={f['prefill']:.0f} window_prefill_per_traj={w['prefill']:.0f} "
          f"ratio={f['prefill'] / w['prefill']:.2f} full_train_tokens_per_traj={f['trained']:.0f} "
          f"window_train_tokens_per_traj={w['trained']:.0f}")


if __name__ == "__main__":
    main()
