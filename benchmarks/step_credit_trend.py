"""Does GiGPO's step credit depend on the turn at which a state is visited? Both step-return rules on the same rollouts.

One batch of real rollouts of the mini recipe's settings (mini-base or a checkpoint, window context, 12 steps,
--games x --group-size, temperature 1, fast engine) on generated mini games. For each rule (`all`: every later
reward, penalties included; `win`: the step's own reward and the discounted later win) the script computes the
step advantages A_S of every anchor group and the within-group slope of A_S on the turn of the visit (a least-squares
slope with each anchor group's own mean turn and mean A_S removed), over the anchor groups whose members stand at
two or more different turns. A positive slope means that a later visit of a state gets more credit than an earlier
one for whatever it did there.

    uv run python benchmarks/step_credit_trend.py [--games 16] [--group-size 8] [--model-path SAMPLER_PATH]
"""
import argparse, math, tempfile
from pathlib import Path


def within_group_slope(points: list[list[tuple[int, float]]]) -> float:
    "Least-squares slope of value on turn with each group's means removed (fixed effects); 0 when no group varies."
    num = den = 0.0
    for group in points:
        tm = sum(t for t, _ in group) / len(group); am = sum(a for _, a in group) / len(group)
        num += sum((t - tm) * (a - am) for t, a in group); den += sum((t - tm) ** 2 for t, _ in group)
    return num / den if den else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--games", type=int, default=16)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--data-seed", type=int, default=3)
    ap.add_argument("--model-path", default=None, help="sampler weights of a checkpoint (default: mini-base itself)")
    ap.add_argument("--invalid-penalty", type=float, default=0.1)
    args = ap.parse_args()
    from alfworld_rl.backends.service import make_service_client
    from alfworld_rl.env.data import discover_games
    from alfworld_rl.mini import recipe as mini
    from alfworld_rl.rl.advantages import gigpo_parts
    from alfworld_rl.rl.rollout import RolloutConfig, run_rollout
    root = Path(tempfile.mkdtemp(prefix="step_credit-"))
    s = mini.settings_from("mini", train_games=args.games, valid_games=1, data_seed=args.data_seed)
    mini.mini_data(s, mini.MiniPaths(root), progress=False)
    games = discover_games(root / "data", "train")[:args.games]
    svc = make_service_client("local", device="cpu")
    sc = svc.create_sampling_client("mini-base", model_path=args.model_path)
    batch = run_rollout(sc, sc.get_tokenizer(), games, RolloutConfig(
        group_size=args.group_size, max_episode_steps=12, max_assistant_tokens=48, max_trajectory_tokens=6000,
        temperature=1.0, seed=0, context="window", engine="fast", invalid_penalty=args.invalid_penalty))
    groups = {}
    for t in batch.trajectories: groups.setdefault(t.game.id, []).append(t)
    won = sum(t.won for t in batch.trajectories); n = len(batch.trajectories)
    cut = sum(t.stop_reason == "max_steps" for t in batch.trajectories)
    print(f"{n} episodes on {len(groups)} games: {won} won ({100 * won / n:.1f}%), {cut} cut at the step limit "
          f"({100 * cut / n:.1f}%); penalty {args.invalid_penalty} per invalid action, win 1")
    for rule in ("all", "win"):
        points, mixed, shared, abs_sum, steps = [], 0, 0, 0.0, 0
        for trajs in groups.values():
            scored = [t for t in trajs if t.stop_reason != "env_error"]
            if not scored: continue
            parts = gigpo_parts([t.reward for t in scored], [[x.anchor_observation for x in t.steps] for t in scored],
                                [[x.reward for x in t.steps] for t in scored], gamma=0.95, step_return=rule)
            members = {}
            for i, t in enumerate(scored):
                for k, x in enumerate(t.steps):
                    members.setdefault(x.anchor_observation, []).append((k, parts.step_advantages[i][k]))
                    abs_sum += abs(parts.step_advantages[i][k]); steps += 1
            for m in members.values():
                if len(m) < 2: continue
                shared += 1
                if len({k for k, _ in m}) > 1: mixed += 1; points.append(m)
        print(f"step_return={rule}: slope of A_S on the turn within anchor groups {within_group_slope(points):+.4f} per turn "
              f"(mean |A_S| {abs_sum / steps:.3f}; {mixed} of {shared} shared anchors mix turns)")


if __name__ == "__main__":
    main()
