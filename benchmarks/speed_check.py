"""The speed issue's check: its PPO command and an evaluation, this checkout against another, side by side in one run.

Through the command line only (`alfworld-rl train` and `alfworld-rl eval` in a fresh process whose imports come from
the checkout, `PYTHONPATH`), so any checkout can be the other one, including those from before the layout moved into
subpackages. On the same generated mini games (this checkout's generator), alternated for `--rounds`:

- `train`: `--updates` PPO updates of the issue's settings (mini-base, window context, GiGPO, fast engine, 12 steps,
  48 reply tokens, 4 games x 8 branches, one Adam step per update, LoRA rank 64, learning rate 5e-4); episodes per
  second of update time (`rollout/trajectories` over `time/update_s` in `metrics.jsonl`), the rollout and training
  parts, and the sampled tokens of each update (equal for both checkouts: the same episodes were played);
- `eval`: `alfworld-rl eval` of mini-base on `--eval-games` valid_unseen games with each checkout's default settings
  (temperature 1 here, the mini's), wall clock of the whole command (start-up included) and of the process after
  its imports, and whether both played the same trajectories.

    git worktree add /tmp/main-before <commit>      # or any other checkout of the project
    uv run python benchmarks/speed_check.py --other /tmp/main-before [--rounds 2] [--updates 2] [--eval-games 60]
    uv run python benchmarks/speed_check.py --other . --extra=--dtype=bfloat16   # one setting against the same code

`--extra` adds flags to this checkout's `train` and `eval` commands only (`=` joins a flag and its value), so a
setting that changes the arithmetic is measured against the same code without it.

Run it on an otherwise idle machine; it reports the best round of each.
"""
import argparse, json, os, subprocess, sys, tempfile, time
from pathlib import Path

from update_speed import rate           # episodes per second of update time, as the speed issue counts them

TRAIN = ["train", "--backend", "local", "--engine", "fast", "--context", "window", "--advantage", "gigpo", "--group-size", "8",
         "--games-per-batch", "4", "--max-episode-steps", "12", "--max-assistant-tokens", "48", "--base-model", "mini-base",
         "--no-report", "--swanlab-mode", "disabled", "--run-name", "run", "--seed", "0", "--save-every", "0",
         "--learning-rate", "5e-4", "--lora-rank", "64"]
EVAL = ["eval", "--backend", "local", "--engine", "fast", "--context", "window", "--base-model", "mini-base", "--split",
        "valid_unseen", "--max-episode-steps", "12", "--max-assistant-tokens", "48", "--temperature", "1.0",
        "--no-report", "--swanlab-mode", "disabled", "--seed", "0", "--overwrite-output"]
CHILD = "import time; t = time.perf_counter(); from alfworld_rl.cli import main; import torch, transformers; " \
        "print('imports', time.perf_counter() - t, flush=True); raise SystemExit(main({argv!r}))"


def cli(tree: Path, argv: list[str]) -> tuple[float, float]:
    "Wall seconds of `alfworld-rl ARGV` run with `tree`'s code in a fresh process, and of its imports."
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD.format(argv=argv)], env={**os.environ, "PYTHONPATH": str(tree)},
                          capture_output=True, text=True, cwd=tempfile.gettempdir())
    wall = time.perf_counter() - t
    if proc.returncode: raise SystemExit(f"alfworld-rl {argv[0]} under {tree} failed:\n{proc.stderr[-3000:]}")
    imports = next(float(l.split()[1]) for l in proc.stdout.splitlines() if l.startswith("imports "))
    return wall, imports


def trajectories(path: Path) -> dict:
    "The messages of each trajectory record of an evaluation file, by game and branch."
    out = {}
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        if rec.get("type") == "trajectory": out[(rec["game_id"], rec.get("branch"))] = json.dumps(rec["messages"])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--other", required=True, help="another checkout of the project (its root directory)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--updates", type=int, default=2)
    ap.add_argument("--eval-games", type=int, default=60)
    ap.add_argument("--extra", action="append", default=[], help="a flag for this checkout's commands, e.g. --extra=--dtype=bfloat16")
    args = ap.parse_args()
    here, other = Path(__file__).resolve().parents[1], Path(args.other).resolve()
    if not (other / "alfworld_rl" / "cli.py").is_file(): raise SystemExit(f"--other: no alfworld_rl/cli.py under {other}")
    from alfworld_rl.mini import recipe as mini
    work = Path(tempfile.mkdtemp(prefix="speed_check-"))
    s = mini.settings_from("mini", train_games=4 * args.updates, valid_games=args.eval_games, data_seed=0)
    mini.mini_data(s, mini.MiniPaths(work / "games"), progress=False)
    data = str(work / "games" / "data")
    trees = {"this": here, "other": other}
    extra = {"this": [part for f in args.extra for part in f.split("=", 1)], "other": []}
    train, evals = {k: [] for k in trees}, {k: [] for k in trees}
    for r in range(args.rounds):
        for name, tree in trees.items():
            out = work / f"{name}-{r}"
            cli(tree, TRAIN + extra[name] + ["--max-steps", str(args.updates), "--data-root", data, "--output-dir", str(out)])
            ms = [json.loads(l) for l in (out / "run" / "metrics.jsonl").read_text().splitlines()]
            train[name].append(dict(rate=rate(ms),
                                    update=sum(m["time/update_s"] for m in ms), rollout=sum(m["time/rollout_s"] for m in ms),
                                    training=sum(m["time/train_s"] for m in ms), tokens=[int(m["tokens/sampled"]) for m in ms]))
            wall, imports = cli(tree, EVAL + extra[name] + ["--data-root", data, "--limit-per-split", str(args.eval_games),
                                              "--output", str(out / "eval.jsonl")])
            evals[name].append(dict(wall=wall, after_imports=wall - imports, trajectories=trajectories(out / "eval.jsonl")))
            print(f"round {r} {name}: {train[name][-1]['rate']:.3f} episodes/s in PPO updates, eval {wall:.1f} s", flush=True)
    best_t = {k: max(v, key=lambda x: x["rate"]) for k, v in train.items()}
    best_e = {k: min(v, key=lambda x: x["wall"]) for k, v in evals.items()}
    print("| checkout | PPO episodes/s | update s (rollout, training) | sampled tokens per update | eval wall s | eval s after imports |")
    print("|---|---|---|---|---|---|")
    for k in trees:
        t, e = best_t[k], best_e[k]
        print(f"| {k} | {t['rate']:.3f} | {t['update']:.1f} ({t['rollout']:.1f}, {t['training']:.1f}) | {t['tokens']} | "
              f"{e['wall']:.1f} | {e['after_imports']:.1f} |")
    same_tokens = all(a["tokens"] == b["tokens"] for a, b in zip(train["this"], train["other"]))
    same_eval = best_e["this"]["trajectories"] == best_e["other"]["trajectories"]
    print(f"PPO speedup this/other: {best_t['this']['rate'] / best_t['other']['rate']:.2f}x; eval speedup: "
          f"{best_e['other']['wall'] / best_e['this']['wall']:.2f}x (after imports "
          f"{best_e['other']['after_imports'] / best_e['this']['after_imports']:.2f}x); same sampled tokens: {same_tokens}; "
          f"same evaluation trajectories: {same_eval}")


if __name__ == "__main__":
    main()
