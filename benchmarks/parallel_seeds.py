"""Seeds in turn in one process vs seeds at once in worker processes: the mini recipe's `--workers`, measured.

The mini recipe's model is small (four decoder layers, under a million parameters), so a second torch thread
inside one process speeds a forward pass up far less than twice, while two processes each on one core do twice the
work. This script runs the per-seed part of the recipe (SFT, its evaluation, PPO from the SFT state, its
evaluation) for two seeds on the same generated games, first with `workers=1` (one process, the machine's torch
threads, seed after seed), then with `workers=2` (two spawned processes, cores / 2 threads each), and prints both
wall-clock times and their ratio. The stages are the mini recipe's, shortened (fewer games, SFT steps and PPO
updates; the same episode, prompt and model settings), so the ratio carries over to the full run; run it on an
otherwise idle machine.

    uv run python benchmarks/parallel_seeds.py [--sft-steps 8] [--ppo-steps 3] [--out DIR]
"""
import argparse, os, tempfile, time
from pathlib import Path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sft-steps", type=int, default=8)
    ap.add_argument("--ppo-steps", type=int, default=3)
    ap.add_argument("--out", default=None, help="working directory (default: a temporary one)")
    args = ap.parse_args()
    import torch
    from alfworld_rl.mini import recipe as mini
    root = Path(args.out or tempfile.mkdtemp(prefix="parallel_seeds_"))
    s = mini.settings_from("mini", seeds=[0, 1], train_games=16, valid_games=6, sft_steps=args.sft_steps,
                           ppo_steps=args.ppo_steps)
    mini.check_batches(s)   # 16 games: one PPO update's, the fewest its batches allow
    shared = mini.MiniPaths(root / "shared")
    mini.mini_data(s, shared, progress=False)
    demos = mini.mini_demonstrations(s, shared, progress=False)
    print(f"{os.process_cpu_count()} cores, torch threads in this process: {torch.get_num_threads()}; "
          f"{len(demos)} demonstrations, {args.sft_steps} SFT steps and {args.ppo_steps} PPO updates per seed")
    seconds = {}
    for workers in (1, 2):
        paths = mini.MiniPaths(root / f"workers{workers}")
        paths.root.mkdir(parents=True, exist_ok=True)
        if not paths.data.exists(): paths.data.symlink_to(shared.data.resolve(), target_is_directory=True)
        t0 = time.perf_counter()
        mini.run_seeds(s, paths, demos, workers, progress=False)
        seconds[workers] = time.perf_counter() - t0
        print(f"workers={workers}: two seeds in {seconds[workers]:.0f} s")
    print(f"in_turn_s={seconds[1]:.0f} at_once_s={seconds[2]:.0f} speedup={seconds[1] / seconds[2]:.2f}")


if __name__ == "__main__":
    main()
