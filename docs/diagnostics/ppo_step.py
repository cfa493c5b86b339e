"""Another PPO on the game set where PPO gains least: the mini's PPO with a setting changed, from the same SFT states.

    uv run python docs/diagnostics/ppo_step.py run MINI_DIR OUT_DIR --set ppo_learning_rate=1.5e-3   # a probe (PPO + its evaluations)
    uv run python docs/diagnostics/ppo_step.py run MINI_DIR OUT_DIR --set step_return=win
    uv run python docs/diagnostics/ppo_step.py run MINI_DIR OUT_DIR --set refused_credit=negative --seeds 0   # one seed; rerun to resume
    uv run python docs/diagnostics/ppo_step.py keep NAME MINI_DIR                             # its figures into ppo_step/NAME.json
    uv run python docs/diagnostics/ppo_step.py compare MINI_DIR OUT_DIR --seed 0               # per update: the two PPOs' rollouts
    uv run python docs/diagnostics/ppo_step.py                                                # the table from the kept figures

`run` copies a finished mini experiment's games, SFT runs and base/SFT evaluations into OUT_DIR, changes only the
`--set` settings of PPO (`ppo_learning_rate`, `step_return`, ...), and finishes the recipe there: PPO from each seed's
SFT state, then PPO's evaluation. The SFT states, the games of every update and the sampling seeds are the original
run's, so the probes' updates are paired and differ only by the settings changed. `keep` stores what the table needs (per seed: rollout
success of the first and last quarter of updates, overall and for pick_and_place_simple, by the mini report's own
rule; per update, the last minibatch's clip fraction and learner-sampler logprob gap; SFT and PPO success per split,
read from the evaluation summaries) in docs/diagnostics/ppo_step/NAME.json. `--seeds` probes a subset of the run's seeds;
the same `run` command again continues a probe that was stopped (each stage resumes as the mini's do).
"""
import argparse, json, shutil, statistics, sys
from pathlib import Path

HERE = Path(__file__).resolve().parent / "ppo_step"
PICK = "pick_and_place_simple"
SPLITS = ("valid_seen", "valid_unseen")


PPO_SETTINGS = ("ppo_learning_rate", "step_return", "advantage", "advantage_norm", "gamma", "invalid_penalty", "win_reward",
                "refused_credit")


def probe_settings(settings: dict, changes: dict, seeds: list | None = None) -> dict:
    "The run's saved settings with PPO's `changes` (strings, typed as each setting is; a setting newer than the run too)."
    from alfworld_rl.mini.recipe import MiniSettings
    for key in changes:
        if key not in PPO_SETTINGS: sys.exit(f"--set {key}: not one of {', '.join(PPO_SETTINGS)}")
    if seeds is not None and not seeds: sys.exit("--seeds: give at least one seed")
    for seed in seeds or []:
        if seed not in settings["seeds"]: sys.exit(f"--seeds: {seed} is not one of the run's seeds {settings['seeds']}")
    typed = {key: type(settings.get(key, getattr(MiniSettings(), key)))(value) for key, value in changes.items()}
    return {**settings, **typed, "seeds": sorted(set(seeds)) if seeds else settings["seeds"]}


def run(src: Path, out: Path, changes: dict, seeds: list | None = None) -> None:
    "Finish `src`'s recipe in `out` with PPO's settings `changes` (games, SFT and their evaluations copied); again: resume."
    from alfworld_rl.core import UserError
    from alfworld_rl.mini.recipe import MiniSettings, run_mini, validate_settings
    settings = probe_settings(json.loads((src / "settings.json").read_text()), changes, seeds)
    fields = {k: (tuple(v) if isinstance(v, list) else v) for k, v in settings.items()}
    try: validate_settings(MiniSettings(**fields))                 # a bad value: one line, before anything is written
    except UserError as e: sys.exit(str(e))
    if out.exists():                                               # the same probe again continues it; another one is refused
        saved = out / "settings.json"
        if not saved.is_file() or json.loads(saved.read_text()) != settings:
            sys.exit(f"{out} exists and holds another probe (or none); pick another OUT_DIR")
    else: copy_run(src, out, settings)
    run_mini(MiniSettings(**fields), out, progress=True)


def copy_run(src: Path, out: Path, settings: dict) -> None:
    "Copy into `out` what the probe keeps of `src`: its games, each probed seed's SFT and evaluations, the base's evaluation."
    (out / "runs").mkdir(parents=True); (out / "eval").mkdir()
    shutil.copytree(src / "data", out / "data")
    for seed in settings["seeds"]:
        shutil.copytree(src / "runs" / f"sft-seed{seed}", out / "runs" / f"sft-seed{seed}")
        shutil.copy(src / "eval" / f"sft-seed{seed}.jsonl", out / "eval")
        greedy = src / "eval" / f"sft-seed{seed}-greedy.jsonl"     # the official settings also evaluate at T = 0.01
        if greedy.is_file(): shutil.copy(greedy, out / "eval")
    shutil.copy(src / "eval" / "base.jsonl", out / "eval")
    stages = [json.loads(l) for l in (src / "stages.jsonl").read_text().splitlines() if l.strip()]
    copied = {"base", *(f"sft-seed{seed}" for seed in settings["seeds"]), *(f"sft-seed{seed}-greedy" for seed in settings["seeds"])}
    keep = [r for r in stages if r["stage"] in ("games", "demonstrations") or (r["stage"] == "sft" and r["seed"] in settings["seeds"])
            or r.get("seed") in copied]
    (out / "stages.jsonl").write_text("".join(json.dumps(r) + "\n" for r in keep))
    (out / "settings.json").write_text(json.dumps(settings, indent=1))


def keep(name: str, root: Path) -> None:
    "Store the figures of mini experiment `root` that the table needs as ppo_step/NAME.json."
    from alfworld_rl.core import read_jsonl
    from alfworld_rl.mini.recipe import MiniPaths, rollout_quarters, seed_summaries
    paths = MiniPaths(root)
    settings = json.loads((root / "settings.json").read_text())
    seeds = {}
    for seed in settings["seeds"]:
        rows = sorted(read_jsonl(paths.ppo_run(seed) / "metrics.jsonl"), key=lambda r: r["step"])
        _, sft, ppo = seed_summaries(paths, seed)
        seeds[seed] = dict(
            rollout_quarters=rollout_quarters(paths, [seed])["per_seed"][seed],
            pick_quarters=rollout_quarters(paths, [seed], key=f"rollout/success_rate/{PICK}")["per_seed"][seed],
            clip_fraction_last=[r["train/clip_fraction_last"] for r in rows],
            logprob_gap_last=[r["train/logprob_diff_abs_mean_last"] for r in rows],
            sft={sp: sft.value(sp, "success_rate") for sp in SPLITS}, ppo={sp: ppo.value(sp, "success_rate") for sp in SPLITS})
    HERE.mkdir(exist_ok=True)
    out = dict(data_seed=settings["data_seed"], ppo_learning_rate=settings["ppo_learning_rate"],
               step_return=settings["step_return"], refused_credit=settings.get("refused_credit", "all"), seeds=seeds)
    (HERE / f"{name}.json").write_text(json.dumps(out, indent=1))


def table() -> None:
    "Print, per kept probe, how far each update moved the policy, the rollout climb and the evaluation gain."
    def mean_se(xs): return f"{statistics.mean(xs):+.1f} +- {statistics.stdev(xs) / len(xs) ** 0.5:.1f}"
    print("| probe | clip fraction, last minibatch | learner-sampler gap, last minibatch | rollout success, first -> last quarter (climb) | pick_and_place rollouts | "
          "PPO - SFT valid_unseen | PPO - SFT valid_seen |\n|---|---|---|---|---|---|---|")
    for path in sorted(HERE.glob("*.json")):
        p = json.loads(path.read_text())
        s = p["seeds"].values()
        clips = [c for v in s for c in v["clip_fraction_last"]]
        gaps = [g for v in s for g in v["logprob_gap_last"]]
        climbs = [(100 * a, 100 * b) for a, b in (v["rollout_quarters"] for v in s)]
        picks = ", ".join(f"{100 * a:.0f} -> {100 * b:.0f}" for a, b in (v["pick_quarters"] for v in s))
        gains = {sp: [100 * (v["ppo"][sp] - v["sft"][sp]) for v in s] for sp in ("valid_unseen", "valid_seen")}
        print(f"| {path.stem} (data seed {p['data_seed']}, lr {p['ppo_learning_rate']:g}, step return "
              f"{p.get('step_return', 'all')}, refused credit {p.get('refused_credit', 'all')}) | "
              f"{100 * min(clips):.2f}-{100 * max(clips):.2f}% | {min(gaps):.4f}-{max(gaps):.4f} nats/token | "
              + ", ".join(f"{a:.0f} -> {b:.0f}" for a, b in climbs)
              + f" ({statistics.mean(b - a for a, b in climbs):+.1f}) | {picks} | {mean_se(gains['valid_unseen'])} | "
              f"{mean_se(gains['valid_seen'])} |")


def compare(src: Path, probe: Path, seed: int) -> None:
    "Print, per update, the rollout success and admissible rate of seed `seed`'s PPO in the run and in the probe."
    from alfworld_rl.core import read_jsonl
    from alfworld_rl.mini.recipe import MiniPaths
    runs = {}
    for name, root in (("run", src), ("probe", probe)):
        metrics = MiniPaths(root).ppo_run(seed) / "metrics.jsonl"
        if not metrics.is_file(): sys.exit(f"{metrics}: no PPO metrics of seed {seed}")
        runs[name] = sorted(read_jsonl(metrics), key=lambda r: r["step"])
    n = max(len(v) for v in runs.values())
    print("| update | " + " | ".join(str(k) for k in range(1, n + 1)) + " |\n|---|" + "---|" * n)
    for key, what in (("rollout/success_rate", "rollout success %"), ("rollout/admissible_action_rate", "admissible commands %")):
        for name, label in (("run", src.name), ("probe", probe.name)):
            cells = [f"{100 * r[key]:.1f}" for r in runs[name]] + [""] * (n - len(runs[name]))
            print(f"| {label}: {what} | " + " | ".join(cells) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd")
    r = sub.add_parser("run"); r.add_argument("src", type=Path); r.add_argument("out", type=Path)
    r.add_argument("--set", action="append", required=True, metavar="KEY=VALUE", help=f"one of {', '.join(PPO_SETTINGS)}")
    r.add_argument("--seeds", type=int, nargs="+", help="probe only these of the run's seeds (default: all of them)")
    k = sub.add_parser("keep"); k.add_argument("name"); k.add_argument("root", type=Path)
    c = sub.add_parser("compare"); c.add_argument("src", type=Path); c.add_argument("out", type=Path)
    c.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.cmd == "run":
        from alfworld_rl.cli import end_on_sigterm
        with end_on_sigterm("ppo_step.py") as term:              # a SIGTERM ends the evaluation workers too, then exits
            try: run(a.src, a.out, dict(kv.split("=", 1) for kv in a.set), a.seeds)
            except KeyboardInterrupt:
                if not term.terminated: raise
        if term.terminated: sys.exit(term.finish("ppo_step.py"))
    elif a.cmd == "keep": keep(a.name, a.root)
    elif a.cmd == "compare": compare(a.src, a.out, a.seed)
    else: table()


if __name__ == "__main__":
    main()
