"""PPO - SFT per game set of the mini recipe, with its standard error: a forest plot and the table in docs/mini.md.

    uv run python docs/mini/forest_plot.py            # writes docs/mini/mini_forest.png and prints the table

One row per game set (data seed) and recipe era, for valid_unseen and valid_seen: the mean over the three training
seeds of PPO's success minus SFT's, in points, and its standard error, the spread of the seeds' gains over sqrt(3)
(as the mini's report computes it, `mini.seed_table`: it holds evaluation and training noise).

Where the numbers come from. The committed run's are read from its executed notebook, `docs/mini/mini.ipynb` (its
per-seed tables). The other runs are no longer on disk; their per-seed success rates are the ones written in
docs/mini.md and docs/changelog.md, held below in `PROSE_RUNS`, each row naming the page and section it is copied
from. Every evaluation there played 60 games once (180 episodes for the three-episode re-evaluation), so a rate
written to one decimal is an exact count of won episodes; the script turns each rate back into its count (and
refuses a rate that is no count), computes the gains from the counts, and checks them against the means and standard
errors the pages state.
"""
import json
import math
import re
import statistics
from pathlib import Path

HERE = Path(__file__).resolve().parent
NOTEBOOK = HERE / "mini.ipynb"
FIGURE = HERE / "mini_forest.png"
TABLE_START, TABLE_END = "<!-- forest table: docs/mini/forest_plot.py -->", "<!-- end of forest table -->"

ERAS = {                                   # the recipe of each era, and when it was measured (the commits' dates)
    "240": "240 games, 4 layers: the current recipe (2026-12-04)",
    "120": "120 games, 4 layers (2026-12-03 to 12-04)",
    "2layer": "2 layers, 4 games x 8, penalty 0.1 (2026-12-01 to 12-03)",
}

# (era, game set, source, episodes per checkpoint and split,
#  {split: ([SFT % per seed], [PPO % per seed], stated mean gain, stated standard error or None)})
# Rates are copied as written; where a page gives only per-seed gains, SFT is written as 0 and PPO as the gain.
PROSE_RUNS = [
    ("240", "data seed 4", "docs/mini.md, current recipe: the second game set at 240 games", 60, {
        "valid_unseen": ([35.0, 35.0, 16.7], [45.0, 40.0, 30.0], 9.4, 2.4),
        "valid_seen": ([30.0, 33.3, 26.7], [36.7, 41.7, 41.7], 10.0, 2.5)}),
    ("120", "data seed 0", "docs/changelog.md, the previous run (120 training games): its table", 60, {
        "valid_unseen": ([16.7, 28.3, 25.0], [35.0, 36.7, 43.3], 15.0, 3.3),
        "valid_seen": ([16.7, 21.7, 21.7], [35.0, 43.3, 35.0], 17.8, 2.4)}),
    ("120", "data seed 0, rerun (dff3ba0)", "docs/mini.md, 120-game era: the default command again (SFT as the committed "
     "120-game run's, to the episode)", 60, {
        "valid_unseen": ([16.7, 28.3, 25.0], [41.7, 36.7, 41.7], 16.7, 4.8),
        "valid_seen": ([16.7, 21.7, 21.7], [33.3, 43.3, 33.3], 16.7, None)}),
    ("120", "data seed 1", "docs/mini.md, 120-game era: another game set (per-seed gains)", 60, {
        "valid_unseen": ([0.0, 0.0, 0.0], [1.7, 5.0, 13.3], 6.7, 3.5),
        "valid_seen": ([0.0, 0.0, 0.0], [-3.3, 1.7, 16.7], 5.0, 6.0)}),
    ("120", "data seed 1, 3 episodes per game", "docs/mini.md, 120-game era: data seed 1 measured again", 180, {
        "valid_unseen": ([28.3, 29.4, 24.4], [27.2, 33.3, 35.0], 4.4, 3.4),
        "valid_seen": ([21.1, 25.0, 19.4], [27.8, 31.7, 28.9], 7.6, 0.9)}),
    ("120", "data seed 2", "docs/mini.md, 120-game era: a third game set", 60, {
        "valid_unseen": ([25.0, 31.7, 43.3], [53.3, 51.7, 45.0], 16.7, 7.9),
        "valid_seen": ([33.3, 35.0, 43.3], [56.7, 46.7, 48.3], 13.3, 5.4)}),
    ("120", "data seed 3", "docs/mini.md, 120-game era: a fourth game set", 60, {
        "valid_unseen": ([31.7, 23.3, 28.3], [38.3, 30.0, 35.0], 6.7, 0.0),
        "valid_seen": ([26.7, 43.3, 28.3], [53.3, 41.7, 45.0], 13.9, None)}),
    ("120", "data seed 4", "docs/mini.md, 120-game era: a fifth game set", 60, {
        "valid_unseen": ([35.0, 33.3, 26.7], [36.7, 38.3, 31.7], 3.9, 1.1),
        "valid_seen": ([36.7, 28.3, 21.7], [38.3, 43.3, 46.7], 13.9, 6.8)}),
    ("2layer", "data seed 0", "docs/changelog.md, the previous run (2-layer base): its table", 60, {
        "valid_unseen": ([15.0, 33.3, 28.3], [20.0, 21.7, 25.0], -3.3, None),
        "valid_seen": ([20.0, 26.7, 25.0], [25.0, 25.0, 30.0], 2.8, None)}),
    ("2layer", "data seed 1", "docs/changelog.md, the previous run (2-layer base): another game set", 60, {
        "valid_unseen": ([36.7, 41.7, 28.3], [28.3, 41.7, 33.3], -1.1, None),
        "valid_seen": ([26.7, 20.0, 31.7], [25.0, 28.3, 28.3], 1.1, None)}),
]


def count(rate: float, episodes: int) -> int:
    "The number of won episodes that `rate` (%, one decimal) stands for; a ValueError if it stands for none."
    k = round(rate * episodes / 100)
    if abs(100 * k / episodes - rate) > 0.051: raise ValueError(f"{rate}% is no count of {episodes} episodes")
    return k


def gain(sft: list[float], ppo: list[float], episodes: int) -> tuple[float, float, list[float]]:
    "Mean PPO - SFT in points, its standard error over the seeds, and the per-seed gains, from exact counts."
    gains = [100 * (count(p, episodes) - count(s, episodes)) / episodes for s, p in zip(sft, ppo)]
    return statistics.fmean(gains), statistics.stdev(gains) / math.sqrt(len(gains)), gains


def notebook_rates() -> dict[str, tuple[list[float], list[float], float, float]]:
    "Per split: SFT and PPO % per seed and the stated mean gain and its error, from the committed run's notebook."
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    shown = ["".join(o.get("data", {}).get("text/markdown", "")) for c in cells for o in c.get("outputs", [])]
    tables = [t for t in shown if "| seed | base % |" in t]          # valid_unseen's, then "valid_seen:" and its own
    assert len(tables) == 2 and tables[1].startswith("valid_seen:"), "the notebook's per-seed tables are not where they were"
    row = re.compile(r"^\| (\w+) \| [\d.]+ \+- [\d.]+ \| ([\d.]+) \+- [\d.]+ \| ([\d.]+) \+- [\d.]+ \| ([+-][\d.]+) \+- ([\d.]+) \|$", re.M)
    out = {}
    for split, table in zip(("valid_unseen", "valid_seen"), tables):
        rows = row.findall(table)
        seeds = [r for r in rows if r[0] != "mean"]
        [mean] = [r for r in rows if r[0] == "mean"]
        out[split] = ([float(r[1]) for r in seeds], [float(r[2]) for r in seeds], float(mean[3]), float(mean[4]))
    return out


def rows() -> list[dict]:
    "Every game set's gain per split, checked against what its source states."
    runs = [("240", "data seed 0 (the committed run)", "docs/mini/mini.ipynb, its per-seed tables", 60, notebook_rates())]
    out = []
    for era, name, source, episodes, splits in runs + PROSE_RUNS:
        row = dict(era=era, name=name, source=source)
        for split, (sft, ppo, stated, stated_se) in splits.items():
            mean, se, gains = gain(sft, ppo, episodes)
            assert abs(mean - stated) < 0.051, (name, split, mean, stated)
            assert stated_se is None or abs(se - stated_se) < 0.051, (name, split, se, stated_se)
            row[split] = (mean, se, gains)
        out.append(row)
    return out


def table(rs: list[dict]) -> str:
    "The markdown table of docs/mini.md: a row per game set, PPO - SFT +- its standard error on both splits."
    lines = ["| recipe | game set | valid_seen: PPO - SFT (points) | valid_unseen: PPO - SFT (points) | per seed, valid_unseen |",
             "|---|---|---|---|---|"]
    short = {"240": "240 games, 4 layers", "120": "120 games, 4 layers", "2layer": "2 layers (mini-base)"}
    for r in rs:
        cell = lambda split: f"{r[split][0]:+.1f} +- {r[split][1]:.1f}"
        seeds = ", ".join(f"{g:+.1f}" for g in r["valid_unseen"][2])
        lines.append(f"| {short[r['era']]} | {r['name']} | {cell('valid_seen')} | {cell('valid_unseen')} | {seeds} |")
    return "\n".join(lines)


def plot(rs: list[dict], path: Path = FIGURE) -> Path:
    "The forest plot: per split a panel, a row per game set under its era's heading, the mean +- one standard error and the seeds."
    from matplotlib.figure import Figure
    ticks, y = [], 0                       # (y, label, is an era's heading)
    placed = []                            # (y, row)
    for era in ERAS:
        ticks.append((y, ERAS[era], True)); y += 1
        for r in [r for r in rs if r["era"] == era]:
            ticks.append((y, r["name"], False)); placed.append((y, r)); y += 1
        y += 0.5
    fig = Figure(figsize=(13, 0.34 * y + 1.6), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    for ax, split in zip(axes, ("valid_seen", "valid_unseen")):
        for yy, r in placed:
            mean, se, gains = r[split]
            ax.plot(gains, [yy] * len(gains), "o", color="0.6", ms=3, zorder=2)
            ax.errorbar(mean, yy, xerr=se, fmt="s", color="tab:blue", ecolor="tab:blue", capsize=3, ms=6, zorder=3)
            ax.annotate(f"{mean:+.1f} ± {se:.1f}", (mean, yy), xytext=(0, 5), textcoords="offset points",
                        ha="center", fontsize=7)
        ax.axvline(0, color="0.3", lw=0.8)
        if split == "valid_unseen": ax.axvline(10, color="tab:green", lw=0.8, ls="--", label="the target, +10 on valid_unseen")
        ax.set_title(f"{split}")
        ax.set_xlabel("PPO - SFT success (points)")
        ax.grid(axis="x", alpha=0.3)
    axes[1].legend(fontsize=8, loc="upper left")
    axes[0].set_yticks([t[0] for t in ticks], [t[1] for t in ticks], fontsize=8)
    for label, (_, _, heading) in zip(axes[0].get_yticklabels(), ticks):
        if heading: label.set_fontweight("bold")
    axes[0].invert_yaxis()
    fig.suptitle("Mini-ALFWorld, PPO - SFT per game set: square, the mean of 3 training seeds ± one standard error "
                 "(the seeds' spread); dots, the seeds", fontsize=10)
    fig.savefig(path, dpi=120)
    return path


def main() -> None:
    rs = rows()
    print(table(rs))
    print(f"\nSaved figure: {plot(rs)}")


if __name__ == "__main__":
    main()
