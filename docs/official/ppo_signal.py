"""What PPO's advantages on the official games are made of: the win's part against the invalid-command penalty's part.

    uv run python docs/official/ppo_signal.py runs/official                      # update 1 again, from the SFT state
    uv run python docs/official/ppo_signal.py runs/official --update 12 --model-path SAMPLER_PATH

Replays one PPO update's rollouts of an official run: the games that update drew (its `metrics.jsonl`), the update's
sampling seed, the run's rollout settings, from the weights that sampled it (by default the SFT state, which sampled
update 1). Then, for every game's group of branches, it splits each step's reward into the win's part and the
penalty's part and computes the run's advantage rule (GiGPO or GRPO, its gamma, step return and normalisation) on each
part alone. With the mean-centred rule (`advantage_norm mean`) the advantage is linear in the rewards, so the two
parts add up to the advantage PPO trained on (`assign_advantages`, the trainer's own rule; the script checks it), and the policy gradient, linear in the
advantages, splits the same way. Printed: how many groups hold a win (only those carry any win signal), and the share
of the advantage mass, sum over turns of |A| and of A^2, that each part carries; and the advantages summed over the
refused commands apart from the admitted ones (a positive sum on refused commands pushes the policy towards commands
that change nothing). Writes `--out` (JSON) when given.
"""
import argparse, json, math, sys
from pathlib import Path


def split_rewards(traj, win_reward: float) -> tuple[list[float], list[float]]:
    "A trajectory's step rewards split into the win's part and the rest (the penalties)."
    win = [win_reward if x.won else 0.0 for x in traj.steps]
    return win, [x.reward - w for x, w in zip(traj.steps, win)]


def group_parts(trajs, s, weight: float = 1.0) -> dict[str, list[list[float]]]:
    "Per-step advantages of one group's scored branches under the run's rule, from the win's part and the penalty's part alone."
    from alfworld_rl.rl.advantages import gigpo, grpo
    scored = [t for t in trajs if t.stop_reason != "env_error"]
    out = {}
    for part in ("win", "penalty"):
        steps = [split_rewards(t, s.win_reward)[part == "penalty"] for t in scored]
        episode = [sum(r) for r in steps]
        if s.advantage == "gigpo":
            out[part] = gigpo(episode, [[x.anchor_observation for x in t.steps] for t in scored], steps,
                              gamma=s.gamma, weight=weight, norm=s.advantage_norm, step_return=s.step_return)
        else:
            out[part] = [[a] * len(t.steps) for a, t in zip(grpo(episode, s.advantage_norm), scored)]
    return out


def trained_advantages(trajs) -> list[list[float]]:
    "The per-step advantages `assign_advantages` set on a group's scored branches (what PPO trained on)."
    return [t.step_advantages if t.step_advantages is not None else [t.advantage] * len(t.steps)
            for t in trajs if t.stop_reason != "env_error"]


def by_admission(groups) -> dict[str, dict[str, float]]:
    "The trained advantages summed over admitted and over refused commands: turns, net sum, positive and negative parts."
    out = {k: {"turns": 0, "net": 0.0, "positive": 0.0, "negative": 0.0, "in_won": 0} for k in ("admitted", "refused")}
    for trajs in groups:
        scored = [t for t in trajs if t.stop_reason != "env_error"]
        for traj, advs in zip(scored, trained_advantages(trajs)):
            for step, a in zip(traj.steps, advs):
                o = out["admitted" if step.admissible else "refused"]
                o["turns"] += 1; o["net"] += a; o["in_won"] += traj.won
                o["positive" if a > 0 else "negative"] += a
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", help="an official run's directory (alfworld-rl mini --settings official --out-dir ...)")
    ap.add_argument("--seed", type=int, default=0, help="the training seed whose PPO to replay (default 0)")
    ap.add_argument("--update", type=int, default=1, help="the PPO update whose games and sampling seed to replay")
    ap.add_argument("--model-path", default=None, help="sampler weights to play (default: the seed's final SFT state)")
    ap.add_argument("--out", default=None, help="write the figures to this JSON file")
    a = ap.parse_args(argv)
    from alfworld_rl.backends.service import make_service_client
    from alfworld_rl.env.data import discover_games
    from alfworld_rl.mini.recipe import MiniPaths, MiniSettings, base_model_path, ppo_config
    from alfworld_rl.rl.loop import step_seed
    from alfworld_rl.rl.ppo import assign_advantages
    from alfworld_rl.rl.rollout import RolloutConfig, run_rollout
    from alfworld_rl.core import read_jsonl
    from alfworld_rl.settings import project
    run = Path(a.run)
    saved = json.loads((run / "settings.json").read_text())
    for name in ("seeds", "task_types"): saved[name] = tuple(saved[name])
    s, paths = MiniSettings(**saved), MiniPaths(run)
    if s.advantage_norm != "mean": sys.exit("the split into parts needs advantage_norm mean (the rule is then linear)")
    if s.refused_credit != "all": sys.exit("the split into parts needs refused_credit all (withholding credit is not linear)")
    metrics = [r for r in read_jsonl(paths.ppo_run(a.seed) / "metrics.jsonl") if r["step"] == a.update]
    if not metrics: sys.exit(f"{paths.ppo_run(a.seed)} has no update {a.update} in metrics.jsonl")
    model = a.model_path
    if model is None:
        saves = [r for r in read_jsonl(paths.sft_run(a.seed) / "checkpoints.jsonl") if r["step"] == s.sft_steps]
        model = saves[-1]["sampler_path"]
    by_id = {g.id: g for g in discover_games(paths.data, "train")}
    games = [by_id[i] for i in metrics[-1]["games"]]
    config = ppo_config(s, paths, a.seed)
    rc = project(RolloutConfig, config, seed=step_seed(config.seed, a.update))
    svc = make_service_client("local", device="cpu")
    sc = svc.create_sampling_client(str(base_model_path(s)), model_path=model)
    batch = run_rollout(sc, sc.get_tokenizer(), games, rc)
    groups = assign_advantages(batch.trajectories, s.advantage, s.advantage_norm, s.gamma, config.step_advantage_weight,
                               s.step_return)
    won = sum(t.won for t in batch.trajectories)
    wins_per_group = sorted((sum(t.won for t in g) for g in groups), reverse=True)
    l1 = {"win": 0.0, "penalty": 0.0}; l2 = {"win": 0.0, "penalty": 0.0}
    turns = turns_win = 0; worst = 0.0
    for trajs in groups:
        parts = group_parts(trajs, s, config.step_advantage_weight)
        for full, win, pen in zip(trained_advantages(trajs), parts["win"], parts["penalty"]):
            for f, w, p in zip(full, win, pen):
                worst = max(worst, abs(f - w - p))
                l1["win"] += abs(w); l1["penalty"] += abs(p); l2["win"] += w * w; l2["penalty"] += p * p
                turns += 1; turns_win += w != 0
    if worst > 1e-9: sys.exit(f"the parts do not add up to the advantage (off by {worst:.2e}): the split is not exact")
    res = {"run": str(run), "update": a.update, "model_path": model, "advantage": s.advantage,
           "episodes": len(batch.trajectories), "won": won, "recorded_success": metrics[-1]["rollout/success_rate"],
           "groups": len(groups), "groups_with_a_win": sum(w > 0 for w in wins_per_group),
           "wins_per_group": wins_per_group, "turns": turns, "turns_with_win_signal": turns_win,
           "win_share_l1": l1["win"] / (l1["win"] + l1["penalty"]),
           "win_share_l2": l2["win"] / (l2["win"] + l2["penalty"]),
           "invalid_actions_mean": sum(t.invalid_action_count for t in batch.trajectories) / len(batch.trajectories)}
    print(f"update {a.update} replayed: {won} of {res['episodes']} episodes won ({100 * won / res['episodes']:.1f}%; "
          f"the run recorded {100 * res['recorded_success']:.1f}%), {res['invalid_actions_mean']:.1f} invalid commands "
          f"per episode")
    print(f"groups holding a win: {res['groups_with_a_win']} of {res['groups']} (wins per group {wins_per_group})")
    print(f"turns whose advantage has a win part: {turns_win} of {turns} ({100 * turns_win / turns:.1f}%)")
    print(f"share of the advantage carried by the win: {100 * res['win_share_l1']:.1f}% of sum |A|, "
          f"{100 * res['win_share_l2']:.1f}% of sum A^2; the penalty: the rest")
    res["by_admission"] = kinds = by_admission(groups)
    positive = sum(k["positive"] for k in kinds.values())
    for name, k in kinds.items():
        print(f"{name} commands: {k['turns']} turns ({k['in_won']} in won episodes), advantage summed {k['net']:+.2f} "
              f"({k['net'] / max(k['turns'], 1):+.3f} per turn) "
              f"(positive {k['positive']:.2f} = {100 * k['positive'] / positive if positive else 0:.1f}% of all positive, "
              f"negative {k['negative']:.2f})")
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
