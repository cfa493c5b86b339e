"""The official recipe's table, figure and result line, read from a run directory (`alfworld-rl mini --settings official`).

    uv run python docs/official/official_table.py runs/official [--out docs/official/results]

For every evaluation the run has finished (base; SFT and PPO at the rollout temperature, `episodes_per_game` episodes per
game, and once per game at T = 0.01): success per split with its standard error (over games), per task type, the
admissible-action rate and the mean steps; then the PPO - SFT gain on valid_unseen with its standard error (over
seeds when there are several, else from the two evaluations), the stage times, and the result line

    official result: base=<pct> sft=<pct> ppo=<pct> gain=<points> (+-<se>) (valid_unseen success, <k> episodes per game, <n> seeds)

Missing evaluations (a run still going) are shown as `-`. Writes `table.md`, `results.json`, `success.png` and (once PPO has updates) `rollout.png` to --out.
--readme writes the README's table: with several seeds, their mean per stage and decoding first (once every seed
has finished it; its error the seeds' errors combined), then each seed's rows.
"""
import argparse, json, math, statistics, sys
from pathlib import Path

SPLITS = ("valid_seen", "valid_unseen")
TYPES = ("pick_and_place_simple", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
         "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep", "pick_two_obj_and_place")
SHORT = dict(zip(TYPES, ("pick", "look", "clean", "heat", "cool", "pick two")))


def summary(path: Path) -> dict | None:
    "The metrics of an evaluation file's summary record, or None while it has none."
    if not path.is_file(): return None
    lines = path.read_text().splitlines()
    last = json.loads(lines[-1]) if lines else {}
    return last.get("metrics") if last.get("type") == "summary" else None


def rows_of(root: Path, seeds) -> dict:
    "Label -> metrics for every evaluation of the run (None where not finished)."
    out = {"base (T = 1, once)": summary(root / "eval" / "base.jsonl")}
    for seed in seeds:
        for stage in ("sft", "ppo"):
            out[f"{stage.upper()} seed {seed} (T = 1)"] = summary(root / "eval" / f"{stage}-seed{seed}.jsonl")
            out[f"{stage.upper()} seed {seed} (T = 0.01)"] = summary(root / "eval" / f"{stage}-seed{seed}-greedy.jsonl")
    return out


def pct(m, key) -> str:
    return "-" if m is None or key not in m else f"{100 * m[key]:.1f}"


def pm(m, split) -> str:
    if m is None: return "-"
    return f"{100 * m[f'eval/{split}/success_rate']:.1f} +- {100 * m.get(f'eval/{split}/success_rate_se', 0.0):.1f}"


def table(rows: dict) -> str:
    "Markdown: success per split (+- SE), both splits, per task type (both splits), admissible commands."
    head = ("| checkpoint | valid_seen % | valid_unseen % | both % | " + " | ".join(SHORT[t] for t in TYPES)
            + " | admissible % |")
    lines = [head, "|" + "---|" * (5 + len(TYPES))]
    for label, m in rows.items():
        cells = [pm(m, s) for s in SPLITS] + [pct(m, "eval/all/success_rate")]
        cells += [pct(m, f"eval/all/success_rate/{t}") for t in TYPES] + [pct(m, "eval/all/admissible_action_rate")]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def headline(rows: dict, seeds, settings: dict) -> dict | None:
    "valid_unseen success of base, SFT and PPO (means over seeds) and the gain with its standard error; None until PPO is evaluated."
    key, se_key = "eval/valid_unseen/success_rate", "eval/valid_unseen/success_rate_se"
    sft = [rows[f"SFT seed {s} (T = 1)"] for s in seeds]
    ppo = [rows[f"PPO seed {s} (T = 1)"] for s in seeds]
    base = rows["base (T = 1, once)"]
    if base is None or any(m is None for m in sft + ppo): return None
    gains = [100 * (p[key] - s[key]) for s, p in zip(sft, ppo)]
    if len(seeds) > 1: se = statistics.stdev(gains) / math.sqrt(len(seeds))
    else: se = 100 * math.hypot(sft[0][se_key], ppo[0][se_key])
    return {"base": 100 * base[key], "sft": 100 * statistics.fmean(m[key] for m in sft),
            "ppo": 100 * statistics.fmean(m[key] for m in ppo), "gain": statistics.fmean(gains), "gain_se": se,
            "episodes_per_game": settings.get("episodes_per_game", 1), "seeds": len(seeds)}


def result_line(h: dict) -> str:
    return (f"official result: base={h['base']:.1f} sft={h['sft']:.1f} ppo={h['ppo']:.1f} gain={h['gain']:+.1f} "
            f"(+-{h['gain_se']:.1f}) (valid_unseen success, {h['episodes_per_game']} episodes per game, {h['seeds']} seeds)")


def figure(rows: dict, path: Path) -> None:
    "Success per split and per task type, one bar per finished evaluation, with standard errors on the split bars."
    import matplotlib; matplotlib.use("Agg")
    from matplotlib.figure import Figure
    done = {k: m for k, m in rows.items() if m is not None}
    fig = Figure(figsize=(12, 3.8), layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=[1, 2.2])
    width = 0.8 / max(1, len(done))
    for i, (label, m) in enumerate(done.items()):
        xs = [j + i * width for j in range(len(SPLITS))]
        left.bar(xs, [100 * m[f"eval/{s}/success_rate"] for s in SPLITS], width,
                 yerr=[100 * m.get(f"eval/{s}/success_rate_se", 0) for s in SPLITS], capsize=3, label=label)
        xt = [j + i * width for j in range(len(TYPES))]
        right.bar(xt, [100 * m.get(f"eval/all/success_rate/{t}", 0) for t in TYPES], width, label=label)
    left.set_xticks([j + 0.4 - width / 2 for j in range(len(SPLITS))], SPLITS)
    right.set_xticks([j + 0.4 - width / 2 for j in range(len(TYPES))], [SHORT[t] for t in TYPES])
    left.set_ylabel("success %"); left.set_title("per split (+- SE over games)")
    right.set_title("per task type (both splits)"); right.legend(fontsize=7)
    for ax in (left, right): ax.grid(axis="y", alpha=0.3)
    path.parent.mkdir(parents=True, exist_ok=True); fig.savefig(path, dpi=110)


def rollout_curves(root: Path, seeds) -> dict:
    "Per seed: PPO's rollout success and admissible rate per update, and the climb (last quarter's mean - first quarter's)."
    out = {}
    for seed in seeds:
        path = root / "runs" / f"ppo-seed{seed}" / "metrics.jsonl"
        if not path.is_file(): continue
        recs = [json.loads(l) for l in path.read_text().splitlines() if l.strip()]
        recs = [r for r in recs if "rollout/success_rate" in r]
        if not recs: continue
        succ = [100 * r["rollout/success_rate"] for r in recs]
        q = max(1, len(succ) // 4)
        out[seed] = {"updates": [r["step"] for r in recs], "success": succ,
                     "admissible": [100 * r.get("rollout/admissible_action_rate", 0) for r in recs],
                     "climb": statistics.fmean(succ[-q:]) - statistics.fmean(succ[:q]) if len(succ) >= 2 else None}
    return out


def curve_figure(curves: dict, path: Path) -> None:
    "PPO's rollout success and admissible-command rate per update, one line per seed."
    import matplotlib; matplotlib.use("Agg")
    from matplotlib.figure import Figure
    fig = Figure(figsize=(9, 3.2), layout="constrained")
    left, right = fig.subplots(1, 2)
    for seed, c in curves.items():
        left.plot(c["updates"], c["success"], marker="o", label=f"seed {seed}")
        right.plot(c["updates"], c["admissible"], marker="o", label=f"seed {seed}")
    left.set_title("PPO rollout success % (16 fresh training games x 8)"); right.set_title("admissible commands %")
    for ax in (left, right): ax.set_xlabel("update"); ax.grid(alpha=0.3); ax.legend(fontsize=7)
    path.parent.mkdir(parents=True, exist_ok=True); fig.savefig(path, dpi=110)


FIELD = [   # published, text-only ALFWorld (success %, valid_seen, valid_unseen): for orientation, not run here
    ("Seq2Seq on expert demonstrations (ALFWorld paper)", "small, from scratch", "greedy", "10", "9"),
    ("BUTLER, DAgger imitation (ALFWorld paper)", "small, frozen DistilBERT", "greedy", "19", "22"),
    ("BUTLER (ALFWorld paper)", "same", "beam search, best of 8 seeds", "40", "37"),
    ("reference recipe, GRPO-style PPO on a LoRA", "Qwen3.5-4B", "T = 0.01", "52.9 -> 56.9 (all 274)", ""),
    ("GRPO / GiGPO (GiGPO paper)", "Qwen2.5-1.5B", "T = 0.4", "72.8 / 86.7", ""),
]
README_START, README_END = "<!-- official-table:start -->", "<!-- official-table:end -->"


def seed_mean(ms: list) -> dict:
    "Mean success over seeds per split, its SE from the evaluations: sqrt(sum of the seeds' squared SEs) / seeds."
    out = {}
    for s in SPLITS:
        key = f"eval/{s}/success_rate"
        out[key] = statistics.fmean(m[key] for m in ms)
        out[f"{key}_se"] = math.sqrt(sum(m.get(f"{key}_se", 0.0) ** 2 for m in ms)) / len(ms)
    return out


def mean_rows(rows: dict, seeds) -> dict:
    "Label -> mean over seeds, for each stage and decoding that every seed has finished (several seeds only)."
    out = {}
    if len(seeds) < 2: return out
    for stage in ("SFT", "PPO"):
        for how in ("T = 1", "T = 0.01"):
            ms = [rows.get(f"{stage} seed {seed} ({how})") for seed in seeds]
            if all(m is not None for m in ms): out[f"{stage} mean of {len(seeds)} seeds ({how})"] = seed_mean(ms)
    return out


def readme_table(rows: dict, settings: dict) -> str:
    "The README's table: this run's finished evaluations (success +- SE per split) above the field's published numbers."
    k = settings.get("episodes_per_game", 1)
    lines = ["| system | model | decoding | valid_seen % | valid_unseen % |", "|---|---|---|---|---|"]
    base, means = {l: m for l, m in rows.items() if l.startswith("base")}, mean_rows(rows, settings.get("seeds", [0]))
    rows = {**base, **means, **{l: m for l, m in rows.items() if l not in base}}
    for label, m in rows.items():
        if m is None: continue
        stage, _, rest = label.partition(" ")
        how = "T = 0.01, once" if "0.01" in label else ("T = 1, once" if stage == "base" else f"T = 1, {k} per game")
        if stage != "base" and len(settings.get("seeds", [0])) > 1: how += f", {rest.split(' (')[0]}"   # which seed(s)
        name = {"base": "this repository: base", "SFT": "this repository: SFT", "PPO": "this repository: SFT + PPO"}[stage]
        cells = [pm(m, s) for s in SPLITS]
        if label in means: name, cells = f"**{name}**", [f"**{c}**" for c in cells]   # the headline rows
        lines.append(f"| {name} | 0.97M, `{settings['base_model']}` | {how} | {cells[0]} | {cells[1]} |")
    lines += [f"| {a} | {b} | {c} | {d} | {e} |" for a, b, c, d, e in FIELD]
    return "\n".join(lines)


def write_readme_table(readme: Path, block: str) -> None:
    "Replace what lies between the README's official-table markers with `block`."
    text = readme.read_text()
    head, start, rest = text.partition(README_START)
    _, end, tail = rest.partition(README_END)
    if not start or not end: sys.exit(f"{readme} has no {README_START} ... {README_END} block")
    readme.write_text(f"{head}{README_START}\n{block}\n{README_END}{tail}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", help="the official run's directory (alfworld-rl mini --settings official --out-dir ...)")
    ap.add_argument("--out", default=None, help="write table.md, results.json and success.png here")
    ap.add_argument("--readme", default=None, help="also write the README's official table (between its markers)")
    ap.add_argument("--seeds", type=int, nargs="+", default=None,
                    help="report only these of the run's seeds (default: every seed in its settings.json)")
    a = ap.parse_args(argv)
    root = Path(a.run)
    if not (root / "settings.json").is_file(): sys.exit(f"{root} holds no mini experiment (no settings.json)")
    settings = json.loads((root / "settings.json").read_text())
    seeds = settings["seeds"]
    if a.seeds is not None:
        if not a.seeds or set(a.seeds) - set(seeds) or len(set(a.seeds)) != len(a.seeds):
            ap.error(f"--seeds must be distinct seeds of the run ({', '.join(map(str, seeds))}); got {a.seeds}")
        seeds = settings["seeds"] = list(a.seeds)
    rows = rows_of(root, seeds)
    md = table(rows)
    stages = [json.loads(l) for l in (root / "stages.jsonl").read_text().splitlines()] if (root / "stages.jsonl").exists() else []
    h = headline(rows, seeds, settings)
    curves = rollout_curves(root, seeds)
    print(md)
    for seed, c in curves.items():
        climb = "-" if c["climb"] is None else f"{c['climb']:+.1f}"
        print(f"PPO seed {seed} rollout success per update: " + ", ".join(f"{x:.1f}" for x in c["success"])
              + f" (climb, last quarter - first: {climb} points)")
    print("\nstage seconds: " + ", ".join(f"{r['stage']}{'' if r['seed'] is None else ' ' + str(r['seed'])}"
                                          f"{' (cut short)' if r.get('interrupted') else ''} {r['seconds']:.0f}" for r in stages))
    print(result_line(h) if h else "official result: not yet (PPO still to be evaluated)")
    if a.out:
        out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
        (out / "table.md").write_text(md + "\n")
        (out / "results.json").write_text(json.dumps({"rows": rows, "headline": h, "stages": stages, "curves": curves,
                                                      "settings": settings}, indent=1) + "\n")
        figure(rows, out / "success.png")
        if curves: curve_figure(curves, out / "rollout.png")
    if a.readme: write_readme_table(Path(a.readme), readme_table(rows, settings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
