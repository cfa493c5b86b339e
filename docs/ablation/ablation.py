"""Which parts of the mini recipe matter: PPO - SFT per variant and game set, beside the recipe's own runs.

    uv run python docs/ablation/ablation.py collect RUN_DIR --name grpo-data0   # a finished (or partial) mini run -> rows/NAME.json
    uv run python docs/ablation/ablation.py                                     # table.md, ablation.png, the table in docs/ablation.md

A variant is the mini recipe with one setting changed (`alfworld-rl mini --set KEY=VALUE --no-report`), three training
seeds. `collect` reads the run's `settings.json`, its evaluation summaries (`eval/sft-seedN.jsonl`,
`eval/ppo-seedN.jsonl`) and PPO's rollout metrics, and writes one JSON file per run: the settings that differ from the
mini preset, and per seed the SFT and PPO success on both validation splits and the rollout climb (mean success of the
last quarter of updates minus the first). A seed whose PPO evaluation is not finished is left out and the row is
marked incomplete.

The recipe's own rows (no setting changed) are the committed runs of docs/mini.md: data seed 0 from the executed
notebook `docs/mini/mini.ipynb`, data seed 4 from the rates docs/mini.md writes, both through
`docs/mini/forest_plot.py`, which checks them against the stated means.

For every variant: the mean over seeds of PPO - SFT with its standard error (the seeds' spread over sqrt(n), as the
mini's report computes it) and its difference from the recipe's row on the same game set. A variant that changes
only PPO starts each seed from the recipe's own SFT state (the same seed, games and settings reproduce it; the script
checks that every seed's SFT success equals the recipe's), and PPO then draws the same games in the same order: the
seeds are paired, and the difference is the mean of the per-seed differences of the gains, its standard error their
spread over sqrt(n) (`paired`). Otherwise the two rows' errors are added in quadrature (`unpaired`). The verdict:
`helps` or `hurts` when the difference on valid_unseen is more than two standard errors from zero, `cannot be told
apart` otherwise.
"""
import argparse, json, math, statistics, sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROWS = HERE / "rows"
sys.path.insert(0, str(HERE.parent / "mini"))
SPLITS = ("valid_seen", "valid_unseen")
TABLE_START, TABLE_END = "<!-- ablation table: docs/ablation/ablation.py -->", "<!-- end of ablation table -->"
# the recipe rows' rollout success, first -> last quarter of updates per seed (%), as their sources write it
RECIPE_ROLLOUTS = {0: ("docs/mini/mini.ipynb, its rollout line", [(38.5, 46.4), (34.4, 44.8), (26.6, 39.1)]),
                   4: ("docs/mini.md, the second game set at 240 games", [(37.5, 44.8), (35.9, 42.2), (24.7, 40.6)])}


def last_metrics(path: Path) -> dict | None:
    "The metrics of an evaluation file's summary (the project's `load_summary`), or None while it has none."
    from alfworld_rl.core import UserError
    from alfworld_rl.runs.analysis import load_summary
    try: return load_summary(path).metrics
    except UserError: return None


def climb(metrics_file: Path) -> float | None:
    "Rollout success of the last quarter of updates minus the first, in points (None without two updates)."
    if not metrics_file.is_file(): return None
    rates = [json.loads(l).get("rollout/success_rate") for l in metrics_file.read_text().splitlines() if l.strip()]
    rates = [r for r in rates if r is not None]
    if len(rates) < 2: return None
    q = max(1, len(rates) // 4)
    return 100 * (statistics.fmean(rates[-q:]) - statistics.fmean(rates[:q]))


def collect(run: Path, name: str) -> dict:
    "One variant's row from a mini run directory."
    from alfworld_rl.mini.recipe import PRESETS
    import dataclasses
    settings = json.loads((run / "settings.json").read_text())
    preset = json.loads(json.dumps(dataclasses.asdict(PRESETS["mini"])))
    changed = {k: v for k, v in settings.items() if k not in ("seeds",) and preset.get(k) != v}
    row = {"name": name, "run": str(run), "changed": changed, "data_seed": settings["data_seed"], "seeds": {}}
    for seed in settings["seeds"]:
        sft, ppo = last_metrics(run / "eval" / f"sft-seed{seed}.jsonl"), last_metrics(run / "eval" / f"ppo-seed{seed}.jsonl")
        if sft is None or ppo is None: continue
        row["seeds"][str(seed)] = {
            "episodes": {s: int(ppo[f"eval/{s}/episodes"]) for s in SPLITS},
            "sft": {s: 100 * sft[f"eval/{s}/success_rate"] for s in SPLITS},
            "ppo": {s: 100 * ppo[f"eval/{s}/success_rate"] for s in SPLITS},
            "climb": climb(run / "runs" / f"ppo-seed{seed}" / "metrics.jsonl")}
    row["complete"] = len(row["seeds"]) == len(settings["seeds"]) >= 3
    return row


def recipe_rows() -> dict[int, dict]:
    "The recipe's own rows (data seeds 0 and 4) in `collect`'s shape, from the committed runs via forest_plot."
    import forest_plot
    sources = {0: ("240", "data seed 0 (the committed run)", forest_plot.notebook_rates()),
               4: next((e, n, splits) for e, n, _, _, splits in forest_plot.PROSE_RUNS if e == "240" and n == "data seed 4")}
    out = {}
    for data_seed, (_, _, splits) in sources.items():
        seeds = {}
        for i in range(3):
            seeds[str(i)] = {"episodes": {s: 60 for s in SPLITS},
                             "sft": {s: splits[s][0][i] for s in SPLITS}, "ppo": {s: splits[s][1][i] for s in SPLITS},
                             "climb": RECIPE_ROLLOUTS[data_seed][1][i][1] - RECIPE_ROLLOUTS[data_seed][1][i][0]}
        out[data_seed] = {"name": f"recipe-data{data_seed}", "run": RECIPE_ROLLOUTS[data_seed][0], "changed": {},
                          "data_seed": data_seed, "seeds": seeds, "complete": True}
    return out


def gains(row: dict, split: str) -> tuple[float, float, list[float]]:
    "Mean PPO - SFT (points) over the row's seeds, its standard error (0 with one seed) and the per-seed gains."
    g = [s["ppo"][split] - s["sft"][split] for s in row["seeds"].values()]
    if not g: return math.nan, math.nan, []
    return statistics.fmean(g), (statistics.stdev(g) / math.sqrt(len(g)) if len(g) > 1 else math.nan), g


def difference(row: dict, recipe: dict, split: str) -> tuple[float, float, str]:
    "The row's gain minus the recipe's, its standard error, and `paired` or `unpaired` (see the docstring)."
    seeds = sorted(row["seeds"])
    # the recipe's rates are held to one decimal; two rates over 60 episodes differ by 1.7 points or more
    same_sft = seeds and all(k in recipe["seeds"] and all(abs(row["seeds"][k]["sft"][s] - recipe["seeds"][k]["sft"][s]) < 0.051
                                                         for s in SPLITS) for k in seeds)
    if same_sft and len(seeds) > 1:
        d = [(row["seeds"][k]["ppo"][split] - row["seeds"][k]["sft"][split])
             - (recipe["seeds"][k]["ppo"][split] - recipe["seeds"][k]["sft"][split]) for k in seeds]
        return statistics.fmean(d), statistics.stdev(d) / math.sqrt(len(d)), "paired"
    g, se, _ = gains(row, split)
    rg, rse, _ = gains(recipe, split)
    return g - rg, math.hypot(se, rse), "unpaired"


def label(row: dict) -> str:
    "What a row changes, as `--set` arguments (the recipe for none)."
    return ", ".join(f"{k}={v}" for k, v in row["changed"].items() if k != "data_seed") or "the recipe"


def verdict(diff: float, se: float) -> str:
    "helps / hurts when `diff` is more than two standard errors from zero; cannot be told apart otherwise."
    if math.isnan(se): return "too few seeds to tell"
    return "helps" if diff > 2 * se else "hurts" if diff < -2 * se else "cannot be told apart"


def table(rows: list[dict], recipes: dict[int, dict]) -> str:
    "The markdown table: a line per row, the recipe first on each game set."
    lines = ["| game set | variant | seeds | PPO valid_seen % | PPO valid_unseen % | PPO - SFT valid_seen | "
             "PPO - SFT valid_unseen | climb (points) | difference from the recipe, valid_unseen | verdict |",
             "|---" * 10 + "|"]
    for data_seed, recipe in sorted(recipes.items()):
        for row in [recipe] + [r for r in rows if r["data_seed"] == data_seed]:
            n = len(row["seeds"])
            ppo = {s: statistics.fmean(x["ppo"][s] for x in row["seeds"].values()) if n else math.nan for s in SPLITS}
            cell = lambda split: "{:+.1f} +- {:.1f}".format(*gains(row, split)[:2])
            climbs = [x["climb"] for x in row["seeds"].values() if x["climb"] is not None]
            c = f"{statistics.fmean(climbs):+.1f}" if climbs else "-"
            if row is recipe: diff, v = "-", "-"
            else:
                d, dse, how = difference(row, recipe, "valid_unseen")
                diff, v = f"{d:+.1f} +- {dse:.1f} ({how})", verdict(d, dse)
            seeds = f"{n}" + ("" if row["complete"] else " (incomplete)")
            lines.append(f"| data seed {data_seed} | {label(row)} | {seeds} | {ppo['valid_seen']:.1f} | "
                         f"{ppo['valid_unseen']:.1f} | {cell('valid_seen')} | {cell('valid_unseen')} | {c} | {diff} | {v} |")
    return "\n".join(lines)


def plot(rows: list[dict], recipes: dict[int, dict], path: Path) -> Path:
    "Gain +- one standard error per variant, a panel per split, grouped by game set; dots are the seeds."
    import matplotlib; matplotlib.use("Agg")
    from matplotlib.figure import Figure
    placed, ticks, y = [], [], 0
    for data_seed, recipe in sorted(recipes.items()):
        ticks.append((y, f"data seed {data_seed}", True)); y += 1
        for row in [recipe] + [r for r in rows if r["data_seed"] == data_seed]:
            ticks.append((y, label(row), False)); placed.append((y, row)); y += 1
        y += 0.5
    fig = Figure(figsize=(11, 0.4 * y + 1.6), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    for ax, split in zip(axes, SPLITS):
        for yy, row in placed:
            mean, se, g = gains(row, split)
            ax.plot(g, [yy] * len(g), "o", color="0.6", ms=3)
            ax.errorbar(mean, yy, xerr=0 if math.isnan(se) else se, fmt="s", capsize=3,
                        color="tab:blue" if row["changed"] else "tab:green")
            ax.annotate(f"{mean:+.1f} ± {se:.1f}", (mean, yy), xytext=(0, 5), textcoords="offset points", ha="center", fontsize=7)
        ax.axvline(0, color="0.3", lw=0.8); ax.set_title(split); ax.set_xlabel("PPO - SFT success (points)")
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks([t[0] for t in ticks], [t[1] for t in ticks], fontsize=8)
    for lab, (_, _, heading) in zip(axes[0].get_yticklabels(), ticks):
        if heading: lab.set_fontweight("bold")
    axes[0].invert_yaxis()
    fig.suptitle("Mini-ALFWorld ablation: PPO - SFT, mean of the training seeds ± one standard error (green: the recipe)",
                 fontsize=10)
    fig.savefig(path, dpi=120)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command")
    c = sub.add_parser("collect", help="write rows/NAME.json from a mini run directory")
    c.add_argument("run"); c.add_argument("--name", required=True)
    a = ap.parse_args(argv)
    if a.command == "collect":
        run = Path(a.run)
        if not (run / "settings.json").is_file(): sys.exit(f"{run} holds no mini experiment (no settings.json)")
        row = collect(run, a.name)
        ROWS.mkdir(exist_ok=True)
        (ROWS / f"{a.name}.json").write_text(json.dumps(row, indent=1) + "\n")
        print(f"{a.name}: {len(row['seeds'])} seed(s) finished, changed {row['changed']}")
        return 0
    rows = [json.loads(p.read_text()) for p in sorted(ROWS.glob("*.json"))]
    recipes = recipe_rows()
    md = table(rows, recipes)
    print(md)
    (HERE / "table.md").write_text(md + "\n")
    page = HERE.parent / "ablation.md"
    text = page.read_text() if page.is_file() else ""
    if TABLE_START in text:
        head, rest = text.split(TABLE_START, 1)
        page.write_text(head + TABLE_START + "\n" + md + "\n" + TABLE_END + rest.split(TABLE_END, 1)[1])
    print(f"\nSaved figure: {plot(rows, recipes, HERE / 'ablation.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
