"""Differential test of the fast engine against TextWorld (the reference) on any ALFWorld data root.

Each game is played for --steps random steps in both engines side by side (mostly admissible
commands, some that are not), comparing observation, score, done, won and the admissible commands
after every step and the intro after every reset (`alfworld_rl.env.branches.compare_engines`). A game stops at
its first mismatch, which is printed.

    uv run python benchmarks/engine_diff.py --games N --steps M [--data-root DIR] [--splits train valid_seen valid_unseen] [--seed 0]

Ends with one line: games=... steps=... mismatches=...
"""
import argparse, sys, time

from alfworld_rl.core import resolve_data_root
from alfworld_rl.env.data import discover_games
from alfworld_rl.env.branches import compare_engines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-root", default=None, help="ALFWorld data root (default: $ALFWORLD_DATA or datasets/alfworld)")
    ap.add_argument("--games", type=int, default=10, help="games to play (spread over the splits)")
    ap.add_argument("--steps", type=int, default=1000, help="total steps over all games")
    ap.add_argument("--splits", nargs="+", default=["train", "valid_seen", "valid_unseen"])
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    if a.games < 1 or a.steps < a.games: sys.exit("--games must be >= 1 and --steps >= --games")
    root = resolve_data_root(a.data_root)
    games = [g for split in a.splits for g in discover_games(root, split)]
    if not games: sys.exit(f"no games under {root}")
    games = games[:: max(1, len(games) // a.games)][: a.games]
    per_game = a.steps // len(games)
    total = bad = 0
    t0 = time.perf_counter()
    for i, game in enumerate(games):
        n = per_game + (1 if i < a.steps - per_game * len(games) else 0)
        played, mismatches = compare_engines(game.game_file, n, seed=a.seed + i)
        total += played; bad += len(mismatches)
        for m in mismatches: print("MISMATCH", m[:4000], flush=True)
        print(f"[{i + 1}/{len(games)}] {game.id} steps={played} mismatches={len(mismatches)} "
              f"elapsed={time.perf_counter() - t0:.0f}s", flush=True)
    print(f"games={len(games)} steps={total} mismatches={bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
