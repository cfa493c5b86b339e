"""Whole PPO updates of this checkout against another checkout (for example today's main), side by side in one run.

Each round runs `--updates` PPO updates under each checkout, in turn, in a fresh Python process whose imports
come from that checkout (`PYTHONPATH`), on the same generated games with the same seeds and settings. Two
settings are available: `issue` (the speed issue's: mini-base, 4 games x 8 branches, one Adam step) and `mini`
(the mini recipe's PPO: mini-base-4layers, 16 games x 8 branches, 4 minibatches, penalty 0.01, step return
`all`); both use window context, GiGPO, the fast engine, 12 steps and 48 reply tokens. It prints, per checkout,
episodes per second of update time (`rollout/trajectories` over `time/update_s`), the rollout and training parts,
and whether the two checkouts sampled the same episodes (their rollout success and token counts).

    git worktree add /tmp/main-before main      # or any other checkout of the project
    uv run python benchmarks/update_speed.py --other /tmp/main-before [--setting issue] [--updates 2] [--rounds 2]

Run it on an otherwise idle machine: the processes run one after another, each with the machine's threads
(`--threads` to pin them, 1 emulates one of the mini's seed workers).
"""
import argparse, json, os, subprocess, sys, tempfile
from pathlib import Path

SETTINGS = {
    "issue": dict(base_model="mini-base", games_per_batch=4, ppo_minibatches=1, invalid_penalty=0.1, step_return="win"),
    "mini": dict(base_model="mini-base-4layers", games_per_batch=16, ppo_minibatches=4, invalid_penalty=0.01,
                 step_return="all"),
}

CHILD = r"""
import json, sys, torch
if {threads}: torch.set_num_threads({threads})
from alfworld_rl.runs.train import Trainer
from alfworld_rl.runs.train_config import TrainConfig
c = TrainConfig(backend="local", engine="fast", context="window", advantage="gigpo", max_steps={updates}, group_size=8,
                max_episode_steps=12, max_assistant_tokens=48, max_trajectory_tokens=6000, learning_rate=5e-4, lora_rank=64,
                save_every=0, run_name="run", output_dir={out!r}, data_root={data!r}, swanlab_mode="disabled", seed=0,
                **{settings!r})
trainer = Trainer(c, progress=False).open()
try: trainer.run()
finally: trainer.close()
print(json.dumps([json.loads(l) for l in (c.run_dir / "metrics.jsonl").read_text().splitlines()]))
"""


def run_updates(tree: Path, data: Path, out: Path, args) -> list[dict]:
    "The metrics of `args.updates` PPO updates run with `tree`'s code in a fresh process."
    code = CHILD.format(threads=args.threads, updates=args.updates, out=str(out), data=str(data),
                        settings=SETTINGS[args.setting])
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=tree)
    if proc.returncode: raise SystemExit(f"updates under {tree} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def rate(metrics: list[dict]) -> float:
    "Episodes per second of update time over `metrics`' updates."
    return sum(m["rollout/trajectories"] for m in metrics) / sum(m["time/update_s"] for m in metrics)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--other", required=True, help="another checkout of the project (its root directory)")
    ap.add_argument("--setting", choices=sorted(SETTINGS), default="issue")
    ap.add_argument("--updates", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0, help="torch threads per process (0: torch's default)")
    args = ap.parse_args()
    here, other = Path(__file__).resolve().parents[1], Path(args.other).resolve()
    if not (other / "alfworld_rl").is_dir(): raise SystemExit(f"--other: no alfworld_rl package under {other}")
    from alfworld_rl.mini import recipe as mini
    work = Path(tempfile.mkdtemp(prefix="update_speed-"))
    per_batch = SETTINGS[args.setting]["games_per_batch"]
    s = mini.settings_from("mini", train_games=per_batch * args.updates, valid_games=2, data_seed=0)
    mini.mini_data(s, mini.MiniPaths(work / "games"), progress=False)
    trees = {"this": here, "other": other}
    results = {name: [] for name in trees}
    for r in range(args.rounds):
        for name, tree in trees.items():
            metrics = run_updates(tree, work / "games" / "data", work / f"{name}-{r}", args)
            results[name].append(metrics)
            print(f"round {r} {name}: {rate(metrics):.3f} episodes/s", flush=True)
    rates = {}
    for name, runs in results.items():
        best = max(runs, key=rate)
        episodes, seconds = sum(m["rollout/trajectories"] for m in best), sum(m["time/update_s"] for m in best)
        rates[name] = rate(best)
        print(f"{name} ({trees[name]}): {episodes:.0f} episodes in {seconds:.1f} s of updates: {rates[name]:.3f} episodes/s "
              f"(rollout {sum(m['time/rollout_s'] for m in best):.1f} s, training {sum(m['time/train_s'] for m in best):.1f} s; "
              f"best of {len(runs)}); success {[round(m['rollout/success_rate'], 3) for m in best]}, "
              f"sampled tokens {[int(m['tokens/sampled']) for m in best]}")
    same = all([m["tokens/sampled"] for m in a] == [m["tokens/sampled"] for m in b]
               for a, b in zip(results["this"], results["other"]))
    print(f"speedup this/other: {rates['this'] / rates['other']:.2f}x episodes/s; same sampled token counts: {same}")


if __name__ == "__main__":
    main()
