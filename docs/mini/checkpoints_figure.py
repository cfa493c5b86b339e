"""docs/mini/mini_checkpoints.png redrawn from the committed run's executed notebook, with its error bars.

    uv run python docs/mini/checkpoints_figure.py

The mini's report draws this figure from the run's evaluation files (`alfworld-rl mini`, nbs/reports/mini.ipynb);
the committed run's files are not in the repository, only its executed notebook, docs/mini/mini.ipynb, which was
drawn before the figure had error bars. This script feeds the same function (`analysis.plot_checkpoints`) with the
numbers that notebook shows: each checkpoint's success per split and overall and its invalid actions per game (the
table of seed means), and the standard error of each mean (the `+-` of the mean rows of the per-seed tables). The
overall bar's error combines the two splits' by their games (the report uses the files' own overall error, which
the notebook does not show). The next run of the recipe draws the figure from its files and replaces this one.
"""
import json
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent


def notebook_markdown() -> list[str]:
    "The markdown outputs of docs/mini/mini.ipynb, in order."
    cells = json.loads((HERE / "mini.ipynb").read_text())["cells"]
    return ["".join(o.get("data", {}).get("text/markdown", "")) for c in cells for o in c.get("outputs", [])]


def summaries():
    "The base, SFT and PPO seed means as `EvalSummary`s, and their standard errors per split (fractions)."
    from alfworld_rl.runs.analysis import EvalSummary
    shown = notebook_markdown()
    games = json.loads((HERE / "settings.json").read_text())["valid_games"]
    [means] = [t for t in shown if t.startswith("| checkpoint | valid_seen success %")]
    rows = re.findall(r"^\| (\w+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| (\d+) \|$", means, re.M)
    seed_tables = [t for t in shown if "| seed | base % |" in t]       # valid_unseen's, then valid_seen's
    assert len(rows) == 3 and len(seed_tables) == 2 and seed_tables[1].startswith("valid_seen:")
    errors = {}
    for split, table in zip(("valid_unseen", "valid_seen"), seed_tables):
        mean = re.search(r"^\| mean \| [\d.]+ \+- ([\d.]+) \| [\d.]+ \+- ([\d.]+) \| [\d.]+ \+- ([\d.]+) \|", table, re.M)
        for (label, *_), se in zip(rows, mean.groups()): errors.setdefault(label, {})[split] = float(se) / 100
    out = []
    for label, seen, unseen, overall, invalid, n in rows:
        assert int(n) == 2 * games
        metrics = {"eval/valid_seen/games": games, "eval/valid_seen/success_rate": float(seen) / 100,
                   "eval/valid_unseen/games": games, "eval/valid_unseen/success_rate": float(unseen) / 100,
                   "eval/all/games": int(n), "eval/all/success_rate": float(overall) / 100,
                   "eval/all/invalid_actions_mean": float(invalid)}
        out.append(EvalSummary(label, "docs/mini/mini.ipynb", "mini-base-4layers", None, metrics))
    return out, errors


def main() -> None:
    from alfworld_rl.runs.analysis import plot_checkpoints
    means, errors = summaries()
    print(f"Saved figure: {plot_checkpoints(means, HERE / 'mini_checkpoints.png', errors)}")


if __name__ == "__main__":
    main()
