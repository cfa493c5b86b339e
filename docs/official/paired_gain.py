"""PPO - SFT paired by game: both checkpoints play the same validation games, so the gain's standard error can be
taken over the per-game differences instead of combining two independent ones.

    uv run python docs/official/paired_gain.py runs/official/eval/sft-seed0.jsonl runs/official/eval/ppo-seed0.jsonl

For each split: the mean over games of (PPO's success on the game - SFT's), each game's success being the mean of its
episodes, the standard error of that mean, and how many games went up and down. Both files must hold the same games.
"""
import argparse, json, math, statistics, sys
from collections import defaultdict
from pathlib import Path

SPLITS = ("valid_seen", "valid_unseen")


def per_game(path: Path) -> dict:
    "{split: {game id: success rate over its episodes}} of an evaluation file's trajectory records."
    wins = defaultdict(lambda: defaultdict(list))
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip(): continue
        r = json.loads(line)
        if r.get("type") == "trajectory": wins[r["split"]][r["game_id"]].append(float(r["won"]))
    return {split: {g: statistics.fmean(v) for g, v in games.items()} for split, games in wins.items()}


def paired(before: dict, after: dict) -> dict:
    "Mean and standard error of after - before over the games both hold (the same games required), and the games up/down."
    if set(before) != set(after):
        raise ValueError(f"the two files hold different games ({len(set(before) ^ set(after))} in one only)")
    diffs = [after[g] - before[g] for g in sorted(before)]
    se = statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else float("nan")
    return {"games": len(diffs), "gain": statistics.fmean(diffs), "se": se,
            "up": sum(d > 0 for d in diffs), "down": sum(d < 0 for d in diffs)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("before", type=Path, help="evaluation JSONL of the first checkpoint (SFT)")
    ap.add_argument("after", type=Path, help="evaluation JSONL of the second checkpoint (PPO)")
    a = ap.parse_args(argv)
    for name, path in (("before", a.before), ("after", a.after)):
        if not path.is_file(): ap.error(f"{name}: {path} is not a file")
    b, c = per_game(a.before), per_game(a.after)
    print("| split | games | after - before (points) | games up | games down |")
    print("|---|---|---|---|---|")
    for split in [s for s in SPLITS if s in b or s in c]:
        try: r = paired(b.get(split, {}), c.get(split, {}))
        except ValueError as e:
            print(f"paired_gain.py: {split}: {e}", file=sys.stderr); return 2
        print(f"| {split} | {r['games']} | {100 * r['gain']:+.1f} +- {100 * r['se']:.1f} | {r['up']} | {r['down']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
