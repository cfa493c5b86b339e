"""PPO - SFT paired by game: both checkpoints play the same validation games, so the gain's standard error can be
taken over the per-game differences instead of combining two independent ones.

    uv run python docs/official/paired_gain.py runs/official/eval/sft-seed0.jsonl runs/official/eval/ppo-seed0.jsonl

For each split: the mean over games of (PPO's success on the game - SFT's), each game's success being the mean of its
episodes, the standard error of that mean, and how many games went up and down. Both files must hold the same games.

Several runs, each as a (before, after) pair of files, add a row per run and a pooled row per split: the mean of the
runs' paired gains, with the standard error of that mean from their evaluations alone (sqrt of the summed squared
errors over the number of runs) and the runs' lowest and highest gain beside it, since two runs of one recipe can
differ by more than their evaluations do:

    uv run python docs/official/paired_gain.py run4/sft.jsonl run4/ppo.jsonl run5/sft.jsonl run5/ppo.jsonl
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
    ap.add_argument("files", type=Path, nargs="+", metavar="BEFORE AFTER",
                    help="evaluation JSONL of the first checkpoint (SFT) then of the second (PPO); more pairs: more runs")
    a = ap.parse_args(argv)
    if len(a.files) % 2: ap.error(f"files come in (before, after) pairs; got {len(a.files)}")
    for path in a.files:
        if not path.is_file(): ap.error(f"{path} is not a file")
    pairs = [(per_game(a.files[i]), per_game(a.files[i + 1])) for i in range(0, len(a.files), 2)]
    many = len(pairs) > 1
    print(("| split | run " if many else "| split ") + "| games | after - before (points) | games up | games down |")
    print("|---" * (6 if many else 5) + "|")
    for split in [x for x in SPLITS if any(x in b or x in c for b, c in pairs)]:
        runs = []
        for i, (b, c) in enumerate(pairs, 1):
            try: r = paired(b.get(split, {}), c.get(split, {}))
            except ValueError as e:
                print(f"paired_gain.py: {split}{f' (run {i})' if many else ''}: {e}", file=sys.stderr); return 2
            runs.append(r)
            print(f"| {split} " + (f"| {i} " if many else "") + f"| {r['games']} | {100 * r['gain']:+.1f} +- "
                  f"{100 * r['se']:.1f} | {r['up']} | {r['down']} |")
        if many:
            gain = statistics.fmean(r["gain"] for r in runs)
            se = math.sqrt(sum(r["se"] ** 2 for r in runs)) / len(runs)
            low, high = min(r["gain"] for r in runs), max(r["gain"] for r in runs)
            print(f"| {split} | pooled ({len(runs)} runs; runs {100 * low:+.1f} to {100 * high:+.1f}) | "
                  f"{sum(r['games'] for r in runs)} | {100 * gain:+.1f} +- {100 * se:.1f} | "
                  f"{sum(r['up'] for r in runs)} | {sum(r['down'] for r in runs)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
