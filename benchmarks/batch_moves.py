"""Rows joining and leaving the sampler's running batch: what they cost in one rollout, this checkout against another.

One rollout of the mini recipe's PPO batch (mini-base-4layers, 16 games x 8 branches, window context, the fast
engine, 12 steps, 48 reply tokens, one torch thread) in a fresh process per checkout (`PYTHONPATH`), alternated for
`--rounds`. Around the two functions that move the batch cache (`_padded_cat`, rows joining; `_select_rows`, rows
leaving) it counts calls and seconds, and how many joins stayed in the batch's own storage (free rows) and how many selections trimmed left
padding (where the checkout has them). It prints the rollout's seconds and its sampled tokens: the same tokens for
both checkouts means the moves changed nothing that was sampled.

    git worktree add /tmp/main-before main      # or any other checkout of the project
    uv run python benchmarks/batch_moves.py --other /tmp/main-before [--rounds 2]
"""
import argparse, json, os, subprocess, sys, tempfile
from pathlib import Path

CHILD = r"""
import collections, json, time, torch
torch.set_num_threads(1)
from alfworld_rl.backends import kv_cache as K
from alfworld_rl.backends.service import make_service_client
from alfworld_rl.env.data import discover_games
from alfworld_rl.rl.rollout import RolloutConfig, run_rollout

count, secs = collections.Counter(), collections.Counter()
cat, select = K._padded_cat, K._select_rows

def timed_cat(a, b):
    t = time.perf_counter(); out = cat(a, b); secs["join"] += time.perf_counter() - t
    count["join"] += 1; count["join into free rows"] += out.untyped_storage().data_ptr() == a.untyped_storage().data_ptr()
    return out

def timed_select(cache, keep, trim):
    t = time.perf_counter(); select(cache, keep, trim); secs["leave"] += time.perf_counter() - t
    count["leave"] += 1; count["leave with a trim"] += bool(trim)

K._padded_cat, K._select_rows = timed_cat, timed_select
games = discover_games({data!r}, "train")[:16]
tc = make_service_client("local", device="cpu").create_lora_training_client("mini-base-4layers", rank=64, seed=0)
sc = tc.save_weights_and_get_sampling_client()
cfg = RolloutConfig(group_size=8, max_episode_steps=12, max_assistant_tokens=48, max_trajectory_tokens=6000,
                    temperature=1.0, seed=0, context="window", engine="fast")
t0 = time.perf_counter()
batch = run_rollout(sc, tc.get_tokenizer(), games, cfg)
seconds = time.perf_counter() - t0
tokens = [len(s.completion_tokens) for tr in batch.trajectories for s in tr.steps]
print(json.dumps(dict(seconds=seconds, episodes=len(batch.trajectories), tokens=sum(tokens), count=count, secs=secs)))
"""


def rollout(tree: Path, data: Path) -> dict:
    "The counts, seconds and sampled tokens of one rollout with `tree`'s code, in a fresh process."
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run([sys.executable, "-c", CHILD.format(data=str(data))], env=env, capture_output=True, text=True, cwd=tree)
    if proc.returncode: raise SystemExit(f"rollout under {tree} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--other", required=True, help="another checkout of the project (its root directory)")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    here, other = Path(__file__).resolve().parents[1], Path(args.other).resolve()
    if not (other / "alfworld_rl").is_dir(): raise SystemExit(f"--other: no alfworld_rl package under {other}")
    from alfworld_rl.mini import recipe as mini
    work = Path(tempfile.mkdtemp(prefix="batch_moves-"))
    mini.mini_data(mini.settings_from("mini", train_games=16, valid_games=2, data_seed=0), mini.MiniPaths(work), progress=False)
    print("| round | checkout | rollout s | joins (into free rows) | join s | leaves (with a trim) | leave s | sampled tokens |\n"
          "|---|---|---|---|---|---|---|---|")
    for r in range(args.rounds):
        for name, tree in (("this", here), ("other", other)):
            x = rollout(tree, work / "data")
            c, s = x["count"], x["secs"]
            print(f"| {r} | {name} | {x['seconds']:.1f} | {c.get('join', 0)} ({c.get('join into free rows', 0)}) | {s.get('join', 0):.1f} | "
                  f"{c.get('leave', 0)} ({c.get('leave with a trim', 0)}) | {s.get('leave', 0):.1f} | {x['tokens']} |", flush=True)


if __name__ == "__main__":
    main()
